import { parseJson } from '../parse-json.js'

/**
 * Where a replica keeps its copy between runs: four tables of JSON values by string key, written
 * all or nothing, and the bytes of the files waiting to be uploaded, by key. Implementations:
 * memory (tests, Node scripts), IndexedDB (browsers) and a file (Node); one shared suite checks
 * them all the same way.
 */

/**
 * notes: the service's notes as last seen, with their ETags; outbox: the writes waiting to be
 * sent, in key order; meta: the feed position and other single values; conflicts: writes the
 * service refused with a 412, kept until the application resolves them.
 */
export type ReplicaTable = 'notes' | 'outbox' | 'meta' | 'conflicts'

export const REPLICA_TABLES: readonly ReplicaTable[] = ['notes', 'outbox', 'meta', 'conflicts']

/** One change of a write: a value put at a key, a key deleted, or a whole table emptied. */
export type ReplicaWrite =
  | { table: ReplicaTable; key: string; value: unknown }
  | { table: ReplicaTable; key: string; delete: true }
  | { table: ReplicaTable; clear: true }

/** Every table's entries, each table's keys in ascending code-unit order. */
export type ReplicaContents = Record<ReplicaTable, Map<string, unknown>>

export interface ReplicaStorage {
  /**
   * Set when other openers of the same place can hold it at once (other tabs of a browser on one
   * IndexedDB database): its name, from which the replica names the Web Lock under which it
   * sends queued files, and a sign that it must read the queue again before each one.
   */
  readonly sharedName?: string | undefined
  /**
   * Everything stored, as the last completed write left it; with `tables`, those tables at least
   * (a storage may leave the others empty rather than read them).
   */
  load(tables?: readonly ReplicaTable[]): Promise<ReplicaContents>
  /**
   * Applies the changes in order, all or none of them, after every write called before it. The
   * promise settles once they survive a crash of the process (and, for a file, of the machine).
   * Values are JSON values (objects, arrays, strings, finite numbers, booleans, null).
   */
  write(changes: readonly ReplicaWrite[]): Promise<void>
  /**
   * Keeps `bytes` under `key` (a storage key: 1-200 of A-Z a-z 0-9 - . _ ~), replacing what was
   * there, apart from the tables: a file waiting to be uploaded. Settles once they survive a
   * crash, as write() does. Only the bytes are kept (the Blob's `type` is not).
   */
  putBytes(key: string, bytes: Blob): Promise<void>
  /** The bytes kept under `key` (a Blob whose `type` is ''), or undefined. */
  getBytes(key: string): Promise<Blob | undefined>
  /** Removes the bytes of `key` (a key holding none is fine). */
  deleteBytes(key: string): Promise<void>
  /** The keys holding bytes, in ascending code-unit order. */
  bytesKeys(): Promise<string[]>
  /** Releases what the storage holds open; later calls reject. */
  close(): Promise<void>
}

/**
 * Storages by key, one per notebook, for a replica of every notebook (NotebooksReplica): the key
 * names the database (IndexedDB), the file (a folder of them) or the entry (memory). Keys are
 * strings of 1-200 URL-safe characters (A-Z a-z 0-9 - . _ ~).
 */
export interface ReplicaStorages {
  /** Opens the storage of `key` (created empty when there is none). */
  open(key: string): Promise<ReplicaStorage>
  /**
   * Removes the storage of `key` from the device, once it is closed; resolves once it is gone
   * (a key never opened is fine).
   */
  remove(key: string): Promise<void>
}

/** 'nb.n4Qv0b' passes; '', '../x' and 'a/b' throw ReplicaStorageError('invalid'). */
export function checkStorageKey(key: string): string {
  if (!/^[A-Za-z0-9._~-]{1,200}$/.test(key) || /^\.+$/.test(key)) {
    throw new ReplicaStorageError('invalid', `${JSON.stringify(key)} is not a storage key.`)
  }
  return key
}

/** An empty ReplicaContents. */
export function emptyContents(): ReplicaContents {
  return { notes: new Map(), outbox: new Map(), meta: new Map(), conflicts: new Map() }
}

/**
 * Why a storage refused: `closed` (used after close), `invalid` (a value that is not JSON),
 * `quota` (the browser or disk has no room; nothing of the write was kept), `blocked` (another
 * tab holds an older version of the database open), `unavailable` (no IndexedDB, as in some
 * private modes), `locked` (another process has the file open), `damaged` (a file damaged before
 * its end), `io` (the file system refused).
 */
export type ReplicaStorageErrorCode =
  | 'closed'
  | 'invalid'
  | 'quota'
  | 'blocked'
  | 'unavailable'
  | 'locked'
  | 'damaged'
  | 'io'

/** A storage's refusal, with a one-line message and the cause when there is one. */
export class ReplicaStorageError extends Error {
  readonly code: ReplicaStorageErrorCode

  constructor(code: ReplicaStorageErrorCode, message: string, options?: { cause: unknown }) {
    super(message, options)
    this.name = 'ReplicaStorageError'
    this.code = code
  }
}

/** The error every storage gives once closed. */
export function closedError(): ReplicaStorageError {
  return new ReplicaStorageError('closed', 'This replica storage is closed.')
}

/**
 * A value as JSON text, refusing what JSON would silently change or drop: functions, symbols,
 * bigints, NaN and infinities, undefined outside an object property, cycles. Properties holding
 * undefined are left out, as JSON.stringify does. { a: [1, 'é'] } -> '{"a":[1,"é"]}';
 * { a: NaN } -> ReplicaStorageError('invalid', '... at a ...').
 */
function encodeValue(value: unknown, where: string): string {
  const path: string[] = []
  let text: string | undefined
  try {
    text = JSON.stringify(value, function (this: unknown, key, inner: unknown) {
      const kind = typeof inner
      const bad =
        kind === 'function' ||
        kind === 'symbol' ||
        kind === 'bigint' ||
        (kind === 'number' && !Number.isFinite(inner)) ||
        (inner === undefined && (key === '' || Array.isArray(this)))
      if (bad) {
        path.push(key)
        throw new TypeError(`${kind === 'number' ? String(inner) : kind} is not a JSON value`)
      }
      return inner
    })
  } catch (err) {
    const at = path.length > 0 && path[0] !== '' ? ` at ${JSON.stringify(path[0])}` : ''
    throw new ReplicaStorageError(
      'invalid',
      `The value for ${where}${at} cannot be stored: ${(err as Error).message}.`,
      { cause: err },
    )
  }
  return text as string
}

/** Each change with its value as checked JSON text (encodeValue), before anything is written. */
export type EncodedWrite =
  | { table: ReplicaTable; key: string; text: string }
  | { table: ReplicaTable; key: string; delete: true }
  | { table: ReplicaTable; clear: true }

/** The changes checked and encoded; throws ReplicaStorageError('invalid') naming the first bad one. */
export function encodeWrites(changes: readonly ReplicaWrite[]): EncodedWrite[] {
  return changes.map((change) => {
    if (!REPLICA_TABLES.includes(change.table)) {
      throw new ReplicaStorageError('invalid', `There is no replica table ${String(change.table)}.`)
    }
    if ('clear' in change) return change
    if (typeof change.key !== 'string') {
      throw new ReplicaStorageError('invalid', `A ${change.table} key must be a string.`)
    }
    if ('delete' in change) return change
    return {
      table: change.table,
      key: change.key,
      text: encodeValue(change.value, `${change.table} ${JSON.stringify(change.key)}`),
    }
  })
}

/** Each table's values as checked JSON text (encodeWrites), by key: what memory and file hold. */
export type ReplicaTexts = Record<ReplicaTable, Map<string, string>>

/** An empty ReplicaTexts. */
export function emptyTexts(): ReplicaTexts {
  return { notes: new Map(), outbox: new Map(), meta: new Map(), conflicts: new Map() }
}

/**
 * Applies encoded changes to texts in place, in order (for the memory and file storages), and
 * answers the change in entryBytes of what they hold: a put of 'k' -> '1' where nothing was: 18;
 * its delete after: -18.
 */
export function applyWrites(texts: ReplicaTexts, changes: readonly EncodedWrite[]): number {
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

/** About what an entry takes: its key, its text and the JSON around them in a file's snapshot. */
export function entryBytes(key: string, text: string): number {
  return key.length + text.length + 16
}

/**
 * The texts as load() answers them: each table's keys in ascending code-unit order, each value
 * parsed. `unreadable` makes the error for a text that is not JSON (a damaged file); without it
 * the SyntaxError is thrown as it is.
 */
export function decodeTexts(
  texts: ReplicaTexts,
  unreadable?: (table: ReplicaTable, key: string, cause: unknown) => Error,
): ReplicaContents {
  const contents = emptyContents()
  for (const table of REPLICA_TABLES) {
    const tableTexts = texts[table]
    for (const key of [...tableTexts.keys()].sort()) {
      try {
        contents[table].set(key, parseJson(tableTexts.get(key) as string))
      } catch (err) {
        throw unreadable === undefined ? err : unreadable(table, key, err)
      }
    }
  }
  return contents
}
