import {
  closeSync,
  fdatasync,
  fsync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  write,
  writeFileSync,
} from 'node:fs'
import { dirname } from 'node:path'
import { promisify } from 'node:util'
import { crc32 } from 'node:zlib'
import {
  closedError,
  type EncodedWrite,
  emptyContents,
  encodeWrites,
  REPLICA_TABLES,
  type ReplicaContents,
  type ReplicaStorage,
  ReplicaStorageError,
  type ReplicaTable,
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
 * (`path.lock`, holding the owner's PID) keeps a second opener out.
 */

const HEADER = Buffer.from('notes-service replica 1\n')
/** Length and checksum before each payload. */
const FRAME = 8
const MAX_PAYLOAD = 1 << 30
/** A snapshot's records hold about this many bytes each. */
const SNAPSHOT_RECORD = 1 << 16
const EMPTY = Buffer.alloc(0)

const writeAt = promisify(write)
const dataSync = promisify(fdatasync)
const fullSync = promisify(fsync)

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

type Texts = Record<ReplicaTable, Map<string, string>>

export class FileReplicaStorage implements ReplicaStorage {
  readonly #path: string
  readonly #compactMinBytes: number
  #fd: number
  /** Every table's values as JSON text, as the durable writes left them. */
  #texts: Texts
  /** Bytes of keys and values held: the file is compacted past twice this. */
  #live: number
  /** The file's length up to its last durable record. */
  #size: number
  /** No compaction before the file is this long (raised after a failed one, so as not to retry each write). */
  #compactAt = 0
  #queue: Pending[] = []
  #busy = false
  #idle: (() => void)[] = []
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
    texts: Texts,
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
        replaceFile(path, [HEADER])
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
      rmSync(lock, { force: true })
      throw asStorageError(err, path)
    }
  }

  /** Resolves once every write called before it has settled. */
  async load(): Promise<ReplicaContents> {
    if (this.#closed) throw closedError()
    if (this.#busy) await new Promise<void>((resolve) => this.#idle.push(resolve))
    const contents = emptyContents()
    for (const table of REPLICA_TABLES) {
      const texts = this.#texts[table]
      for (const key of [...texts.keys()].sort()) {
        const text = texts.get(key) as string
        try {
          contents[table].set(key, JSON.parse(text))
        } catch (err) {
          throw new ReplicaStorageError(
            'damaged',
            `${this.#path} holds a ${table} value for ${JSON.stringify(key)} that is not JSON.`,
            { cause: err },
          )
        }
      }
    }
    return contents
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
      this.#queue.push(
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
      if (!this.#busy) void this.#pump()
    })
  }

  /** Waits for the writes called before it, then closes the file and removes the lock. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    if (this.#busy) await new Promise<void>((resolve) => this.#idle.push(resolve))
    closeSync(this.#fd)
    rmSync(`${this.#path}.lock`, { force: true })
  }

  async #pump(): Promise<void> {
    this.#busy = true
    // One turn lets the writes of this tick join the first batch.
    await Promise.resolve()
    while (this.#queue.length > 0) {
      const batch = this.#queue
      this.#queue = []
      try {
        await this.#append(batch)
      } catch (err) {
        this.#recover()
        const error = asStorageError(err, this.#path)
        for (const pending of batch) pending.reject(pending.refused ?? error)
        continue
      }
      for (const pending of batch) this.#live += applyTo(this.#texts, pending.changes)
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
    this.#busy = false
    for (const resolve of this.#idle.splice(0)) resolve()
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
    const frames = [HEADER, ...snapshotRecords(this.#texts)]
    const bytes = Buffer.concat(frames)
    const tmp = `${this.#path}.tmp`
    const fd = openSync(tmp, 'w')
    try {
      await writeAll(fd, bytes, 0)
      await fullSync(fd)
      renameSync(tmp, this.#path)
    } catch (err) {
      closeSync(fd)
      rmSync(tmp, { force: true })
      throw err
    }
    closeSync(this.#fd)
    this.#fd = fd
    this.#size = bytes.length
    this.compactions++
    syncDirectory(this.#path)
  }
}

/** A write's changes as one record's payload: puts [t, k, v], deletes [t, k], clears [t]. */
function payloadOf(changes: readonly EncodedWrite[]): string {
  return changes
    .map((change) => {
      if ('clear' in change) return `C\t${change.table}`
      const head = `${change.table}\t${JSON.stringify(change.key)}`
      return 'delete' in change ? `D\t${head}` : `P\t${head}\t${change.text}`
    })
    .join('\n')
}

function snapshotRecords(texts: Texts): Buffer[] {
  const records: Buffer[] = []
  let changes: EncodedWrite[] = []
  let bytes = 0
  for (const table of REPLICA_TABLES) {
    for (const [key, text] of texts[table]) {
      changes.push({ table, key, text })
      bytes += key.length + text.length
      if (bytes >= SNAPSHOT_RECORD) {
        records.push(encodeRecord(payloadOf(changes)))
        changes = []
        bytes = 0
      }
    }
  }
  if (changes.length > 0) records.push(encodeRecord(payloadOf(changes)))
  return records
}

function encodeRecord(payload: string): Buffer {
  const body = Buffer.from(payload)
  const frame = Buffer.allocUnsafe(FRAME + body.length)
  frame.writeUInt32BE(body.length, 0)
  frame.writeUInt32BE(crc32(body), 4)
  body.copy(frame, FRAME)
  return frame
}

/**
 * The tables a file's bytes hold, and where its good records end. A torn tail (damage that
 * reaches the end of the file, or is followed by zeros only) is not an error: a write resolves
 * only after its fsync, so it holds no resolved write. Damage with good bytes after it is.
 */
function replay(bytes: Buffer, path: string): { texts: Texts; end: number } {
  if (!bytes.subarray(0, HEADER.length).equals(HEADER)) {
    throw new ReplicaStorageError('damaged', `${path} is not a notes-service replica file.`)
  }
  const texts = emptyTexts()
  let offset = HEADER.length
  while (offset < bytes.length) {
    const damage = recordDamage(bytes, offset)
    if (damage !== undefined) {
      if (damage.torn || zerosFrom(bytes, offset)) break
      throw new ReplicaStorageError(
        'damaged',
        `${path} is damaged at byte ${offset}: ${damage.reason}; restore it from a backup or move it away.`,
      )
    }
    const length = bytes.readUInt32BE(offset)
    const payload = bytes.toString('utf8', offset + FRAME, offset + FRAME + length)
    applyTo(texts, decodePayload(payload, path, offset))
    offset += FRAME + length
  }
  return { texts, end: offset }
}

function recordDamage(
  bytes: Buffer,
  offset: number,
): { reason: string; torn: boolean } | undefined {
  if (bytes.length - offset < FRAME) return { reason: 'a record frame cut short', torn: true }
  const length = bytes.readUInt32BE(offset)
  if (length === 0 || length > MAX_PAYLOAD) {
    return { reason: `a record length of ${length}`, torn: false }
  }
  const end = offset + FRAME + length
  if (end > bytes.length) return { reason: 'a record cut short', torn: true }
  if (crc32(bytes.subarray(offset + FRAME, end)) !== bytes.readUInt32BE(offset + 4)) {
    return { reason: 'a record whose checksum does not match', torn: end === bytes.length }
  }
  return undefined
}

function zerosFrom(bytes: Buffer, offset: number): boolean {
  for (let i = offset; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}

/**
 * A record's changes. Values stay JSON text, parsed only by load(): JSON text holds no raw tab
 * or newline, so the fields split without parsing it. A checksummed payload that is not a list
 * of changes was written by something else.
 */
function decodePayload(payload: string, path: string, offset: number): EncodedWrite[] {
  const refuse = (): never => {
    throw new ReplicaStorageError(
      'damaged',
      `${path} is damaged at byte ${offset}: a record that is not a list of changes.`,
    )
  }
  return payload.split('\n').map((line): EncodedWrite => {
    const op = line.slice(0, 2)
    const tableEnd = line.indexOf('\t', 2)
    const table = line.slice(2, tableEnd === -1 ? undefined : tableEnd) as ReplicaTable
    if (!REPLICA_TABLES.includes(table)) return refuse()
    if (op === 'C\t' && tableEnd === -1) return { table, clear: true }
    const keyEnd = op === 'P\t' ? line.indexOf('\t', tableEnd + 1) : line.length
    let key: unknown
    try {
      key = JSON.parse(line.slice(tableEnd + 1, keyEnd))
    } catch {
      return refuse()
    }
    if (typeof key !== 'string' || keyEnd === -1) return refuse()
    if (op === 'D\t') return { table, key, delete: true }
    if (op !== 'P\t') return refuse()
    return { table, key, text: line.slice(keyEnd + 1) }
  })
}

function applyTo(texts: Texts, changes: readonly EncodedWrite[]): number {
  let delta = 0
  for (const change of changes) {
    const table = texts[change.table]
    if ('clear' in change) {
      for (const [key, text] of table) delta -= entryBytes(key, text)
      table.clear()
      continue
    }
    const old = table.get(change.key)
    if (old !== undefined) delta -= entryBytes(change.key, old)
    if ('delete' in change) table.delete(change.key)
    else {
      table.set(change.key, change.text)
      delta += entryBytes(change.key, change.text)
    }
  }
  return delta
}

/** About what an entry takes in a snapshot: its key, its value and the JSON around them. */
function entryBytes(key: string, text: string): number {
  return key.length + text.length + 16
}

function emptyTexts(): Texts {
  return { notes: new Map(), outbox: new Map(), meta: new Map(), conflicts: new Map() }
}

function liveBytes(texts: Texts): number {
  let bytes = 0
  for (const table of REPLICA_TABLES) {
    for (const [key, text] of texts[table]) bytes += entryBytes(key, text)
  }
  return bytes
}

async function writeAll(fd: number, bytes: Buffer, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await writeAt(fd, bytes, done, bytes.length - done, position + done)
    done += bytesWritten
  }
}

function readIfThere(path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0)
    throw err
  }
}

/** Writes `path` whole, atomically: a temporary file, fsync, rename, directory fsync. */
function replaceFile(path: string, frames: readonly Buffer[]): void {
  const tmp = `${path}.tmp`
  writeFileSync(tmp, Buffer.concat(frames))
  const fd = openSync(tmp, 'r+')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(tmp, path)
  syncDirectory(path)
}

function syncDirectory(path: string): void {
  try {
    const fd = openSync(dirname(path), 'r')
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  } catch {
    // Some file systems refuse to fsync a directory; the rename stands.
  }
}

/**
 * One opener per file. Node has no flock, so the lock is a file created only if absent (`wx`)
 * holding the owner's PID; a lock whose PID no longer runs (a kill -9) is taken over.
 */
function takeLock(lock: string, path: string): void {
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' })
      return
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) {
        throw asStorageError(err, path)
      }
    }
    let owner = ''
    try {
      owner = readFileSync(lock, 'utf8')
    } catch {
      // Removed meanwhile: the next attempt takes it.
    }
    const pid = Number.parseInt(owner, 10)
    if (Number.isSafeInteger(pid) && pid > 0 && isRunning(pid)) {
      const who = pid === process.pid ? 'another storage in this process' : `process ${pid}`
      throw new ReplicaStorageError('locked', `${path} is open in ${who} (lock ${lock}).`)
    }
    rmSync(lock, { force: true })
  }
}

/** Signal 0 checks that the process exists; EPERM means it does, as another user's. */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function asStorageError(err: unknown, path: string): ReplicaStorageError {
  if (err instanceof ReplicaStorageError) return err
  const { code, message } = err as NodeJS.ErrnoException
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new ReplicaStorageError('quota', `No room to write ${path}: ${code}.`, { cause: err })
  }
  return new ReplicaStorageError('io', `Cannot use ${path}: ${message.split('\n')[0]}`, {
    cause: err,
  })
}
