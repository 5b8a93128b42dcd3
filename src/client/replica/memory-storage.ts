import { parseJson } from '../parse-json.js'
import {
  closedError,
  emptyContents,
  encodeWrites,
  REPLICA_TABLES,
  type ReplicaContents,
  type ReplicaStorage,
  type ReplicaTable,
  type ReplicaWrite,
} from './storage.js'

/**
 * A replica's storage that lasts as long as the object: for tests, and for a Node script that
 * needs no copy after it exits. Values are kept as JSON text, so they come out as the persistent
 * storages give them back (copies, with the same refusals of what is not JSON).
 */
export class MemoryReplicaStorage implements ReplicaStorage {
  readonly #tables: Record<ReplicaTable, Map<string, string>> = {
    notes: new Map(),
    outbox: new Map(),
    meta: new Map(),
    conflicts: new Map(),
  }
  #closed = false

  async load(): Promise<ReplicaContents> {
    this.#check()
    const contents = emptyContents()
    for (const table of REPLICA_TABLES) {
      const texts = this.#tables[table]
      for (const key of [...texts.keys()].sort()) {
        contents[table].set(key, parseJson(texts.get(key) as string))
      }
    }
    return contents
  }

  async write(changes: readonly ReplicaWrite[]): Promise<void> {
    this.#check()
    for (const change of encodeWrites(changes)) {
      const texts = this.#tables[change.table]
      if ('clear' in change) texts.clear()
      else if ('delete' in change) texts.delete(change.key)
      else texts.set(change.key, change.text)
    }
  }

  async close(): Promise<void> {
    this.#closed = true
  }

  #check(): void {
    if (this.#closed) throw closedError()
  }
}
