import {
  ID_TAKEN,
  type NoteArchive,
  type Revision,
  type RevisionPage,
  type TrashPage,
} from '../archive.js'
import { keyReused } from '../kernel/defaults.js'
import { etagOf, versionToken } from '../kernel/version-token.js'
import type {
  BatchKey,
  BatchResult,
  MaybePromise,
  NoteRecord,
  NoteStore,
  NoteWriter,
} from '../types.js'
import { FileRoom } from './file-room.js'
import { entryOf, imageNotes } from './image-notes.js'
import { type Batch, MemoryStoreCore } from './memory-store-core.js'
import type { RecordedWrite, RememberedKey, StoreImage } from './records.js'

/**
 * Notes in an array in list order (deleted ones left as dead slots until there are as many dead as
 * alive, then compacted) plus an index from numeric id to entry (entries.ts), so get,
 * update and delete cost O(1), and a page O(log n + limit), whatever the number of notes. The ids
 * creates give and the caps are kept by an IdSpace and a Capacity: the store's own, or, for a
 * notebook, shared with the service's other notebooks (MemoryNotebooks). Its change history
 * (change-history.ts), idempotency keys (remembered-keys.ts) and cached reads
 * (read-cache.ts) are parts of their own.
 */
export class MemoryNoteStore extends MemoryStoreCore implements NoteStore, NoteArchive {
  #fileRoom: FileRoom | undefined

  /**
   * The room files held beside this store take in its byte cap (the service's, for a notebook):
   * one for the store, shared by its files and its uploads.
   */
  fileRoom(): FileRoom {
    this.#fileRoom ??= new FileRoom(this.capacity)
    return this.#fileRoom
  }

  revisions(id: number, limit: number, after: string | undefined): RevisionPage | undefined {
    const entry = this.byId.find(id)
    return entry === undefined ? undefined : this.archive.revisions(entry, limit, after, this.now())
  }

  revision(id: number, version: string): Revision | undefined {
    const entry = this.byId.find(id)
    return entry === undefined ? undefined : this.archive.revision(entry, version, this.now())
  }

  trash(limit: number, after: number | undefined): TrashPage {
    return this.archive.trash(limit, after, this.now())
  }

  untrash(id: number): NoteRecord | undefined | typeof ID_TAKEN {
    const now = this.now()
    const item = this.archive.take(id, now, this.byId.find(id) !== undefined)
    if (item === undefined || item === ID_TAKEN) return item
    const entry = this.putBack(item.entry, now)
    const { position: sequence } = entry
    this.report({ type: 'untrashed', sequence, trashed: item.sequence, modified: now })
    return entry
  }

  purge(id: number): boolean {
    const trashed = this.archive.purge(id, this.now())
    if (trashed === undefined) return false
    this.report({ type: 'purged', trashed: [trashed] })
    return true
  }

  emptyTrash(): number {
    const trashed = this.archive.empty()
    if (trashed.length > 0) this.report({ type: 'purged', trashed })
    return trashed.length
  }

  /**
   * Applies a write that this store (or one loaded from the same image) reported through
   * `onWrite`, with the same result: same sequence, position, id, JSON and time. Caps are not
   * checked (the write was accepted once) and `onWrite` is not called; subscribers are.
   * @throws Error when the write does not follow this store's state (a damaged journal).
   */
  replay(write: RecordedWrite): void {
    if (write.type === 'purged') {
      this.archive.purgeDeletedBy(write.trashed)
      return
    }
    if (write.sequence !== this.sequence + 1) {
      throw new Error(`sequence ${write.sequence} does not follow ${this.sequence}`)
    }
    if (write.type === 'created') {
      const { id, json, modified } = write
      if (id <= this.ids.last) throw new Error(`id ${id} was given before`)
      const entry = this.append(id, json, modified, Buffer.byteLength(json))
      this.emit('created', entry.position, json)
      return
    }
    if (write.type === 'untrashed') {
      const item = this.archive.takeDeletedBy(write.trashed)
      if (item === undefined) throw new Error(`no note in the trash deleted at ${write.trashed}`)
      this.putBack(item.entry, write.modified)
      return
    }
    const entry = this.at(write.position)
    if (entry === undefined) throw new Error(`no note at position ${write.position}`)
    if (write.type === 'deleted') {
      const sequence = this.remove(entry, write.trashed)
      this.emit('deleted', sequence, `{"id":${JSON.stringify(write.id)}}`)
      return
    }
    const { json, modified } = write
    const { id } = JSON.parse(json) as { id?: unknown }
    const bytes = Buffer.byteLength(json)
    this.archive.keep(entry, modified, undefined)
    this.byChange.remove(entry)
    this.byId.move(entry, id)
    const sequence = this.advance()
    this.capacity.add(0, bytes - entry.bytes)
    entry.json = json
    entry.bytes = bytes
    entry.etag = etagOf(this.current)
    entry.modified = modified
    entry.change = 'updated'
    this.byChange.add(entry)
    this.emit('updated', sequence, json)
  }

  /**
   * Gives back the room of every note, here and in the service's capacity: its notebook was
   * removed. Nothing may use the store afterwards.
   */
  release(): void {
    this.capacity.add(-this.capacity.notes, -this.capacity.bytes)
    this.archive.release(this.entries)
    this.entries = []
    this.byChange.fill([])
  }

  /** Everything this store holds, to be loaded back with `load` (a journal's compaction). */
  image(): StoreImage {
    return {
      sequence: this.sequence,
      historyStart: this.history.start,
      lastId: this.ids.last,
      notes: imageNotes(this.entries),
      history: this.history.changes,
      keys: this.keys.entries(),
      trash: this.archive.image(),
    }
  }

  /**
   * Makes an empty store hold `image` (from `image()` of a store of the same epoch). Caps are not
   * checked.
   * @throws Error when the store is not empty or the image is not in order.
   */
  load(image: StoreImage): void {
    if (this.sequence !== 0) throw new Error('the store is not empty')
    if (image.lastId > Number.NEGATIVE_INFINITY) this.ids.give(image.lastId)
    let previous = 0
    for (const note of image.notes) {
      if (note.position <= previous || note.position > image.sequence) {
        throw new Error(`a note at position ${note.position} is out of order`)
      }
      previous = note.position
      const entry = entryOf(note)
      this.archive.loadPast(entry, note.past)
      this.entries.push(entry)
      this.byId.add(entry)
      this.capacity.add(1, entry.bytes)
    }
    for (const { note, deleted, sequence } of image.trash ?? []) {
      this.archive.loadTrashed(entryOf(note), deleted, sequence, note.past)
    }
    this.byChange.fill(this.entries)
    this.sequence = image.sequence
    this.current = versionToken(this.epoch, image.sequence)
    this.history.load(image.history, image.historyStart)
    this.keys.load(image.keys)
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
      const known = this.keys.live(once.key, this.now)
      if (known !== undefined) {
        if (known.fingerprint !== once.fingerprint) throw keyReused()
        return { body: known.note.json, replayed: true }
      }
    }
    if (this.pending !== undefined) throw new Error('a batch cannot run inside another')
    const batch: Batch = {
      sequence: this.sequence,
      version: this.current,
      ids: this.ids.mark(),
      undo: [],
      changes: [],
      writes: [],
      archive: [],
    }
    this.pending = batch
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
      this.pending = undefined
    }
    if (body === undefined) {
      this.#undo(batch)
      return undefined
    }
    for (const keep of batch.archive) keep()
    for (const write of batch.writes) this.onWrite?.(write)
    for (const change of batch.changes) this.history.publish(change)
    if (once !== undefined) {
      const now = this.now()
      const note = { json: body, etag: '', modified: now }
      this.remember(
        once.key,
        { fingerprint: once.fingerprint, note, expires: now + this.keyTtlMs },
        now,
      )
    }
    return { body, replayed: false }
  }

  /** The key as remembered, if it is (a journal writes a batch's key down with the batch). */
  rememberedKey(key: string): RememberedKey | undefined {
    return this.keys.get(key)
  }

  /** Puts the store back as it was before `batch`: every write undone, the version restored. */
  #undo(batch: Batch): void {
    for (let i = batch.undo.length - 1; i >= 0; i--) (batch.undo[i] as () => void)()
    // After the undos every note is where it was: the id space as it was, whatever they counted.
    this.ids.restore(batch.ids)
    this.sequence = batch.sequence
    this.current = batch.version
    this.cache.clear()
  }
}
