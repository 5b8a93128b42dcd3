import {
  applyWrites,
  checkStorageKey,
  closedError,
  decodeTexts,
  emptyTexts,
  encodeWrites,
  type ReplicaContents,
  type ReplicaStorage,
  type ReplicaStorages,
  type ReplicaTexts,
  type ReplicaWrite,
} from './storage.js'

/**
 * A replica's storage that lasts as long as the object: for tests, and for a Node script that
 * needs no copy after it exits. Values are kept as JSON text, so they come out as the persistent
 * storages give them back (copies, with the same refusals of what is not JSON).
 */
export class MemoryReplicaStorage implements ReplicaStorage {
  readonly #texts: ReplicaTexts
  #closed = false

  /** `texts`: what it holds, shared with the storages it was opened from (MemoryReplicaStorages). */
  constructor(texts: ReplicaTexts = emptyTexts()) {
    this.#texts = texts
  }

  async load(): Promise<ReplicaContents> {
    this.#check()
    return decodeTexts(this.#texts)
  }

  async write(changes: readonly ReplicaWrite[]): Promise<void> {
    this.#check()
    applyWrites(this.#texts, encodeWrites(changes))
  }

  async close(): Promise<void> {
    this.#closed = true
  }

  #check(): void {
    if (this.#closed) throw closedError()
  }
}

/**
 * Storages by key in memory, for as long as the object lasts: a storage opened again by its key
 * (a replica of every notebook opened again) holds what the last one left.
 */
export class MemoryReplicaStorages implements ReplicaStorages {
  readonly #byKey = new Map<string, ReplicaTexts>()

  async open(key: string): Promise<MemoryReplicaStorage> {
    let texts = this.#byKey.get(checkStorageKey(key))
    if (texts === undefined) {
      texts = emptyTexts()
      this.#byKey.set(key, texts)
    }
    return new MemoryReplicaStorage(texts)
  }

  async remove(key: string): Promise<void> {
    this.#byKey.delete(checkStorageKey(key))
  }
}
