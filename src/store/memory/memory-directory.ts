import {
  type Access,
  type AccessChange,
  type Directory,
  type DirectoryLimits,
  type DirectoryRecord,
  defaultStore,
  type Invite,
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

interface InviteState {
  readonly id: string
  readonly hash: string
  readonly role: Role
  readonly expires: number
  uses: number
}

interface NotebookState {
  readonly id: string
  name: string
  readonly store: string
  readonly defaultUser: string | undefined
  /** Members in the order they joined (Map order). */
  readonly roles: Map<string, Role>
  /** Where each member's membership began (Access.since), when known. */
  readonly since: Map<string, string>
  /** Invitations in the order they were made. */
  readonly invites: Map<string, InviteState>
}

export interface MemoryDirectoryOptions extends DirectoryLimits {
  /** Removes the notes of a removed notebook (its store name). */
  dropNotes: (store: string) => void
  /** The version token of a notebook's notes now (its store name), which a join carries. */
  versionOf: (store: string) => string
  /** Told of every change, synchronously, before the act answers (a journal writes it down). */
  onRecord?: (record: DirectoryRecord) => void
}

/** The default notebook's name until its owner renames it. */
const DEFAULT_NOTEBOOK_NAME = 'My notes'

/**
 * The directory in memory: every act is checked and applied in one synchronous step, so nothing
 * can come between a rule's check and its change.
 */
export class MemoryDirectory implements Directory {
  readonly #options: MemoryDirectoryOptions
  readonly #notebooks = new Map<string, NotebookState>()
  /** Each user's default notebook id. */
  readonly #defaults = new Map<string, string>()
  /** Each user's notebooks, in the order they joined them (their default first). */
  readonly #joined = new Map<string, Set<string>>()
  /**
   * Every membership ('<id>\n<user>') in the order it began: what records() replays, so that both
   * a notebook's members and a user's notebooks come back in the order they joined.
   */
  readonly #joins = new Set<string>()
  /** Invitation token hashes -> [notebook id, invitation id]. */
  readonly #tokens = new Map<string, readonly [string, string]>()
  readonly #listeners = new Set<(change: AccessChange) => void>()

  constructor(options: MemoryDirectoryOptions) {
    this.#options = options
  }

  list(user: string): readonly NotebookView[] {
    const own = this.#ensure(user)
    // Their default first, though a notebook they were added to before their first act joined
    // earlier.
    const views: NotebookView[] = [viewOf(this.#notebooks.get(own) as NotebookState, user)]
    for (const id of this.#joined.get(user) ?? []) {
      if (id !== own) views.push(viewOf(this.#notebooks.get(id) as NotebookState, user))
    }
    return views
  }

  defaultOf(user: string): string {
    return this.#ensure(user)
  }

  access(user: string, id: string): Access | undefined {
    this.#ensure(user)
    const notebook = this.#notebooks.get(id)
    const role = notebook?.roles.get(user)
    if (notebook === undefined || role === undefined) return undefined
    let since = notebook.since.get(user)
    if (since === undefined && notebook.defaultUser !== user) {
      // A membership an older release wrote down without where it began: it began before now,
      // so now stands in for it (a stream resumed from before reloads once, not on every resume),
      // and a compaction writes it down. (A user's own default notebook needs none.)
      since = this.#options.versionOf(notebook.store)
      notebook.since.set(user, since)
    }
    return since === undefined
      ? { id, store: notebook.store, role }
      : { id, store: notebook.store, role, since }
  }

  /** The role of `user` in the notebook kept under `store`, for a write's check. */
  roleIn(store: string, user: string): Role | undefined {
    const id = store.startsWith('nb:') ? store.slice(3) : this.#defaults.get(store.slice(5))
    return id === undefined ? undefined : this.#notebooks.get(id)?.roles.get(user)
  }

  create(actor: string, name: string): NotebookView | Refusal {
    this.#ensure(actor)
    let owned = 0
    for (const id of this.#joined.get(actor) ?? []) {
      if (this.#notebooks.get(id)?.roles.get(actor) === 'owner') owned++
    }
    if (owned >= this.#options.maxNotebooksPerUser) {
      return notebooksFull(this.#options.maxNotebooksPerUser)
    }
    let id = randomId()
    while (this.#notebooks.has(id)) id = randomId()
    this.#apply({ t: 'notebook', id, name, store: notebookStore(id) })
    this.#apply({ t: 'role', id, user: actor, role: 'owner' })
    return viewOf(this.#notebooks.get(id) as NotebookState, actor)
  }

  rename(actor: string, id: string, name: string): NotebookView | Refusal {
    const found = this.#as(actor, id, 'owner')
    if (!('store' in found)) return found
    this.#apply({ t: 'name', id, name })
    return viewOf(found, actor)
  }

  remove(actor: string, id: string): { store: string } | Refusal {
    const found = this.#as(actor, id, 'owner')
    if (!('store' in found)) return found
    if (found.defaultUser !== undefined) return { refused: 'default-notebook' }
    this.#apply({ t: 'remove', id })
    return { store: found.store }
  }

  members(actor: string, id: string): readonly Member[] | Refusal {
    const found = this.#as(actor, id, 'viewer')
    if (!('store' in found)) return found
    return [...found.roles].map(([user, role]) => ({ user, role }))
  }

  setRole(actor: string, id: string, user: string, role: Role): Member | Refusal {
    this.#ensure(actor)
    const notebook = this.#notebooks.get(id)
    if (notebook === undefined) return NOT_FOUND_REFUSAL
    const refusal = canSetRole(notebook, actor, user, role, this.#options.maxMembers)
    if (refusal !== undefined) return refusal
    if (notebook.roles.get(user) !== role) this.#apply({ t: 'role', id, user, role })
    return { user, role }
  }

  removeMember(actor: string, id: string, user: string): true | Refusal {
    this.#ensure(actor)
    const notebook = this.#notebooks.get(id)
    if (notebook === undefined) return NOT_FOUND_REFUSAL
    const refusal = canRemoveMember(notebook, actor, user)
    if (refusal !== undefined) return refusal
    this.#apply({ t: 'leave', id, user })
    return true
  }

  invite(
    actor: string,
    id: string,
    { role, expires, uses }: { role: Role; expires: number; uses: number },
  ): NewInvite | Refusal {
    const found = this.#as(actor, id, 'owner')
    if (!('store' in found)) return found
    if (found.invites.size >= MAX_INVITES) return invitesFull()
    const token = randomToken()
    let invite = randomId()
    while (found.invites.has(invite)) invite = randomId()
    this.#apply({ t: 'invite', id, invite, hash: tokenHash(token), role, expires, uses })
    return { id: invite, token, role, expires, uses }
  }

  invites(actor: string, id: string, now: number): readonly Invite[] | Refusal {
    const found = this.#as(actor, id, 'owner')
    if (!('store' in found)) return found
    const usable: Invite[] = []
    for (const invite of found.invites.values()) {
      if (invite.expires > now && invite.uses > 0) {
        usable.push({
          id: invite.id,
          role: invite.role,
          expires: invite.expires,
          uses: invite.uses,
        })
      }
    }
    return usable
  }

  withdraw(actor: string, id: string, inviteId: string): true | Refusal {
    const found = this.#as(actor, id, 'owner')
    if (!('store' in found)) return found
    if (!found.invites.has(inviteId)) return NOT_FOUND_REFUSAL
    this.#apply({ t: 'withdraw', id, invite: inviteId })
    return true
  }

  redeem(actor: string, token: string, now: number): NotebookView | Refusal {
    this.#ensure(actor)
    const where = this.#tokens.get(tokenHash(token))
    if (where === undefined) return NOT_FOUND_REFUSAL
    const [id, inviteId] = where
    const notebook = this.#notebooks.get(id) as NotebookState
    const invite = notebook.invites.get(inviteId) as InviteState
    if (invite.expires <= now || invite.uses <= 0) return NOT_FOUND_REFUSAL
    const current = notebook.roles.get(actor)
    const role = redeemedRole(current, invite.role)
    if (current === undefined && notebook.roles.size >= this.#options.maxMembers) {
      return membersFull(this.#options.maxMembers)
    }
    this.#apply({ t: 'spend', id, invite: inviteId })
    if (role !== undefined) this.#apply({ t: 'role', id, user: actor, role })
    return viewOf(notebook, actor)
  }

  subscribe(listener: (change: AccessChange) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /** Applies a record written down before (a journal's replay): no listener hears of it. */
  replay(record: DirectoryRecord): void {
    this.#change(record)
  }

  /** The records that rebuild this directory as it is now, for a compacted journal. */
  *records(): Generator<DirectoryRecord> {
    for (const notebook of this.#notebooks.values()) {
      const { id, name, store, defaultUser } = notebook
      yield {
        t: 'notebook',
        id,
        name,
        store,
        ...(defaultUser === undefined ? {} : { default: defaultUser }),
      }
    }
    for (const join of this.#joins) {
      // A notebook id holds no line break; a sub may.
      const cut = join.indexOf('\n')
      const id = join.slice(0, cut)
      const user = join.slice(cut + 1)
      const notebook = this.#notebooks.get(id) as NotebookState
      const role = notebook.roles.get(user) as Role
      const since = notebook.since.get(user)
      yield since === undefined
        ? { t: 'role', id, user, role }
        : { t: 'role', id, user, role, since }
    }
    for (const notebook of this.#notebooks.values()) {
      const { id } = notebook
      for (const invite of notebook.invites.values()) {
        const { hash, role, expires, uses } = invite
        yield { t: 'invite', id, invite: invite.id, hash, role, expires, uses }
      }
    }
  }

  /** The user's default notebook id, made (with them as its owner) on their first act. */
  #ensure(user: string): string {
    const known = this.#defaults.get(user)
    if (known !== undefined) return known
    let id = randomId()
    while (this.#notebooks.has(id)) id = randomId()
    this.#apply({
      t: 'notebook',
      id,
      name: DEFAULT_NOTEBOOK_NAME,
      store: defaultStore(user),
      default: user,
    })
    // Theirs from their first act: no one is told they joined it.
    const record: DirectoryRecord = { t: 'role', id, user, role: 'owner' }
    this.#options.onRecord?.(record)
    this.#change(record)
    return id
  }

  /** The notebook, when the actor holds at least `needs` in it. */
  #as(actor: string, id: string, needs: Role): NotebookState | Refusal {
    this.#ensure(actor)
    const notebook = this.#notebooks.get(id)
    if (notebook === undefined) return NOT_FOUND_REFUSAL
    return needsRole(notebook, actor, needs) ?? notebook
  }

  #apply(record: DirectoryRecord): void {
    const notebook = this.#notebooks.get(record.id)
    if (record.t === 'role' && notebook !== undefined && !notebook.roles.has(record.user)) {
      // A join: where it began, read in the same synchronous step (no write comes between), is
      // written down with it and is the version its `joined` carries.
      record = { ...record, since: this.#options.versionOf(notebook.store) }
    }
    this.#options.onRecord?.(record)
    for (const change of this.#change(record)) {
      for (const listener of this.#listeners) listener(change)
    }
  }

  /** Makes the change and answers what the listeners hear of it. */
  #change(record: DirectoryRecord): AccessChange[] {
    switch (record.t) {
      case 'notebook': {
        this.#notebooks.set(record.id, {
          id: record.id,
          name: record.name,
          store: record.store,
          defaultUser: record.default,
          roles: new Map(),
          since: new Map(),
          invites: new Map(),
        })
        if (record.default !== undefined) this.#defaults.set(record.default, record.id)
        return []
      }
      case 'name': {
        const notebook = this.#notebooks.get(record.id)
        if (notebook === undefined) return []
        notebook.name = record.name
        return [{ type: 'renamed', notebook: record.id, name: record.name }]
      }
      case 'remove': {
        const notebook = this.#notebooks.get(record.id)
        if (notebook === undefined) return []
        this.#notebooks.delete(record.id)
        for (const invite of notebook.invites.values()) this.#tokens.delete(invite.hash)
        const changes: AccessChange[] = []
        for (const user of notebook.roles.keys()) {
          this.#joined.get(user)?.delete(record.id)
          this.#joins.delete(`${record.id}\n${user}`)
          changes.push({ type: 'left', notebook: record.id, user })
        }
        this.#options.dropNotes(notebook.store)
        return changes
      }
      case 'role': {
        const notebook = this.#notebooks.get(record.id)
        if (notebook === undefined) return []
        const joining = !notebook.roles.has(record.user)
        notebook.roles.set(record.user, record.role)
        if (!joining)
          return [{ type: 'role', notebook: record.id, user: record.user, role: record.role }]
        // A record an older release wrote has none: not known.
        const since = typeof record.since === 'string' ? record.since : undefined
        if (since !== undefined) notebook.since.set(record.user, since)
        let joined = this.#joined.get(record.user)
        if (joined === undefined) {
          joined = new Set()
          this.#joined.set(record.user, joined)
        }
        joined.add(record.id)
        this.#joins.add(`${record.id}\n${record.user}`)
        return [{ type: 'joined', notebook: record.id, user: record.user, version: since }]
      }
      case 'leave': {
        const notebook = this.#notebooks.get(record.id)
        if (notebook === undefined || !notebook.roles.delete(record.user)) return []
        notebook.since.delete(record.user)
        this.#joined.get(record.user)?.delete(record.id)
        this.#joins.delete(`${record.id}\n${record.user}`)
        return [{ type: 'left', notebook: record.id, user: record.user }]
      }
      case 'invite': {
        const notebook = this.#notebooks.get(record.id)
        if (notebook === undefined) return []
        const { invite: id, hash, role, expires, uses } = record
        notebook.invites.set(id, { id, hash, role, expires, uses })
        this.#tokens.set(hash, [record.id, id])
        return []
      }
      case 'spend': {
        const invite = this.#notebooks.get(record.id)?.invites.get(record.invite)
        if (invite !== undefined) invite.uses--
        if (invite !== undefined && invite.uses <= 0) this.#forget(record.id, record.invite)
        return []
      }
      case 'withdraw': {
        this.#forget(record.id, record.invite)
        return []
      }
    }
  }

  #forget(id: string, inviteId: string): void {
    const notebook = this.#notebooks.get(id)
    const invite = notebook?.invites.get(inviteId)
    if (notebook === undefined || invite === undefined) return
    notebook.invites.delete(inviteId)
    this.#tokens.delete(invite.hash)
  }
}

function viewOf(notebook: NotebookState, user: string): NotebookView {
  return {
    id: notebook.id,
    name: notebook.name,
    role: notebook.roles.get(user) as Role,
    members: notebook.roles.size,
  }
}
