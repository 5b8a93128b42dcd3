import {
  closeSync,
  fdatasync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  rmSync,
} from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { readIfThere, replaceFile, replaceFileSync, writeAll } from '../../durable/file-steps.js'
import { GroupCommit } from '../../durable/group-commit.js'
import { releasePidLock } from '../../durable/pid-lock.js'
import { encodeRecord } from '../../durable/record-frame.js'
import {
  asStorageError,
  bytesFileKeys,
  bytesFolder,
  EMPTY,
  HEADER,
  liveBytes,
  payloadOf,
  readBytesFile,
  removeBytesFile,
  replay,
  snapshotRecords,
  takeLock,
  writeBytesFile,
} from './file-journal.js'
import {
  applyWrites,
  checkStorageKey,
  closedError,
  decodeTexts,
  type EncodedWrite,
  encodeWrites,
  type ReplicaContents,
  type ReplicaStorage,
  ReplicaStorageError,
  type ReplicaStorages,
  type ReplicaTexts,
  type ReplicaWrite,
} from './storage.js'

/**
 * A replica's storage in one file, for Node only (notes-service/client/file-storage, so that a
 * browser never meets node:fs). The file is a journal after LevelDB's log: a header line, then one
 * record per write, `[u32 BE length][u32 BE crc32][payload]`, the payload the write's changes as
 * a line per change: 'P\tnotes\t"n:1"\t{"id":1}' puts, 'D\toutbox\t"0001"' deletes, 'C\tmeta' clears. A write
 * resolves after its record is fsynced; writes made meanwhile share the next fsync (group
 * commit). A torn last record (a crash mid-write) is dropped on open; damage before the end is an
 * error naming its byte offset. Once the file passes twice the live data it is rewritten as
 * SQLite commits: a snapshot to `path.tmp`, fsync, rename, fsync of the directory. A lock file
 * (`path.lock`, holding the owner's identity: durable/pid-lock.ts) keeps a second opener out.
 * The bytes of files waiting to be uploaded are files of their own beside it, in `path.files/`,
 * each written to a temporary name, fsynced and renamed into place.
 */

const dataSync = promisify(fdatasync)

export interface FileReplicaStorageOptions {
  /** No compaction while the file is smaller than this; default 1 MiB. */
  compactMinBytes?: number
}

interface Pending {
  readonly changes: readonly EncodedWrite[]
  /** EMPTY for a refused or empty write. */
  readonly frame: Buffer
  readonly refused?: unknown
  resolve(): void
  reject(err: unknown): void
}

export class FileReplicaStorage implements ReplicaStorage {
  readonly #path: string
  readonly #compactMinBytes: number
  #fd: number
  /** Every table's values as JSON text, as the durable writes left them. */
  #texts: ReplicaTexts
  /** Bytes of keys and values held: the file is compacted past twice this. */
  #live: number
  /** The file's length up to its last durable record. */
  #size: number
  /** No compaction before the file is this long (raised after a failed one, so as not to retry each write). */
  #compactAt = 0
  readonly #writes = new GroupCommit<Pending>((batch) => this.#commit(batch))
  #closed = false
  /** Compactions done, and fsyncs of appends (for tests and the bench). */
  compactions = 0
  syncs = 0
  /** A torn last record that opening cut off: where it started and how long it was. */
  readonly dropped: { offset: number; bytes: number } | undefined

  private constructor(
    path: string,
    options: FileReplicaStorageOptions,
    fd: number,
    texts: ReplicaTexts,
    size: number,
    dropped: FileReplicaStorage['dropped'],
  ) {
    this.#path = path
    this.#compactMinBytes = options.compactMinBytes ?? 1 << 20
    this.#fd = fd
    this.#texts = texts
    this.#live = liveBytes(texts)
    this.#size = size
    this.dropped = dropped
  }

  /**
   * Takes the lock, reads the file (creating it when absent), cuts a torn tail off.
   * @throws ReplicaStorageError: `locked` (another process, or another storage in this one, has
   * it open), `damaged` (not a replica file, or damaged at a byte offset), `io`.
   */
  static async open(
    path: string,
    options: FileReplicaStorageOptions = {},
  ): Promise<FileReplicaStorage> {
    const lock = `${path}.lock`
    takeLock(lock, path)
    try {
      let bytes = readIfThere(path)
      if (bytes.length === 0) {
        replaceFileSync(path, [HEADER])
        bytes = HEADER
      }
      const { texts, end } = replay(bytes, path)
      const fd = openSync(path, 'r+')
      let dropped: FileReplicaStorage['dropped']
      if (end < bytes.length) {
        dropped = { offset: end, bytes: bytes.length - end }
        ftruncateSync(fd, end)
        fsyncSync(fd)
      }
      return new FileReplicaStorage(path, options, fd, texts, end, dropped)
    } catch (err) {
      releasePidLock(lock)
      throw asStorageError(err, path)
    }
  }

  /** Resolves once every write called before it has settled. */
  async load(): Promise<ReplicaContents> {
    if (this.#closed) throw closedError()
    await this.#writes.idle()
    return decodeTexts(
      this.#texts,
      (table, key, cause) =>
        new ReplicaStorageError(
          'damaged',
          `${this.#path} holds a ${table} value for ${JSON.stringify(key)} that is not JSON.`,
          { cause },
        ),
    )
  }

  write(changes: readonly ReplicaWrite[]): Promise<void> {
    if (this.#closed) return Promise.reject(closedError())
    let encoded: EncodedWrite[] | undefined
    let refused: unknown
    try {
      encoded = encodeWrites(changes)
    } catch (err) {
      refused = err
    }
    // A refused write (a value that is not JSON) joins the queue too, so writes settle in call order.
    return new Promise<void>((resolve, reject) => {
      this.#writes.push(
        encoded === undefined
          ? { changes: [], frame: EMPTY, refused, resolve, reject }
          : {
              changes: encoded,
              // An empty write has nothing to write, and settles in its turn.
              frame: encoded.length === 0 ? EMPTY : encodeRecord(payloadOf(encoded)),
              resolve,
              reject,
            },
      )
    })
  }

  async putBytes(key: string, bytes: Blob): Promise<void> {
    await this.#bytes(() => writeBytesFile(bytesFolder(this.#path), checkStorageKey(key), bytes))
  }

  async getBytes(key: string): Promise<Blob | undefined> {
    return this.#bytes(() => readBytesFile(bytesFolder(this.#path), checkStorageKey(key)))
  }

  async deleteBytes(key: string): Promise<void> {
    await this.#bytes(() => removeBytesFile(bytesFolder(this.#path), checkStorageKey(key)))
  }

  async bytesKeys(): Promise<string[]> {
    return this.#bytes(() => bytesFileKeys(bytesFolder(this.#path)))
  }

  /** A step on the bytes folder, refused once closed, its failure in the storage's words. */
  async #bytes<T>(step: () => Promise<T>): Promise<T> {
    if (this.#closed) throw closedError()
    try {
      return await step()
    } catch (err) {
      throw asStorageError(err, bytesFolder(this.#path))
    }
  }

  /** Waits for the writes called before it, then closes the file and removes the lock. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    await this.#writes.idle()
    closeSync(this.#fd)
    releasePidLock(`${this.#path}.lock`)
  }

  /** One batch of writes (GroupCommit): appended and fsynced, applied, then settled. */
  async #commit(batch: Pending[]): Promise<void> {
    try {
      await this.#append(batch)
    } catch (err) {
      this.#recover()
      const error = asStorageError(err, this.#path)
      for (const pending of batch) pending.reject(pending.refused ?? error)
      return
    }
    for (const pending of batch) this.#live += applyWrites(this.#texts, pending.changes)
    if (
      this.#size >= this.#compactAt &&
      this.#size > Math.max(this.#compactMinBytes, 2 * this.#live)
    ) {
      // A failed compaction (no room for the copy) leaves the old file, which holds every write.
      await this.#compact().catch(() => {
        this.#compactAt = Math.ceil(this.#size * 1.5)
      })
    }
    for (const pending of batch) {
      if (pending.refused !== undefined) pending.reject(pending.refused)
      else pending.resolve()
    }
  }

  async #append(batch: readonly Pending[]): Promise<void> {
    const bytes =
      batch.length === 1 ? (batch[0] as Pending).frame : Buffer.concat(batch.map((p) => p.frame))
    if (bytes.length === 0) return
    await writeAll(this.#fd, bytes, this.#size)
    await dataSync(this.#fd)
    this.syncs++
    this.#size += bytes.length
  }

  /** A write or fsync failed: the file is cut back to its durable length, the texts kept. */
  #recover(): void {
    try {
      ftruncateSync(this.#fd, this.#size)
    } catch {
      // The next append writes at #size again, over whatever is there.
    }
  }

  async #compact(): Promise<void> {
    const bytes = Buffer.concat([HEADER, ...snapshotRecords(this.#texts)])
    const fd = await replaceFile(this.#path, bytes)
    closeSync(this.#fd)
    this.#fd = fd
    this.#size = bytes.length
    this.compactions++
  }
}

/**
 * Storages by key in one folder (created when missing), a file each: key 'nb.n4Qv0b' ->
 * '<folder>/nb.n4Qv0b.replica', with its lock file beside it while open.
 */
export class FileReplicaStorages implements ReplicaStorages {
  readonly #folder: string
  readonly #options: FileReplicaStorageOptions

  constructor(folder: string, options: FileReplicaStorageOptions = {}) {
    this.#folder = folder
    this.#options = options
  }

  /** The file of `key`. */
  pathOf(key: string): string {
    return join(this.#folder, `${checkStorageKey(key)}.replica`)
  }

  async open(key: string): Promise<FileReplicaStorage> {
    const path = this.pathOf(key)
    try {
      mkdirSync(this.#folder, { recursive: true })
    } catch (err) {
      throw asStorageError(err, this.#folder)
    }
    return FileReplicaStorage.open(path, this.#options)
  }

  async remove(key: string): Promise<void> {
    const path = this.pathOf(key)
    try {
      // A compaction's copy may be left by a crash; the file goes last, so a failure keeps it whole.
      rmSync(`${path}.tmp`, { force: true })
      rmSync(bytesFolder(path), { recursive: true, force: true })
      rmSync(path, { force: true })
    } catch (err) {
      throw asStorageError(err, path)
    }
  }
}
