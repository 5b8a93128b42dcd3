import { encodeRecord } from '../../durable/record-frame.js'
import type {
  Access,
  AccessChange,
  Directory,
  DirectoryLimits,
  DirectoryRecord,
  Invite,
  Member,
  NewInvite,
  NotebookView,
  Refusal,
  Role,
} from '../directory.js'
import { MemoryDirectory } from '../memory/memory-directory.js'
import { type MaybePromise, StoreUnavailableError } from '../types.js'
import type { Payload } from './journal-records.js'
import { type JournalHost, writeError } from './journaled-store.js'

export interface JournaledDirectoryOptions extends DirectoryLimits {
  /** Removes the notes of a removed notebook (its store name), in memory. */
  dropNotes: (store: string) => void
  /** The version token of a notebook's notes in memory now (its store name), which a join carries. */
  versionOf: (store: string) => string
}

/**
 * The directory of a journal: a MemoryDirectory whose every act is checked and applied in one
 * synchronous step, its records journaled as one record per act (so a crash keeps all or none of
 * an act: a notebook is never kept without its owner), and answered once that record is durable.
 * Subscribers hear of a change only then, as a notebook's change feed hears of a write.
 *
 * An act that writes nothing (a read, a refusal) may answer what acts not yet durable made (the
 * default notebook another call just made, a member just added): it is answered once the last of
 * them is, and asked again if the disk lost them.
 */
export class JournaledDirectory implements Directory {
  readonly #host: JournalHost
  readonly #options: JournaledDirectoryOptions
  #memory: MemoryDirectory
  /** The records and changes of the act in progress, taken by #commit. */
  #records: DirectoryRecord[] = []
  #changes: AccessChange[] = []
  readonly #listeners = new Set<(change: AccessChange) => void>()
  /** The last append of an act, settled either way, until it is. */
  #pending: Promise<void> | undefined

  constructor(host: JournalHost, options: JournaledDirectoryOptions) {
    this.#host = host
    this.#options = options
    this.#memory = this.#newMemory()
  }

  /** Starts over on an empty directory, for the journal to replay into (`replay`). */
  reset(): void {
    this.#memory = this.#newMemory()
    this.#records = []
    this.#changes = []
  }

  /** Applies a record of the journal: no subscriber hears of it. */
  replay(record: DirectoryRecord): void {
    this.#memory.replay(record)
  }

  /** The records that rebuild the directory as it is now, for a compaction's image. */
  records(): Generator<DirectoryRecord> {
    return this.#memory.records()
  }

  /** The role of `user` in the notebook kept under `store`, for a guarded write's check. */
  roleIn(store: string, user: string): Role | undefined {
    return this.#memory.roleIn(store, user)
  }

  list(user: string): MaybePromise<readonly NotebookView[]> {
    return this.#act(() => this.#memory.list(user))
  }

  defaultOf(user: string): MaybePromise<string> {
    return this.#act(() => this.#memory.defaultOf(user))
  }

  access(user: string, id: string): MaybePromise<Access | undefined> {
    return this.#act(() => this.#memory.access(user, id))
  }

  create(actor: string, name: string): MaybePromise<NotebookView | Refusal> {
    return this.#act(() => this.#memory.create(actor, name))
  }

  rename(actor: string, id: string, name: string): MaybePromise<NotebookView | Refusal> {
    return this.#act(() => this.#memory.rename(actor, id, name))
  }

  remove(actor: string, id: string): MaybePromise<{ readonly store: string } | Refusal> {
    return this.#act(() => this.#memory.remove(actor, id))
  }

  members(actor: string, id: string): MaybePromise<readonly Member[] | Refusal> {
    return this.#act(() => this.#memory.members(actor, id))
  }

  setRole(actor: string, id: string, user: string, role: Role): MaybePromise<Member | Refusal> {
    return this.#act(() => this.#memory.setRole(actor, id, user, role))
  }

  removeMember(actor: string, id: string, user: string): MaybePromise<true | Refusal> {
    return this.#act(() => this.#memory.removeMember(actor, id, user))
  }

  invite(
    actor: string,
    id: string,
    invite: { role: Role; expires: number; uses: number },
  ): MaybePromise<NewInvite | Refusal> {
    return this.#act(() => this.#memory.invite(actor, id, invite))
  }

  invites(actor: string, id: string, now: number): MaybePromise<readonly Invite[] | Refusal> {
    return this.#act(() => this.#memory.invites(actor, id, now))
  }

  withdraw(actor: string, id: string, inviteId: string): MaybePromise<true | Refusal> {
    return this.#act(() => this.#memory.withdraw(actor, id, inviteId))
  }

  redeem(actor: string, token: string, now: number): MaybePromise<NotebookView | Refusal> {
    return this.#act(() => this.#memory.redeem(actor, token, now))
  }

  subscribe(listener: (change: AccessChange) => void): () => void {
    const subscription = (change: AccessChange) => listener(change)
    this.#listeners.add(subscription)
    return () => {
      this.#listeners.delete(subscription)
    }
  }

  /** Runs one act on the memory directory, then answers as the class comment says. */
  #act<T>(call: () => T, wait = true): MaybePromise<T> {
    // An act after close would change the directory and never reach the file.
    if (this.#host.closed) throw new StoreUnavailableError('The store is shutting down.')
    const result = call()
    const records = this.#records
    const changes = this.#changes
    if (records.length > 0) {
      this.#records = []
      this.#changes = []
      return this.#commit(records, changes, result)
    }
    const pending = this.#pending
    if (pending === undefined || !wait) return result
    return pending.then(() => this.#act(call, false))
  }

  async #commit<T>(records: DirectoryRecord[], changes: AccessChange[], result: T): Promise<T> {
    const payload: Payload = { t: 'dir', r: records }
    const appended = this.#host.append(encodeRecord(JSON.stringify(payload)))
    const settled = appended.then(
      () => {},
      () => {},
    )
    this.#pending = settled
    void settled.then(() => {
      if (this.#pending === settled) this.#pending = undefined
    })
    try {
      await appended
    } catch (err) {
      throw writeError(err, 'The store could not write the change of notebooks to its disk.')
    }
    for (const change of changes) for (const listener of this.#listeners) listener(change)
    return result
  }

  #newMemory(): MemoryDirectory {
    const { maxNotebooksPerUser, maxMembers, dropNotes, versionOf } = this.#options
    const memory = new MemoryDirectory({
      maxNotebooksPerUser,
      maxMembers,
      dropNotes,
      versionOf,
      onRecord: (record) => this.#records.push(record),
    })
    memory.subscribe((change) => this.#changes.push(change))
    return memory
  }
}
