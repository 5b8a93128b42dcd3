import type { Preconditions } from '../store/types.js'

/**
 * RFC 9110 §13 conditions, read from request headers. ETags here are strong and quoted, as the
 * store writes them ('"k2x9q1.5t"'); a compressed representation's ETag carries a suffix inside
 * the quotes ('"k2x9q1.5t-br"').
 */

/**
 * If-None-Match against the representation's ETag, by weak comparison (§13.1.2):
 * '"a", W/"b"' matches '"b"'; '*' matches anything; no header (undefined) matches nothing.
 * The one implementation of the rule: the API, the notes page and the docs page use it.
 */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header === etag || header === '*') return true
  for (const tag of header.split(',')) {
    const trimmed = tag.trim()
    if ((trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed) === etag) return true
  }
  return false
}

/**
 * The store's preconditions for a write, from If-Match (strong comparison: weak tags never
 * match) or, without it, If-Unmodified-Since (§13.1.4: ignored when If-Match is present, and when
 * it is not a valid date); undefined when the request has neither.
 * '"v.1-gzip", W/"v.2"' -> { ifMatch: ['"v.1"'] }; '*' -> { ifMatch: '*' }
 */
export function writeConditions(
  ifMatch: string | undefined,
  ifUnmodifiedSince: string | undefined,
): Preconditions | undefined {
  if (ifMatch !== undefined) {
    if (ifMatch.trim() === '*') return { ifMatch: '*' }
    const tags: string[] = []
    for (const tag of ifMatch.split(',')) {
      const trimmed = tag.trim()
      if (trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"')) {
        tags.push(withoutEncoding(trimmed))
      }
    }
    return { ifMatch: tags }
  }
  if (ifUnmodifiedSince !== undefined) {
    const since = Date.parse(ifUnmodifiedSince)
    if (Number.isFinite(since)) return { ifUnmodifiedSince: since }
  }
  return undefined
}

/**
 * If-Modified-Since on a GET (§13.1.3, ignored with If-None-Match or an invalid date): true when
 * the note was not written after that second, so the answer is 304.
 */
export function notModifiedSince(header: string, modified: number): boolean {
  const since = Date.parse(header)
  return Number.isFinite(since) && modified < since + 1000
}

const ENCODING_SUFFIXES = ['-br"', '-gzip"']

/** '"v.1-br"' -> '"v.1"': a compressed representation's ETag names the same content. */
function withoutEncoding(tag: string): string {
  for (const suffix of ENCODING_SUFFIXES) {
    if (tag.endsWith(suffix)) return `${tag.slice(0, -suffix.length)}"`
  }
  return tag
}

const httpDates = new Map<number, string>()

/** 1700000000123 -> 'Tue, 14 Nov 2023 22:13:20 GMT' (memoized: reads repeat the same few). */
export function httpDate(ms: number): string {
  const second = Math.floor(ms / 1000)
  let date = httpDates.get(second)
  if (date === undefined) {
    if (httpDates.size >= 4096) httpDates.clear()
    date = new Date(second * 1000).toUTCString()
    httpDates.set(second, date)
  }
  return date
}
