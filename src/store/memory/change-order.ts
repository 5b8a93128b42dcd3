import { keyId } from '../kernel/change-key.js'
import type { ChangeKey, PageQuery } from '../types.js'
import type { Entry } from './entries.js'

/**
 * Most entries a chunk holds before it is split in two. 100,000 notes are some 200 to 400
 * chunks: finding a place is two binary searches, moving one is a splice of at most this many.
 */
const MAX_CHUNK = 1024

function keyOf(entry: Entry): ChangeKey {
  return { modified: entry.modified, id: keyId(entry.id), position: entry.position }
}

/**
 * Where an entry stands against a key in the order of last change: < 0 before, 0 at, > 0 after
 * (compareKeys, without making the entry's key).
 */
function compareToKey(entry: Entry, key: ChangeKey): number {
  if (entry.modified !== key.modified) return entry.modified < key.modified ? -1 : 1
  const id = keyId(entry.id)
  if (id !== key.id) return id < key.id ? -1 : 1
  return entry.position - key.position
}

/** The index of the first entry of `chunk` at or after `key` (`strict`: after it). */
function firstFrom(chunk: readonly Entry[], key: ChangeKey, strict: boolean): number {
  let low = 0
  let high = chunk.length
  while (low < high) {
    const middle = (low + high) >>> 1
    const against = compareToKey(chunk[middle] as Entry, key)
    if (against < 0 || (strict && against === 0)) low = middle + 1
    else high = middle
  }
  return low
}

/** The index of the first chunk whose last entry is at or after `key` (`strict`: after it). */
function chunkFrom(chunks: readonly Entry[][], key: ChangeKey, strict: boolean): number {
  let low = 0
  let high = chunks.length
  while (low < high) {
    const middle = (low + high) >>> 1
    const chunk = chunks[middle] as Entry[]
    const against = compareToKey(chunk[chunk.length - 1] as Entry, key)
    if (against < 0 || (strict && against === 0)) low = middle + 1
    else high = middle
  }
  return low
}

/**
 * A memory store's live notes in the order of last change (ChangeKey), for sort=updated: a list
 * of sorted chunks, so that a write moves its note in O(log n + MAX_CHUNK) and a page costs
 * O(log n + limit), without a sort per request. A write usually stamps the newest time and lands
 * at the end; a clock that goes back (or a batch undone) puts it wherever its key says.
 * Entries are removed before their key changes (a write) and added back after.
 */
export class ChangeOrder {
  #chunks: Entry[][] = []

  add(entry: Entry): void {
    const chunks = this.#chunks
    const key = keyOf(entry)
    let at = chunkFrom(chunks, key, true)
    if (at === chunks.length) {
      if (at === 0) {
        chunks.push([entry])
        return
      }
      at--
    }
    const chunk = chunks[at] as Entry[]
    chunk.splice(firstFrom(chunk, key, true), 0, entry)
    if (chunk.length > MAX_CHUNK) chunks.splice(at + 1, 0, chunk.splice(MAX_CHUNK >>> 1))
  }

  /** Takes out an entry that was added with the key it holds now. */
  remove(entry: Entry): void {
    const chunks = this.#chunks
    const key = keyOf(entry)
    const at = chunkFrom(chunks, key, false)
    const chunk = chunks[at]
    const i = chunk === undefined ? -1 : firstFrom(chunk, key, false)
    if (chunk === undefined || chunk[i] !== entry) {
      throw new Error(`no note at ${JSON.stringify(key)} in the order of last change`)
    }
    chunk.splice(i, 1)
    if (chunk.length === 0) chunks.splice(at, 1)
  }

  /** Makes the order hold exactly `entries` (the live ones), whatever it held (a load). */
  fill(entries: readonly Entry[]): void {
    const sorted = entries.filter((entry) => entry.alive)
    sorted.sort((a, b) => compareToKey(a, keyOf(b)))
    this.#chunks = []
    for (let i = 0; i < sorted.length; i += MAX_CHUNK >>> 1) {
      this.#chunks.push(sorted.slice(i, i + (MAX_CHUNK >>> 1)))
    }
  }

  /** Every live note in the order of last change, in chunks (to search). */
  get chunks(): readonly (readonly Entry[])[] {
    return this.#chunks
  }

  /** A page of the order, or of `found` (a search's matches, in this order) when given. */
  page(
    query: Pick<PageQuery, 'limit' | 'order' | 'after'>,
    found?: readonly Entry[],
  ): { json: string; next: ChangeKey | undefined } {
    const chunks = found === undefined ? this.#chunks : found.length > 0 ? [found] : []
    return walkByChange(chunks, query)
  }
}

/**
 * One page of `chunks` (entries in the order of last change): the JSON array of up to `limit`
 * notes past the key `after` in walk order, and the key to continue after while more follow.
 * Costs O(log n + limit).
 */
function walkByChange(
  chunks: readonly (readonly Entry[])[],
  { limit, order, after }: Pick<PageQuery, 'limit' | 'order' | 'after'>,
): { json: string; next: ChangeKey | undefined } {
  if (typeof after === 'number') throw new TypeError('sort=updated walks after a ChangeKey')
  let c: number
  let i: number
  if (order === 'asc') {
    c = after === undefined ? 0 : chunkFrom(chunks as Entry[][], after, true)
    i =
      after === undefined || c === chunks.length ? 0 : firstFrom(chunks[c] as Entry[], after, true)
  } else {
    // The last entry before `after`: just before the first one at or after it.
    c = after === undefined ? chunks.length - 1 : chunkFrom(chunks as Entry[][], after, false)
    if (c === chunks.length) c--
    const chunk = chunks[c]
    i =
      chunk === undefined
        ? -1
        : after === undefined
          ? chunk.length - 1
          : firstFrom(chunk, after, false) - 1
  }
  const step = order === 'asc' ? 1 : -1
  const parts: string[] = []
  let last: Entry | undefined
  let more = false
  walk: while (c >= 0 && c < chunks.length) {
    const chunk = chunks[c] as readonly Entry[]
    for (; i >= 0 && i < chunk.length; i += step) {
      if (parts.length === limit) {
        more = true
        break walk
      }
      last = chunk[i] as Entry
      parts.push(last.json)
    }
    c += step
    i = step === 1 ? 0 : (chunks[c]?.length ?? 0) - 1
  }
  return {
    json: `[${parts.join(',')}]`,
    next: more && last !== undefined ? keyOf(last) : undefined,
  }
}
