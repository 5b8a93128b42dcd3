import type pg from 'pg'
import {
  type Access,
  type AccessChange,
  type Directory,
  type DirectoryLimits,
  defaultStore,
  type Invite,
  isRefusal,
  type Member,
  type NewInvite,
  type NotebookView,
  notebookStore,
  type Refusal,
  type Role,
} from '../directory.js'
import {
  canRemoveMember,
  canSetRole,
  invitesFull,
  MAX_INVITES,
  membersFull,
  NOT_FOUND_REFUSAL,
  needsRole,
  notebooksFull,
  randomId,
  randomToken,
  redeemedRole,
  tokenHash,
} from '../kernel/notebook-rules.js'
import { randomEpoch, versionToken } from '../kernel/version-token.js'
import { AccessDelivery } from './access-delivery.js'
import type { ChangeListener } from './change-delivery.js'
import type { Database } from './database.js'
import { MemberCache } from './member-cache.js'
import { accessOf, type Locked, lockNotebook, putMember } from './member-rows.js'

/** The default notebook's name until its owner renames it (as MemoryDirectory's). */
const DEFAULT_NOTEBOOK_NAME = 'My notes'

/** Changes of access kept for subscribers that fall behind (a listener reconnecting). */
const ACCESS_HISTORY = 10_000

/** Default notebook ids remembered at most (they never change; forgotten, they are read again). */
const MAX_KNOWN_DEFAULTS = 10_000

/** Every id this directory gives (randomId): a string that is not one is no notebook of ours. */
const OUR_ID = /^[A-Za-z0-9_-]{22}$/

/**
 * The directory of notebooks in PostgreSQL (migrations 4 and 8, directory-schema.ts), shared by
 * every instance on the database. Each act is one transaction that locks its notebook's row
 * (SELECT ... FOR UPDATE), reads its members, decides with notebook-rules.ts (as every directory
 * does) and writes; the changes of access it makes are numbered in commit order in the same
 * transaction, and every instance's subscribers hear them (AccessDelivery). A default notebook is
 * made by its user's first act, once, whichever instances race to make it (INSERT ... ON
 * CONFLICT). Each user's default notebook id is kept (it never changes), and the memberships
 * access() reads (MemberCache): one is used only while a read of the log's head, begun after the
 * request arrived, shows that no change since it was read can have touched it, so access() answers
 * exactly as the query would, whatever another instance changed a moment before.
 */
export class PostgresDirectory implements Directory {
  readonly #db: Database
  readonly #limits: DirectoryLimits
  readonly #delivery: AccessDelivery
  /** Told the store name of a notebook removed here, once its removal is committed. */
  readonly #removed: (store: string) => void
  /** The epoch a notebook's version tokens get if it is new (its store name), as its store's. */
  readonly #epochOf: (store: string) => string | undefined
  readonly #defaults = new Map<string, string>()
  readonly #members: MemberCache
  /** Stops the cache hearing the changes of access; undefined until access() first reads one. */
  #unfollow: (() => void) | undefined

  constructor(
    db: Database,
    listener: ChangeListener,
    limits: DirectoryLimits,
    removed: (store: string) => void,
    epochOf: (store: string) => string | undefined,
  ) {
    this.#db = db
    this.#limits = limits
    this.#removed = removed
    this.#epochOf = epochOf
    this.#delivery = new AccessDelivery(db, listener)
    this.#members = new MemberCache(async () => {
      const { rows } = await db.read<{ sequence: string }>(
        'notes_access_head',
        'SELECT sequence FROM notes_access_clock',
        [],
      )
      return Number((rows[0] as { sequence: string }).sequence)
    })
  }

  async list(user: string): Promise<readonly NotebookView[]> {
    await this.#ensure(user)
    // Their default first, though a notebook they were added to before their first act joined
    // earlier.
    const { rows } = await this.#db.query<{
      id: string
      name: string
      role: Role
      members: string
    }>(
      `SELECT d.id, d.name, m.role,
        (SELECT count(*) FROM notes_members c WHERE c.notebook = d.id) AS members
      FROM notes_members m JOIN notes_directory d ON d.id = m.notebook
      WHERE m.sub = $1
      ORDER BY d.default_user IS NOT DISTINCT FROM $1 DESC, m.joined`,
      [user],
    )
    return rows.map(({ id, name, role, members }) => ({ id, name, role, members: Number(members) }))
  }

  defaultOf(user: string): Promise<string> {
    return this.#ensure(user)
  }

  async access(user: string, id: string): Promise<Access | undefined> {
    await this.#ensure(user)
    if (!OUR_ID.test(id)) return undefined
    const known = await this.#members.vouch(id, user)
    if (known !== undefined) return known
    // The membership and the log's head in one snapshot: what the cache is validated against.
    type Row = { store: string | null; role: Role | null; since: string | null; head: string }
    const { rows } = await this.#db.read<Row>(
      'notes_member_access',
      `SELECT d.store, m.role, m.since, c.sequence AS head FROM notes_access_clock c
      LEFT JOIN (notes_directory d JOIN notes_members m ON m.notebook = d.id AND m.sub = $2)
      ON d.id = $1`,
      [id, user],
    )
    const row = rows[0] as Row
    const access =
      row.store === null || row.role === null
        ? undefined
        : accessOf(
            id,
            row.store,
            row.role,
            // (A user's own default notebook needs none.)
            row.since ??
              (row.store === defaultStore(user) ? null : await this.#sinceNow(id, user, row.store)),
          )
    const members = this.#members
    this.#unfollow ??= this.#delivery.subscribe((change, sequence) =>
      members.apply(change, sequence),
    )
    members.fill(id, user, access, Number(row.head))
    return access
  }

  async create(actor: string, name: string): Promise<NotebookView | Refusal> {
    await this.#ensure(actor)
    return this.#transaction(async (tx, changes) => {
      // The actor's default notebook row, locked: two creates of one user, on any instances,
      // count their notebooks one after the other.
      await tx.query('SELECT 1 FROM notes_directory WHERE default_user = $1 FOR UPDATE', [actor])
      const { rows } = await tx.query<{ owned: string }>(
        "SELECT count(*) AS owned FROM notes_members WHERE sub = $1 AND role = 'owner'",
        [actor],
      )
      const { maxNotebooksPerUser } = this.#limits
      if (Number(rows[0]?.owned) >= maxNotebooksPerUser) return notebooksFull(maxNotebooksPerUser)
      const id = randomId()
      await tx.query('INSERT INTO notes_directory (id, name, store) VALUES ($1, $2, $3)', [
        id,
        name,
        notebookStore(id),
      ])
      changes.push(await this.#join(tx, id, notebookStore(id), actor, 'owner'))
      return { id, name, role: 'owner', members: 1 }
    })
  }

  rename(actor: string, id: string, name: string): Promise<NotebookView | Refusal> {
    return this.#act(actor, id, async (tx, notebook, changes) => {
      const refusal = needsRole(notebook, actor, 'owner')
      if (refusal !== undefined) return refusal
      await tx.query('UPDATE notes_directory SET name = $2 WHERE id = $1', [id, name])
      changes.push({ type: 'renamed', notebook: id, name })
      return { id, name, role: 'owner', members: notebook.roles.size }
    })
  }

  async remove(actor: string, id: string): Promise<{ store: string } | Refusal> {
    const removed = await this.#act(actor, id, async (tx, notebook, changes) => {
      const refusal = needsRole(notebook, actor, 'owner')
      if (refusal !== undefined) return refusal
      if (notebook.defaultUser !== undefined) return { refused: 'default-notebook' }
      // The members first: a guarded write holds its writer's row (FOR SHARE) until it commits,
      // so this waits for the writes in flight, and any later one finds no row.
      await tx.query('DELETE FROM notes_members WHERE notebook = $1', [id])
      await tx.query('SELECT notes_drop_notebook($1)', [notebook.row.store])
      await tx.query('DELETE FROM notes_directory WHERE id = $1', [id])
      for (const { user } of notebook.members) changes.push({ type: 'left', notebook: id, user })
      return { store: notebook.row.store }
    })
    if (!isRefusal(removed)) this.#removed(removed.store)
    return removed
  }

  members(actor: string, id: string): Promise<readonly Member[] | Refusal> {
    return this.#act(actor, id, async (_tx, notebook) => {
      return needsRole(notebook, actor, 'viewer') ?? notebook.members
    })
  }

  setRole(actor: string, id: string, user: string, role: Role): Promise<Member | Refusal> {
    return this.#act(actor, id, async (tx, notebook, changes) => {
      const refusal = canSetRole(notebook, actor, user, role, this.#limits.maxMembers)
      if (refusal !== undefined) return refusal
      const current = notebook.roles.get(user)
      if (current === undefined)
        changes.push(await this.#join(tx, id, notebook.row.store, user, role))
      else if (current !== role) {
        await putMember(tx, id, user, role)
        changes.push({ type: 'role', notebook: id, user, role })
      }
      return { user, role }
    })
  }

  removeMember(actor: string, id: string, user: string): Promise<true | Refusal> {
    return this.#act(actor, id, async (tx, notebook, changes) => {
      const refusal = canRemoveMember(notebook, actor, user)
      if (refusal !== undefined) return refusal
      await tx.query('DELETE FROM notes_members WHERE notebook = $1 AND sub = $2', [id, user])
      changes.push({ type: 'left', notebook: id, user })
      return true
    })
  }

  invite(
    actor: string,
    id: string,
    { role, expires, uses }: { role: Role; expires: number; uses: number },
  ): Promise<NewInvite | Refusal> {
    return this.#act(actor, id, async (tx, notebook) => {
      const refusal = needsRole(notebook, actor, 'owner')
      if (refusal !== undefined) return refusal
      const { rows } = await tx.query<{ open: string }>(
        'SELECT count(*) AS open FROM notes_invites WHERE notebook = $1',
        [id],
      )
      if (Number(rows[0]?.open) >= MAX_INVITES) return invitesFull()
      const token = randomToken()
      const invite = randomId()
      await tx.query(
        'INSERT INTO notes_invites (notebook, id, hash, role, expires, uses) VALUES ($1, $2, $3, $4, $5, $6)',
        [id, invite, tokenHash(token), role, expires, uses],
      )
      return { id: invite, token, role, expires, uses }
    })
  }

  invites(actor: string, id: string, now: number): Promise<readonly Invite[] | Refusal> {
    return this.#act(actor, id, async (tx, notebook) => {
      const refusal = needsRole(notebook, actor, 'owner')
      if (refusal !== undefined) return refusal
      const { rows } = await tx.query<{ id: string; role: Role; expires: string; uses: number }>(
        `SELECT id, role, expires, uses FROM notes_invites
        WHERE notebook = $1 AND expires > $2 AND uses > 0 ORDER BY made`,
        [id, now],
      )
      return rows.map((row) => ({ ...row, expires: Number(row.expires) }))
    })
  }

  withdraw(actor: string, id: string, inviteId: string): Promise<true | Refusal> {
    return this.#act(actor, id, async (tx, notebook) => {
      const refusal = needsRole(notebook, actor, 'owner')
      if (refusal !== undefined) return refusal
      const { rowCount } = await tx.query(
        'DELETE FROM notes_invites WHERE notebook = $1 AND id = $2',
        [id, inviteId],
      )
      return rowCount === 0 ? NOT_FOUND_REFUSAL : true
    })
  }

  async redeem(actor: string, token: string, now: number): Promise<NotebookView | Refusal> {
    await this.#ensure(actor)
    const hash = tokenHash(token)
    const { rows } = await this.#db.query<{ notebook: string }>(
      'SELECT notebook FROM notes_invites WHERE hash = $1',
      [hash],
    )
    const found = rows[0]
    if (found === undefined) return NOT_FOUND_REFUSAL
    const id = found.notebook
    return this.#act(actor, id, async (tx, notebook, changes) => {
      // Read again under the notebook's lock: another redeem may have spent it meanwhile.
      const { rows: invites } = await tx.query<{
        id: string
        role: Role
        expires: string
        uses: number
      }>('SELECT id, role, expires, uses FROM notes_invites WHERE notebook = $1 AND hash = $2', [
        id,
        hash,
      ])
      const invite = invites[0]
      if (invite === undefined || Number(invite.expires) <= now || invite.uses <= 0) {
        return NOT_FOUND_REFUSAL
      }
      const current = notebook.roles.get(actor)
      const { maxMembers } = this.#limits
      if (current === undefined && notebook.roles.size >= maxMembers) return membersFull(maxMembers)
      await tx.query(
        invite.uses > 1
          ? 'UPDATE notes_invites SET uses = uses - 1 WHERE notebook = $1 AND id = $2'
          : 'DELETE FROM notes_invites WHERE notebook = $1 AND id = $2',
        [id, invite.id],
      )
      const role = redeemedRole(current, invite.role)
      if (role !== undefined && current === undefined) {
        changes.push(await this.#join(tx, id, notebook.row.store, actor, role))
      } else if (role !== undefined) {
        await putMember(tx, id, actor, role)
        changes.push({ type: 'role', notebook: id, user: actor, role })
      }
      const members = notebook.roles.size + (current === undefined ? 1 : 0)
      return { id, name: notebook.row.name, role: role ?? (current as Role), members }
    })
  }

  subscribe(listener: (change: AccessChange) => void): () => void {
    return this.#delivery.subscribe(listener)
  }

  caughtUp(): Promise<void> {
    return this.#delivery.caughtUp()
  }

  /** Stops delivering changes of access. */
  close(): void {
    this.#unfollow?.()
    this.#members.clear()
    this.#delivery.close()
  }

  /** The user's default notebook id, made (with them as its owner) on their first act. */
  async #ensure(user: string): Promise<string> {
    const known = this.#defaults.get(user)
    if (known !== undefined) return known
    // The notebook and its owner in one statement: a racing instance's insert makes this one do
    // nothing, and the notebook it made is read below once it has committed.
    const { rows } = await this.#db.query<{ id: string }>(
      `WITH made AS (
        INSERT INTO notes_directory (id, name, store, default_user) VALUES ($1, $2, $3, $4)
        ON CONFLICT DO NOTHING RETURNING id
      ), owner AS (
        INSERT INTO notes_members (notebook, sub, role) SELECT id, $4, 'owner' FROM made
      )
      SELECT id FROM made`,
      [randomId(), DEFAULT_NOTEBOOK_NAME, defaultStore(user), user],
    )
    let id = rows[0]?.id
    if (id === undefined) {
      const { rows: existing } = await this.#db.query<{ id: string }>(
        'SELECT id FROM notes_directory WHERE default_user = $1',
        [user],
      )
      id = (existing[0] as { id: string }).id
    }
    if (this.#defaults.size >= MAX_KNOWN_DEFAULTS) this.#defaults.clear()
    this.#defaults.set(user, id)
    return id
  }

  /**
   * Makes `user` a member of notebook `id`, kept under `store`, with `role`, in the join's
   * transaction `tx`: the version of its notes is read there (its clock row, made here if it has
   * none yet, as its store makes it on first use) and kept with the membership as where it began.
   * A write committed after that read is after the join; one in flight as it is read may land on
   * either side.
   */
  async #join(
    tx: pg.ClientBase,
    id: string,
    store: string,
    user: string,
    role: Role,
  ): Promise<AccessChange> {
    const { rows } = await tx.query<{ r_epoch: string; r_sequence: string }>(
      'SELECT r_epoch, r_sequence FROM notes_open_notebook($1, $2)',
      [store, this.#epochOf(store) ?? randomEpoch()],
    )
    const { r_epoch, r_sequence } = rows[0] as { r_epoch: string; r_sequence: string }
    const version = versionToken(r_epoch, Number(r_sequence))
    await putMember(tx, id, user, role, version)
    return { type: 'joined', notebook: id, user, version }
  }

  /**
   * Where a membership made before the service kept it (its `since` NULL) began: it began before
   * now, so the version of its notes now stands in for it, written down once (the first instance
   * to write it wins, and every instance reads that one). A stream resumed from before then reloads
   * once instead of on every resume. NULL when the membership has gone meanwhile.
   */
  async #sinceNow(id: string, user: string, store: string): Promise<string | null> {
    const { rows } = await this.#db.query<{ r_epoch: string; r_sequence: string }>(
      'SELECT r_epoch, r_sequence FROM notes_open_notebook($1, $2)',
      [store, this.#epochOf(store) ?? randomEpoch()],
    )
    const { r_epoch, r_sequence } = rows[0] as { r_epoch: string; r_sequence: string }
    const { rows: kept } = await this.#db.query<{ since: string }>(
      `UPDATE notes_members SET since = COALESCE(since, $3) WHERE notebook = $1 AND sub = $2
      RETURNING since`,
      [id, user, versionToken(r_epoch, Number(r_sequence))],
    )
    return kept[0]?.since ?? null
  }

  /**
   * An act on notebook `id` by `actor`: `work` runs with the notebook's row locked and its
   * members read; 'not-found' when there is no such notebook.
   */
  async #act<T>(
    actor: string,
    id: string,
    work: (tx: pg.ClientBase, notebook: Locked, changes: AccessChange[]) => Promise<T | Refusal>,
  ): Promise<T | Refusal> {
    await this.#ensure(actor)
    if (!OUR_ID.test(id)) return NOT_FOUND_REFUSAL
    return this.#transaction(async (tx, changes) => {
      const notebook = await lockNotebook(tx, id)
      return notebook === undefined ? NOT_FOUND_REFUSAL : work(tx, notebook, changes)
    })
  }

  /**
   * `work` in one transaction: committed with the changes of access it pushed (numbered and
   * kept, notes_record_access) unless it answers a refusal, then rolled back.
   */
  async #transaction<T>(
    work: (tx: pg.ClientBase, changes: AccessChange[]) => Promise<T | Refusal>,
  ): Promise<T | Refusal> {
    await this.#delivery.ready()
    let heard = false
    const changes: AccessChange[] = []
    try {
      return await this.#db.transaction<T | Refusal>(async (tx) => {
        const value = await work(tx, changes)
        if (isRefusal(value)) return { commit: false, value }
        if (changes.length > 0) {
          await tx.query('SELECT notes_record_access($1::text[], $2)', [
            changes.map((change) => JSON.stringify(change)),
            ACCESS_HISTORY,
          ])
          heard = true
        }
        return { commit: true, value }
      })
    } finally {
      // Before the act is acknowledged (or fails, perhaps committed): what it touched is read
      // again here, whatever the listener has heard.
      for (const change of changes) this.#members.forget(change)
      if (heard) this.#delivery.pump()
    }
  }
}
