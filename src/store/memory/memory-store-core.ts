import { Capacity } from '../kernel/capacity.js'
import { keyReused, STORE_DEFAULTS } from '../kernel/defaults.js'
import { serializeWithId } from '../kernel/id-placement.js'
import { type IdMark, IdSpace } from '../kernel/id-space.js'
import { patchNote } from '../kernel/patch-note.js'
import { meets } from '../kernel/preconditions.js'
import { etagOf, randomEpoch, tokenSequence, versionToken } from '../kernel/version-token.js'
import {
  type Change,
  type IdempotentCreate,
  type ListRecord,
  type NoteExport,
  type NoteFields,
  type NoteRecord,
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
import { type Entry, EntryIndex, firstAbove, walkPage } from './entries.js'
import { MemoryArchive } from './notes-archive.js'
import type { MemoryStoreOptions } from './options.js'
import { ReadCache } from './read-cache.js'
import { type RecordedWrite, type RememberedKey, snapshot } from './records.js'
import { RememberedKeys } from './remembered-keys.js'

/**
 * A batch under way (NoteStore.batch): what undoes each of its writes, and the changes and
 * writes that are reported once it is kept.
 */
export interface Batch {
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
 * The notes of a memory store and the writes that change them (MemoryNoteStore is the store):
 * entries in list order, their indexes, caps, version, change history and idempotency keys, shared
 * with the parts of the store that replay, image and batch its writes.
 */
export abstract class MemoryStoreCore {
  protected readonly capacity: Capacity
  protected readonly ids: IdSpace
  protected readonly now: () => number
  protected readonly epoch: string
  protected readonly keyTtlMs: number
  /** Every note in list order; positions increase strictly along it. */
  protected entries: Entry[] = []
  protected readonly byId: EntryIndex
  /** The live notes in the order of last change (sort=updated). */
  protected readonly byChange = new ChangeOrder()
  /** The number of changes so far: the version. */
  protected sequence = 0
  protected current: string
  protected readonly cache = new ReadCache()
  protected readonly history: ChangeHistory
  protected readonly keys: RememberedKeys
  protected readonly onWrite: ((write: RecordedWrite) => void) | undefined
  protected pending: Batch | undefined
  /** Its revisions and trash. */
  protected readonly archive: MemoryArchive

  constructor(options: MemoryStoreOptions) {
    const { shared } = options
    const holder = options.holder ?? (shared === undefined ? 'The store' : 'This notebook')
    this.capacity = new Capacity(options.maxNotes, options.maxBytes, holder, shared?.capacity)
    this.ids = shared?.ids ?? new IdSpace()
    this.byId = new EntryIndex(this.ids)
    this.now = options.now ?? Date.now
    this.epoch = options.epoch ?? randomEpoch()
    this.history = new ChangeHistory(options.historyLimit ?? STORE_DEFAULTS.historyLimit)
    this.keys = new RememberedKeys(options.maxIdempotencyKeys ?? STORE_DEFAULTS.maxIdempotencyKeys)
    this.keyTtlMs = options.idempotencyTtlMs ?? STORE_DEFAULTS.idempotencyTtlMs
    this.current = versionToken(this.epoch, 0)
    this.onWrite = options.onWrite
    this.archive = new MemoryArchive(options.archive, this.capacity, this.epoch, shared?.history)
  }

  create(fields: NoteFields): NoteRecord {
    const capacity = this.capacity
    const now = this.now()
    this.archive.sweep(now)
    capacity.roomForNote()
    const id = this.ids.next(now)
    const json = serializeWithId(fields, id)
    const bytes = Buffer.byteLength(json)
    capacity.roomForBytes(bytes)
    const entry = this.append(id, json, now, bytes)
    this.pending?.undo.push(() => {
      this.entries.pop()
      this.byChange.remove(entry)
      this.byId.remove(entry)
      this.capacity.add(-1, -bytes)
    })
    this.report({ type: 'created', sequence: entry.position, id, json, modified: now })
    this.emit('created', entry.position, json)
    return entry
  }

  /** Stores a created note at the end of the list, at the next sequence (create, replay). */
  protected append(id: number, json: string, modified: number, bytes: number): Entry {
    const sequence = this.advance()
    const entry: Entry = {
      id,
      json,
      etag: etagOf(this.current),
      modified,
      bytes,
      position: sequence,
      alive: true,
      change: 'created',
      past: undefined,
    }
    this.entries.push(entry)
    // No note holds a fresh id, in this store or any other of its id space: one Map write.
    this.ids.give(id)
    this.byId.addFresh(id, entry)
    this.byChange.add(entry)
    this.capacity.add(1, bytes)
    return entry
  }

  createOnce(key: string, fingerprint: string, fields: NoteFields): IdempotentCreate {
    const known = this.keys.live(key, this.now)
    if (known !== undefined) {
      if (known.fingerprint !== fingerprint) throw keyReused()
      return { note: known.note, replayed: true }
    }
    const entry = this.create(fields)
    const now = entry.modified
    // A snapshot: a later PATCH changes the entry, not the answer a repeat gets.
    const note = snapshot(entry)
    this.remember(key, { fingerprint, note, expires: now + this.keyTtlMs }, now)
    return { note, replayed: false }
  }

  /** Remembers an idempotency key as createOnce does; a journal's replay calls it too. */
  remember(key: string, remembered: RememberedKey, now: number): void {
    this.keys.remember(key, remembered, now)
  }

  /** How long a key is remembered, in ms. */
  get idempotencyTtlMs(): number {
    return this.keyTtlMs
  }

  list(): ListRecord {
    let list = this.cache.list
    if (list === undefined) {
      const count = this.capacity.notes
      const parts: string[] = new Array(count)
      let i = 0
      for (const entry of this.entries) if (entry.alive) parts[i++] = entry.json
      list = { json: `[${parts.join(',')}]`, version: this.current, count }
      this.cache.list = list
    }
    return list
  }

  /**
   * The live notes' JSON at this version (an export): an array of references to the strings the
   * store holds, which a write replaces and never changes, so later writes leave it as it is.
   */
  exportNotes(): NoteExport {
    const notes: string[] = new Array(this.capacity.notes)
    let i = 0
    for (const entry of this.entries) if (entry.alive) notes[i++] = entry.json
    return arrayExport(this.current, notes)
  }

  page({ limit, order, sort, after, q }: PageQuery): PageRecord {
    if (sort === 'updated') {
      const found = q === undefined ? undefined : this.cache.matchingByChange(q, this.byChange)
      const { json, next } = this.byChange.page({ limit, order, after }, found)
      return { json, version: this.current, total: found?.length ?? this.capacity.notes, next }
    }
    const notes = q === undefined ? this.entries : this.cache.matching(q, this.entries)
    const total = q === undefined ? this.capacity.notes : notes.length
    const { json, next } = walkPage(notes, { limit, order, after })
    return { json, version: this.current, total, next }
  }

  get(id: number): NoteRecord | undefined {
    return this.byId.find(id)
  }

  update(
    id: number,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    conditions?: Preconditions,
  ): NoteRecord | undefined | PreconditionFailed {
    const entry = this.byId.find(id)
    if (entry === undefined) return undefined
    if (conditions !== undefined && !meets(entry, conditions)) {
      return new PreconditionFailed(snapshot(entry))
    }
    // A fresh copy of the note: it is changed, measured, and only then stored or dropped.
    const note = patchNote(entry.json, fields, kind)
    const json = JSON.stringify(note)
    const bytes = Buffer.byteLength(json)
    const growth = bytes - entry.bytes
    const now = this.now()
    this.archive.sweep(now)
    this.capacity.roomForBytes(growth)
    const batch = this.pending
    if (batch !== undefined) batch.undo.push(this.restorer(entry))
    this.archive.keep(entry, now, batch)
    this.byChange.remove(entry)
    this.byId.move(entry, note.id)
    const sequence = this.advance()
    entry.json = json
    entry.bytes = bytes
    entry.etag = etagOf(this.current)
    entry.modified = now
    entry.change = 'updated'
    this.byChange.add(entry)
    this.capacity.add(0, growth)
    this.report({
      type: 'updated',
      sequence,
      position: entry.position,
      json,
      modified: entry.modified,
    })
    this.emit('updated', sequence, json)
    return entry
  }

  delete(id: number, conditions?: Preconditions): boolean | PreconditionFailed {
    const entry = this.byId.find(id)
    if (entry === undefined) return false
    if (conditions !== undefined && !meets(entry, conditions)) {
      return new PreconditionFailed(snapshot(entry))
    }
    const trashed = this.archive.trashing ? this.now() : undefined
    if (trashed !== undefined) this.archive.sweep(trashed)
    const sequence = this.remove(entry, trashed)
    const { position } = entry
    this.report(
      trashed === undefined
        ? { type: 'deleted', sequence, position, id }
        : { type: 'deleted', sequence, position, id, trashed },
    )
    this.emit('deleted', sequence, `{"id":${JSON.stringify(id)}}`)
    return true
  }

  /** Takes the entry out of the list: into the trash when `trashed` (the time) is given. */
  protected remove(entry: Entry, trashed: number | undefined): number {
    const sequence = this.advance()
    entry.alive = false
    this.byId.remove(entry)
    this.byChange.remove(entry)
    const capacity = this.capacity
    capacity.add(-1, -entry.bytes)
    const untrash = this.archive.removed(entry, trashed, sequence, this.pending)
    if (this.pending !== undefined) {
      // No compaction within a batch: an undone delete finds its slot where it was.
      this.pending.undo.push(() => {
        entry.alive = true
        this.byId.add(entry)
        this.byChange.add(entry)
        capacity.add(1, entry.bytes)
        untrash?.()
      })
    } else if (this.entries.length - capacity.notes > Math.max(1024, capacity.notes)) {
      this.entries = this.entries.filter((kept) => kept.alive)
    }
    return sequence
  }

  /**
   * A note of the trash at the end of the list again, as written at `modified`: its content, id
   * and past states, its state at the delete kept as one more.
   */
  protected putBack(old: Entry, modified: number): Entry {
    const sequence = this.advance()
    const entry: Entry = {
      id: old.id,
      json: old.json,
      etag: etagOf(this.current),
      modified,
      bytes: old.bytes,
      position: sequence,
      alive: true,
      change: 'created',
      past: old.past,
    }
    this.archive.putBack(entry, old, modified)
    this.entries.push(entry)
    this.byId.add(entry)
    this.byChange.add(entry)
    this.capacity.add(1, entry.bytes)
    this.emit('created', sequence, entry.json)
    return entry
  }

  /** What puts an entry's content and id back as they are now (an update in a batch). */
  protected restorer(entry: Entry): () => void {
    const { id, json, bytes, etag, modified, change } = entry
    return () => {
      this.byChange.remove(entry)
      this.byId.move(entry, id)
      this.capacity.add(0, bytes - entry.bytes)
      entry.json = json
      entry.bytes = bytes
      entry.etag = etag
      entry.modified = modified
      entry.change = change
      this.byChange.add(entry)
    }
  }

  version(): string {
    return this.current
  }

  changesSince(since: string, limit: number): readonly Change[] | undefined {
    const sequence = tokenSequence(since, this.epoch)
    if (sequence === undefined) return undefined
    return this.history.after(sequence, this.sequence, limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    return this.history.subscribe(listener)
  }

  stats(): StoreStats {
    const { notes, bytes, maxNotes, maxBytes } = this.capacity
    return { notes, bytes, maxNotes, maxBytes }
  }

  /** One more change: a new version, and every per-version cache dropped. */
  protected advance(): number {
    const sequence = ++this.sequence
    this.current = versionToken(this.epoch, sequence)
    this.cache.clear()
    return sequence
  }

  protected emit(type: Change['type'], sequence: number, data: string): void {
    const change: Change = { type, version: this.current, sequence, data }
    if (this.pending === undefined) this.history.publish(change)
    else this.pending.changes.push(change)
  }

  /** A write's result to `onWrite`, or to the batch under way, which reports it once kept. */
  protected report(write: RecordedWrite): void {
    if (this.pending === undefined) this.onWrite?.(write)
    else this.pending.writes.push(write)
  }

  /** The live entry at this list position, or undefined. */
  protected at(position: number): Entry | undefined {
    const entry = this.entries[firstAbove(this.entries, position - 1)]
    return entry?.position === position && entry.alive ? entry : undefined
  }
}
