import type { PageQuery } from '../store/types.js'

/** What a list request asks for: the whole list, or a page of it. */
export type ListRequest =
  | { readonly kind: 'whole' }
  | { readonly kind: 'page'; readonly query: PageQuery; readonly paged: boolean }
  | { readonly kind: 'bad'; readonly detail: string }

const WHOLE_LIST: ListRequest = Object.freeze({ kind: 'whole' })

export const MAX_LIMIT = 1000
export const DEFAULT_LIMIT = 100
export const MAX_Q_LENGTH = 256

/**
 * Reads `limit`, `after`, `order` and `q` from a query string (without the '?'); every other
 * parameter is ignored, as the contract's list ignores them. The first of repeated parameters counts.
 * '' -> whole; 'limit=2&order=desc' -> a page of 2 from the newest;
 * 'order=desc' -> the whole list reversed (a page without a limit); 'limit=0' -> bad
 */
export function parseListQuery(search: string): ListRequest {
  if (search === '') return WHOLE_LIST
  const params = new URLSearchParams(search)
  const limitText = params.get('limit')
  const afterText = params.get('after')
  const orderText = params.get('order')
  const q = params.get('q') ?? undefined
  if (limitText === null && afterText === null && orderText === null && q === undefined) {
    return WHOLE_LIST
  }
  let limit = Number.MAX_SAFE_INTEGER
  if (limitText !== null) {
    limit = /^[0-9]{1,4}$/.test(limitText) ? Number(limitText) : 0
    if (limit < 1 || limit > MAX_LIMIT) {
      return bad(`limit must be a whole number from 1 to ${MAX_LIMIT}; got "${clip(limitText)}".`)
    }
  } else if (afterText !== null) {
    limit = DEFAULT_LIMIT
  }
  if (orderText !== null && orderText !== 'asc' && orderText !== 'desc') {
    return bad(`order must be "asc" or "desc"; got "${clip(orderText)}".`)
  }
  const order = orderText === 'desc' ? 'desc' : 'asc'
  let after: number | undefined
  if (afterText !== null) {
    const cursor = readCursor(afterText)
    if (cursor === undefined) {
      return bad(
        'after must be the cursor from a Link: rel="next" header of this list, as it was given.',
      )
    }
    if (cursor.order !== order) {
      return bad(
        `after belongs to a walk with order=${cursor.order}; keep order=${cursor.order} to go on, or start again without after.`,
      )
    }
    after = cursor.position
  }
  if (q !== undefined) {
    const length = [...q].length
    if (length === 0 || length > MAX_Q_LENGTH) {
      return bad(`q must be 1 to ${MAX_Q_LENGTH} characters of text to search for; got ${length}.`)
    }
  }
  return {
    kind: 'page',
    query: { limit, order, after, q },
    paged: limitText !== null || afterText !== null,
  }
}

/**
 * The URL of the page after the one that ended at `position`, for Link: rel="next".
 * (limit 2, desc, q 'a b') and 17 -> '/api/note?limit=2&order=desc&q=a%20b&after=d11.1x3k9a'
 */
export function nextPageUrl(path: string, query: PageQuery, position: number): string {
  let url = `${path}?limit=${query.limit}`
  if (query.order === 'desc') url += '&order=desc'
  if (query.q !== undefined) url += `&q=${encodeURIComponent(query.q)}`
  return `${url}&after=${writeCursor(query.order, position)}`
}

/**
 * An opaque cursor: the walk's direction and the list position of the last note seen, with a
 * check, so that a cursor typed by hand or cut short is refused with a 400, not answered with a
 * wrong page. It is not a secret: a client that forges one just skips to another position.
 * ('asc', 35) -> 'az.<check>'
 */
function writeCursor(order: 'asc' | 'desc', position: number): string {
  const body = `${order === 'desc' ? 'd' : 'a'}${position.toString(36)}`
  return `${body}.${check(body)}`
}

function readCursor(text: string): { order: 'asc' | 'desc'; position: number } | undefined {
  const match = /^([ad])([0-9a-z]{1,11})\.([0-9a-z]{1,7})$/.exec(text)
  if (match === null) return undefined
  const [, direction, digits, given] = match as unknown as [string, string, string, string]
  if (check(`${direction}${digits}`) !== given) return undefined
  const position = Number.parseInt(digits, 36)
  if (!Number.isSafeInteger(position)) return undefined
  return { order: direction === 'd' ? 'desc' : 'asc', position }
}

/** FNV-1a, 32 bits, in base 36: enough that a changed character fails it. */
function check(body: string): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < body.length; i++) {
    hash ^= body.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return (hash >>> 0).toString(36)
}

function bad(detail: string): ListRequest {
  return { kind: 'bad', detail }
}

/** A parameter as quoted in a detail: at most 40 characters of it. */
function clip(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}...` : text
}
