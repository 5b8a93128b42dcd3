/**
 * NotebooksReplica: a Replica of every notebook the user can read, each in its own storage (by
 * key, ReplicaStorages), all kept current by the one stream of every notebook
 * (`GET /api/events?notebooks=all`: a browser allows six connections per host, so not one feed
 * each). `joined` starts keeping a notebook (it is loaded), `left` removes its copy from the
 * device once the writes it could not send are handed to the application (`unsent`), and a
 * `reset` loads that notebook alone again. Each notebook's replica sends its own outbox, to
 * `/api/notebooks/<id>/...`; a 404 for the notebook is taken as `left`, a 403 (a viewer) hands
 * the queued writes over instead of trying them forever.
 *
 * Where the stream stands is kept in a storage of its own (key `notebooks`, with the notebooks
 * kept), and stored only once every notebook's changes up to it are: after a crash the stream
 * resumes at or before what each notebook holds, and a change seen twice is applied twice to the
 * same effect.
 */
import { NoteNotFoundError, NotesProblem } from '../errors.js'
import type { NotebooksEvent } from '../notebooks-feed.js'
import type { NotesClient } from '../notes-client.js'
import { backoffMs, sleep } from '../retry-policy.js'
import type { Notebook } from '../types.js'
import {
  dropQueued,
  handedFiles,
  openConflicts,
  type UnsentWrites,
  unsentWrites,
} from './handover.js'
import { apply, reload } from './pull.js'
import { openFedReplica, type Replica } from './replica.js'
import type { ReplicaState } from './replica-state.js'
import type { ReplicaEvent } from './replica-types.js'
import type { ReplicaStorage, ReplicaStorages, ReplicaWrite } from './storage.js'
import { WriteQueue } from './write-queue.js'

export type { UnsentWrite, UnsentWrites } from './handover.js'

export interface NotebooksReplicaOptions {
  /** A client with the user's token (its own notebook option is not used). */
  client: NotesClient
  /** Where each notebook's copy is kept, by key: `nb.<notebook id>`, and `notebooks`. */
  storages: ReplicaStorages
  /**
   * Gets the writes that can no longer be sent (the notebook was lost, or the user may only read
   * it). Awaited before they leave the device: if it throws, they are kept and handed over again
   * (at the next `left`, or the next open).
   */
  unsent: (handover: UnsentWrites) => void | Promise<void>
  /** As Replica's: the longest wait between attempts (default 30 s). */
  maxDelayMs?: number | undefined
  /** As Replica's: the most queued writes sent as one batch (default 100). */
  batchLimit?: number | undefined
}

/**
 * `joined`, `left` (its copy is gone), and each notebook's replica's own events with the
 * notebook's id (`change`, `waiting`, `conflict`, `online`, `reset`).
 */
export type NotebooksReplicaEvent =
  | { type: 'joined' | 'left'; notebook: Notebook }
  | { type: ReplicaEvent['type']; notebook: string }

/**
 * A notebook kept, in the index: `order`, when it was first kept (notebooks() keeps that order);
 * `left` once lost, until its writes are handed over.
 */
interface IndexEntry {
  notebook: Notebook
  order: number
  left?: true
}

interface Kept {
  notebook: Notebook
  readonly order: number
  readonly replica: Replica
  readonly state: ReplicaState
  readonly unsubscribe: () => void
}

const INDEX_KEY = 'notebooks'
const POSITION = 'position'
const NOTEBOOK_PREFIX = 'notebook:'

function storageKey(id: string): string {
  return `nb.${id}`
}

export class NotebooksReplica {
  readonly #options: NotebooksReplicaOptions
  readonly #index: ReplicaStorage
  readonly #indexWrites: WriteQueue
  readonly #kept = new Map<string, Kept>()
  readonly #leaving = new Map<string, Promise<void>>()
  readonly #listeners = new Set<(event: NotebooksReplicaEvent) => void>()
  /** Where the stream stands (the position after the last event taken), and what is stored. */
  #position: string | undefined
  #stored: string | undefined
  #checkpoint: Promise<void> | undefined
  #again = false
  /** The stream has opened in this run and every notebook was loaded. */
  #current = false
  readonly #waiters = new Set<() => void>()
  #running: { stop: AbortController; done: Promise<void> } | undefined
  #closed = false

  private constructor(options: NotebooksReplicaOptions, index: ReplicaStorage) {
    this.#options = options
    this.#index = index
    this.#indexWrites = new WriteQueue(index)
  }

  /** Opens every notebook's copy the storages hold (no network until start() or sync()). */
  static async open(options: NotebooksReplicaOptions): Promise<NotebooksReplica> {
    const index = await options.storages.open(INDEX_KEY)
    const self = new NotebooksReplica(options, index)
    const contents = await index.load()
    self.#position = contents.meta.get(POSITION) as string | undefined
    self.#stored = self.#position
    const entries = [...contents.meta]
      .filter(([key]) => key.startsWith(NOTEBOOK_PREFIX))
      .map(([, value]) => value as IndexEntry)
      .sort((a, b) => a.order - b.order)
    for (const entry of entries) await self.#keep(entry.notebook, entry.order)
    // A notebook lost in a run that could not hand its writes over: handed over now.
    for (const entry of entries) {
      if (entry.left === true) await self.#leave(entry.notebook.id).catch(() => {})
    }
    return self
  }

  /** The notebooks kept, as last listed, in the order they were first kept. */
  notebooks(): Notebook[] {
    return [...this.#kept.values()].map((kept) => ({ ...kept.notebook }))
  }

  /** The replica of notebook `id` (its notes, writes, conflicts), or undefined if not kept. */
  replica(id: string): Replica | undefined {
    return this.#leaving.has(id) ? undefined : this.#kept.get(id)?.replica
  }

  /** Listeners get NotebooksReplicaEvents; answers an unsubscribe. */
  subscribe(listener: (event: NotebooksReplicaEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /** Follows the stream and sends every notebook's outbox; retries while offline. */
  start(): void {
    this.#checkOpen()
    if (this.#running !== undefined) return
    const stop = new AbortController()
    for (const kept of this.#kept.values()) kept.replica.start()
    this.#running = { stop, done: this.#follow(stop.signal) }
  }

  /** Stops following and sending; holds no timer or connection afterwards. */
  async stop(): Promise<void> {
    const running = this.#running
    if (running === undefined) return
    this.#running = undefined
    this.#current = false
    running.stop.abort()
    await running.done
    await Promise.all([...this.#kept.values()].map((kept) => kept.replica.stop()))
    await Promise.allSettled(this.#leaving.values())
  }

  /**
   * Resolves once the stream has opened, every notebook is loaded, every outbox is empty
   * (conflicts aside) and its writes came back on the stream, notebooks lost meanwhile handed
   * over, and all of it stored. Starts syncing if needed; rejects on abort.
   */
  async sync(options: { signal?: AbortSignal | undefined } = {}): Promise<void> {
    this.start()
    const signal = options.signal
    for (;;) {
      await this.#until(() => this.#current, signal)
      const kept = [...this.#kept.entries()].filter(([id]) => !this.#leaving.has(id))
      const results = await Promise.allSettled(kept.map(([, k]) => k.replica.sync({ signal })))
      signal?.throwIfAborted()
      await Promise.allSettled(this.#leaving.values())
      const failed = results.findIndex(
        (result, i) =>
          result.status === 'rejected' && this.#kept.has((kept[i] as [string, Kept])[0]),
      )
      if (failed !== -1) throw (results[failed] as PromiseRejectedResult).reason
      if (results.every((result) => result.status === 'fulfilled') && this.#current) break
    }
    this.#storePosition()
    while (this.#checkpoint !== undefined) await this.#checkpoint
  }

  /** Stops, and closes every storage. */
  async close(): Promise<void> {
    if (this.#closed) return
    await this.stop()
    this.#closed = true
    for (const kept of this.#kept.values()) await kept.replica.close()
    await this.#indexWrites.settled()
    await this.#index.close()
  }

  // ---- The stream ----

  async #follow(signal: AbortSignal): Promise<void> {
    for (let failures = 0; !signal.aborted; failures++) {
      try {
        const feed = this.#options.client.allChanges({ since: this.#position, signal })
        for await (const event of feed) {
          failures = 0
          await this.#take(event, signal)
          this.#position = event.position
          this.#storePosition()
        }
      } catch {
        // A refusal, a load that failed: the stream is opened again from the last event taken.
        if (signal.aborted) return
      }
      this.#current = false
      try {
        await sleep(backoffMs(failures, this.#options.maxDelayMs ?? 30_000), signal)
      } catch {
        return
      }
    }
  }

  async #take(event: NotebooksEvent, signal: AbortSignal): Promise<void> {
    if (event.type === 'opened') {
      if (this.#position === undefined) {
        // The first run: the stream tells only of notebooks joined or left from now on.
        const listed = await this.#options.client.notebooks({ signal })
        for (const notebook of listed) if (!this.#kept.has(notebook.id)) await this.#join(notebook)
        for (const id of [...this.#kept.keys()]) {
          if (!listed.some((notebook) => notebook.id === id)) await this.#leave(id)
        }
      }
      for (const kept of [...this.#kept.values()]) {
        if (kept.state.version === undefined) await this.#load(kept, signal)
      }
      this.#current = true
      this.#wake()
      return
    }
    if (event.type === 'joined') {
      const kept = this.#kept.get(event.notebook.id)
      if (kept === undefined) await this.#join(event.notebook)
      else {
        // Kept from before the position: its changes since may have been missed.
        kept.notebook = event.notebook
        await this.#storeEntry(kept)
      }
      await this.#load(this.#kept.get(event.notebook.id) as Kept, signal)
      return
    }
    if (event.type === 'left') {
      await this.#leave(event.notebook)
      return
    }
    const kept = this.#kept.get(event.notebook)
    if (kept === undefined || this.#leaving.has(event.notebook)) return
    const state = kept.state
    if (event.type === 'reset' || state.pullError !== undefined || state.version === undefined) {
      // A change whose storage write failed is loaded again with the whole notebook.
      state.pullError = undefined
      await this.#load(kept, signal, event.position)
      return
    }
    apply(
      state,
      event.type === 'deleted'
        ? { type: 'deleted', version: event.position, id: event.id }
        : { type: event.type, version: event.position, note: event.note },
    )
  }

  /** Loads a notebook whole; a 404 for it means it was lost. */
  async #load(kept: Kept, signal: AbortSignal, position?: string): Promise<void> {
    try {
      await reload(kept.state, signal, position)
    } catch (err) {
      if (isNotebookGone(err)) await this.#leave(kept.notebook.id)
      else throw err
    }
  }

  // ---- Notebooks kept ----

  /** Starts keeping a notebook the user gained (its copy is loaded by the caller). */
  async #join(notebook: Notebook): Promise<void> {
    const order = Math.max(0, ...[...this.#kept.values()].map((kept) => kept.order + 1))
    await this.#storeEntry(await this.#keep(notebook, order))
    this.#emit({ type: 'joined', notebook: { ...notebook } })
  }

  /** Opens a notebook's replica over its storage. */
  async #keep(notebook: Notebook, order: number): Promise<Kept> {
    const id = notebook.id
    const storage = await this.#options.storages.open(storageKey(id))
    const { replica, state } = await openFedReplica(
      {
        client: this.#options.client.notebook(id),
        storage,
        maxDelayMs: this.#options.maxDelayMs,
        batchLimit: this.#options.batchLimit,
      },
      { refused: (err) => this.#refused(id, err) },
    )
    const unsubscribe = replica.subscribe((event) => this.#emit({ type: event.type, notebook: id }))
    const kept: Kept = { notebook, order, replica, state, unsubscribe }
    this.#kept.set(id, kept)
    if (this.#running !== undefined) replica.start()
    return kept
  }

  /** A notebook's send was refused for the notebook itself (push.ts): 404 lost, 403 a viewer. */
  async #refused(id: string, err: NotesProblem): Promise<void> {
    const kept = this.#kept.get(id)
    if (kept === undefined) return
    if (err.status === 404) {
      // Not waited for: leaving stops the very loop that calls this.
      this.#leave(id).catch(() => {})
      return
    }
    const writes = unsentWrites(kept.state)
    if (writes.length === 0) return
    const notebook = { ...kept.notebook, role: 'viewer' as const }
    await this.#options.unsent({ notebook, reason: 'read-only', writes, conflicts: [], files: [] })
    await dropQueued(kept.state, writes.length)
  }

  /**
   * The user lost notebook `id`: its writes are handed over, then its copy removed from the
   * device. Once at a time for a notebook; a failed handover leaves it marked, to try again.
   */
  #leave(id: string): Promise<void> {
    const kept = this.#kept.get(id)
    if (kept === undefined) return Promise.resolve()
    const leaving = this.#leaving.get(id)
    if (leaving !== undefined) return leaving
    const done = (async () => {
      await kept.replica.stop()
      await this.#storeEntry(kept, true)
      const writes = unsentWrites(kept.state)
      const conflicts = openConflicts(kept.state)
      const files = await handedFiles(kept.state, true, true)
      if (writes.length > 0 || conflicts.length > 0 || files.length > 0) {
        await this.#options.unsent({
          notebook: { ...kept.notebook },
          reason: 'left',
          writes,
          conflicts,
          files,
        })
      }
      kept.unsubscribe()
      this.#kept.delete(id)
      await kept.replica.close()
      await this.#options.storages.remove(storageKey(id))
      await this.#indexWrites.write([
        { table: 'meta', key: `${NOTEBOOK_PREFIX}${id}`, delete: true },
      ])
      this.#emit({ type: 'left', notebook: { ...kept.notebook } })
    })().finally(() => this.#leaving.delete(id))
    this.#leaving.set(id, done)
    return done
  }

  #storeEntry(kept: Kept, left?: true): Promise<void> {
    const key = `${NOTEBOOK_PREFIX}${kept.notebook.id}`
    const entry: IndexEntry = { notebook: kept.notebook, order: kept.order, ...(left && { left }) }
    return this.#indexWrites.write([{ table: 'meta', key, value: entry }])
  }

  /**
   * Stores the stream's position once every notebook's changes up to it are stored (a change
   * whose write failed holds it back until its notebook is loaded again); one at a time, the
   * latest position when it runs.
   */
  #storePosition(): void {
    if (this.#checkpoint !== undefined) {
      this.#again = true
      return
    }
    this.#checkpoint = (async () => {
      do {
        this.#again = false
        const position = this.#position
        const kept = [...this.#kept.values()]
        await Promise.all(kept.map((k) => k.state.writes.settled()))
        if (position === undefined || position === this.#stored) continue
        if (kept.some((k) => k.state.pullError !== undefined)) continue
        const change: ReplicaWrite = { table: 'meta', key: POSITION, value: position }
        await this.#indexWrites.write([change])
        this.#stored = position
      } while (this.#again)
    })()
      .catch(() => {})
      .finally(() => {
        this.#checkpoint = undefined
      })
  }

  // ---- Events and waits ----

  #emit(event: NotebooksReplicaEvent): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(event)
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  #wake(): void {
    for (const waiter of [...this.#waiters]) waiter()
  }

  /** Resolves once `check()` holds (looked at after each opening of the stream). */
  async #until(check: () => boolean, signal: AbortSignal | undefined): Promise<void> {
    while (!check()) {
      signal?.throwIfAborted()
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.#waiters.delete(done)
          signal?.removeEventListener('abort', done)
          resolve()
        }
        this.#waiters.add(done)
        signal?.addEventListener('abort', done, { once: true })
      })
    }
  }

  #checkOpen(): void {
    if (this.#closed) throw new Error('The replica is closed.')
  }
}

/** The 404 problem of a notebook the user is not (or no longer) in. */
function isNotebookGone(err: unknown): boolean {
  return err instanceof NotesProblem && !(err instanceof NoteNotFoundError) && err.status === 404
}
