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
  type MembersSnapshot,
  membersFull,
  NOT_FOUND_REFUSAL,
  needsRole,
  notebooksFull,
  randomId,
  randomToken,
  redeemedRole,
  tokenHash,
} from '../kernel/notebook-rules.js'
import { AccessDelivery } from './access-delivery.js'
import type { ChangeListener } from './change-delivery.js'
import type { Database } from './database.js'
import { MemberCache } from './member-cache.js'

/** The default notebook's name until its owner renames it (as MemoryDirectory's). */
const DEFAULT_NOTEBOOK_NAME = 'My notes'

/** Changes of access kept for subscribers that fall behind (a listener reconnecting). */
const ACCESS_HISTORY = 10_000

/** Default notebook ids remembered at most (they never change; forgotten, they are read again). */
const MAX_KNOWN_DEFAULTS = 10_000

/** Every id this directory gives (randomId): a string that is not one is no notebook of ours. */
const OUR_ID = /^[A-Za-z0-9_-]{22}$/

interface NotebookRow {
  id: string
  name: string
  store: string
  default_user: string | null
}

/** A notebook locked by an act (FOR UPDATE), with its members in the order they joined. */
interface Locked extends MembersSnapshot {
  readonly row: NotebookRow
  readonly members: readonly Member[]
}

/**
 * The directory of notebooks in PostgreSQL (migration 4, directory-schema.ts), shared by every
 * instance on the database. Each act is one transaction that locks its notebook's row
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
  readonly #defaults = new Map<string, string>()
  readonly #members: MemberCache
  /** Stops the cache hearing the changes of access; undefined until access() first reads one. */
  #unfollow: (() => void) | undefined

  constructor(
    db: Database,
    listener: ChangeListener,
    limits: DirectoryLimits,
    removed: (store: string) => void,
  ) {
    this.#db = db
    this.#limits = limits
    this.#removed = removed
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
    const { rows } = await this.#db.read<{ store: string | null; role: Role | null; head: string }>(
      'notes_member_access',
      `SELECT d.store, m.role, c.sequence AS head FROM notes_access_clock c
      LEFT JOIN (notes_directory d JOIN notes_members m ON m.notebook = d.id AND m.sub = $2)
      ON d.id = $1`,
      [id, user],
    )
    const row = rows[0] as { store: string | null; role: Role | null; head: string }
    const access =
      row.store === null || row.role === null ? undefined : { id, store: row.store, role: row.role }
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
      await putMember(tx, id, actor, 'owner')
      changes.push({ type: 'joined', notebook: id, user: actor })
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
      if (current !== role) {
        await putMember(tx, id, user, role)
        changes.push(
          current === undefined
            ? { type: 'joined', notebook: id, user }
            : { type: 'role', notebook: id, user, role },
        )
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
      if (role !== undefined) {
        await putMember(tx, id, actor, role)
        changes.push(
          current === undefined
            ? { type: 'joined', notebook: id, user: actor }
            : { type: 'role', notebook: id, user: actor, role },
        )
      }
      const members = notebook.roles.size + (current === undefined ? 1 : 0)
      return { id, name: notebook.row.name, role: role ?? (current as Role), members }
    })
  }

  subscribe(listener: (change: AccessChange) => void): () => void {
    return this.#delivery.subscribe(listener)
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

/**
 * The role `user` holds now in the notebook kept under `store`, read with their member row locked
 * FOR SHARE until the transaction `tx` ends: a guarded write runs it first, so a removal or
 * demotion of them waits for the write to commit, or the write waits and reads what it left.
 */
export async function writerRole(
  tx: pg.ClientBase,
  store: string,
  user: string,
): Promise<Role | undefined> {
  const { rows } = await tx.query<{ role: Role }>(
    `SELECT m.role FROM notes_directory d
    JOIN notes_members m ON m.notebook = d.id AND m.sub = $2
    WHERE d.store = $1 FOR SHARE OF m`,
    [store, user],
  )
  return rows[0]?.role
}

async function lockNotebook(tx: pg.ClientBase, id: string): Promise<Locked | undefined> {
  const { rows } = await tx.query<NotebookRow>(
    'SELECT id, name, store, default_user FROM notes_directory WHERE id = $1 FOR UPDATE',
    [id],
  )
  const row = rows[0]
  if (row === undefined) return undefined
  const { rows: members } = await tx.query<{ sub: string; role: Role }>(
    'SELECT sub, role FROM notes_members WHERE notebook = $1 ORDER BY joined',
    [id],
  )
  return {
    row,
    members: members.map(({ sub, role }) => ({ user: sub, role })),
    roles: new Map(members.map(({ sub, role }) => [sub, role])),
    defaultUser: row.default_user ?? undefined,
  }
}

/** Adds `user` with `role`, or changes their role (they keep their place in the join order). */
async function putMember(tx: pg.ClientBase, id: string, user: string, role: Role): Promise<void> {
  await tx.query(
    `INSERT INTO notes_members (notebook, sub, role) VALUES ($1, $2, $3)
    ON CONFLICT (notebook, sub) DO UPDATE SET role = EXCLUDED.role`,
    [id, user, role],
  )
}
