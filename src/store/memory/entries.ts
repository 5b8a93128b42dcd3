import { isIndexable } from '../kernel/id-placement.js'
import type { IdSpace } from '../kernel/id-space.js'
import type { NoteRecord, PageQuery } from '../types.js'

/** The past states of an entry (revisions.ts), oldest first. */
export interface PastStates {
  /**
   * Each state's JSON: the string the note held. The slots before `head` are of states already
   * let go, cleared a few at a time (revisions.ts).
   */
  readonly json: string[]
  /**
   * [time, sequence, time, sequence, ...]: two doubles a state, unboxed: when it was written (ms)
   * and the change sequence of its ETag in `epoch` (-1 when its ETag is another epoch's: `odd`).
   */
  readonly marks: number[]
  /** The slot of the oldest state kept, in `json` and `odd` (twice it in `marks`). */
  head: number
  /** The epoch of the ETags kept as sequences: the first state's. */
  epoch: string | undefined
  /** The ETags of another epoch, by state ('' for those of `epoch`); undefined while none came. */
  odd: string[] | undefined
  /** The ETags of the states a create made (the first, a restore from the trash), oldest first. */
  created: string[] | undefined
  /** States ever kept, and ever let go (from the oldest): the budget's queue tells them apart. */
  pushed: number
  dropped: number
}

/**
 * How a memory store holds its notes: entries in an array in list order (positions increase
 * strictly along it), walked by position for a page, and an index from numeric id to entry.
 */
export interface Entry extends NoteRecord {
  /** The note's `id` field: a number unless a PATCH made it something else. */
  id: unknown
  json: string
  etag: string
  modified: number
  /** UTF-8 length of `json`, counted against maxBytes. */
  bytes: number
  /** The note's place in the list: the change sequence of its create, never reused. */
  readonly position: number
  /** False once deleted: the slot stays in the list array until the next compaction. */
  alive: boolean
  /** What made the current state: a create (or a restore from the trash), or an update. */
  change: 'created' | 'updated'
  /** The note's past states, oldest first (revisions.ts); undefined when it has none. */
  past: PastStates | undefined
}

/** The index of the first entry whose position is above `after` (binary search). */
export function firstAbove(entries: readonly Entry[], after: number): number {
  let low = 0
  let high = entries.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if ((entries[middle] as Entry).position <= after) low = middle + 1
    else high = middle
  }
  return low
}

/**
 * One page of `notes` (in list order, dead slots skipped): the JSON array of up to `limit` live
 * notes past the position `after` in walk order, and the position to continue after while more
 * follow. Costs O(log n + limit).
 */
export function walkPage(
  notes: readonly Entry[],
  { limit, order, after }: Pick<PageQuery, 'limit' | 'order' | 'after'>,
): { json: string; next: number | undefined } {
  if (typeof after === 'object') throw new TypeError('sort=created walks after a list position')

  const step = order === 'asc' ? 1 : -1
  // Where the walk starts: the first note past `after` in walk order (positions are integers,
  // so the last one below `after` is just before the first one at or above it).
  let i =
    after === undefined
      ? step === 1
        ? 0
        : notes.length - 1
      : step === 1
        ? firstAbove(notes, after)
        : firstAbove(notes, after - 1) - 1
  const parts: string[] = []
  let sent: number | undefined
  let next: number | undefined
  for (; i >= 0 && i < notes.length; i += step) {
    const entry = notes[i] as Entry
    if (!entry.alive) continue
    if (parts.length === limit) {
      next = sent
      break
    }
    parts.push(entry.json)
    sent = entry.position
  }
  return { json: `[${parts.join(',')}]`, next }
}

/**
 * id -> the entry holding it, or its holders in list order when a PATCH duplicated it (the first
 * is the one found). Which ids notes hold is told to the store's IdSpace, so that
 * creates step over them.
 */
export class EntryIndex {
  readonly #ids: IdSpace
  readonly #byId = new Map<number, Entry | Entry[]>()

  constructor(ids: IdSpace) {
    this.#ids = ids
  }

  find(id: number): Entry | undefined {
    const found = this.#byId.get(id)
    return Array.isArray(found) ? found[0] : found
  }

  /** Indexes a created entry at the fresh id it was given, which no other note holds. */
  addFresh(id: number, entry: Entry): void {
    this.#byId.set(id, entry)
  }

  /** Indexes an entry that a PATCH moved to its id (a create indexes its fresh id itself). */
  add(entry: Entry): void {
    const { id } = entry
    if (!isIndexable(id)) return
    if (this.#ids.hold(id)) {
      // Above every id a note has held: no other holder to find.
      this.#byId.set(id, entry)
      return
    }
    const found = this.#byId.get(id)
    if (found === undefined) {
      this.#byId.set(id, entry)
      return
    }
    const holders = Array.isArray(found) ? found : [found]
    let at = holders.length
    while (at > 0 && (holders[at - 1] as Entry).position > entry.position) at--
    holders.splice(at, 0, entry)
    if (holders !== found) this.#byId.set(id, holders)
  }

  /** Gives an entry another `id` field (a PATCH, or one undone) and indexes it there. */
  move(entry: Entry, id: unknown): void {
    if (id === entry.id) return
    this.remove(entry)
    entry.id = id
    this.add(entry)
  }

  remove(entry: Entry): void {
    const { id } = entry
    if (!isIndexable(id)) return
    this.#ids.release(id)
    const found = this.#byId.get(id)
    if (!Array.isArray(found)) {
      this.#byId.delete(id)
      return
    }
    found.splice(found.indexOf(entry), 1)
    if (found.length === 1) this.#byId.set(id, found[0] as Entry)
  }
}
