import {
  ARCHIVE_DEFAULTS,
  ID_TAKEN,
  type NoteArchive,
  type Revision,
  type RevisionPage,
  type TrashPage,
} from '../archive.js'
import { Capacity } from '../kernel/capacity.js'
import { keyReused, STORE_DEFAULTS } from '../kernel/defaults.js'
import { serializeWithId } from '../kernel/id-placement.js'
import { type IdMark, IdSpace } from '../kernel/id-space.js'
import { patchNote } from '../kernel/patch-note.js'
import { meets } from '../kernel/preconditions.js'
import { etagOf, randomEpoch, tokenSequence, versionToken } from '../kernel/version-token.js'
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
} from '../types.js'
import { arrayExport } from './array-export.js'
import { ChangeHistory } from './change-history.js'
import { ChangeOrder } from './change-order.js'
import {
  type Entry,
  EntryIndex,
  entryOf,
  firstAbove,
  imageNote,
  imageNotes,
  walkPage,
} from './entries.js'
import type { MemoryStoreOptions } from './options.js'
import { ReadCache } from './read-cache.js'
import { type RecordedWrite, type RememberedKey, type StoreImage, snapshot } from './records.js'
import { RememberedKeys } from './remembered-keys.js'
import {
  dropPast,
  findRevision,
  HistoryBudget,
  type HistoryRules,
  keepPast,
  keepState,
  loadPast,
  revisionPage,
} from './revisions.js'
import { MemoryTrash, type TrashedEntry } from './trash.js'

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
  /** What the batch's writes keep of past states, done once it is kept. */
  readonly archive: (() => void)[]
}

/**
 * Notes in an array in list order (deleted ones left as dead slots until there are as many dead as
 * alive, then compacted) plus an index from numeric id to entry (entries.ts), so get,
 * update and delete cost O(1), and a page O(log n + limit), whatever the number of notes. The ids
 * creates give and the caps are kept by an IdSpace and a Capacity: the store's own, or, for a
 * notebook, shared with the service's other notebooks (MemoryNotebooks). Its change history
 * (change-history.ts), idempotency keys (remembered-keys.ts) and cached reads
 * (read-cache.ts) are parts of their own.
 */
export class MemoryNoteStore implements NoteStore, NoteArchive {
  readonly #capacity: Capacity
  readonly #ids: IdSpace
  readonly #now: () => number
  readonly #epoch: string
  readonly #keyTtlMs: number
  /** Every note in list order; positions increase strictly along it. */
  #entries: Entry[] = []
  readonly #byId: EntryIndex
  /** The live notes in the order of last change (sort=updated). */
  readonly #byChange = new ChangeOrder()
  /** The number of changes so far: the version. */
  #sequence = 0
  #version: string
  readonly #cache = new ReadCache()
  readonly #history: ChangeHistory
  readonly #keys: RememberedKeys
  readonly #onWrite: ((write: RecordedWrite) => void) | undefined
  #batch: Batch | undefined
  readonly #rules: HistoryRules
  /** How long a deleted note stays in the trash, in ms; 0: none does. */
  readonly #trashMs: number
  readonly #trash = new MemoryTrash()

  constructor(options: MemoryStoreOptions) {
    const { shared } = options
    const holder = options.holder ?? (shared === undefined ? 'The store' : 'This notebook')
    this.#capacity = new Capacity(options.maxNotes, options.maxBytes, holder, shared?.capacity)
    this.#ids = shared?.ids ?? new IdSpace()
    this.#byId = new EntryIndex(this.#ids)
    this.#now = options.now ?? Date.now
    this.#epoch = options.epoch ?? randomEpoch()
    this.#history = new ChangeHistory(options.historyLimit ?? STORE_DEFAULTS.historyLimit)
    this.#keys = new RememberedKeys(options.maxIdempotencyKeys ?? STORE_DEFAULTS.maxIdempotencyKeys)
    this.#keyTtlMs = options.idempotencyTtlMs ?? STORE_DEFAULTS.idempotencyTtlMs
    this.#version = versionToken(this.#epoch, 0)
    this.#onWrite = options.onWrite
    const limits = { ...ARCHIVE_DEFAULTS, ...options.archive }
    this.#rules = {
      noteHistory: limits.noteHistory,
      historyMs: limits.historyMs,
      budget: shared?.history ?? new HistoryBudget(limits.maxHistoryBytes),
    }
    this.#trashMs = limits.trashMs
  }

  create(fields: NoteFields): NoteRecord {
    const capacity = this.#capacity
    const now = this.#now()
    this.#sweep(now)
    capacity.roomForNote()
    const id = this.#ids.next(now)
    const json = serializeWithId(fields, id)
    const bytes = Buffer.byteLength(json)
    capacity.roomForBytes(bytes)
    const entry = this.#append(id, json, now, bytes)
    this.#batch?.undo.push(() => {
      this.#entries.pop()
      this.#byChange.remove(entry)
      this.#byId.remove(entry)
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
      change: 'created',
      past: undefined,
    }
    this.#entries.push(entry)
    // No note holds a fresh id, in this store or any other of its id space: one Map write.
    this.#ids.give(id)
    this.#byId.addFresh(id, entry)
    this.#byChange.add(entry)
    this.#capacity.add(1, bytes)
    return entry
  }

  createOnce(key: string, fingerprint: string, fields: NoteFields): IdempotentCreate {
    const known = this.#keys.live(key, this.#now)
    if (known !== undefined) {
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
    this.#keys.remember(key, remembered, now)
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
   * The live notes' JSON at this version (an export): an array of references to the strings the
   * store holds, which a write replaces and never changes, so later writes leave it as it is.
   */
  exportNotes(): NoteExport {
    const notes: string[] = new Array(this.#capacity.notes)
    let i = 0
    for (const entry of this.#entries) if (entry.alive) notes[i++] = entry.json
    return arrayExport(this.#version, notes)
  }

  page({ limit, order, sort, after, q }: PageQuery): PageRecord {
    if (sort === 'updated') {
      const found = q === undefined ? undefined : this.#cache.matchingByChange(q, this.#byChange)
      const { json, next } = this.#byChange.page({ limit, order, after }, found)
      return { json, version: this.#version, total: found?.length ?? this.#capacity.notes, next }
    }
    const notes = q === undefined ? this.#entries : this.#cache.matching(q, this.#entries)
    const total = q === undefined ? this.#capacity.notes : notes.length
    const { json, next } = walkPage(notes, { limit, order, after })
    return { json, version: this.#version, total, next }
  }

  get(id: number): NoteRecord | undefined {
    return this.#byId.find(id)
  }

  update(
    id: number,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    conditions?: Preconditions,
  ): NoteRecord | undefined | PreconditionFailed {
    const entry = this.#byId.find(id)
    if (entry === undefined) return undefined
    if (conditions !== undefined && !meets(entry, conditions)) {
      return new PreconditionFailed(snapshot(entry))
    }
    // A fresh copy of the note: it is changed, measured, and only then stored or dropped.
    const note = patchNote(entry.json, fields, kind)
    const json = JSON.stringify(note)
    const bytes = Buffer.byteLength(json)
    const growth = bytes - entry.bytes
    const now = this.#now()
    this.#sweep(now)
    this.#capacity.roomForBytes(growth)
    this.#keepPast(entry, now)
    this.#byChange.remove(entry)
    this.#byId.move(entry, note.id)
    const sequence = this.#advance()
    entry.json = json
    entry.bytes = bytes
    entry.etag = etagOf(this.#version)
    entry.modified = now
    entry.change = 'updated'
    this.#byChange.add(entry)
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
    const entry = this.#byId.find(id)
    if (entry === undefined) return false
    if (conditions !== undefined && !meets(entry, conditions)) {
      return new PreconditionFailed(snapshot(entry))
    }
    const trashed = this.#trashMs > 0 ? this.#now() : undefined
    if (trashed !== undefined) this.#sweep(trashed)
    const sequence = this.#remove(entry, trashed)
    const { position } = entry
    this.#report(
      trashed === undefined
        ? { type: 'deleted', sequence, position, id }
        : { type: 'deleted', sequence, position, id, trashed },
    )
    this.#emit('deleted', sequence, `{"id":${JSON.stringify(id)}}`)
    return true
  }

  /** Takes the entry out of the list: into the trash when `trashed` (the time) is given. */
  #remove(entry: Entry, trashed: number | undefined): number {
    const sequence = this.#advance()
    entry.alive = false
    this.#byId.remove(entry)
    this.#byChange.remove(entry)
    const capacity = this.#capacity
    capacity.add(-1, -entry.bytes)
    if (trashed !== undefined) {
      this.#trash.add({ entry, deleted: trashed, sequence })
      capacity.trash(1, entry.bytes)
    } else if (this.#batch === undefined) {
      dropPast(entry, this.#rules.budget)
    } else {
      this.#batch.archive.push(() => dropPast(entry, this.#rules.budget))
    }
    if (this.#batch !== undefined) {
      // No compaction within a batch: an undone delete finds its slot where it was.
      this.#batch.undo.push(() => {
        entry.alive = true
        this.#byId.add(entry)
        this.#byChange.add(entry)
        capacity.add(1, entry.bytes)
        if (trashed !== undefined) {
          this.#trash.undoAdd()
          capacity.trash(-1, -entry.bytes)
        }
      })
    } else if (this.#entries.length - capacity.notes > Math.max(1024, capacity.notes)) {
      this.#entries = this.#entries.filter((kept) => kept.alive)
    }
    return sequence
  }

  /** Keeps the entry's current state as a past one (after the batch, if one is under way). */
  #keepPast(entry: Entry, now: number): void {
    const batch = this.#batch
    if (batch === undefined) {
      keepPast(entry, this.#rules, now)
      return
    }
    batch.undo.push(this.#restorer(entry))
    const { etag, modified, change, json } = entry
    batch.archive.push(() => keepState(entry, etag, modified, change, json, this.#rules, now))
  }

  /** Lets the trash's notes past their time go, with their room and revisions. */
  #sweep(now: number): void {
    if (this.#trash.size === 0) return
    for (const item of this.#trash.expire(now - this.#trashMs)) this.#forget(item)
  }

  /** A note gone from the trash for good: its room given back and its revisions dropped. */
  #forget({ entry }: TrashedEntry): void {
    this.#capacity.trash(-1, -entry.bytes)
    dropPast(entry, this.#rules.budget)
  }

  revisions(id: number, limit: number, after: string | undefined): RevisionPage | undefined {
    const entry = this.#byId.find(id)
    if (entry === undefined) return undefined
    const from = after === undefined ? undefined : (tokenSequence(after, this.#epoch) ?? 0)
    return revisionPage(entry, limit, from, this.#sequenceOf, this.#now() - this.#rules.historyMs)
  }

  revision(id: number, version: string): Revision | undefined {
    const entry = this.#byId.find(id)
    if (entry === undefined) return undefined
    return findRevision(entry, version, this.#now() - this.#rules.historyMs)
  }

  /** The sequence of one of this store's ETags. */
  readonly #sequenceOf = (etag: string): number =>
    tokenSequence(etag.slice(1, -1), this.#epoch) ?? 0

  trash(limit: number, after: number | undefined): TrashPage {
    this.#sweep(this.#now())
    return this.#trash.page(limit, after)
  }

  untrash(id: number): NoteRecord | undefined | typeof ID_TAKEN {
    const now = this.#now()
    this.#sweep(now)
    const at = this.#trash.findId(id)
    if (at === -1) return undefined
    if (this.#byId.find(id) !== undefined) return ID_TAKEN
    const item = this.#trash.take(at)
    const entry = this.#putBack(item.entry, now)
    this.#report({
      type: 'untrashed',
      sequence: entry.position,
      trashed: item.sequence,
      modified: now,
    })
    return entry
  }

  /**
   * A note of the trash at the end of the list again, as written at `modified`: its content, id
   * and past states, its state at the delete kept as one more.
   */
  #putBack(old: Entry, modified: number): Entry {
    this.#capacity.trash(-1, -old.bytes)
    const sequence = this.#advance()
    const entry: Entry = {
      id: old.id,
      json: old.json,
      etag: etagOf(this.#version),
      modified,
      bytes: old.bytes,
      position: sequence,
      alive: true,
      change: 'created',
      past: old.past,
    }
    keepState(entry, old.etag, old.modified, old.change, old.json, this.#rules, modified)
    this.#entries.push(entry)
    this.#byId.add(entry)
    this.#byChange.add(entry)
    this.#capacity.add(1, entry.bytes)
    this.#emit('created', sequence, entry.json)
    return entry
  }

  purge(id: number): boolean {
    this.#sweep(this.#now())
    const at = this.#trash.findId(id)
    if (at === -1) return false
    const item = this.#trash.take(at)
    this.#forget(item)
    this.#report({ type: 'purged', trashed: [item.sequence] })
    return true
  }

  emptyTrash(): number {
    const items = this.#trash.takeAll()
    for (const item of items) this.#forget(item)
    if (items.length > 0)
      this.#report({ type: 'purged', trashed: items.map((item) => item.sequence) })
    return items.length
  }

  /**
   * Applies a write that this store (or one loaded from the same image) reported through
   * `onWrite`, with the same result: same sequence, position, id, JSON and time. Caps are not
   * checked (the write was accepted once) and `onWrite` is not called; subscribers are.
   * @throws Error when the write does not follow this store's state (a damaged journal).
   */
  replay(write: RecordedWrite): void {
    if (write.type === 'purged') {
      for (const sequence of write.trashed) {
        const at = this.#trash.findSequence(sequence)
        if (at !== -1) this.#forget(this.#trash.take(at))
      }
      return
    }
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
    if (write.type === 'untrashed') {
      const at = this.#trash.findSequence(write.trashed)
      if (at === -1) throw new Error(`no note in the trash deleted at ${write.trashed}`)
      this.#putBack(this.#trash.take(at).entry, write.modified)
      return
    }
    const entry = this.#at(write.position)
    if (entry === undefined) throw new Error(`no note at position ${write.position}`)
    if (write.type === 'deleted') {
      const sequence = this.#remove(entry, write.trashed)
      this.#emit('deleted', sequence, `{"id":${JSON.stringify(write.id)}}`)
      return
    }
    const { json, modified } = write
    const { id } = JSON.parse(json) as { id?: unknown }
    const bytes = Buffer.byteLength(json)
    keepPast(entry, this.#rules, modified)
    this.#byChange.remove(entry)
    this.#byId.move(entry, id)
    const sequence = this.#advance()
    this.#capacity.add(0, bytes - entry.bytes)
    entry.json = json
    entry.bytes = bytes
    entry.etag = etagOf(this.#version)
    entry.modified = modified
    entry.change = 'updated'
    this.#byChange.add(entry)
    this.#emit('updated', sequence, json)
  }

  /**
   * Gives back the room of every note, here and in the service's capacity: its notebook was
   * removed. Nothing may use the store afterwards.
   */
  release(): void {
    this.#capacity.add(-this.#capacity.notes, -this.#capacity.bytes)
    const { budget } = this.#rules
    for (const entry of this.#entries) if (entry.alive) dropPast(entry, budget)
    for (const item of this.#trash.takeAll()) this.#forget(item)
    this.#entries = []
    this.#byChange.fill([])
  }

  /** Everything this store holds, to be loaded back with `load` (a journal's compaction). */
  image(): StoreImage {
    return {
      sequence: this.#sequence,
      historyStart: this.#history.start,
      lastId: this.#ids.last,
      notes: imageNotes(this.#entries),
      history: this.#history.changes,
      keys: this.#keys.entries(),
      trash: this.#trash.items.map(({ entry, deleted, sequence }) => ({
        note: imageNote(entry),
        deleted,
        sequence,
      })),
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
      const entry = entryOf(note)
      loadPast(entry, note.past ?? [], this.#rules.budget)
      this.#entries.push(entry)
      this.#byId.add(entry)
      this.#capacity.add(1, entry.bytes)
    }
    for (const { note, deleted, sequence } of image.trash ?? []) {
      const entry = entryOf(note)
      entry.alive = false
      loadPast(entry, note.past ?? [], this.#rules.budget)
      this.#trash.add({ entry, deleted, sequence })
      this.#capacity.trash(1, entry.bytes)
    }
    this.#byChange.fill(this.#entries)
    this.#sequence = image.sequence
    this.#version = versionToken(this.#epoch, image.sequence)
    this.#history.load(image.history, image.historyStart)
    this.#keys.load(image.keys)
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
      const known = this.#keys.live(once.key, this.#now)
      if (known !== undefined) {
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
      archive: [],
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
    for (const keep of batch.archive) keep()
    for (const write of batch.writes) this.#onWrite?.(write)
    for (const change of batch.changes) this.#history.publish(change)
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
    this.#cache.clear()
  }

  /** What puts an entry's content and id back as they are now (an update in a batch). */
  #restorer(entry: Entry): () => void {
    const { id, json, bytes, etag, modified, change } = entry
    return () => {
      this.#byChange.remove(entry)
      this.#byId.move(entry, id)
      this.#capacity.add(0, bytes - entry.bytes)
      entry.json = json
      entry.bytes = bytes
      entry.etag = etag
      entry.modified = modified
      entry.change = change
      this.#byChange.add(entry)
    }
  }

  version(): string {
    return this.#version
  }

  changesSince(since: string, limit: number): readonly Change[] | undefined {
    const sequence = tokenSequence(since, this.#epoch)
    if (sequence === undefined) return undefined
    return this.#history.after(sequence, this.#sequence, limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    return this.#history.subscribe(listener)
  }

  stats(): StoreStats {
    const { notes, bytes, maxNotes, maxBytes } = this.#capacity
    return { notes, bytes, maxNotes, maxBytes }
  }

  /** One more change: a new version, and every per-version cache dropped. */
  #advance(): number {
    const sequence = ++this.#sequence
    this.#version = versionToken(this.#epoch, sequence)
    this.#cache.clear()
    return sequence
  }

  #emit(type: Change['type'], sequence: number, data: string): void {
    const change: Change = { type, version: this.#version, sequence, data }
    if (this.#batch === undefined) this.#history.publish(change)
    else this.#batch.changes.push(change)
  }

  /** A write's result to `onWrite`, or to the batch under way, which reports it once kept. */
  #report(write: RecordedWrite): void {
    if (this.#batch === undefined) this.#onWrite?.(write)
    else this.#batch.writes.push(write)
  }

  /** The live entry at this list position, or undefined. */
  #at(position: number): Entry | undefined {
    const entry = this.#entries[firstAbove(this.#entries, position - 1)]
    return entry?.position === position && entry.alive ? entry : undefined
  }
}
