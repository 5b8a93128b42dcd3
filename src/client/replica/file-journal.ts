import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { dirname } from 'node:path'
import { crc32 } from 'node:zlib'
import {
  type EncodedWrite,
  REPLICA_TABLES,
  ReplicaStorageError,
  type ReplicaTable,
} from './storage.js'

/**
 * The file replica storage's bytes and file system steps (Node only, with file-storage.ts): the
 * record format (a header line, then `[u32 BE length][u32 BE crc32][payload]` per write), its
 * replay, the snapshot a compaction writes, the atomic replacement of a file and the lock.
 */

export const HEADER = Buffer.from('notes-service replica 1\n')
/** Length and checksum before each payload. */
export const FRAME = 8
const MAX_PAYLOAD = 1 << 30
/** A snapshot's records hold about this many bytes each. */
const SNAPSHOT_RECORD = 1 << 16
export const EMPTY = Buffer.alloc(0)

/** Each table's entries as their JSON text, by key. */
export type Texts = Record<ReplicaTable, Map<string, string>>

/** A write's changes as one record's payload: puts [t, k, v], deletes [t, k], clears [t]. */
export function payloadOf(changes: readonly EncodedWrite[]): string {
  return changes
    .map((change) => {
      if ('clear' in change) return `C\t${change.table}`
      const head = `${change.table}\t${JSON.stringify(change.key)}`
      return 'delete' in change ? `D\t${head}` : `P\t${head}\t${change.text}`
    })
    .join('\n')
}

export function snapshotRecords(texts: Texts): Buffer[] {
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

export function encodeRecord(payload: string): Buffer {
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
export function replay(bytes: Buffer, path: string): { texts: Texts; end: number } {
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

export function applyTo(texts: Texts, changes: readonly EncodedWrite[]): number {
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

export function emptyTexts(): Texts {
  return { notes: new Map(), outbox: new Map(), meta: new Map(), conflicts: new Map() }
}

export function liveBytes(texts: Texts): number {
  let bytes = 0
  for (const table of REPLICA_TABLES) {
    for (const [key, text] of texts[table]) bytes += entryBytes(key, text)
  }
  return bytes
}

export function readIfThere(path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0)
    throw err
  }
}

/** Writes `path` whole, atomically: a temporary file, fsync, rename, directory fsync. */
export function replaceFile(path: string, frames: readonly Buffer[]): void {
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

export function syncDirectory(path: string): void {
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
export function takeLock(lock: string, path: string): void {
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

export function asStorageError(err: unknown, path: string): ReplicaStorageError {
  if (err instanceof ReplicaStorageError) return err
  const { code, message } = err as NodeJS.ErrnoException
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return new ReplicaStorageError('quota', `No room to write ${path}: ${code}.`, { cause: err })
  }
  return new ReplicaStorageError('io', `Cannot use ${path}: ${message.split('\n')[0]}`, {
    cause: err,
  })
}
