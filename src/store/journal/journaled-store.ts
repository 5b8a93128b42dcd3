import { encodeRecord } from '../../durable/record-frame.js'
import { ID_TAKEN, type Revision, type RevisionPage, type TrashPage } from '../archive.js'
import { MemoryNoteStore } from '../memory/memory-store.js'
import type { MemoryStoreOptions, SharedParts } from '../memory/options.js'
import { type RecordedWrite, snapshot } from '../memory/records.js'
import {
  type BatchKey,
  type BatchResult,
  type Change,
  type IdempotentCreate,
  type ListRecord,
  type MaybePromise,
  type NoteExport,
  type NoteFields,
  type NoteRecord,
  type NoteStore,
  type NoteWriter,
  type PageQuery,
  type PageRecord,
  type PatchKind,
  PreconditionFailed,
  type Preconditions,
  SHARED_NOTEBOOK,
  StoreFullError,
  type StoreStats,
  StoreUnavailableError,
} from '../types.js'
import type { BatchKeyPayload, Payload, WritePayload } from './journal-records.js'

/**
 * What a notebook's store needs of the journal that holds it (JournaledNotebooks): appends that
 * settle once durable, and the journal's own life.
 */
export interface JournalHost {
  append(bytes: Buffer): Promise<void>
  /** Settles once every append made before it has. */
  settled(): Promise<void>
  readonly closed: boolean
  /** Closes the journal: every notebook of it. */
  close(): Promise<void>
  readonly dropped: { offset: number; bytes: number } | undefined
  readonly fileBytes: number
}

/**
 * One notebook of a journal, or the whole store without user tokens: every write is
 * applied to a MemoryNoteStore, written to the journal as its result, and answered once the fsync
 * that covers it completed; the change feed hears of it only then. Reads are the memory store's,
 * so a read may see a write a few ms before that write is acknowledged (and, if the disk then
 * fails, a write that is never).
 *
 * When the disk refuses a write, every write not yet durable is answered 507 (ENOSPC, EDQUOT) or
 * 503 (anything else), and the journal rebuilds every notebook's memory store from its durable
 * bytes (`reset`, then a replay): nothing acknowledged is lost, and later writes try again.
 */
export class JournaledStore implements NoteStore {
  /** The notebook's name; its records carry it unless it is the shared one. */
  readonly notebook: string
  readonly #host: JournalHost
  readonly #options: Omit<MemoryStoreOptions, 'onWrite'>
  #memory: MemoryNoteStore
  /** The writes and changes of the memory call in progress, taken by #commit. */
  #writes: RecordedWrite[] = []
  #changes: Change[] = []
  readonly #listeners = new Set<(change: Change) => void>()
  /** The key of the createOnce in progress, by its create's write. */
  readonly #keyOf = new WeakMap<RecordedWrite, [string, string, number]>()

  /** Made by JournaledNotebooks; `options` are the memory store's (its epoch and shared parts). */
  constructor(host: JournalHost, notebook: string, options: Omit<MemoryStoreOptions, 'onWrite'>) {
    this.#host = host
    this.notebook = notebook
    this.#options = options
    this.#memory = this.#newMemory(options)
  }

  /**
   * Starts over on an empty memory store with `shared` parts, for the journal to replay into
   * (`memory`); `ready` then makes it the store's from the next write on.
   */
  reset(shared: SharedParts): void {
    this.#memory = this.#newMemory({ ...this.#options, shared })
  }

  /** The memory store that a replay fills. */
  get memory(): MemoryNoteStore {
    return this.#memory
  }

  /** Forgets what the replay reported: the changes it made were not writes of this process. */
  ready(): void {
    this.#writes = []
    this.#changes = []
  }

  /** A torn last record that opening the journal dropped, for start-up to log. */
  get dropped(): { offset: number; bytes: number } | undefined {
    return this.#host.dropped
  }

  /** The journal's size in bytes (for tests and metrics). */
  get fileBytes(): number {
    return this.#host.fileBytes
  }

  async create(fields: NoteFields): Promise<NoteRecord> {
    this.#refuseIfClosed()
    return this.#commit(snapshot(this.#memory.create(fields)))
  }

  async createOnce(
    key: string,
    fingerprint: string,
    fields: NoteFields,
  ): Promise<IdempotentCreate> {
    return this.#createOnce(key, fingerprint, fields, true)
  }

  async #createOnce(
    key: string,
    fingerprint: string,
    fields: NoteFields,
    wait: boolean,
  ): Promise<IdempotentCreate> {
    this.#refuseIfClosed()
    const memory = this.#memory
    const answer = memory.createOnce(key, fingerprint, fields)
    if (answer.replayed && wait) {
      // The first create may not be durable yet: a repeat is answered once it is, or, if the disk
      // lost it (and the key with it), creates now. Everything queued before is settled after one wait.
      await this.#host.settled()
      return this.#createOnce(key, fingerprint, fields, false)
    }
    const write = this.#writes[0]
    if (write?.type === 'created') {
      this.#keyOf.set(write, [key, fingerprint, answer.note.modified + memory.idempotencyTtlMs])
    }
    return this.#commit(answer)
  }

  async batch(
    work: (writer: NoteWriter) => MaybePromise<string | undefined>,
    once?: BatchKey,
  ): Promise<BatchResult | undefined> {
    return this.#batch(work, once, true)
  }

  async #batch(
    work: (writer: NoteWriter) => MaybePromise<string | undefined>,
    once: BatchKey | undefined,
    wait: boolean,
  ): Promise<BatchResult | undefined> {
    this.#refuseIfClosed()
    const memory = this.#memory
    const result = memory.batch(work, once)
    if (result === undefined) return undefined
    if (result.replayed) {
      if (!wait) return result
      // As a create's repeat: answered once the first batch is durable, or applied now if it was lost.
      await this.#host.settled()
      return this.#batch(work, once, false)
    }
    const kept = once === undefined ? undefined : memory.rememberedKey(once.key)
    const key: BatchKeyPayload =
      once === undefined || kept === undefined
        ? undefined
        : [once.key, once.fingerprint, kept.expires, kept.note.modified, result.body]
    return this.#commit(result, key ?? true)
  }

  list(): ListRecord {
    return this.#memory.list()
  }

  /** The memory store's snapshot: what the list shows, writes not yet durable included. */
  exportNotes(): NoteExport {
    return this.#memory.exportNotes()
  }

  page(query: PageQuery): PageRecord {
    return this.#memory.page(query)
  }

  get(id: number): NoteRecord | undefined {
    // A copy, as the writes answer: the memory store's own record changes under a write in flight.
    const note = this.#memory.get(id)
    return note === undefined ? undefined : snapshot(note)
  }

  async update(
    id: number,
    fields: NoteFields,
    kind?: PatchKind,
    conditions?: Preconditions,
  ): Promise<NoteRecord | undefined | PreconditionFailed> {
    this.#refuseIfClosed()
    const note = this.#memory.update(id, fields, kind, conditions)
    return this.#commit(
      note === undefined || note instanceof PreconditionFailed ? note : snapshot(note),
    )
  }

  async delete(id: number, conditions?: Preconditions): Promise<boolean | PreconditionFailed> {
    this.#refuseIfClosed()
    return this.#commit(this.#memory.delete(id, conditions))
  }

  revisions(id: number, limit: number, after: string | undefined): RevisionPage | undefined {
    return this.#memory.revisions(id, limit, after)
  }

  revision(id: number, version: string): Revision | undefined {
    return this.#memory.revision(id, version)
  }

  trash(limit: number, after: number | undefined): TrashPage {
    return this.#memory.trash(limit, after)
  }

  async untrash(id: number): Promise<NoteRecord | undefined | typeof ID_TAKEN> {
    this.#refuseIfClosed()
    const note = this.#memory.untrash(id)
    return this.#commit(note === undefined || note === ID_TAKEN ? note : snapshot(note))
  }

  async purge(id: number): Promise<boolean> {
    this.#refuseIfClosed()
    return this.#commit(this.#memory.purge(id))
  }

  async emptyTrash(): Promise<number> {
    this.#refuseIfClosed()
    return this.#commit(this.#memory.emptyTrash())
  }

  version(): string {
    return this.#memory.version()
  }

  changesSince(since: string, limit: number): readonly Change[] | undefined {
    return this.#memory.changesSince(since, limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    const subscription = (change: Change) => listener(change)
    this.#listeners.add(subscription)
    return () => {
      this.#listeners.delete(subscription)
    }
  }

  stats(): StoreStats {
    return this.#memory.stats()
  }

  /** Waits for the writes in flight, closes the journal (every notebook of it) and removes its lock. */
  close(): Promise<void> {
    return this.#host.close()
  }

  /** A write after close would change the memory store and never reach the file. */
  #refuseIfClosed(): void {
    if (this.#host.closed) throw new StoreUnavailableError('The store is shutting down.')
  }

  /**
   * Journals what the memory call just did and answers `result` once it is durable. The writes of
   * a batch (`batch`: true, or its key) go in one record, so that a crash keeps all or none.
   */
  async #commit<T>(result: T, batch?: true | BatchKeyPayload): Promise<T> {
    const writes = this.#writes
    const changes = this.#changes
    if (writes.length === 0) return result
    this.#writes = []
    this.#changes = []
    let bytes: Buffer
    if (batch === undefined) {
      const nb = this.notebook === SHARED_NOTEBOOK ? undefined : this.notebook
      const frames = writes.map((write) => encodeRecord(JSON.stringify(this.#payload(write, nb))))
      bytes = frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames)
    } else {
      const w = writes.map((write) => this.#payload(write, undefined))
      const record: Payload = batch === true ? { t: 'b', w } : { t: 'b', w, key: batch }
      if (this.notebook !== SHARED_NOTEBOOK) record.nb = this.notebook
      bytes = encodeRecord(JSON.stringify(record))
    }
    try {
      await this.#host.append(bytes)
    } catch (err) {
      throw writeError(err)
    }
    for (const change of changes) for (const listener of this.#listeners) listener(change)
    return result
  }

  /** The record of one write; `nb` names the notebook (in a batch, the batch's record does). */
  #payload(write: RecordedWrite, nb: string | undefined): WritePayload {
    const payload = writePayload(write, this.#keyOf.get(write))
    if (nb !== undefined) payload.nb = nb
    return payload
  }

  #newMemory(options: Omit<MemoryStoreOptions, 'onWrite'>): MemoryNoteStore {
    const memory = new MemoryNoteStore({ ...options, onWrite: (write) => this.#writes.push(write) })
    memory.subscribe((change) => this.#changes.push(change))
    return memory
  }
}

function writePayload(
  write: RecordedWrite,
  key: [string, string, number] | undefined,
): WritePayload {
  switch (write.type) {
    case 'created': {
      const { sequence: s, id, modified: m, json } = write
      return key === undefined ? { t: 'c', s, id, m, json } : { t: 'c', s, id, m, json, key }
    }
    case 'updated':
      return { t: 'u', s: write.sequence, p: write.position, m: write.modified, json: write.json }
    case 'deleted': {
      const { sequence: s, position: p, id, trashed: tr } = write
      return tr === undefined ? { t: 'd', s, p, id } : { t: 'd', s, p, id, tr }
    }
    case 'untrashed':
      return { t: 'r', s: write.sequence, tr: write.trashed, m: write.modified }
    case 'purged':
      return { t: 'x', tr: write.trashed }
  }
}

/** The disk's refusal as the store's: 507 when it is full, 503 (with `message`) otherwise. */
export function writeError(
  err: unknown,
  message = 'The store could not write the note to its disk.',
): Error {
  const code = (err as NodeJS.ErrnoException).code
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new StoreFullError(
      'The disk that holds the notes is full; the write was not stored.',
      'Try again later.',
    )
  }
  return new StoreUnavailableError(message, 1, {
    cause: `${code ?? 'error'}: ${(err as Error).message}`,
  })
}
