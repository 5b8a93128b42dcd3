import { Readable } from 'node:stream'
import type { Role } from '../directory.js'
import {
  FILE_LIMIT_DEFAULTS,
  type FileLimits,
  type FileRecord,
  type FileSpace,
  type FileTotals,
  type NotebookFiles,
} from '../files.js'
import { takeIn } from '../kernel/file-intake.js'
import { filePage } from '../kernel/file-pages.js'
import { HeldUploads } from '../kernel/held-uploads.js'
import { AccessLostError } from '../types.js'
import type { FileRoom } from './file-room.js'

/** One file in memory: what it is and its bytes, as the pieces they arrived in (never copied). */
interface HeldFile {
  readonly record: FileRecord
  readonly parts: readonly Buffer[]
}

/** The bytes [start, end) of `parts`, piece by piece, each a view of what is held. */
function* rangeOf(parts: readonly Buffer[], start: number, end: number): Generator<Buffer> {
  let at = 0
  for (const part of parts) {
    const next = at + part.length
    if (next > start && at < end) {
      yield part.subarray(Math.max(0, start - at), Math.min(part.length, end - at))
    }
    if (next >= end) return
    at = next
  }
}

/** One notebook's files, in the order they were stored. */
class Shelf {
  readonly byId = new Map<string, HeldFile>()
  bytes = 0
}

export interface MemoryFilesOptions extends Partial<FileLimits> {
  /** The role `user` holds in the notebook kept under `notebook` now; for writerFor. */
  roleOf?: (notebook: string, user: string) => Role | undefined
  /** The clock of a file's `created`; Date.now by default. */
  now?: () => number
  /** The room the files take beside the notes of their store (MAX_STORE_BYTES); none without. */
  room?: FileRoom
}

/**
 * Every notebook's files in memory: each file's bytes in the pieces they came in (so the file itself
 * is what an upload costs), under its notebook, counted toward the notebook's and the service's caps of
 * files, and, with a `room`, toward the store's byte cap beside its notes, at its byte length.
 * Each put is kept in one synchronous step once its bytes have arrived, so the caps, the
 * writer's role and the same bytes stored twice are checked with nothing in between. Unfinished
 * uploads (MemoryUploads made with this space's uploadRoom) count toward the same caps as
 * their bytes arrive (HeldUploads).
 */
export class MemoryFiles implements FileSpace {
  readonly #limits: FileLimits
  readonly #roleOf: MemoryFilesOptions['roleOf']
  readonly #now: () => number
  readonly #room: FileRoom | undefined
  readonly #shelves = new Map<string, Shelf>()
  #bytes = 0
  #files = 0
  #sequence = 0
  /**
   * The bytes of unfinished uploads, counted with the files against the caps: the UploadRoom of
   * the MemoryUploads whose files come here.
   */
  readonly uploadRoom: HeldUploads

  constructor(options: MemoryFilesOptions = {}) {
    const { roleOf, now = Date.now, room, ...limits } = options
    this.#limits = { ...FILE_LIMIT_DEFAULTS, ...limits }
    this.#roleOf = roleOf
    this.#now = now
    this.#room = room
    this.uploadRoom = new HeldUploads(
      {
        notebookBytes: (notebook) => this.#shelves.get(notebook)?.bytes ?? 0,
        serviceBytes: () => this.#bytes,
      },
      this.#limits,
    )
  }

  files(notebook: string): NotebookFiles {
    return this.#filesOf(notebook, () => {})
  }

  writerFor(notebook: string, user: string): NotebookFiles {
    const roleOf = this.#roleOf
    return this.#filesOf(notebook, () => {
      const role = roleOf?.(notebook, user)
      if (role !== 'owner' && role !== 'editor') throw new AccessLostError(role)
    })
  }

  notebooks(): readonly string[] {
    return [...this.#shelves.keys()]
  }

  totals(): FileTotals {
    return { files: this.#files, bytes: this.#bytes }
  }

  /** Removes every file of the notebook (the notebook is gone) and gives back their room. */
  drop(notebook: string): void {
    const shelf = this.#shelves.get(notebook)
    if (shelf === undefined) return
    this.#bytes -= shelf.bytes
    this.#files -= shelf.byId.size
    this.#room?.add(-shelf.bytes)
    this.#shelves.delete(notebook)
  }

  #filesOf(notebook: string, check: () => void): NotebookFiles {
    const shelfOf = () => this.#shelves.get(notebook)
    return {
      put: async (type, body, { created, upload } = {}) => {
        const chunks: Buffer[] = []
        // The store's room is asked as the bytes arrive once they pass the notebook's largest
        // file (until then they may be one it holds, which takes no more room), and for all of
        // them once they are known to be a new file.
        const largest = largestOf(shelfOf())
        const room = (more: number, known = false) => {
          this.uploadRoom.check(notebook, more, upload)
          if (known || more > largest) this.#room?.check(more, body)
        }
        const { id, size } = await takeIn(
          body,
          this.#limits.maxFileBytes,
          (chunk) => {
            // A copy of each piece as it comes (the body's owner may use its buffer again), kept
            // as it is: the file costs its bytes once, never twice while they are joined.
            chunks.push(Buffer.from(chunk))
          },
          room,
        )
        check()
        let shelf = shelfOf()
        const held = shelf?.byId.get(id)
        if (held !== undefined && shelf !== undefined) {
          if (upload !== undefined) this.uploadRoom.release(upload)
          // Put again: its grace, were no note to refer to it, runs from now.
          const record = { ...held.record, touched: this.#now() }
          shelf.byId.set(id, { record, parts: held.parts })
          return record
        }
        room(size, true)
        if (shelf === undefined) {
          shelf = new Shelf()
          this.#shelves.set(notebook, shelf)
        }
        const record: FileRecord = {
          id,
          size,
          type,
          created: created ?? this.#now(),
          sequence: ++this.#sequence,
        }
        shelf.byId.set(id, { record, parts: chunks })
        shelf.bytes += size
        this.#bytes += size
        this.#files += 1
        this.#room?.add(size)
        if (upload !== undefined) this.uploadRoom.release(upload)
        return record
      },
      stat: (id) => shelfOf()?.byId.get(id)?.record,
      read: (id, start, end) => {
        const held = shelfOf()?.byId.get(id)
        if (held === undefined) return undefined
        return Readable.from(rangeOf(held.parts, start, end), { objectMode: false })
      },
      list: (limit, after) => filePage(recordsOf(shelfOf()), limit, after),
      delete: (id) => {
        check()
        const shelf = shelfOf()
        const held = shelf?.byId.get(id)
        if (shelf === undefined || held === undefined) return false
        shelf.byId.delete(id)
        shelf.bytes -= held.record.size
        this.#bytes -= held.record.size
        this.#files -= 1
        this.#room?.add(-held.record.size)
        if (shelf.byId.size === 0) this.#shelves.delete(notebook)
        return true
      },
      totals: () => {
        const shelf = shelfOf()
        return { files: shelf?.byId.size ?? 0, bytes: shelf?.bytes ?? 0 }
      },
    }
  }
}

/** The size of the shelf's largest file; -1 without any. */
function largestOf(shelf: Shelf | undefined): number {
  let largest = -1
  for (const record of recordsOf(shelf)) largest = Math.max(largest, record.size)
  return largest
}

/** A shelf's records in the order stored: a Map keeps them so, which is sequence order. */
function* recordsOf(shelf: Shelf | undefined): Generator<FileRecord> {
  if (shelf === undefined) return
  for (const { record } of shelf.byId.values()) yield record
}
