import { Capacity } from './capacity.js'
import { type IdMark, IdSpace } from './id-space.js'
import { arrayExport } from './kernel/array-export.js'
import { keyReused, MAX_CACHED_SEARCHES, STORE_DEFAULTS } from './kernel/defaults.js'
import { isIndexable, serializeWithId } from './kernel/id-placement.js'
import { patchNote } from './kernel/patch-note.js'
import { meets } from './kernel/preconditions.js'
import { etagOf, randomEpoch, tokenSequence, versionToken } from './kernel/version-token.js'
import { matchesText } from './search.js'
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
  type StoreStats,
} from './types.js'

export interface MemoryStoreOptions {
  /** Most notes held at once. */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON held at once. */
  maxBytes: number
  /** Clock for ids and Last-Modified, in ms since the epoch; tests pass a fake one. */
  now?: () => number
  /** Changes kept for the change feed to replay (CHANGE_HISTORY); default 10,000. */
  historyLimit?: number
  /** Idempotency keys remembered (DECISION 30); default 100,000. */
  maxIdempotencyKeys?: number
  /** How long an idempotency key is remembered, in ms; default 24 h. */
  idempotencyTtlMs?: number
  /**
   * The first part of every version token; default random. Two stores (or one restarted) must
   * not share it, or their tokens and ETags could repeat for different contents (DECISION 21).
   */
  epoch?: string
  /**
   * What this store shares with the other notebooks of one service (MemoryNotebooks): the ids
   * creates give, and the service's capacity, whose caps hold beside this store's own. Without
   * it the store has its own id space and caps alone.
   */
  shared?: SharedParts
  /** Who holds the notes, in a refusal's words; 'The store', or 'This notebook' with `shared`. */
  holder?: string
  /**
   * Told of every write, synchronously, as the result it had (a journal writes it down, DECISION
   * 37); `replay` applies such a result again.
   */
  onWrite?: (write: RecordedWrite) => void
}

/**
 * A write as its result, so that replaying it needs no clock and gives the same store: a create's
 * id and time, an update's new JSON, a delete, each at its sequence and list position (a create's
 * position is its sequence).
 */
export type RecordedWrite =
  | { type: 'created'; sequence: number; id: number; json: string; modified: number }
  | { type: 'updated'; sequence: number; position: number; json: string; modified: number }
  | { type: 'deleted'; sequence: number; position: number; id: number }

/** An idempotency key as the store remembers it (DECISION 30). */
export interface RememberedKey {
  readonly fingerprint: string
  readonly note: NoteRecord
  readonly expires: number
}

/** Everything a store holds, to write down whole (a journal's compaction) and load back. */
export interface StoreImage {
  readonly sequence: number
  /** The sequence before the oldest change in `history`. */
  readonly historyStart: number
  /** The id the last create gave (IdSpace), or -Infinity before any. */
  readonly lastId: number
  /** Live notes in list order. */
  readonly notes: readonly ImageNote[]
  readonly history: readonly Change[]
  /** Oldest first. */
  readonly keys: readonly (readonly [string, RememberedKey])[]
}

export interface ImageNote extends NoteRecord {
  readonly position: number
}

/** The parts the notebooks of one service share. */
export interface SharedParts {
  readonly ids: IdSpace
  /** The whole service's notes, bytes and caps. */
  readonly capacity: Capacity
}

interface Entry extends NoteRecord {
  /** The note's `id` field: a number unless a PATCH made it something else. */
  id: unknown
  json: string
  etag: string
  modified: number
  /** UTF-8 length of `json`, counted against maxBytes. */
  bytes: number
  /** The note's place in the list: the change sequence of its create, never reused. */
  readonly position: number
  /** False once deleted: the slot stays in the list array until the next compaction. */
  alive: boolean
}

/**
 * A batch under way (NoteStore.batch): what undoes each of its writes, and the changes and
 * writes that are reported once it is kept.
 */
interface Batch {
  readonly sequence: number
  readonly version: string
  /** The id space before the batch, put back when it is undone. */
  readonly ids: IdMark
  readonly undo: (() => void)[]
  readonly changes: Change[]
  readonly writes: RecordedWrite[]
}

/** The per-version answers that are worth keeping until the next write. */
interface VersionCache {
  list: ListRecord | undefined
  /** q -> the notes matching it, in list order. */
  readonly matches: Map<string, Entry[]>
}

/**
 * Notes in an array in list order (deleted ones left as dead slots until there are as many dead as
 * alive, then compacted) plus an index from numeric id to entry, so get, update and delete cost
 * O(1), and a page O(log n + limit), whatever the number of notes. The ids creates give and the
 * caps are kept by an IdSpace and a Capacity: the store's own, or, for a notebook, shared with the
 * service's other notebooks (MemoryNotebooks).
 */
export class MemoryNoteStore implements NoteStore {
  readonly #capacity: Capacity
  readonly #ids: IdSpace
  readonly #now: () => number
  readonly #epoch: string
  readonly #historyLimit: number
  readonly #maxKeys: number
  readonly #keyTtlMs: number
  /** Every note in list order; positions increase strictly along it. */
  #entries: Entry[] = []
  /** id -> the entry holding it, or its holders in list order when a PATCH duplicated it. */
  readonly #byId = new Map<number, Entry | Entry[]>()
  /** The number of changes so far: the version (DECISION 21). */
  #sequence = 0
  #version: string
  #cache: VersionCache = { list: undefined, matches: new Map() }
  /** The last changes, oldest first; at most historyLimit. */
  #history: Change[] = []
  #historyStart = 0
  readonly #listeners = new Set<(change: Change) => void>()
  readonly #keys = new Map<string, RememberedKey>()
  readonly #onWrite: ((write: RecordedWrite) => void) | undefined
  #batch: Batch | undefined

  constructor(options: MemoryStoreOptions) {
    const { shared } = options
    const holder = options.holder ?? (shared === undefined ? 'The store' : 'This notebook')
    this.#capacity = new Capacity(options.maxNotes, options.maxBytes, holder, shared?.capacity)
    this.#ids = shared?.ids ?? new IdSpace()
    this.#now = options.now ?? Date.now
    this.#epoch = options.epoch ?? randomEpoch()
    this.#historyLimit = options.historyLimit ?? STORE_DEFAULTS.historyLimit
    this.#maxKeys = options.maxIdempotencyKeys ?? STORE_DEFAULTS.maxIdempotencyKeys
    this.#keyTtlMs = options.idempotencyTtlMs ?? STORE_DEFAULTS.idempotencyTtlMs
    this.#version = versionToken(this.#epoch, 0)
    this.#onWrite = options.onWrite
  }

  create(fields: NoteFields): NoteRecord {
    const capacity = this.#capacity
    capacity.roomForNote()
    const now = this.#now()
    const id = this.#ids.next(now)
    const json = serializeWithId(fields, id)
    const bytes = Buffer.byteLength(json)
    capacity.roomForBytes(bytes)
    const entry = this.#append(id, json, now, bytes)
    this.#batch?.undo.push(() => {
      this.#entries.pop()
      this.#unindex(entry)
      this.#capacity.add(-1, -bytes)
    })
    this.#report({ type: 'created', sequence: entry.position, id, json, modified: now })
    this.#emit('created', entry.position, json)
    return entry
  }

  /** Stores a created note at the end of the list, at the next sequence (create, replay). */
  #append(id: number, json: string, modified: number, bytes: number): Entry {
    const sequence = this.#advance()
    const entry: Entry = {
      id,
      json,
      etag: etagOf(this.#version),
      modified,
      bytes,
      position: sequence,
      alive: true,
    }
    this.#entries.push(entry)
    // No note holds a fresh id, in this store or any other of its id space: one Map write.
    this.#ids.give(id)
    this.#byId.set(id, entry)
    this.#capacity.add(1, bytes)
    return entry
  }

  createOnce(key: string, fingerprint: string, fields: NoteFields): IdempotentCreate {
    const known = this.#keys.get(key)
    if (known !== undefined && known.expires > this.#now()) {
      if (known.fingerprint !== fingerprint) throw keyReused()
      return { note: known.note, replayed: true }
    }
    const entry = this.create(fields)
    const now = entry.modified
    // A snapshot: a later PATCH changes the entry, not the answer a repeat gets.
    const note = snapshot(entry)
    this.remember(key, { fingerprint, note, expires: now + this.#keyTtlMs }, now)
    return { note, replayed: false }
  }

  /** Remembers an idempotency key as createOnce does; a journal's replay calls it too. */
  remember(key: string, remembered: RememberedKey, now: number): void {
    this.#keys.delete(key)
    this.#keys.set(key, remembered)
    // Oldest first: drop the expired ones and those beyond the bound.
    for (const [oldKey, kept] of this.#keys) {
      if (this.#keys.size <= this.#maxKeys && kept.expires > now) break
      this.#keys.delete(oldKey)
    }
  }

  /** How long a key is remembered, in ms. */
  get idempotencyTtlMs(): number {
    return this.#keyTtlMs
  }

  list(): ListRecord {
    let list = this.#cache.list
    if (list === undefined) {
      const count = this.#capacity.notes
      const parts: string[] = new Array(count)
      let i = 0
      for (const entry of this.#entries) if (entry.alive) parts[i++] = entry.json
      list = { json: `[${parts.join(',')}]`, version: this.#version, count }
      this.#cache.list = list
    }
    return list
  }

  /**
   * The live notes' JSON at this version (DECISION 36): an array of references to the strings the
   * store holds, which a write replaces and never changes, so later writes leave it as it is.
   */
  exportNotes(): NoteExport {
    const notes: string[] = new Array(this.#capacity.notes)
    let i = 0
    for (const entry of this.#entries) if (entry.alive) notes[i++] = entry.json
    return arrayExport(this.#version, notes)
  }

  page({ limit, order, after, q }: PageQuery): PageRecord {
    const notes = q === undefined ? this.#entries : this.#matching(q)
    const total = q === undefined ? this.#capacity.notes : notes.length
    const step = order === 'asc' ? 1 : -1
    // Where the walk starts: the first note past `after` in walk order (positions are integers,
    // so the last one below `after` is just before the first one at or above it).
    let i =
      after === undefined
        ? step === 1
          ? 0
          : notes.length - 1
        : step === 1
          ? firstAbove(notes, after)
          : firstAbove(notes, after - 1) - 1
    const parts: string[] = []
    let sent: number | undefined
    let next: number | undefined
    for (; i >= 0 && i < notes.length; i += step) {
      const entry = notes[i] as Entry
      if (!entry.alive) continue
      if (parts.length === limit) {
        next = sent
        break
      }
      parts.push(entry.json)
      sent = entry.position
    }
    return { json: `[${parts.join(',')}]`, version: this.#version, total, next }
  }

  get(id: number): NoteRecord | undefined {
    return this.#find(id)
  }

  update(
    id: number,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    conditions?: Preconditions,
  ): NoteRecord | undefined | PreconditionFailed {
    const entry = this.#find(id)
    if (entry === undefined) return undefined
    if (conditions !== undefined && !meets(entry, conditions)) {
      return new PreconditionFailed(snapshot(entry))
    }
    // A fresh copy of the note: it is changed, measured, and only then stored or dropped.
    const note = patchNote(entry.json, fields, kind)
    const json = JSON.stringify(note)
    const bytes = Buffer.byteLength(json)
    const growth = bytes - entry.bytes
    this.#capacity.roomForBytes(growth)
    if (this.#batch !== undefined) this.#batch.undo.push(this.#restorer(entry))
    if (note.id !== entry.id) {
      this.#unindex(entry)
      entry.id = note.id
      this.#index(entry)
    }
    const sequence = this.#advance()
    entry.json = json
    entry.bytes = bytes
    entry.etag = etagOf(this.#version)
    entry.modified = this.#now()
    this.#capacity.add(0, growth)
    this.#report({
      type: 'updated',
      sequence,
      position: entry.position,
      json,
      modified: entry.modified,
    })
    this.#emit('updated', sequence, json)
    return entry
  }

  delete(id: number, conditions?: Preconditions): boolean | PreconditionFailed {
    const entry = this.#find(id)
    if (entry === undefined) return false
    if (conditions !== undefined && !meets(entry, conditions)) {
      return new PreconditionFailed(snapshot(entry))
    }
    const sequence = this.#remove(entry)
    this.#report({ type: 'deleted', sequence, position: entry.position, id })
    this.#emit('deleted', sequence, `{"id":${JSON.stringify(id)}}`)
    return true
  }

  #remove(entry: Entry): number {
    entry.alive = false
    this.#unindex(entry)
    const capacity = this.#capacity
    capacity.add(-1, -entry.bytes)
    if (this.#batch !== undefined) {
      // No compaction within a batch: an undone delete finds its slot where it was.
      this.#batch.undo.push(() => {
        entry.alive = true
        this.#index(entry)
        capacity.add(1, entry.bytes)
      })
    } else if (this.#entries.length - capacity.notes > Math.max(1024, capacity.notes)) {
      this.#entries = this.#entries.filter((kept) => kept.alive)
    }
    return this.#advance()
  }

  /**
   * Applies a write that this store (or one loaded from the same image) reported through
   * `onWrite`, with the same result: same sequence, position, id, JSON and time. Caps are not
   * checked (the write was accepted once) and `onWrite` is not called; subscribers are.
   * @throws Error when the write does not follow this store's state (a damaged journal).
   */
  replay(write: RecordedWrite): void {
    if (write.sequence !== this.#sequence + 1) {
      throw new Error(`sequence ${write.sequence} does not follow ${this.#sequence}`)
    }
    if (write.type === 'created') {
      const { id, json, modified } = write
      if (id <= this.#ids.last) throw new Error(`id ${id} was given before`)
      const entry = this.#append(id, json, modified, Buffer.byteLength(json))
      this.#emit('created', entry.position, json)
      return
    }
    const entry = this.#at(write.position)
    if (entry === undefined) throw new Error(`no note at position ${write.position}`)
    if (write.type === 'deleted') {
      const sequence = this.#remove(entry)
      this.#emit('deleted', sequence, `{"id":${JSON.stringify(write.id)}}`)
      return
    }
    const { json, modified } = write
    const { id } = JSON.parse(json) as { id?: unknown }
    const bytes = Buffer.byteLength(json)
    if (id !== entry.id) {
      this.#unindex(entry)
      entry.id = id
      this.#index(entry)
    }
    const sequence = this.#advance()
    this.#capacity.add(0, bytes - entry.bytes)
    entry.json = json
    entry.bytes = bytes
    entry.etag = etagOf(this.#version)
    entry.modified = modified
    this.#emit('updated', sequence, json)
  }

  /** Everything this store holds, to be loaded back with `load` (a journal's compaction). */
  image(): StoreImage {
    const notes: ImageNote[] = []
    for (const entry of this.#entries) {
      if (entry.alive) {
        notes.push({
          json: entry.json,
          etag: entry.etag,
          modified: entry.modified,
          position: entry.position,
        })
      }
    }
    return {
      sequence: this.#sequence,
      historyStart: this.#historyStart,
      lastId: this.#ids.last,
      notes,
      history: this.#history,
      keys: [...this.#keys],
    }
  }

  /**
   * Makes an empty store hold `image` (from `image()` of a store of the same epoch). Caps are not
   * checked.
   * @throws Error when the store is not empty or the image is not in order.
   */
  load(image: StoreImage): void {
    if (this.#sequence !== 0) throw new Error('the store is not empty')
    if (image.lastId > Number.NEGATIVE_INFINITY) this.#ids.give(image.lastId)
    let previous = 0
    for (const note of image.notes) {
      if (note.position <= previous || note.position > image.sequence) {
        throw new Error(`a note at position ${note.position} is out of order`)
      }
      previous = note.position
      const { id } = JSON.parse(note.json) as { id?: unknown }
      const bytes = Buffer.byteLength(note.json)
      const entry: Entry = {
        id,
        json: note.json,
        etag: note.etag,
        modified: note.modified,
        bytes,
        position: note.position,
        alive: true,
      }
      this.#entries.push(entry)
      this.#index(entry)
      this.#capacity.add(1, bytes)
    }
    this.#sequence = image.sequence
    this.#version = versionToken(this.#epoch, image.sequence)
    this.#history = [...image.history]
    this.#historyStart = image.historyStart
    for (const [key, remembered] of image.keys) this.#keys.set(key, remembered)
  }

  /**
   * NoteStore.batch: `work` writes through this store while every write records how to undo it
   * and holds back its change and its `onWrite`; a batch kept then reports them in order, one
   * refused runs the undos backwards and puts the version back. Nothing can read in between: the
   * store is synchronous, and so must `work` be.
   */
  batch(
    work: (writer: NoteWriter) => MaybePromise<string | undefined>,
    once?: BatchKey,
  ): BatchResult | undefined {
    if (once !== undefined) {
      const known = this.#keys.get(once.key)
      if (known !== undefined && known.expires > this.#now()) {
        if (known.fingerprint !== once.fingerprint) throw keyReused()
        return { body: known.note.json, replayed: true }
      }
    }
    if (this.#batch !== undefined) throw new Error('a batch cannot run inside another')
    const batch: Batch = {
      sequence: this.#sequence,
      version: this.#version,
      ids: this.#ids.mark(),
      undo: [],
      changes: [],
      writes: [],
    }
    this.#batch = batch
    let body: string | undefined
    try {
      const result = work(this)
      if (result instanceof Promise) {
        result.catch(() => {})
        throw new Error('a memory store batch must be synchronous')
      }
      body = result
    } catch (err) {
      this.#undo(batch)
      throw err
    } finally {
      this.#batch = undefined
    }
    if (body === undefined) {
      this.#undo(batch)
      return undefined
    }
    for (const write of batch.writes) this.#onWrite?.(write)
    for (const change of batch.changes) this.#publish(change)
    if (once !== undefined) {
      const now = this.#now()
      const note = { json: body, etag: '', modified: now }
      this.remember(
        once.key,
        { fingerprint: once.fingerprint, note, expires: now + this.#keyTtlMs },
        now,
      )
    }
    return { body, replayed: false }
  }

  /** The key as remembered, if it is (a journal writes a batch's key down with the batch). */
  rememberedKey(key: string): RememberedKey | undefined {
    return this.#keys.get(key)
  }

  /** Puts the store back as it was before `batch`: every write undone, the version restored. */
  #undo(batch: Batch): void {
    for (let i = batch.undo.length - 1; i >= 0; i--) (batch.undo[i] as () => void)()
    // After the undos every note is where it was: the id space as it was, whatever they counted.
    this.#ids.restore(batch.ids)
    this.#sequence = batch.sequence
    this.#version = batch.version
    this.#cache = { list: undefined, matches: new Map() }
  }

  /** What puts an entry's content and id back as they are now (an update in a batch). */
  #restorer(entry: Entry): () => void {
    const { id, json, bytes, etag, modified } = entry
    return () => {
      if (entry.id !== id) {
        this.#unindex(entry)
        entry.id = id
        this.#index(entry)
      }
      this.#capacity.add(0, bytes - entry.bytes)
      entry.json = json
      entry.bytes = bytes
      entry.etag = etag
      entry.modified = modified
    }
  }

  version(): string {
    return this.#version
  }

  changesSince(since: string, limit: number): readonly Change[] | undefined {
    const sequence = tokenSequence(since, this.#epoch)
    if (sequence === undefined || sequence > this.#sequence) return undefined
    // The history holds changes historyStart+1 ... sequence (and at least the last historyLimit).
    if (sequence < Math.max(this.#historyStart, this.#sequence - this.#historyLimit))
      return undefined
    const from = sequence - this.#historyStart
    return this.#history.slice(from, from + limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    // A wrapper, so that one function subscribed twice is called twice and removed once.
    const subscription = (change: Change) => listener(change)
    this.#listeners.add(subscription)
    return () => {
      this.#listeners.delete(subscription)
    }
  }

  stats(): StoreStats {
    const { notes, bytes, maxNotes, maxBytes } = this.#capacity
    return { notes, bytes, maxNotes, maxBytes }
  }

  /** One more change: a new version, and every per-version cache dropped. */
  #advance(): number {
    const sequence = ++this.#sequence
    this.#version = versionToken(this.#epoch, sequence)
    if (this.#cache.list !== undefined || this.#cache.matches.size > 0) {
      this.#cache = { list: undefined, matches: new Map() }
    }
    return sequence
  }

  #emit(type: Change['type'], sequence: number, data: string): void {
    const change: Change = { type, version: this.#version, sequence, data }
    if (this.#batch === undefined) this.#publish(change)
    else this.#batch.changes.push(change)
  }

  /** A write's result to `onWrite`, or to the batch under way, which reports it once kept. */
  #report(write: RecordedWrite): void {
    if (this.#batch === undefined) this.#onWrite?.(write)
    else this.#batch.writes.push(write)
  }

  /** A change into the history and to every subscriber. */
  #publish(change: Change): void {
    const { sequence } = change
    if (this.#historyLimit > 0) {
      this.#history.push(change)
      // Trimmed in steps of an eighth, so the history holds 1 to 1.125 times its limit: a heap
      // that a soak watches stays level once the history is full.
      if (this.#history.length >= this.#historyLimit + Math.max(64, this.#historyLimit >> 3)) {
        const drop = this.#history.length - this.#historyLimit
        this.#history = this.#history.slice(drop)
        this.#historyStart += drop
      }
    } else {
      this.#historyStart = sequence
    }
    for (const listener of this.#listeners) listener(change)
  }

  /** The notes matching q, in list order, kept for this version (paging through a search). */
  #matching(q: string): Entry[] {
    const cached = this.#cache.matches.get(q)
    if (cached !== undefined) return cached
    const matches = matchesText(q)
    const found: Entry[] = []
    for (const entry of this.#entries) if (entry.alive && matches(entry.json)) found.push(entry)
    if (this.#cache.matches.size >= MAX_CACHED_SEARCHES) this.#cache.matches.clear()
    this.#cache.matches.set(q, found)
    return found
  }

  /** The live entry at this list position, or undefined. */
  #at(position: number): Entry | undefined {
    const entry = this.#entries[firstAbove(this.#entries, position - 1)]
    return entry?.position === position && entry.alive ? entry : undefined
  }

  #find(id: number): Entry | undefined {
    const found = this.#byId.get(id)
    return Array.isArray(found) ? found[0] : found
  }

  /** Indexes an entry that a PATCH moved to its id (a create indexes its fresh id itself). */
  #index(entry: Entry): void {
    const { id } = entry
    if (!isIndexable(id)) return
    if (this.#ids.hold(id)) {
      // Above every id a note has held: no other holder to find.
      this.#byId.set(id, entry)
      return
    }
    const found = this.#byId.get(id)
    if (found === undefined) {
      this.#byId.set(id, entry)
      return
    }
    const holders = Array.isArray(found) ? found : [found]
    let at = holders.length
    while (at > 0 && (holders[at - 1] as Entry).position > entry.position) at--
    holders.splice(at, 0, entry)
    if (holders !== found) this.#byId.set(id, holders)
  }

  #unindex(entry: Entry): void {
    const { id } = entry
    if (!isIndexable(id)) return
    this.#ids.release(id)
    const found = this.#byId.get(id)
    if (!Array.isArray(found)) {
      this.#byId.delete(id)
      return
    }
    found.splice(found.indexOf(entry), 1)
    if (found.length === 1) this.#byId.set(id, found[0] as Entry)
  }
}

/** The index of the first entry whose position is above `after` (binary search). */
function firstAbove(entries: readonly Entry[], after: number): number {
  let low = 0
  let high = entries.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if ((entries[middle] as Entry).position <= after) low = middle + 1
    else high = middle
  }
  return low
}

/** The entry's current values, apart from the entry that later writes change in place. */
export function snapshot(entry: NoteRecord): NoteRecord {
  return { json: entry.json, etag: entry.etag, modified: entry.modified }
}
