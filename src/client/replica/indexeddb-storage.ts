import { parseJson } from '../parse-json.js'
import {
  checkStorageKey,
  closedError,
  type EncodedWrite,
  emptyContents,
  encodeWrites,
  REPLICA_TABLES,
  type ReplicaContents,
  type ReplicaStorage,
  ReplicaStorageError,
  type ReplicaStorages,
  type ReplicaTable,
} from './storage.js'

/**
 * A replica's storage in the browser: one IndexedDB database, one object store per table, each
 * table's entries spread over BUCKETS records by a hash of their keys (Chromium's cost is per
 * record read, so a load is one getAll per table, a JSON.parse per bucket and a sort of the keys).
 * Values are kept as JSON text, so they come back exactly as the file and memory storages give
 * them. Each write is one readwrite transaction over all four stores, asked for `strict`
 * durability: it resolves on `complete`, which Chromium then fires only after the data is
 * flushed to disk (its default since Chrome 121 is `relaxed`, which does not wait). Transactions
 * over the same stores run in the order they were made, so writes land in call order, from this
 * tab or another.
 */

/** The schema's version: bump it, and add the step to `upgrade`, when the stores change. */
const VERSION = 2
/** The store of files' bytes waiting to be uploaded: a Blob per key, as IndexedDB keeps them. */
const BYTES = 'bytes'
/**
 * Records per table: each holds the entries whose keys hash to it, as the JSON text of
 * [[key, value], ...]. Chromium pays per record read: 10,000 notes as a record each loaded two to
 * three times slower than as buckets (bench/README.md), and a write rewrites only the buckets it
 * touches, at 10,000 notes about 80 notes (16 kB) each. Changing it moves keys to other buckets:
 * that needs a new VERSION whose upgrade re-buckets every table.
 */
const BUCKETS = 128

/**
 * The parts of IndexedDB this module uses, declared here because the service's own tsconfig has
 * no DOM library; the browser's objects fit them.
 */
interface DomErrorLike {
  readonly name: string
  readonly message: string
}
interface IdbRequest<T> {
  readonly result: T
  readonly error: DomErrorLike | null
  onsuccess: (() => void) | null
  onerror: ((event: { preventDefault(): void }) => void) | null
}
interface IdbOpenRequest extends IdbRequest<IdbDatabase> {
  onupgradeneeded: ((event: { oldVersion: number }) => void) | null
  onblocked: (() => void) | null
}
interface IdbStore {
  get(key: string): IdbRequest<unknown>
  put(value: unknown, key: string): IdbRequest<unknown>
  delete(key: string): IdbRequest<unknown>
  clear(): unknown
  getAll(): IdbRequest<unknown[]>
  getAllKeys(): IdbRequest<unknown[]>
}
interface IdbTransaction {
  readonly error: DomErrorLike | null
  readonly durability?: string
  objectStore(name: string): IdbStore
  abort(): void
  commit?(): void
  oncomplete: (() => void) | null
  onabort: (() => void) | null
}
interface IdbDatabase {
  readonly objectStoreNames: { contains(name: string): boolean }
  createObjectStore(name: string): unknown
  transaction(
    stores: string[],
    mode: 'readonly' | 'readwrite',
    options?: { durability: 'strict' | 'relaxed' | 'default' },
  ): IdbTransaction
  close(): void
  onversionchange: (() => void) | null
  onclose: (() => void) | null
}
/** window.indexedDB, or a stand-in (fake-indexeddb in Node). */
export interface IdbFactoryLike {
  open(name: string, version: number): IdbOpenRequest
  deleteDatabase(name: string): IdbRequest<unknown>
}

export interface IndexedDbReplicaStorageOptions {
  /** The IndexedDB to use; default globalThis.indexedDB. */
  indexedDB?: IdbFactoryLike
}

const TABLES = [...REPLICA_TABLES]

export class IndexedDbReplicaStorage implements ReplicaStorage {
  readonly #db: IdbDatabase
  readonly #name: string
  #closed: ReplicaStorageError | undefined
  #closeCalled = false
  /** The last write, settled either way: close() waits for it. */
  #last: Promise<unknown> = Promise.resolve()
  /** Every tab of the origin opens the database by this name. */
  readonly sharedName: string

  private constructor(db: IdbDatabase, name: string) {
    this.#db = db
    this.#name = name
    this.sharedName = name
    // Another tab opens a newer version: step aside so it can upgrade, and say why from now on.
    db.onversionchange = () => {
      db.close()
      this.#closed = new ReplicaStorageError(
        'closed',
        `The replica database ${name} was closed for a newer version of the page; reload it.`,
      )
    }
    db.onclose = () => {
      this.#closed ??= new ReplicaStorageError(
        'closed',
        `The browser closed the replica database ${name} (cleared by the user, or a storage failure).`,
      )
    }
  }

  /**
   * Opens (creating or upgrading) the database `name`.
   * @throws ReplicaStorageError: `unavailable` (no IndexedDB here, as in some private modes, or
   * the browser refused it), `blocked` (another tab has an older version open and did not close
   * it), `io` (any other refusal).
   */
  static open(
    name: string,
    options: IndexedDbReplicaStorageOptions = {},
  ): Promise<IndexedDbReplicaStorage> {
    const factory = options.indexedDB ?? defaultFactory()
    if (factory === undefined) {
      return Promise.reject(
        new ReplicaStorageError(
          'unavailable',
          'This browser offers no IndexedDB here (a private window or a sandboxed frame may not); the replica cannot be kept.',
        ),
      )
    }
    return new Promise((resolve, reject) => {
      let request: IdbOpenRequest
      try {
        request = factory.open(name, VERSION)
      } catch (err) {
        reject(openError(name, err as DomErrorLike))
        return
      }
      let settled = false
      request.onupgradeneeded = () => upgrade(request.result)
      request.onblocked = () => {
        settled = true
        reject(
          new ReplicaStorageError(
            'blocked',
            `The replica database ${name} is held open at an older version by another tab; close the other tabs of this page and reload.`,
          ),
        )
      }
      request.onsuccess = () => {
        // Opened after all, once the other tab let go: too late for this caller.
        if (settled) request.result.close()
        else resolve(new IndexedDbReplicaStorage(request.result, name))
      }
      request.onerror = (event) => {
        event.preventDefault()
        if (!settled) reject(openError(name, request.error))
      }
    })
  }

  /** Deletes the database `name` (signing out, a reset); resolves once it is gone. */
  static delete(name: string, options: IndexedDbReplicaStorageOptions = {}): Promise<void> {
    const factory = options.indexedDB ?? defaultFactory()
    if (factory === undefined) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const request = factory.deleteDatabase(name)
      request.onsuccess = () => resolve()
      request.onerror = () => reject(openError(name, request.error))
    })
  }

  load(tables: readonly ReplicaTable[] = TABLES): Promise<ReplicaContents> {
    if (this.#closed) return Promise.reject(this.#closed)
    return new Promise((resolve, reject) => {
      const tx = this.#transaction('readonly')
      const reads = tables.map((table) => ({ table, buckets: tx.objectStore(table).getAll() }))
      tx.oncomplete = () => {
        const contents = emptyContents()
        try {
          for (const { table, buckets } of reads) {
            const entries: [string, unknown][] = []
            for (const text of buckets.result) {
              for (const entry of parseJson(text as string) as [string, unknown][]) {
                entries.push(entry)
              }
            }
            entries.sort(([a], [b]) => (a < b ? -1 : 1))
            const map = contents[table]
            for (const [key, value] of entries) map.set(key, value)
          }
        } catch (err) {
          reject(
            new ReplicaStorageError(
              'damaged',
              `The replica database ${this.#name} holds a record that is not a bucket of JSON entries.`,
              { cause: err },
            ),
          )
          return
        }
        resolve(contents)
      }
      tx.onabort = () => reject(failure(this.#name, tx.error, 'read'))
    })
  }

  write(changes: Parameters<ReplicaStorage['write']>[0]): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closed)
    let written: Promise<void>
    try {
      const encoded = encodeWrites(changes)
      const tx = this.#transaction('readwrite')
      written = new Promise<void>((resolve, reject) => {
        tx.oncomplete = () => resolve()
        tx.onabort = () => reject(failure(this.#name, tx.error, 'write'))
      })
      try {
        if (!writeBuckets(tx, encoded)) tx.commit?.()
      } catch (err) {
        // A request refused as it was made (DataError, a closing database): nothing is kept.
        tx.abort()
        written = Promise.reject(failure(this.#name, err as DomErrorLike, 'write'))
      }
    } catch (err) {
      // Refused before any transaction (a value that is not JSON): settled after the writes
      // called before it all the same, so that writes settle in call order.
      written = this.#last.then(() => Promise.reject(err))
    }
    this.#last = written.catch(() => {})
    return written
  }

  async putBytes(key: string, bytes: Blob): Promise<void> {
    checkStorageKey(key)
    // A slice without a type: the bytes alone, as the other storages give them back.
    const blob = bytes.slice(0, bytes.size)
    await this.#bytes('readwrite', (store) => store.put(blob, key))
  }

  async getBytes(key: string): Promise<Blob | undefined> {
    checkStorageKey(key)
    return (await this.#bytes('readonly', (store) => store.get(key))) as Blob | undefined
  }

  async deleteBytes(key: string): Promise<void> {
    checkStorageKey(key)
    await this.#bytes('readwrite', (store) => store.delete(key))
  }

  async bytesKeys(): Promise<string[]> {
    const keys = (await this.#bytes('readonly', (store) => store.getAllKeys())) as string[]
    return keys.sort()
  }

  /**
   * One request on the bytes store, in a transaction of its own (`strict`: a write resolves once
   * flushed), and its result once the transaction completes; close() waits for it.
   */
  #bytes(
    mode: 'readonly' | 'readwrite',
    make: (store: IdbStore) => IdbRequest<unknown>,
  ): Promise<unknown> {
    if (this.#closed) return Promise.reject(this.#closed)
    const done = new Promise<unknown>((resolve, reject) => {
      const fail = (error: DomErrorLike | null): void =>
        reject(failure(this.#name, error, mode === 'readonly' ? 'read' : 'write'))
      try {
        const tx = this.#db.transaction([BYTES], mode, { durability: 'strict' })
        const request = make(tx.objectStore(BYTES))
        tx.oncomplete = () => resolve(request.result)
        tx.onabort = () => fail(tx.error)
      } catch (err) {
        // Refused as it was made (a closing database): nothing was kept.
        fail(err as DomErrorLike)
      }
    })
    this.#last = Promise.all([this.#last, done.catch(() => {})])
    return done
  }

  /** Waits for the writes called before it, then closes the database. */
  async close(): Promise<void> {
    if (this.#closeCalled) return
    this.#closeCalled = true
    this.#closed ??= closedError()
    await this.#last
    this.#db.close()
  }

  #transaction(mode: 'readonly' | 'readwrite'): IdbTransaction {
    try {
      return mode === 'readonly'
        ? this.#db.transaction(TABLES, mode)
        : this.#db.transaction(TABLES, mode, { durability: 'strict' })
    } catch (err) {
      // InvalidStateError: the browser closed the connection under us.
      throw failure(this.#name, err as DomErrorLike, mode === 'readonly' ? 'read' : 'write')
    }
  }
}

/**
 * Storages by key in IndexedDB, a database each: with prefix 'notes', key 'nb.n4Qv0b' -> the
 * database 'notes/nb.n4Qv0b'.
 */
export class IndexedDbReplicaStorages implements ReplicaStorages {
  readonly #prefix: string
  readonly #options: IndexedDbReplicaStorageOptions

  constructor(prefix: string, options: IndexedDbReplicaStorageOptions = {}) {
    this.#prefix = prefix
    this.#options = options
  }

  async open(key: string): Promise<IndexedDbReplicaStorage> {
    return IndexedDbReplicaStorage.open(`${this.#prefix}/${checkStorageKey(key)}`, this.#options)
  }

  async remove(key: string): Promise<void> {
    return IndexedDbReplicaStorage.delete(`${this.#prefix}/${checkStorageKey(key)}`, this.#options)
  }
}

/**
 * Makes a write's requests: for each table, a clear if the write clears it (what came before the
 * last clear no longer matters), then each bucket it touches read, changed and put back, in the
 * same transaction (so two tabs writing at once cannot lose each other's entries). Answers
 * whether it had to read a bucket (then the transaction must not be committed early).
 */
function writeBuckets(tx: IdbTransaction, changes: readonly EncodedWrite[]): boolean {
  let reads = false
  for (const table of TABLES) {
    const mine = changes.filter((change) => change.table === table)
    if (mine.length === 0) continue
    let cleared = -1
    mine.forEach((change, i) => {
      if ('clear' in change) cleared = i
    })
    const store = tx.objectStore(table)
    const byBucket = new Map<string, EncodedWrite[]>()
    for (const change of mine.slice(cleared + 1)) {
      if ('clear' in change) continue
      const bucket = bucketOf(change.key)
      const list = byBucket.get(bucket)
      if (list === undefined) byBucket.set(bucket, [change])
      else list.push(change)
    }
    if (cleared >= 0) store.clear()
    for (const [bucket, list] of byBucket) {
      if (cleared >= 0) {
        putBucket(store, bucket, new Map(), list)
        continue
      }
      reads = true
      const request = store.get(bucket)
      request.onsuccess = () => {
        // Thrown here (a damaged bucket), an error aborts the transaction: nothing is kept.
        const text = request.result as string | undefined
        const entries = text === undefined ? [] : (parseJson(text) as [string, unknown][])
        putBucket(store, bucket, new Map(entries.map(([k, v]) => [k, JSON.stringify(v)])), list)
      }
    }
  }
  return reads
}

function putBucket(
  store: IdbStore,
  bucket: string,
  texts: Map<string, string>,
  changes: readonly EncodedWrite[],
): void {
  for (const change of changes) {
    if ('text' in change) texts.set(change.key, change.text)
    else if ('key' in change) texts.delete(change.key)
  }
  if (texts.size === 0) {
    store.delete(bucket)
    return
  }
  const parts: string[] = []
  for (const [key, text] of texts) parts.push(`[${JSON.stringify(key)},${text}]`)
  store.put(`[${parts.join(',')}]`, bucket)
}

/** A key's bucket: FNV-1a of its code units, modulo BUCKETS. 'n:1' -> '0042'-like ids. */
function bucketOf(key: string): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return String((hash >>> 0) % BUCKETS)
}

function defaultFactory(): IdbFactoryLike | undefined {
  try {
    return (globalThis as unknown as { indexedDB?: IdbFactoryLike }).indexedDB ?? undefined
  } catch {
    // Some browsers throw SecurityError on the mere access (storage blocked for the site).
    return undefined
  }
}

/** Version 0 -> 1: the four stores; 1 -> 2: the bytes store. */
function upgrade(db: IdbDatabase): void {
  for (const table of [...TABLES, BYTES]) {
    if (!db.objectStoreNames.contains(table)) db.createObjectStore(table)
  }
}

function openError(name: string, error: DomErrorLike | null): ReplicaStorageError {
  const reason = error === null ? 'unknown error' : `${error.name}: ${error.message}`
  if (error?.name === 'VersionError') {
    return new ReplicaStorageError(
      'unavailable',
      `The replica database ${name} was written by a newer version of this page (${reason}); reload.`,
      { cause: error },
    )
  }
  // InvalidStateError (Firefox's private windows before 115), SecurityError, UnknownError.
  return new ReplicaStorageError(
    'unavailable',
    `The browser refused the replica database ${name} (${reason}); a private window or blocked site data may not allow it.`,
    { cause: error },
  )
}

/** A transaction that aborted: quota, a closed connection, or anything else. */
function failure(
  name: string,
  error: DomErrorLike | null,
  doing: 'read' | 'write',
): ReplicaStorageError {
  const reason = error === null ? 'aborted' : `${error.name}: ${error.message}`
  if (error?.name === 'QuotaExceededError') {
    return new ReplicaStorageError(
      'quota',
      `The browser has no room left for the replica database ${name}; nothing of this write was kept.`,
      { cause: error },
    )
  }
  if (error?.name === 'InvalidStateError') {
    return new ReplicaStorageError(
      'closed',
      `The replica database ${name} is closed (${reason}).`,
      {
        cause: error,
      },
    )
  }
  return new ReplicaStorageError(
    'io',
    `Could not ${doing} the replica database ${name}: ${reason}`,
    {
      cause: error,
    },
  )
}
