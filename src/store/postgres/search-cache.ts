import { MAX_CACHED_SEARCHES } from '../kernel/defaults.js'
import { matchesText } from '../kernel/search.js'

/** The notes matching one `q` at one version, in list order. */
export interface Search {
  readonly positions: number[]
  readonly notes: string[]
}

/**
 * The searches of the current version (at most MAX_CACHED_SEARCHES), so that paging through the
 * results of a `q` costs one scan of the candidates, not one a page. A newer version drops them.
 */
export class SearchCache<S = Search> {
  #sequence = -1
  #byQuery = new Map<string, S>()

  /** The search for `q` at version `sequence`, if it was kept. */
  get(sequence: number, q: string): S | undefined {
    return this.#sequence === sequence ? this.#byQuery.get(q) : undefined
  }

  set(sequence: number, q: string, search: S): void {
    if (this.#sequence !== sequence) {
      this.#sequence = sequence
      this.#byQuery = new Map()
    }
    if (this.#byQuery.size >= MAX_CACHED_SEARCHES) this.#byQuery.clear()
    this.#byQuery.set(q, search)
  }
}

/**
 * The notes among `candidates` (the index's, in list order) that match `q` (matchesText decides:
 * the index only narrows).
 */
export function searchAmong(
  candidates: readonly { position: string | null; json: string | null }[],
  q: string,
): Search {
  const matches = matchesText(q)
  const search: Search = { positions: [], notes: [] }
  for (const row of candidates) {
    if (row.json !== null && matches(row.json)) {
      search.positions.push(Number(row.position))
      search.notes.push(row.json)
    }
  }
  return search
}

/**
 * One page of a search (`q`): up to `limit` notes after list position `after`, walking
 * `order`; `next` is the last one's position when more follow.
 * positions [2, 5, 9], limit 2, 'asc', after undefined -> notes at 2 and 5, next 5
 * positions [2, 5, 9], limit 2, 'desc', after 9 -> notes at 5 and 2, next undefined
 */
export function pageOfSearch(
  { positions, notes }: Search,
  limit: number,
  order: 'asc' | 'desc',
  after: number | undefined,
): { json: string; next: number | undefined } {
  const sent: string[] = []
  let next: number | undefined
  if (order === 'asc') {
    let i = after === undefined ? 0 : positions.findIndex((p) => p > after)
    if (i === -1) i = positions.length
    for (; i < positions.length; i++) {
      if (sent.length === limit) {
        next = positions[i - 1]
        break
      }
      sent.push(notes[i] as string)
    }
  } else {
    let i = positions.length - 1
    if (after !== undefined) while (i >= 0 && (positions[i] as number) >= after) i--
    for (; i >= 0; i--) {
      if (sent.length === limit) {
        next = positions[i + 1]
        break
      }
      sent.push(notes[i] as string)
    }
  }
  return { json: `[${sent.join(',')}]`, next }
}
