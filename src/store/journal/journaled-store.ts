import { etagOf, randomEpoch } from '../kernel/version-token.js'
import {
  type ImageNote,
  MemoryNoteStore,
  type MemoryStoreOptions,
  type RecordedWrite,
  type RememberedKey,
  type StoreImage,
  snapshot,
} from '../memory.js'
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
  StoreFullError,
  type StoreStats,
  StoreUnavailableError,
} from '../types.js'
import { JournalFile } from './journal-file.js'
import { JournalOpenError } from './journal-open-error.js'
import { type DecodedRecord, decodeJournal, encodeRecord } from './record-format.js'

export interface JournaledStoreOptions
  extends Omit<MemoryStoreOptions, 'epoch' | 'shared' | 'onWrite'> {
  /** The journal (DATA_FILE); its lock is `path.lock`, a compaction writes `path.tmp`. */
  path: string
  /** No compaction below this size, in bytes; default 1 MiB. */
  compactMinBytes?: number
}

/**
 * A record's payload, as JSON: the result of one write (RecordedWrite), or a part of a snapshot
 * that compaction wrote at the start of the file. Records may carry a notebook name (`nb`) later.
 *   {"t":"c","s":7,"id":1700000000000,"m":1700000000000,"json":"{...}","key":["k","fp",1700086400000]}
 *   {"t":"u","s":8,"p":7,"m":1700000000500,"json":"{...}"}      {"t":"d","s":9,"p":7,"id":1700000000000}
 *   a batch, whose writes are replayed all or none, as one record with its key and answer:
 *   {"t":"b","w":[{"t":"c",...},{"t":"u",...}],"key":["k","fp",1700086400000,1700000000000,"{...}"]}
 *   snapshot: {"t":"image","s":9,"hs":0,"last":1700000000000}, then "n" (a note), "h" (a change
 *   of the history) and "k" (an idempotency key) records.
 */
type Payload =
  | WritePayload
  | {
      t: 'b'
      w: WritePayload[]
      key?: [key: string, fingerprint: string, expires: number, modified: number, body: string]
    }
  | { t: 'image'; s: number; hs: number; last: number | null }
  | { t: 'n'; p: number; m: number; etag: string; json: string }
  | ({ t: 'h' } & Change)
  | { t: 'k'; k: string; f: string; x: number; m: number; etag: string; json: string }

/** The payload of one write. */
type WritePayload =
  | {
      t: 'c'
      s: number
      id: number
      m: number
      json: string
      key?: [key: string, fingerprint: string, expires: number]
    }
  | { t: 'u'; s: number; p: number; m: number; json: string }
  | { t: 'd'; s: number; p: number; id: number }

/**
 * The memory store made durable (DECISION 37): every write is applied to a MemoryNoteStore, written
 * to the journal as its result, and answered once the fsync that covers it completed; the change
 * feed hears of it only then. Reads are the memory store's, so a read may see a write a few ms
 * before that write is acknowledged (and, if the disk then fails, a write that is never).
 *
 * When the disk refuses a write, every write not yet durable is answered 507 (ENOSPC, EDQUOT) or
 * 503 (anything else), and the memory store is rebuilt from the journal's durable bytes: nothing
 * acknowledged is lost, and later writes try again.
 */
export class JournaledStore implements NoteStore {
  /** A torn last record that opening dropped, for start-up to log. */
  readonly dropped: { offset: number; bytes: number } | undefined
  readonly #options: JournaledStoreOptions
  readonly #file: JournalFile
  readonly #epoch: string
  #memory: MemoryNoteStore
  /** The writes and changes of the memory call in progress, taken by #commit. */
  #writes: RecordedWrite[] = []
  #changes: Change[] = []
  readonly #listeners = new Set<(change: Change) => void>()
  #closed = false
  /** The key of the createOnce in progress, by its create's write. */
  readonly #keyOf = new WeakMap<RecordedWrite, [string, string, number]>()

  /**
   * Opens (or creates) the journal at `options.path`, under its lock, and replays it.
   * @throws JournalOpenError with a one-line message.
   */
  constructor(options: JournaledStoreOptions) {
    this.#options = options
    const opened = JournalFile.open({
      path: options.path,
      newEpoch: randomEpoch,
      liveBytes: () => this.#memory.stats().bytes,
      image: () => imageRecords(this.#memory.image()),
      onLost: () => {
        this.#memory = this.#build(this.#fileRecords())
      },
      ...(options.compactMinBytes === undefined
        ? {}
        : { compactMinBytes: options.compactMinBytes }),
    })
    this.#file = opened.file
    this.#epoch = opened.epoch
    this.dropped = opened.dropped
    try {
      this.#memory = this.#build(opened.records)
    } catch (err) {
      void this.#file.close()
      throw err
    }
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
      await this.#file.settled()
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
      await this.#file.settled()
      return this.#batch(work, once, false)
    }
    const kept = once === undefined ? undefined : memory.rememberedKey(once.key)
    const key: Extract<Payload, { t: 'b' }>['key'] =
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

  /** Waits for the writes in flight, closes the journal and removes its lock. */
  close(): Promise<void> {
    this.#closed = true
    return this.#file.close()
  }

  /** A write after close would change the memory store and never reach the file. */
  #refuseIfClosed(): void {
    if (this.#closed) throw new StoreUnavailableError('The store is shutting down.')
  }

  /** The journal's size in bytes (for tests and metrics). */
  get fileBytes(): number {
    return this.#file.size
  }

  /**
   * Journals what the memory call just did and answers `result` once it is durable. The writes of
   * a batch (`batch`: true, or its key) go in one record, so that a crash keeps all or none.
   */
  async #commit<T>(result: T, batch?: true | Extract<Payload, { t: 'b' }>['key']): Promise<T> {
    const writes = this.#writes
    const changes = this.#changes
    if (writes.length === 0) return result
    this.#writes = []
    this.#changes = []
    let bytes: Buffer
    if (batch === undefined) {
      const frames = writes.map((write) => encodeRecord(JSON.stringify(this.#payload(write))))
      bytes = frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames)
    } else {
      const w = writes.map((write) => this.#payload(write))
      bytes = encodeRecord(
        JSON.stringify(batch === true ? { t: 'b', w } : { t: 'b', w, key: batch }),
      )
    }
    try {
      await this.#file.append(bytes)
    } catch (err) {
      throw writeError(err)
    }
    for (const change of changes) for (const listener of this.#listeners) listener(change)
    return result
  }

  #payload(write: RecordedWrite): WritePayload {
    switch (write.type) {
      case 'created': {
        const { sequence: s, id, modified: m, json } = write
        const key = this.#keyOf.get(write)
        return key === undefined ? { t: 'c', s, id, m, json } : { t: 'c', s, id, m, json, key }
      }
      case 'updated':
        return { t: 'u', s: write.sequence, p: write.position, m: write.modified, json: write.json }
      case 'deleted':
        return { t: 'd', s: write.sequence, p: write.position, id: write.id }
    }
  }

  #fileRecords(): readonly DecodedRecord[] {
    // The file was cut back to its durable length, which decodes as it did when it was written.
    const decoded = decodeJournal(this.#file.durableBytes())
    if (decoded === 'foreign' || !decoded.ok) throw new Error('the journal changed under the store')
    return decoded.records
  }

  /** A memory store holding what the records say, reporting its writes to this one. */
  #build(records: readonly DecodedRecord[]): MemoryNoteStore {
    const { path: _path, compactMinBytes: _min, ...memoryOptions } = this.#options
    const memory = new MemoryNoteStore({
      ...memoryOptions,
      epoch: this.#epoch,
      onWrite: (write) => this.#writes.push(write),
    })
    let i = 0
    try {
      const first = records[0]
      if (first !== undefined && (parse(first) as Payload).t === 'image') {
        i = loadImage(memory, records)
      }
      for (; i < records.length; i++) replayRecord(memory, parse(records[i] as DecodedRecord))
    } catch (err) {
      const offset = (records[i] as DecodedRecord | undefined)?.offset ?? 0
      throw new JournalOpenError(
        `DATA_FILE ${this.#options.path} is damaged at byte ${offset}: ${(err as Error).message}; restore it from a backup or move it away.`,
      )
    }
    memory.subscribe((change) => this.#changes.push(change))
    return memory
  }
}

/** The snapshot records of an image, in the order loadImage reads them (an import writes them too). */
export function imageRecords(image: StoreImage): Buffer[] {
  const frames: Buffer[] = []
  const add = (payload: Payload) => frames.push(encodeRecord(JSON.stringify(payload)))
  const last = Number.isFinite(image.lastId) ? image.lastId : null
  add({ t: 'image', s: image.sequence, hs: image.historyStart, last })
  for (const { position: p, modified: m, etag, json } of image.notes)
    add({ t: 'n', p, m, etag, json })
  for (const change of image.history) add({ t: 'h', ...change })
  for (const [k, { fingerprint: f, expires: x, note }] of image.keys) {
    add({ t: 'k', k, f, x, m: note.modified, etag: note.etag, json: note.json })
  }
  return frames
}

/** Loads the snapshot at the start of `records`; returns the index of the first record after it. */
function loadImage(memory: MemoryNoteStore, records: readonly DecodedRecord[]): number {
  const head = parse(records[0] as DecodedRecord) as Extract<Payload, { t: 'image' }>
  const notes: ImageNote[] = []
  const history: Change[] = []
  const keys: [string, RememberedKey][] = []
  let i = 1
  for (; i < records.length; i++) {
    const payload = parse(records[i] as DecodedRecord)
    if (payload.t === 'n') {
      notes.push({
        position: payload.p,
        modified: payload.m,
        etag: payload.etag,
        json: payload.json,
      })
    } else if (payload.t === 'h') {
      const { type, version, sequence, data } = payload
      history.push({ type, version, sequence, data })
    } else if (payload.t === 'k') {
      const note = { json: payload.json, etag: payload.etag, modified: payload.m }
      keys.push([payload.k, { fingerprint: payload.f, expires: payload.x, note }])
    } else break
  }
  memory.load({
    sequence: head.s,
    historyStart: head.hs,
    lastId: head.last ?? Number.NEGATIVE_INFINITY,
    notes,
    history,
    keys,
  })
  return i
}

function replayRecord(memory: MemoryNoteStore, payload: Payload): void {
  switch (payload.t) {
    case 'c': {
      const { s: sequence, id, m: modified, json, key } = payload
      memory.replay({ type: 'created', sequence, id, json, modified })
      if (key !== undefined) {
        const note = { json, etag: etagOf(memory.version()), modified }
        memory.remember(key[0], { fingerprint: key[1], expires: key[2], note }, modified)
      }
      return
    }
    case 'u':
      memory.replay({
        type: 'updated',
        sequence: payload.s,
        position: payload.p,
        json: payload.json,
        modified: payload.m,
      })
      return
    case 'd':
      memory.replay({ type: 'deleted', sequence: payload.s, position: payload.p, id: payload.id })
      return
    case 'b': {
      for (const write of payload.w) {
        if ((write as Payload).t === 'b') throw new Error('a batch inside a batch')
        replayRecord(memory, write)
      }
      if (payload.key !== undefined) {
        const [key, fingerprint, expires, modified, body] = payload.key
        const note = { json: body, etag: '', modified }
        memory.remember(key, { fingerprint, expires, note }, modified)
      }
      return
    }
    default:
      throw new Error(`a record of type ${JSON.stringify(payload.t)} out of place`)
  }
}

function parse(record: DecodedRecord): Payload {
  const payload: unknown = JSON.parse(record.payload)
  if (typeof payload !== 'object' || payload === null || !('t' in payload)) {
    throw new Error('a record that is not a journal entry')
  }
  return payload as Payload
}

/** The disk's refusal as the store's: 507 when it is full, 503 otherwise. */
function writeError(err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new StoreFullError(
      'The disk that holds the notes is full; the write was not stored.',
      'Try again later.',
    )
  }
  return new StoreUnavailableError('The store could not write the note to its disk.', 1, {
    cause: `${code ?? 'error'}: ${(err as Error).message}`,
  })
}
