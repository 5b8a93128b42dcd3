/**
 * Where a replica keeps its copy between runs: four tables of JSON values by string key, written
 * all or nothing. Implementations: memory (tests, Node scripts), IndexedDB (browsers) and a file
 * (Node); one shared suite checks them all the same way.
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
  /** Everything stored, as the last completed write left it. */
  load(): Promise<ReplicaContents>
  /**
   * Applies the changes in order, all or none of them, after every write called before it. The
   * promise settles once they survive a crash of the process (and, for a file, of the machine).
   * Values are JSON values (objects, arrays, strings, finite numbers, booleans, null).
   */
  write(changes: readonly ReplicaWrite[]): Promise<void>
  /** Releases what the storage holds open; later calls reject. */
  close(): Promise<void>
}

/** An empty ReplicaContents. */
export function emptyContents(): ReplicaContents {
  return { notes: new Map(), outbox: new Map(), meta: new Map(), conflicts: new Map() }
}

/** Applies changes to contents in place (the meaning every implementation shares). */
export function applyWrites(contents: ReplicaContents, changes: readonly ReplicaWrite[]): void {
  for (const change of changes) {
    const table = contents[change.table]
    if ('clear' in change) table.clear()
    else if ('delete' in change) table.delete(change.key)
    else table.set(change.key, change.value)
  }
}

/** The contents with each table's keys in ascending order, as load() answers them. */
export function sortedContents(contents: ReplicaContents): ReplicaContents {
  const sorted = emptyContents()
  for (const table of REPLICA_TABLES) {
    for (const key of [...contents[table].keys()].sort()) {
      sorted[table].set(key, contents[table].get(key))
    }
  }
  return sorted
}
