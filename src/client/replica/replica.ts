/**
 * Replica: an offline copy of the notebook, kept current by the change feed, that takes writes
 * at once and sends them later. Its local view is the service's notes (the base, as the feed
 * last told them) with the queued writes (the outbox) applied on top, recomputed whenever either
 * changes: a change of the service under a pending write shows through it, as Replicache rebases
 * pending mutations on each pull. A write is stored (one storage write) before its call resolves,
 * and sent in order with an Idempotency-Key (creates) or the If-Match of the version it was made
 * on (updates and deletes). A refusal (412, or 404 of an update) is a conflict kept with both
 * versions until the application resolves it, as PouchDB keeps both revisions of a conflict.
 */
import { newIdempotencyKey } from '../idempotency-key.js'
import type { NoteFields } from '../types.js'
import { resolveConflict } from './conflicts.js'
import {
  fileInfos,
  filesWaiting,
  handedFiles,
  openConflicts,
  type UnsentWrite,
  unsentWrites,
} from './handover.js'
import { buildView, entryOf, queueWrite, stateOf, updateOf, withoutId } from './local-view.js'
import { matchesText } from './note-json.js'
import { queuedCreate } from './outbox.js'
import { currentVersion, pullLoop } from './pull.js'
import { pushLoop } from './push.js'
import type { AttachOptions } from './queued-files.js'
import {
  checkOpen,
  type FedHooks,
  loadState,
  lostError,
  type ReplicaState,
  waitFor,
} from './replica-state.js'
import type {
  ReplicaConflict,
  ReplicaEntry,
  ReplicaEvent,
  ReplicaFile,
  ReplicaOptions,
  UnsentFile,
} from './replica-types.js'

export type { AttachOptions } from './queued-files.js'
export type {
  ReplicaConflict,
  ReplicaEntry,
  ReplicaEvent,
  ReplicaFile,
  ReplicaOptions,
  UnsentFile,
} from './replica-types.js'

/**
 * queued-files.ts (attaching and uploading files), loaded on first use: a page that attaches no
 * file never loads it.
 */
let queuedFiles: Promise<typeof import('./queued-files.js')> | undefined
function filesModule(): Promise<typeof import('./queued-files.js')> {
  queuedFiles ??= import('./queued-files.js')
  return queuedFiles
}

/** Makes a Replica over a state (its constructor is private to the class). */
let construct: ((state: ReplicaState) => Replica) | undefined

/**
 * The public face of the replica: the local view, local writes, conflicts' resolution and the
 * sync's start and stop, over the state its parts share (local-view, pull, push, conflicts).
 */
export class Replica {
  readonly #state: ReplicaState
  #running:
    | { stop: AbortController; done: Promise<void>; uploads: Promise<void> | undefined }
    | undefined

  private constructor(state: ReplicaState) {
    this.#state = state
  }

  static {
    construct = (state) => new Replica(state)
  }

  /** Opens a replica over its storage (no network until start() or sync()). */
  static async open(options: ReplicaOptions): Promise<Replica> {
    return new Replica(await loadState(options))
  }

  // ---- The local view ----

  /**
   * The local view: the service's notes with the outbox applied, in list order (service ids
   * ascending, local creates after them in creation order).
   */
  notes(): readonly ReplicaEntry[] {
    this.#state.view ??= buildView(this.#state)
    return this.#state.view
  }

  /** The service's q rule (string values at any depth, keys excluded, case-insensitive). */
  search(text: string): readonly ReplicaEntry[] {
    const matches = matchesText(text)
    return this.notes().filter((entry) => matches(entry.note))
  }

  get(key: string): ReplicaEntry | undefined {
    return this.notes().find((entry) => entry.key === key)
  }

  /** Queued writes not yet acknowledged by the service. */
  get waiting(): number {
    return this.#state.outbox.length
  }

  get conflicts(): readonly ReplicaConflict[] {
    return openConflicts(this.#state)
  }

  /** The last contact with the service succeeded. */
  get online(): boolean {
    return this.#state.online
  }

  /**
   * The service said this notebook is no longer the user's (a replica of `client.notebook(id)`
   * whose feed was revoked, or whose reads or writes met the notebook's 404): syncing has
   * stopped for good, as no retry can change that. The local view stays readable, and the
   * writes that could not be sent are in unsent(), for the application to keep or drop; close()
   * the replica and clear its storage once they are handled.
   */
  get lost(): boolean {
    return this.#state.lost
  }

  /** The queued writes, oldest first, as the application would keep them (see `lost`). */
  unsent(): UnsentWrite[] {
    return unsentWrites(this.#state)
  }

  /**
   * Listeners get 'change', 'waiting', 'conflict', 'online', 'reset', 'lost', 'files'; answers an
   * unsubscribe.
   */
  subscribe(listener: (event: ReplicaEvent) => void): () => void {
    this.#state.listeners.add(listener)
    return () => this.#state.listeners.delete(listener)
  }

  // ---- Local writes ----

  /** Applies a create to the local view and queues it; resolves once it is stored. */
  async create(fields: NoteFields): Promise<ReplicaEntry> {
    checkOpen(this.#state)
    const note = withoutId(fields)
    const key = `local:${newIdempotencyKey()}`
    await queueWrite(this.#state, queuedCreate(key, note))
    return entryOf(this.#state, key)
  }

  /**
   * Applies an update to the local view and queues it. `patch` must not hold `id` (the replica
   * does not move notes to another id). Throws when the view has no such entry.
   */
  async update(
    key: string,
    patch: NoteFields,
    options: { mergePatch?: boolean } = {},
  ): Promise<ReplicaEntry> {
    checkOpen(this.#state)
    if (Object.hasOwn(patch, 'id')) {
      throw new TypeError('A replica update cannot change a note id: leave `id` out of the patch.')
    }
    const current = stateOf(this.#state, key)
    if (current === null) throw new RangeError(`The replica has no note ${key}.`)
    await queueWrite(this.#state, updateOf(key, current, patch, options.mergePatch === true))
    return entryOf(this.#state, key)
  }

  /** Removes the entry from the local view and queues the delete. */
  async delete(key: string): Promise<void> {
    checkOpen(this.#state)
    if (stateOf(this.#state, key) === null) throw new RangeError(`The replica has no note ${key}.`)
    await queueWrite(this.#state, { seq: 0, entry: key, op: 'delete', basis: null, after: null })
  }

  // ---- Files ----

  /**
   * Attaches a file to the note `key`: its bytes are kept on the device (the replica's storage)
   * and the call resolves once they are stored, without the network. While the replica syncs
   * and the service can be reached, queued files are uploaded in order (`files.upload`,
   * resumable; their progress in files(), with a 'files' event at each step), then each one's
   * reference, `{ id, name, size, type }`, is added to the note's `files` list as a queued
   * update (sent, merged and kept as a conflict as any other), and its bytes leave the device.
   * They stay queued across a reload (a new Replica on the same storage). A file the service
   * refuses for good (413, 507, 403, ...) or whose note is gone stays, in unsentFiles().
   */
  async attachFile(
    key: string,
    bytes: Blob | Uint8Array<ArrayBuffer>,
    options: AttachOptions = {},
  ): Promise<ReplicaFile> {
    const files = await filesModule()
    const file = await files.attachFile(this.#state, key, bytes, options)
    this.#startUploads()
    return file
  }

  /** The files on the device, in the order they are sent. */
  files(): ReplicaFile[] {
    return fileInfos(this.#state)
  }

  /**
   * The files that will not be sent, with their bytes: refused ones (and, once the notebook is
   * `lost`, every queued file). removeFile() each once the application has kept or dropped it.
   */
  unsentFiles(): Promise<UnsentFile[]> {
    checkOpen(this.#state)
    return handedFiles(this.#state, this.#state.lost, false)
  }

  /**
   * Removes a queued file (and its bytes) from the device, aborting its upload if one is under
   * way; false when there is none by that key.
   */
  async removeFile(fileKey: string): Promise<boolean> {
    checkOpen(this.#state)
    if (!this.#state.files.some((file) => file.key === fileKey)) return false
    return (await filesModule()).removeFile(this.#state, fileKey)
  }

  // ---- Conflicts ----

  /**
   * Settles a conflict: 'theirs' drops the local version; 'mine' writes the local version over
   * the service's; `{ note }` writes that note (a merge). The write is queued like any other,
   * conditional on the service's version the conflict showed (so it can conflict again).
   */
  async resolve(
    conflictKey: string,
    choice: 'mine' | 'theirs' | { note: NoteFields },
  ): Promise<void> {
    checkOpen(this.#state)
    await resolveConflict(this.#state, conflictKey, choice)
  }

  // ---- Syncing ----

  /**
   * Starts syncing: pull (full load when empty or on reset, then the change feed), push the
   * outbox in order; keeps retrying with backoff while the service is unreachable.
   */
  start(): void {
    checkOpen(this.#state)
    if (this.#running !== undefined) return
    const stop = new AbortController()
    const done = Promise.all([
      // Fed from outside, its changes come from NotebooksReplica's one stream.
      this.#state.fed === undefined ? pullLoop(this.#state, stop.signal) : undefined,
      pushLoop(this.#state, stop.signal),
    ]).then(() => undefined)
    this.#running = { stop, done, uploads: undefined }
    if (this.#state.files.length > 0) this.#startUploads()
  }

  /** Starts sending the queued files, while syncing, unless that is under way. */
  #startUploads(): void {
    const running = this.#running
    if (running === undefined || running.uploads !== undefined) return
    const state = this.#state
    running.uploads = filesModule()
      .then((files) => files.uploadLoop(state, running.stop.signal))
      .catch(() => {
        // The module could not be loaded (offline, not cached): tried again at the next start.
        queuedFiles = undefined
        running.uploads = undefined
      })
  }

  /** Stops syncing: aborts the requests under way; holds no timer or connection afterwards. */
  async stop(): Promise<void> {
    const running = this.#running
    if (running === undefined) return
    this.#running = undefined
    running.stop.abort()
    this.#state.wakePush?.()
    await running.done
    await running.uploads
  }

  /**
   * Resolves once the outbox is empty (or only conflicts remain) and no file waits to be sent
   * (but refused ones), the feed has caught up to the
   * service's version at the time of the call, and all of it is stored; rejects on abort, and once
   * the notebook is `lost`. Starts syncing if needed. In a NotebooksReplica, the feed is the one
   * stream, and it is waited for until it has brought back every write this replica sent (other
   * people's changes come as it brings them).
   */
  async sync(options: { signal?: AbortSignal | undefined } = {}): Promise<void> {
    const state = this.#state
    checkOpen(state)
    if (state.lost) throw lostError()
    this.start()
    const signal = options.signal
    if (state.fed !== undefined) {
      const done = (): boolean =>
        state.outbox.length === 0 &&
        !filesWaiting(state) &&
        state.echoes.size === 0 &&
        state.version !== undefined
      await waitFor(state, done, signal)
      await state.writes.settled()
      return
    }
    for (;;) {
      const sent = (): boolean => state.outbox.length === 0 && !filesWaiting(state)
      await waitFor(state, sent, signal)
      const seen = new Set<string>()
      state.watchers.add(seen)
      try {
        const version = await currentVersion(state, signal)
        await waitFor(
          state,
          () => state.version === version || seen.has(version) || seen.has(''),
          signal,
        )
      } finally {
        state.watchers.delete(seen)
      }
      if (sent()) {
        // And stored: the feed's changes go to the storage in groups, behind the view.
        await state.writes.settled()
        return
      }
    }
  }

  /** Stops syncing and closes the storage. */
  async close(): Promise<void> {
    const state = this.#state
    if (state.closed) return
    await this.stop()
    state.closed = true
    for (const waiter of state.waiters) waiter.reject(new Error('The replica was closed.'))
    state.waiters.clear()
    await state.writes.settled()
    await state.storage.close()
  }
}

/** A replica whose changes NotebooksReplica brings (no feed of its own), with its state. */
export async function openFedReplica(
  options: ReplicaOptions,
  hooks: FedHooks,
): Promise<{ replica: Replica; state: ReplicaState }> {
  const state = await loadState(options, hooks)
  return { replica: (construct as (state: ReplicaState) => Replica)(state), state }
}
