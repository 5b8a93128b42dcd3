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
  readonly #bytes: Map<string, Blob>
  #closed = false

  /**
   * `texts` and `bytes`: what it holds, shared with the storages it was opened from
   * (MemoryReplicaStorages).
   */
  constructor(texts: ReplicaTexts = emptyTexts(), bytes = new Map<string, Blob>()) {
    this.#texts = texts
    this.#bytes = bytes
  }

  async load(): Promise<ReplicaContents> {
    this.#check()
    return decodeTexts(this.#texts)
  }

  async write(changes: readonly ReplicaWrite[]): Promise<void> {
    this.#check()
    applyWrites(this.#texts, encodeWrites(changes))
  }

  async putBytes(key: string, bytes: Blob): Promise<void> {
    this.#check()
    // A slice without a type: the bytes alone, as the other storages give them back.
    this.#bytes.set(checkStorageKey(key), bytes.slice(0, bytes.size))
  }

  async getBytes(key: string): Promise<Blob | undefined> {
    this.#check()
    return this.#bytes.get(checkStorageKey(key))
  }

  async deleteBytes(key: string): Promise<void> {
    this.#check()
    this.#bytes.delete(checkStorageKey(key))
  }

  async bytesKeys(): Promise<string[]> {
    this.#check()
    return [...this.#bytes.keys()].sort()
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
  readonly #byKey = new Map<string, { texts: ReplicaTexts; bytes: Map<string, Blob> }>()

  async open(key: string): Promise<MemoryReplicaStorage> {
    let held = this.#byKey.get(checkStorageKey(key))
    if (held === undefined) {
      held = { texts: emptyTexts(), bytes: new Map() }
      this.#byKey.set(key, held)
    }
    return new MemoryReplicaStorage(held.texts, held.bytes)
  }

  async remove(key: string): Promise<void> {
    this.#byKey.delete(checkStorageKey(key))
  }
}
