import { compareKeys } from '../kernel/change-key.js'
import { matchesText } from '../kernel/search.js'
import type { ChangeKey, PageQuery, PageRecord } from '../types.js'
import type { NotebookDb } from './notebook-db.js'
import { readSequence } from './queries.js'
import { SearchCache } from './search-cache.js'
import { likePattern } from './search-text.js'

/**
 * The ChangeKey of a row, as notes_by_change indexes it (migration 5): a note whose id is not a
 * number has a NULL id, which sorts as Infinity, after every numeric id of the same ms.
 */
const KEY_ID = `coalesce(id, 'Infinity'::double precision)`

interface ChangeRow {
  sequence: string
  position: string | null
  json: string | null
  modified: string | null
  key_id: number | null
}

/** The notes matching one `q` at one version, in the order of last change. */
interface ChangeSearch {
  readonly keys: ChangeKey[]
  readonly notes: string[]
}

/**
 * The list in the order of last change (sort=updated) of a PostgreSQL notebook: a page is one
 * keyset range of the index on (notebook, modified, id, position), so it costs O(limit) whatever
 * the notebook holds; a `q` is searched once per version and kept, as the list order's is.
 */
export class ChangePages {
  readonly #searches = new SearchCache<ChangeSearch>()

  async page(db: NotebookDb, { limit, order, after, q }: PageQuery): Promise<PageRecord> {
    if (typeof after === 'number') throw new TypeError('sort=updated walks after a ChangeKey')
    if (q !== undefined) return this.#searchPage(db, limit, order, after, q)
    const rows = await readChangePage(db, order === 'asc', after, limit + 1)
    const first = rows[0] as ChangeRow & { notes: string }
    const at = Number(first.sequence)
    db.see(at)
    const notes = rows.filter((row) => row.json !== null)
    const sent = notes.slice(0, limit)
    return {
      json: `[${sent.map((row) => row.json).join(',')}]`,
      version: db.token(at),
      total: Number(first.notes),
      next: notes.length > limit ? keyOfRow(sent.at(-1) as ChangeRow) : undefined,
    }
  }

  async #searchPage(
    db: NotebookDb,
    limit: number,
    order: 'asc' | 'desc',
    after: ChangeKey | undefined,
    q: string,
  ): Promise<PageRecord> {
    const sequence = await readSequence(db)
    let search = this.#searches.get(sequence, q)
    let at = sequence
    if (search === undefined) {
      const rows = await readChangeCandidates(db, likePattern(q))
      at = Number((rows[0] as ChangeRow).sequence)
      db.see(at)
      const matches = matchesText(q)
      search = { keys: [], notes: [] }
      for (const row of rows) {
        if (row.json !== null && matches(row.json)) {
          search.keys.push(keyOfRow(row))
          search.notes.push(row.json)
        }
      }
      this.#searches.set(at, q, search)
    }
    const { json, next } = pageOfChangeSearch(search, limit, order, after)
    return { json, version: db.token(at), total: search.keys.length, next }
  }
}

/**
 * A list-order query (sort=created) as its walk needs it, `after` a list position; a ChangeKey
 * there is the caller's mistake (the API refuses a cursor of one sort with the other).
 */
export function byPosition(query: PageQuery): PageQuery & { readonly after: number | undefined } {
  const { after } = query
  if (typeof after === 'object') throw new TypeError('sort=created walks after a list position')
  return { ...query, after }
}

function keyOfRow(row: ChangeRow): ChangeKey {
  return { modified: Number(row.modified), id: Number(row.key_id), position: Number(row.position) }
}

/**
 * One page of a search in the order of last change: up to `limit` notes past `after` in walk
 * order; `next` is the last one's key when more follow.
 */
function pageOfChangeSearch(
  { keys, notes }: ChangeSearch,
  limit: number,
  order: 'asc' | 'desc',
  after: ChangeKey | undefined,
): { json: string; next: ChangeKey | undefined } {
  // The first key past `after` (asc), or at or past it (desc: the walk starts just before it).
  let low = 0
  let high = keys.length
  if (after !== undefined) {
    while (low < high) {
      const middle = (low + high) >>> 1
      const against = compareKeys(keys[middle] as ChangeKey, after)
      if (against < 0 || (order === 'asc' && against === 0)) low = middle + 1
      else high = middle
    }
  }
  const step = order === 'asc' ? 1 : -1
  let i = order === 'asc' ? low : (after === undefined ? keys.length : low) - 1
  const sent: string[] = []
  for (; i >= 0 && i < keys.length && sent.length < limit; i += step) {
    sent.push(notes[i] as string)
  }
  const more = i >= 0 && i < keys.length
  return { json: `[${sent.join(',')}]`, next: more ? keys[i - step] : undefined }
}

/**
 * Up to `limit` notes past `after` in the order of last change, walking `asc` or not, each row
 * with the version and the number of notes; one row with null notes when the page is empty.
 */
async function readChangePage(
  db: NotebookDb,
  asc: boolean,
  after: ChangeKey | undefined,
  limit: number,
): Promise<(ChangeRow & { notes: string })[]> {
  const values: unknown[] = [db.name, limit]
  if (after !== undefined) values.push(after.modified, after.id, after.position)
  const { rows } = await db.query<ChangeRow & { notes: string }>(
    changePageSql(asc, after !== undefined),
    values,
  )
  return rows
}

/**
 * The statement of readChangePage: $1 the notebook, $2 the limit, and with `past` $3, $4, $5 the
 * key to start after. Its inner ORDER BY and comparison are the index's columns, so that a page
 * is a range scan of notes_by_change (forward, or backward for desc) that stops at the limit.
 */
export function changePageSql(asc: boolean, past: boolean): string {
  const direction = asc ? 'ASC' : 'DESC'
  const from = past
    ? `AND (modified, ${KEY_ID}, position) ${asc ? '>' : '<'} ($3::bigint, $4::double precision, $5::bigint)`
    : ''
  return `SELECT n.sequence, n.notes, p.position, p.json, p.modified, p.key_id FROM notes_notebooks n
    LEFT JOIN LATERAL (
      SELECT position, json, modified, ${KEY_ID} AS key_id FROM notes
      WHERE notebook = $1 ${from}
      ORDER BY modified ${direction}, ${KEY_ID} ${direction}, position ${direction} LIMIT $2
    ) p ON true
    WHERE n.notebook = $1
    ORDER BY p.modified ${direction}, p.key_id ${direction}, p.position ${direction}`
}

/**
 * The notes whose search text is LIKE `pattern` (candidates for a `q`) in the order of last
 * change, each row with the version; one row with null notes when there are none.
 */
async function readChangeCandidates(db: NotebookDb, pattern: string): Promise<ChangeRow[]> {
  const { rows } = await db.query<ChangeRow>(
    `SELECT n.sequence, p.position, p.json, p.modified, p.key_id FROM notes_notebooks n
    LEFT JOIN LATERAL (
      SELECT position, json, modified, ${KEY_ID} AS key_id FROM notes
      WHERE notebook = $2 AND search LIKE $1
    ) p ON true
    WHERE n.notebook = $2
    ORDER BY p.modified, p.key_id, p.position`,
    [pattern, db.name],
  )
  return rows
}
