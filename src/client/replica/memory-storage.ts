import {
  applyWrites,
  emptyContents,
  type ReplicaContents,
  type ReplicaStorage,
  type ReplicaWrite,
  sortedContents,
} from './storage.js'

/**
 * A replica's storage that lasts as long as the object: for tests, and for a Node script that
 * needs no copy after it exits. Values are copied in and out, as a real storage would.
 */
export class MemoryReplicaStorage implements ReplicaStorage {
  #contents = emptyContents()
  #closed = false

  async load(): Promise<ReplicaContents> {
    this.#check()
    const copy = sortedContents(this.#contents)
    for (const table of Object.values(copy)) {
      for (const [key, value] of table) table.set(key, structuredClone(value))
    }
    return copy
  }

  async write(changes: readonly ReplicaWrite[]): Promise<void> {
    this.#check()
    applyWrites(
      this.#contents,
      changes.map((change) =>
        'value' in change ? { ...change, value: structuredClone(change.value) } : change,
      ),
    )
  }

  async close(): Promise<void> {
    this.#closed = true
  }

  #check(): void {
    if (this.#closed) throw new Error('This replica storage is closed.')
  }
}
