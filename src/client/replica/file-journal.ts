import { closeSync, fsync, openAsBlob, openSync } from 'node:fs'
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { syncFolder, writeAll } from '../../durable/file-steps.js'
import { describeHolder, takePidLock } from '../../durable/pid-lock.js'
import { encodeRecord, scanRecords } from '../../durable/record-frame.js'
import {
  applyWrites,
  type EncodedWrite,
  emptyTexts,
  entryBytes,
  REPLICA_TABLES,
  ReplicaStorageError,
  type ReplicaTable,
  type ReplicaTexts,
} from './storage.js'

/**
 * The file replica storage's bytes and file system steps (Node only, with file-storage.ts): the
 * record format (a header line, then a frame of durable/record-frame.ts per write), its replay,
 * the snapshot a compaction writes, the files' bytes kept beside the journal, and the storage's
 * words for the lock and the file system's errors. The frames, the file steps and the PID lock are the durable/ floor's, shared with the
 * service's journal.
 */

export const HEADER = Buffer.from('notes-service replica 1\n')
/** A snapshot's records hold about this many bytes each. */
const SNAPSHOT_RECORD = 1 << 16
export const EMPTY = Buffer.alloc(0)

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

export function snapshotRecords(texts: ReplicaTexts): Buffer[] {
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

/**
 * The tables a file's bytes hold, and where its good records end. A torn tail (damage that
 * reaches the end of the file, or is followed by zeros only) is not an error: a write resolves
 * only after its fsync, so it holds no resolved write. Damage with good bytes after it is.
 */
export function replay(bytes: Buffer, path: string): { texts: ReplicaTexts; end: number } {
  if (!bytes.subarray(0, HEADER.length).equals(HEADER)) {
    throw new ReplicaStorageError('damaged', `${path} is not a notes-service replica file.`)
  }
  const texts = emptyTexts()
  const scanned = scanRecords(bytes, HEADER.length, (payload, offset) =>
    applyWrites(texts, decodePayload(payload, path, offset)),
  )
  if (!scanned.ok) {
    throw new ReplicaStorageError(
      'damaged',
      `${path} is damaged at byte ${scanned.offset}: ${scanned.reason}; restore it from a backup or move it away.`,
    )
  }
  return { texts, end: scanned.end }
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

export function liveBytes(texts: ReplicaTexts): number {
  let bytes = 0
  for (const table of REPLICA_TABLES) {
    for (const [key, text] of texts[table]) bytes += entryBytes(key, text)
  }
  return bytes
}

/**
 * One opener per file (durable/pid-lock.ts), in the storage's words: `locked` names the holder,
 * this process's own when another storage in it has the file open, and for a holder seen only
 * through its lease (another container or host) when that lapses; opening is not retried here.
 */
export function takeLock(lock: string, path: string): void {
  const holder = takePidLock(lock, (err) => asStorageError(err, path))
  if (holder !== undefined) {
    const who = holder.own
      ? `another storage in this process (lock ${lock})`
      : describeHolder(holder, lock)
    throw new ReplicaStorageError('locked', `${path} is open in ${who}.`)
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

const fullSync = promisify(fsync)

/** A name of the bytes folder that no key can have ('#' is not in a key): a write on its way. */
const TMP_SUFFIX = '#tmp'

/** The folder of a storage's files' bytes, beside its journal: '<path>.files'. */
export function bytesFolder(path: string): string {
  return `${path}.files`
}

/**
 * Writes `bytes` as the file `key` of `folder` durably: into '<key>#tmp', fsync, rename, fsync
 * of the folder (and of its parent when the folder is new), streamed a chunk at a time.
 */
export async function writeBytesFile(folder: string, key: string, bytes: Blob): Promise<void> {
  const made = await mkdir(folder, { recursive: true })
  if (made !== undefined) await syncFolder(dirname(folder))
  const path = join(folder, key)
  const tmp = `${path}${TMP_SUFFIX}`
  const fd = openSync(tmp, 'w')
  try {
    let at = 0
    for await (const chunk of bytes.stream()) {
      await writeAll(fd, Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength), at)
      at += chunk.byteLength
    }
    await fullSync(fd)
  } catch (err) {
    closeSync(fd)
    await rm(tmp, { force: true })
    throw err
  }
  closeSync(fd)
  await rename(tmp, path)
  await syncFolder(folder)
}

/** The file `key` of `folder` as a Blob read from the disk when used, or undefined. */
export async function readBytesFile(folder: string, key: string): Promise<Blob | undefined> {
  const path = join(folder, key)
  let size: number
  try {
    size = (await stat(path)).size
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
  // Node's openAsBlob refuses an empty file.
  return size === 0 ? new Blob([]) : openAsBlob(path)
}

/** Removes the file `key` of `folder` (none is fine), and fsyncs the folder. */
export async function removeBytesFile(folder: string, key: string): Promise<void> {
  await rm(join(folder, key), { force: true })
  await syncFolder(folder)
}

/** The keys of the files in `folder`, sorted; writes cut off by a crash are removed. */
export async function bytesFileKeys(folder: string): Promise<string[]> {
  let names: string[]
  try {
    names = await readdir(folder)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
  for (const name of names) {
    if (name.endsWith(TMP_SUFFIX)) await rm(join(folder, name), { force: true })
  }
  return names.filter((name) => !name.endsWith(TMP_SUFFIX)).sort()
}
