import {
  applyWrites,
  closedError,
  decodeTexts,
  emptyTexts,
  encodeWrites,
  type ReplicaContents,
  type ReplicaStorage,
  type ReplicaWrite,
} from './storage.js'

/**
 * A replica's storage that lasts as long as the object: for tests, and for a Node script that
 * needs no copy after it exits. Values are kept as JSON text, so they come out as the persistent
 * storages give them back (copies, with the same refusals of what is not JSON).
 */
export class MemoryReplicaStorage implements ReplicaStorage {
  readonly #texts = emptyTexts()
  #closed = false

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
