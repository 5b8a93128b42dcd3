import { MAX_CACHED_SEARCHES } from '../kernel/defaults.js'
import { matchesText } from '../kernel/search.js'
import type { ListRecord } from '../types.js'
import type { ChangeOrder } from './change-order.js'
import type { Entry } from './entries.js'

/**
 * A memory store's answers that are worth keeping until its next write: the whole list, and the
 * notes matching each `q`, so that paging through a search does not search again for each page.
 */
export class ReadCache {
  /** The whole list at this version, once asked for. */
  list: ListRecord | undefined
  /** q -> the notes matching it, in list order. */
  #matches = new Map<string, Entry[]>()
  /** q -> the notes matching it, in the order of last change (sort=updated). */
  #changedMatches = new Map<string, Entry[]>()

  /** The live notes of `entries` (the list, in order) that match q, kept for this version. */
  matching(q: string, entries: readonly Entry[]): Entry[] {
    const cached = this.#matches.get(q)
    if (cached !== undefined) return cached
    const matches = matchesText(q)
    const found: Entry[] = []
    for (const entry of entries) if (entry.alive && matches(entry.json)) found.push(entry)
    if (this.#matches.size >= MAX_CACHED_SEARCHES) this.#matches.clear()
    this.#matches.set(q, found)
    return found
  }

  /** The notes of `order` that match q, in its order, kept for this version. */
  matchingByChange(q: string, order: ChangeOrder): Entry[] {
    const cached = this.#changedMatches.get(q)
    if (cached !== undefined) return cached
    const matches = matchesText(q)
    const found: Entry[] = []
    for (const chunk of order.chunks)
      for (const entry of chunk) if (matches(entry.json)) found.push(entry)
    if (this.#changedMatches.size >= MAX_CACHED_SEARCHES) this.#changedMatches.clear()
    this.#changedMatches.set(q, found)
    return found
  }

  /** Drops every answer kept: the version they were for has passed. */
  clear(): void {
    if (this.list !== undefined || this.#matches.size > 0 || this.#changedMatches.size > 0) {
      this.list = undefined
      this.#matches = new Map()
      this.#changedMatches = new Map()
    }
  }
}
