import { rmSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { encodeRecord } from '../../durable/record-frame.js'
import type { Role } from '../directory.js'
import {
  FILE_LIMIT_DEFAULTS,
  type FileLimits,
  type FileRecord,
  type FileSpace,
  type FileTotals,
  isFileId,
  type NotebookFiles,
  type PutOptions,
} from '../files.js'
import { takeIn } from '../kernel/file-intake.js'
import { filePage } from '../kernel/file-pages.js'
import { HeldUploads } from '../kernel/held-uploads.js'
import { AccessLostError, SHARED_NOTEBOOK, StoreUnavailableError } from '../types.js'
import {
  type ExpectedFolder,
  FilesFolder,
  holdsFiles,
  sweepFolder,
  TempFile,
} from './files-folder.js'
import { JournalOpenError } from './journal-open-error.js'
import type { FilePayload } from './journal-records.js'
import { writeError } from './journaled-store.js'

/** What the files need of the journal that records them (JournaledNotebooks). */
export interface FilesHost {
  /** Appends one record; settles once it is durable or lost (the host then rebuilds the index). */
  append(bytes: Buffer): Promise<void>
  /** Settles once every append made before it has. */
  settled(): Promise<void>
  readonly closed: boolean
}

export interface JournalFilesOptions {
  /** The journal (DATA_FILE), for start-up's messages; the files live in `<path>.files`. */
  path: string
  limits?: Partial<FileLimits>
  /** The role `user` holds in the notebook kept under `notebook` now; for writerFor. */
  roleOf: (notebook: string, user: string) => Role | undefined
  /** The clock of a file's `created`; Date.now by default. */
  now?: () => number
}

/** One notebook's files, in the order stored (which is sequence order). */
class Shelf {
  readonly byId = new Map<string, FileRecord>()
  bytes = 0
}

const DISK_REFUSED = 'The store could not write the file to its disk.'

/**
 * The files of a journal (DATA_FILE): their bytes in a folder beside it (files-folder.ts), what
 * they are (id, size, type, time, sequence, notebook) in records of the journal, and in memory an
 * index of them that replay rebuilds.
 *
 * A put streams its body to a temporary file (each chunk written before the next is read), fsyncs
 * it, checks the writer's role, the same bytes held already and the caps, renames it over its
 * id's name and fsyncs the folder; then, in one synchronous step, checks all three again, adds
 * the file to the index and appends its record, and answers once that record is durable. So a
 * record never names bytes that are not on disk, a crash leaves at most bytes without a record
 * (start-up removes them), and a failure part way leaves nothing. A removal (a delete, or the
 * notebook's removal) takes the file out of the index and appends its record first, and unlinks
 * the bytes only once that record is durable, and only if no record or put holds that name again
 * by then: if the disk loses the record, the index (rebuilt from the journal) and the bytes still
 * agree.
 *
 * Start-up (`recover`) removes temporary files and files without a record, and stops, with one
 * line, at a recorded file that is missing or not of its recorded size: guessing past it would
 * serve a file that is not the one stored, or lose one silently.
 */
export class JournalFiles implements FileSpace {
  readonly #host: FilesHost
  readonly #path: string
  readonly #limits: FileLimits
  readonly #roleOf: JournalFilesOptions['roleOf']
  readonly #now: () => number
  readonly #folder: FilesFolder
  #shelves = new Map<string, Shelf>()
  #bytes = 0
  #files = 0
  #sequence = 0
  /** Records are being replayed: a notebook dropped meanwhile keeps its bytes (start-up sweeps). */
  #replaying = false
  /** Paths a put renamed (or is renaming) a file to and has not yet recorded or given up: kept. */
  readonly #claims = new Map<string, number>()
  /** Notebook folders with uploads in flight: not removed. */
  readonly #uploads = new Map<string, number>()
  /**
   * The bytes of unfinished uploads, counted with the files against the caps: the UploadRoom of
   * the UploadFolder whose files come here.
   */
  readonly uploadRoom: HeldUploads

  constructor(host: FilesHost, options: JournalFilesOptions) {
    this.#host = host
    this.#path = options.path
    this.#limits = { ...FILE_LIMIT_DEFAULTS, ...options.limits }
    this.#roleOf = options.roleOf
    this.#now = options.now ?? Date.now
    this.#folder = new FilesFolder(`${options.path}.files`)
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
    return this.#filesOf(notebook, () => {
      const role = this.#roleOf(notebook, user)
      if (role !== 'owner' && role !== 'editor') throw new AccessLostError(role)
    })
  }

  notebooks(): readonly string[] {
    return [...this.#shelves.keys()]
  }

  totals(): FileTotals {
    return { files: this.#files, bytes: this.#bytes }
  }

  /**
   * Removes every file of the notebook (the notebook is gone) from the index and gives back their
   * room; their bytes go once the record that removed the notebook, appended in the same step, is
   * durable.
   */
  drop(notebook: string): void {
    const shelf = this.#shelves.get(notebook)
    if (shelf !== undefined) {
      this.#bytes -= shelf.bytes
      this.#files -= shelf.byId.size
      this.#shelves.delete(notebook)
    }
    if (this.#replaying) return
    const ids = [...(shelf?.byId.keys() ?? [])]
    // A turn later the directory's record is queued: settled() then covers it.
    void Promise.resolve()
      .then(() => this.#host.settled())
      .then(() => {
        for (const id of ids) this.#removeIfLoose(notebook, id)
        const folder = this.#folder.folderOf(notebook)
        if (!this.#shelves.has(notebook) && !this.#uploads.has(folder)) {
          this.#folder.removeIfEmpty(folder)
        }
      })
  }

  /** Starts over on an empty index, for the journal to replay into (`replay`, then `ready`). */
  reset(): void {
    this.#shelves = new Map()
    this.#bytes = 0
    this.#files = 0
    this.#sequence = 0
    this.#replaying = true
  }

  /** Applies a record of files. @throws Error when it does not follow from the ones before. */
  replay(payload: FilePayload): void {
    if (payload.t === 'fs') {
      if (!Number.isSafeInteger(payload.s)) throw new Error('a file sequence that is not a number')
      this.#sequence = Math.max(this.#sequence, payload.s)
      return
    }
    const notebook = payload.nb ?? SHARED_NOTEBOOK
    if (typeof notebook !== 'string' || typeof payload.id !== 'string' || !isFileId(payload.id)) {
      throw new Error('a file record without its notebook or id')
    }
    const held = this.#shelves.get(notebook)?.byId.get(payload.id)
    if (payload.t === 'fd') {
      if (held === undefined) throw new Error('the removal of a file not stored')
      this.#unshelve(notebook, held)
      return
    }
    const { id, z: size, ty: type, m: created, s: sequence } = payload
    if (
      !Number.isSafeInteger(size) ||
      size < 0 ||
      typeof type !== 'string' ||
      !Number.isFinite(created) ||
      !Number.isSafeInteger(sequence)
    ) {
      throw new Error('a file record without its size, type, time or sequence')
    }
    if (held !== undefined) throw new Error('a file stored twice')
    this.#shelve(notebook, { id, size, type, created, sequence })
    this.#sequence = Math.max(this.#sequence, sequence)
  }

  /** The replay is over: removals from now on remove bytes too. */
  ready(): void {
    this.#replaying = false
  }

  /** The records of the index as it is now, for a compaction's image: the sequence, then every file. */
  image(): Buffer[] {
    const files = [...this.#shelves].flatMap(([notebook, shelf]) =>
      [...shelf.byId.values()].map((record) => [notebook, record] as const),
    )
    return filesImage(this.#sequence, files)
  }

  /**
   * Start-up, after the replay: removes what crashes left in the files folder (temporary files,
   * files without a record) and checks that every recorded file is there at its size. `created`:
   * the journal was just made, so a folder that holds files is another journal's.
   * @throws JournalOpenError with one line
   */
  recover(created: boolean): void {
    const { root } = this.#folder
    let problem: ReturnType<typeof sweepFolder>
    try {
      if (created && holdsFiles(root)) {
        throw new JournalOpenError(
          `DATA_FILE ${this.#path} is a new journal, but ${root} holds files of another; restore the journal they belong to, or move the folder away.`,
        )
      }
      const expected = new Map<string, ExpectedFolder>()
      for (const [notebook, shelf] of this.#shelves) {
        const sizes = new Map<string, number>()
        for (const record of shelf.byId.values()) sizes.set(record.id, record.size)
        expected.set(this.#folder.nameOf(notebook), sizes)
      }
      problem = sweepFolder(root, expected)
    } catch (err) {
      if (err instanceof JournalOpenError) throw err
      const { code, message } = err as NodeJS.ErrnoException
      const reason = code === undefined ? message : `${code}: ${message.replace(/^\w+: /, '')}`
      throw new JournalOpenError(
        `cannot open the files of DATA_FILE ${this.#path} in ${root}: ${reason.split('\n')[0]}`,
      )
    }
    if (problem === undefined) return
    const what =
      problem.found === undefined
        ? `is missing (its record says ${problem.size} bytes)`
        : `holds ${problem.found} bytes where its record says ${problem.size}`
    throw new JournalOpenError(
      `DATA_FILE ${this.#path}: the file ${problem.path} ${what}; restore ${root} from the backup the journal came from.`,
    )
  }

  #filesOf(notebook: string, check: () => void): NotebookFiles {
    const shelfOf = () => this.#shelves.get(notebook)
    return {
      put: (type, body, options) => this.#put(notebook, check, type, body, options ?? {}),
      stat: (id) => shelfOf()?.byId.get(id),
      read: (id, start, end) => this.#read(notebook, id, start, end),
      list: (limit, after) => filePage(shelfOf()?.byId.values() ?? [], limit, after),
      delete: (id) => this.#delete(notebook, check, id),
      totals: () => {
        const shelf = shelfOf()
        return { files: shelf?.byId.size ?? 0, bytes: shelf?.bytes ?? 0 }
      },
    }
  }

  async #put(
    notebook: string,
    check: () => void,
    type: string,
    body: AsyncIterable<Uint8Array>,
    options: PutOptions,
  ): Promise<FileRecord> {
    this.#refuseIfClosed()
    check()
    const folder = this.#folder.folderOf(notebook)
    const room = (more: number) => this.uploadRoom.check(notebook, more, options.upload)
    count(this.#uploads, folder, 1)
    let temp: TempFile | undefined
    try {
      const file = await onDisk(this.#folder.make(folder).then(() => TempFile.open(folder)))
      temp = file
      const { id, size } = await takeIn(
        body,
        this.#limits.maxFileBytes,
        (chunk) => onDisk(file.write(chunk)),
        room,
      )
      await onDisk(file.seal())
      // Checked before the rename, so a refusal costs no rename; and again with the record.
      check()
      const held = this.#shelves.get(notebook)?.byId.get(id)
      if (held !== undefined) return this.#putAgain(notebook, held, options.upload)
      room(size)
      const path = this.#folder.pathOf(notebook, id)
      count(this.#claims, path, 1)
      try {
        await onDisk(file.moveTo(path))
        return await this.#record(notebook, check, { id, size, type }, room, options)
      } finally {
        count(this.#claims, path, -1)
        this.#removeIfLoose(notebook, id)
      }
    } finally {
      await temp?.discard()
      count(this.#uploads, folder, -1)
    }
  }

  /**
   * `file`, whose bytes were put again: touched now (in the index only: a restart gives every
   * file the sweep's grace from the start-up anyway), and what upload `upload` became.
   */
  #putAgain(notebook: string, file: FileRecord, upload: string | undefined): FileRecord {
    const touched: FileRecord = { ...file, touched: this.#now() }
    this.#shelves.get(notebook)?.byId.set(file.id, touched)
    return this.#became(touched, upload)
  }

  /** `file`, which upload `upload` (if any) became: its bytes count as the file's alone now. */
  #became(file: FileRecord, upload: string | undefined): FileRecord {
    if (upload !== undefined) this.uploadRoom.release(upload)
    return file
  }

  /**
   * The file whose bytes are in place, recorded: the role, the same bytes and the caps checked,
   * the index changed and the record appended in one synchronous step; answered once durable.
   */
  async #record(
    notebook: string,
    check: () => void,
    file: { id: string; size: number; type: string },
    room: (more: number) => void,
    options: PutOptions,
  ): Promise<FileRecord> {
    this.#refuseIfClosed()
    check()
    const held = this.#shelves.get(notebook)?.byId.get(file.id)
    if (held !== undefined) return this.#putAgain(notebook, held, options.upload)
    room(file.size)
    const record: FileRecord = {
      ...file,
      created: options.created ?? this.#now(),
      sequence: ++this.#sequence,
    }
    this.#shelve(notebook, record)
    try {
      await this.#host.append(frame(storedPayload(notebook, record)))
    } catch (err) {
      throw writeError(err, DISK_REFUSED)
    }
    // Counted twice until the record is durable (never past a cap), then as the file's alone.
    return this.#became(record, options.upload)
  }

  async #delete(notebook: string, check: () => void, id: string): Promise<boolean> {
    this.#refuseIfClosed()
    check()
    const held = this.#shelves.get(notebook)?.byId.get(id)
    if (held === undefined) return false
    this.#unshelve(notebook, held)
    const payload: Extract<FilePayload, { t: 'fd' }> = { t: 'fd', id }
    if (notebook !== SHARED_NOTEBOOK) payload.nb = notebook
    try {
      await this.#host.append(frame(payload))
    } catch (err) {
      throw writeError(err, 'The store could not write the file’s removal to its disk.')
    }
    this.#removeIfLoose(notebook, id)
    return true
  }

  async #read(
    notebook: string,
    id: string,
    start: number,
    end: number,
  ): Promise<Readable | undefined> {
    const held = () => this.#shelves.get(notebook)?.byId.has(id) === true
    if (!held()) return undefined
    if (end <= start) return Readable.from([], { objectMode: false })
    let handle: FileHandle
    try {
      // Opened now, so a removal after this answer leaves the stream reading its bytes.
      handle = await open(this.#folder.pathOf(notebook, id), 'r')
    } catch (err) {
      // Removed between the look-up and the open.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !held()) return undefined
      throw err
    }
    // 256 KiB reads: a quarter of the reads and socket writes of the default 64 KiB, for the same
    // bytes (a 100 MiB download: 400 of each).
    return handle.createReadStream({ start, end: end - 1, highWaterMark: 256 * 1024 })
  }

  #shelve(notebook: string, record: FileRecord): void {
    let shelf = this.#shelves.get(notebook)
    if (shelf === undefined) {
      shelf = new Shelf()
      this.#shelves.set(notebook, shelf)
    }
    shelf.byId.set(record.id, record)
    shelf.bytes += record.size
    this.#bytes += record.size
    this.#files += 1
  }

  #unshelve(notebook: string, record: FileRecord): void {
    const shelf = this.#shelves.get(notebook) as Shelf
    shelf.byId.delete(record.id)
    shelf.bytes -= record.size
    this.#bytes -= record.size
    this.#files -= 1
    if (shelf.byId.size === 0) this.#shelves.delete(notebook)
  }

  /**
   * Unlinks the bytes of (notebook, id) unless the index holds them or a put is placing them:
   * checked and done in one synchronous step, so no put's rename slips in between.
   */
  #removeIfLoose(notebook: string, id: string): void {
    if (this.#shelves.get(notebook)?.byId.has(id)) return
    const path = this.#folder.pathOf(notebook, id)
    if (this.#claims.has(path)) return
    try {
      rmSync(path, { force: true })
    } catch {
      // Left for start-up, which removes files without a record.
    }
  }

  #refuseIfClosed(): void {
    if (this.#host.closed) throw new StoreUnavailableError('The store is shutting down.')
  }
}

/**
 * The records that make a files index, as a compaction's image (and an import's journal) holds it:
 * the last sequence given, then every file with its notebook.
 */
export function filesImage(
  sequence: number,
  files: Iterable<readonly [notebook: string, record: FileRecord]>,
): Buffer[] {
  const frames = [frame({ t: 'fs', s: sequence })]
  for (const [notebook, record] of files) frames.push(frame(storedPayload(notebook, record)))
  return frames
}

function storedPayload(notebook: string, record: FileRecord): FilePayload {
  const { id, size: z, type: ty, created: m, sequence: s } = record
  return notebook === SHARED_NOTEBOOK
    ? { t: 'f', id, z, ty, m, s }
    : { t: 'f', id, z, ty, m, s, nb: notebook }
}

function frame(payload: FilePayload): Buffer {
  return encodeRecord(JSON.stringify(payload))
}

/** A step on the disk, its refusal told as the store's (507 when full, else 503). */
async function onDisk<T>(step: Promise<T>): Promise<T> {
  try {
    return await step
  } catch (err) {
    throw writeError(err, DISK_REFUSED)
  }
}

/** Adds `by` to the count of `key`, forgetting it at 0. */
function count(counts: Map<string, number>, key: string, by: number): void {
  const now = (counts.get(key) ?? 0) + by
  if (now === 0) counts.delete(key)
  else counts.set(key, now)
}
