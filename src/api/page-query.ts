import type { ChangeKey, PageQuery } from '../store/types.js'

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
 * Reads `limit`, `after`, `order`, `sort` and `q` from a query string (without the '?'); every
 * other parameter is ignored, as the contract's list ignores them. The first of repeated
 * parameters counts.
 * '' -> whole; 'limit=2&order=desc' -> a page of 2 from the newest;
 * 'order=desc' -> the whole list reversed (a page without a limit); 'limit=0' -> bad;
 * 'sort=updated' -> the whole list in the order of last change; 'sort=created' -> whole
 */
export function parseListQuery(search: string): ListRequest {
  if (search === '') return WHOLE_LIST
  const params = new URLSearchParams(search)
  const limitText = params.get('limit')
  const afterText = params.get('after')
  const orderText = params.get('order')
  const sortText = params.get('sort')
  const q = params.get('q') ?? undefined
  if (
    limitText === null &&
    afterText === null &&
    orderText === null &&
    (sortText === null || sortText === 'created') &&
    q === undefined
  ) {
    return WHOLE_LIST
  }
  let limit = Number.MAX_SAFE_INTEGER
  if (limitText !== null) {
    const read = readLimit(limitText)
    if (typeof read === 'string') return bad(read)
    limit = read
  } else if (afterText !== null) {
    limit = DEFAULT_LIMIT
  }
  if (orderText !== null && orderText !== 'asc' && orderText !== 'desc') {
    return bad(`order must be "asc" or "desc"; got "${clip(orderText)}".`)
  }
  const order = orderText === 'desc' ? 'desc' : 'asc'
  if (sortText !== null && sortText !== 'created' && sortText !== 'updated') {
    return bad(`sort must be "created" or "updated"; got "${clip(sortText)}".`)
  }
  const sort = sortText === 'updated' ? 'updated' : 'created'
  let after: number | ChangeKey | undefined
  if (afterText !== null) {
    const cursor = readCursor(afterText)
    if (cursor === undefined) {
      return bad(
        'after must be the cursor from a Link: rel="next" header of this list, as it was given.',
      )
    }
    if (cursor.sort !== sort) {
      return bad(
        `after belongs to a walk with sort=${cursor.sort}; keep sort=${cursor.sort} to go on, or start again without after.`,
      )
    }
    if (cursor.order !== order) {
      return bad(
        `after belongs to a walk with order=${cursor.order}; keep order=${cursor.order} to go on, or start again without after.`,
      )
    }
    after = cursor.after
  }
  if (q !== undefined) {
    const length = [...q].length
    if (length === 0 || length > MAX_Q_LENGTH) {
      return bad(`q must be 1 to ${MAX_Q_LENGTH} characters of text to search for; got ${length}.`)
    }
  }
  return {
    kind: 'page',
    query: sort === 'updated' ? { limit, order, sort, after, q } : { limit, order, after, q },
    paged: limitText !== null || afterText !== null,
  }
}

/**
 * The URL of the page after the one that ended at `next` (PageRecord.next), for Link: rel="next".
 * (limit 2, desc, q 'a b') and 17 -> '/api/note?limit=2&order=desc&q=a%20b&after=d11.1x3k9a'
 * (limit 2, sort updated) and (1000, 7, 3) -> '/api/note?limit=2&sort=updated&after=uars_i7_3.<check>'
 */
export function nextPageUrl(path: string, query: PageQuery, next: number | ChangeKey): string {
  let url = `${path}?limit=${query.limit}`
  if (query.sort === 'updated') url += '&sort=updated'
  if (query.order === 'desc') url += '&order=desc'
  if (query.q !== undefined) url += `&q=${encodeURIComponent(query.q)}`
  return `${url}&after=${writeCursor(query.order, next)}`
}

interface Cursor {
  readonly sort: 'created' | 'updated'
  readonly order: 'asc' | 'desc'
  readonly after: number | ChangeKey
}

/**
 * An opaque cursor: the walk's direction and the place of the last note seen (its list position,
 * or for sort=updated 'u' and its ChangeKey), with a check, so that a cursor typed by hand or cut
 * short is refused with a 400, not answered with a wrong page. It is not a secret: a client that
 * forges one just skips to another place.
 * ('asc', 35) -> 'az.<check>'; ('desc', (1000, 7, 3)) -> 'udrs_i7_3.<check>'
 */
function writeCursor(order: 'asc' | 'desc', after: number | ChangeKey): string {
  const direction = order === 'desc' ? 'd' : 'a'
  const body =
    typeof after === 'number'
      ? `${direction}${after.toString(36)}`
      : `u${direction}${after.modified.toString(36)}_${writeId(after.id)}_${after.position.toString(36)}`
  return `${body}.${check(body)}`
}

/**
 * A ChangeKey's id in a cursor: 'i' and base 36 for a safe integer, 'f' and the 16 hex digits of
 * its IEEE 754 bits for any other finite number, 'n' for none (Infinity).
 * 7 -> 'i7'; -1.5 -> 'fbff8000000000000'; Infinity -> 'n'
 */
function writeId(id: number): string {
  if (Number.isSafeInteger(id)) return `i${id.toString(36)}`
  if (!Number.isFinite(id)) return 'n'
  const bits = new DataView(new ArrayBuffer(8))
  bits.setFloat64(0, id)
  return `f${bits.getBigUint64(0).toString(16).padStart(16, '0')}`
}

function readId(text: string): number | undefined {
  if (text === 'n') return Number.POSITIVE_INFINITY
  if (text.startsWith('i')) {
    const id = Number.parseInt(text.slice(1), 36)
    return Number.isSafeInteger(id) ? id : undefined
  }
  const bits = new DataView(new ArrayBuffer(8))
  bits.setBigUint64(0, BigInt(`0x${text.slice(1)}`))
  const id = bits.getFloat64(0)
  return Number.isFinite(id) && !Number.isSafeInteger(id) ? id : undefined
}

function readCursor(text: string): Cursor | undefined {
  const dot = text.lastIndexOf('.')
  if (dot === -1 || !/^[0-9a-z]{1,7}$/.test(text.slice(dot + 1))) return undefined
  const body = text.slice(0, dot)
  if (check(body) !== text.slice(dot + 1)) return undefined
  const created = /^([ad])([0-9a-z]{1,11})$/.exec(body)
  if (created !== null) {
    const [, direction, digits] = created as unknown as [string, string, string]
    const position = Number.parseInt(digits, 36)
    if (!Number.isSafeInteger(position)) return undefined
    return { sort: 'created', order: direction === 'd' ? 'desc' : 'asc', after: position }
  }
  const updated =
    /^u([ad])(-?[0-9a-z]{1,11})_(i-?[0-9a-z]{1,11}|f[0-9a-f]{16}|n)_([0-9a-z]{1,11})$/.exec(body)
  if (updated === null) return undefined
  const [, direction, modifiedDigits, idText, positionDigits] = updated as unknown as [
    string,
    string,
    string,
    string,
    string,
  ]
  const modified = Number.parseInt(modifiedDigits, 36)
  const id = readId(idText)
  const position = Number.parseInt(positionDigits, 36)
  if (!Number.isSafeInteger(modified) || id === undefined || !Number.isSafeInteger(position)) {
    return undefined
  }
  return {
    sort: 'updated',
    order: direction === 'd' ? 'desc' : 'asc',
    after: { modified, id, position },
  }
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

/** A `limit` parameter: a whole number from 1 to MAX_LIMIT, or the detail of its 400. */
export function readLimit(text: string): number | string {
  const limit = /^[0-9]{1,4}$/.test(text) ? Number(text) : 0
  return limit >= 1 && limit <= MAX_LIMIT
    ? limit
    : `limit must be a whole number from 1 to ${MAX_LIMIT}; got "${clip(text)}".`
}

function bad(detail: string): ListRequest {
  return { kind: 'bad', detail }
}

/** A parameter as quoted in a detail: at most 40 characters of it. */
export function clip(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}...` : text
}
