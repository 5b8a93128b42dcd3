import { closeSync, fdatasync, fsyncSync, ftruncateSync, openSync, readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { readIfThere, replaceFile, replaceFileSync, writeAll } from '../../durable/file-steps.js'
import { GroupCommit } from '../../durable/group-commit.js'
import { releasePidLock } from '../../durable/pid-lock.js'
import { takeLock } from './file-lock.js'
import { JournalOpenError } from './journal-open-error.js'
import { type DecodedRecord, decodeJournal, encodeHeader } from './record-format.js'

const dataSync = promisify(fdatasync)

export interface JournalFileOptions {
  path: string
  /** The epoch a new journal is given. */
  newEpoch: () => string
  /** UTF-8 bytes of the notes held now: the journal is compacted past twice this. */
  liveBytes: () => number
  /**
   * The records of everything the store holds now, the appends not yet durable included (the
   * snapshot a compaction writes in place of the journal).
   */
  image: () => Buffer[]
  /**
   * Called, synchronously, when appends were lost (a write or fsync failed): the file is back at
   * its last durable length (`durableBytes()`), and every append not yet durable is about to be
   * rejected; the store rebuilds itself from the file.
   */
  onLost: () => void
  /** No compaction below this size; default 1 MiB. */
  compactMinBytes?: number
}

export interface OpenedJournal {
  file: JournalFile
  epoch: string
  records: readonly DecodedRecord[]
  /** A torn last record that opening cut off (a crash mid-write): where, and its bytes. */
  dropped: { offset: number; bytes: number } | undefined
  /** Whether the journal was absent (or empty) and opening made it. */
  created: boolean
}

interface Append {
  readonly frame: Buffer
  resolve(): void
  reject(err: unknown): void
}

/**
 * The journal on disk (DATA_FILE): opened under a lock, appended to with group commit (every
 * append queued while a write and its fsync run goes into the next single write and fsync), and
 * compacted as SQLite commits and Redis rewrites its AOF: a snapshot written to `path.tmp`,
 * fsynced, renamed over `path`, the directory fsynced. Appends made meanwhile wait for the rename
 * and go to the new file.
 */
export class JournalFile {
  readonly #path: string
  readonly #lockPath: string
  readonly #epoch: string
  readonly #options: JournalFileOptions
  readonly #compactMinBytes: number
  #fd: number
  /** The bytes known to be on disk: every append acknowledged lies before it. */
  #durable: number
  /** The file may hold bytes past `durable` (a failed write): cut before the next write. */
  #dirty = false
  /** No compaction until the file is this long: twice the last image written (or more after a failed one). */
  #compactAt = 0
  readonly #appends = new GroupCommit<Append>((batch) => this.#commit(batch))
  #closed = false
  /** The last append, settled either way. */
  #last: Promise<void> = Promise.resolve()

  private constructor(options: JournalFileOptions, fd: number, epoch: string, durable: number) {
    this.#options = options
    this.#path = options.path
    this.#lockPath = `${options.path}.lock`
    this.#compactMinBytes = options.compactMinBytes ?? 1 << 20
    this.#fd = fd
    this.#epoch = epoch
    this.#durable = durable
  }

  /**
   * Takes the lock, reads the journal (creating it when absent or empty), cuts a torn tail off.
   * @throws JournalOpenError, one line: a directory, a foreign file, damage at a byte offset, a
   * file in use by another process, or the file system's refusal.
   */
  static open(options: JournalFileOptions): OpenedJournal {
    const { path } = options
    takeLock(`${path}.lock`, path)
    try {
      let bytes = readIfThere(path)
      const created = bytes.length === 0
      if (created) {
        bytes = encodeHeader(options.newEpoch())
        replaceFileSync(path, [bytes])
      }
      const decoded = decodeJournal(bytes)
      if (decoded === 'foreign') {
        throw new JournalOpenError(`DATA_FILE ${path} is not a notes-service journal.`)
      }
      if (!decoded.ok) {
        throw new JournalOpenError(
          `DATA_FILE ${path} is damaged at byte ${decoded.offset}: ${decoded.reason}; restore it from a backup or move it away.`,
        )
      }
      const fd = openSync(path, 'r+')
      let dropped: OpenedJournal['dropped']
      if (decoded.end < bytes.length) {
        dropped = { offset: decoded.end, bytes: bytes.length - decoded.end }
        ftruncateSync(fd, decoded.end)
        fsyncSync(fd)
      }
      const file = new JournalFile(options, fd, decoded.epoch, decoded.end)
      return { file, epoch: decoded.epoch, records: decoded.records, dropped, created }
    } catch (err) {
      releasePidLock(`${path}.lock`)
      throw JournalOpenError.from(err, path)
    }
  }

  /** The journal's bytes up to the last durable one. */
  durableBytes(): Buffer {
    return readFileSync(this.#path).subarray(0, this.#durable)
  }

  /** Bytes on disk now. */
  get size(): number {
    return this.#durable
  }

  /**
   * Queues one record (encodeRecord) and resolves once it is on disk (written and fsynced),
   * rejects with the file system's error when it could not be.
   */
  append(frame: Buffer): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('the journal is closed'))
    const appended = new Promise<void>((resolve, reject) => {
      this.#appends.push({ frame, resolve, reject })
    })
    this.#last = appended.catch(() => {})
    return appended
  }

  /** Resolves once every append queued so far is durable or lost. */
  settled(): Promise<void> {
    return this.#appends.busy ? this.#last : Promise.resolve()
  }

  /** Waits for every append queued, then closes the file and removes the lock. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#appends.idle()
    closeSync(this.#fd)
    releasePidLock(this.#lockPath)
  }

  /** One batch of appends (GroupCommit): written and fsynced, or lost. */
  async #commit(batch: Append[]): Promise<void> {
    try {
      if (!(this.#compactionDue() && (await this.#compact()))) await this.#write(batch)
    } catch (err) {
      this.#lose(batch, err)
      return
    }
    for (const append of batch) append.resolve()
  }

  async #write(batch: readonly Append[]): Promise<void> {
    if (this.#dirty) {
      ftruncateSync(this.#fd, this.#durable)
      this.#dirty = false
    }
    const bytes =
      batch.length === 1 ? (batch[0] as Append).frame : Buffer.concat(batch.map((a) => a.frame))
    this.#dirty = true
    await writeAll(this.#fd, bytes, this.#durable)
    await dataSync(this.#fd)
    this.#dirty = false
    this.#durable += bytes.length
  }

  /**
   * A batch failed (ENOSPC, EIO, ...): it and every append queued after it are rejected, since the
   * store has applied them all on top of it; the file is cut back to what is durable and the store
   * rebuilt from it, synchronously, so no write slips in between.
   */
  #lose(batch: readonly Append[], error: unknown): void {
    const lost = [...batch, ...this.#appends.takeQueued()]
    try {
      ftruncateSync(this.#fd, this.#durable)
      this.#dirty = false
    } catch {
      // Cut again before the next write.
    }
    this.#options.onLost()
    for (const append of lost) append.reject(error)
  }

  #compactionDue(): boolean {
    return (
      this.#durable >= this.#compactAt &&
      this.#durable > Math.max(this.#compactMinBytes, 2 * this.#options.liveBytes())
    )
  }

  /**
   * Writes the store's image (which holds the batch being committed) as the new journal. False
   * when that failed before the rename: the old file is intact and the batch is appended to it.
   */
  async #compact(): Promise<boolean> {
    const bytes = Buffer.concat([encodeHeader(this.#epoch), ...this.#options.image()])
    let fd: number
    try {
      fd = await replaceFile(this.#path, bytes)
    } catch {
      this.#compactAt = Math.ceil(this.#durable * 1.5)
      return false
    }
    // The descriptor written is the file now at `path`: nothing after the rename can fail.
    const old = this.#fd
    this.#fd = fd
    this.#durable = bytes.length
    // The image holds the change history and the idempotency keys besides the notes, and can be
    // larger than twice the notes alone (1,000 small notes, 10,000 changes kept): the next
    // compaction waits until the file has doubled since, or every write would compact again.
    this.#compactAt = 2 * bytes.length
    // replaceFile fsynced the directory; one that refuses leaves the rename to the file system's
    // next flush, which is what an error here cannot improve on.
    closeSync(old)
    return true
  }
}
