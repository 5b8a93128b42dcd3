/**
 * What an operation answers, free of any transport, and the names every answer uses. The lanes
 * (the Fastify routes and the fast lane) write an Answer through answer-head.ts, so a status,
 * header or body decided by an operation reaches every client the same way.
 */

import type { IncomingHttpHeaders } from 'node:http'

/** The request headers an operation reads (conditions, idempotency keys); node:http's shape. */
export type RequestHeaders = IncomingHttpHeaders

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

/** The response header that carries the request's id (the caller's, or one generated for it). */
export const REQUEST_ID_HEADER = 'x-request-id'
/** The contract's collection; a note is `${NOTES_PATH}/{id}`. */
export const NOTES_PATH = '/api/note'

const NO_HEADERS: readonly string[] = Object.freeze([])

export class Answer {
  constructor(
    readonly status: number,
    /** The media type of `body`; undefined with no body at all (then no Content-Type either). */
    readonly contentType: string | undefined,
    readonly body: string | Buffer | undefined,
    /** Further response headers as a flat [name, value, ...] list; usually empty. */
    readonly headers: readonly string[] = NO_HEADERS,
  ) {}
}

/** The contract's not-found: 404, no body and no Content-Type (`Content-Length: 0`). */
export const NOT_FOUND: Answer = Object.freeze(new Answer(404, undefined, undefined))

/** The headers a 304 repeats from the 200 it stands for (RFC 9110 §15.4.5). */
const NOT_MODIFIED_HEADERS = ['etag', 'notes-version', 'last-modified', 'cache-control', 'vary']

/**
 * The one way a 304 is made: the validators and caching headers of the 200 it stands for
 * (`headers`, a flat list), with `etag` as the ETag of the representation the client has.
 * (['etag', '"v.1"', 'x-total-count', '3', 'vary', 'Accept-Encoding'], '"v.1-br"') ->
 * 304 with ['etag', '"v.1-br"', 'vary', 'Accept-Encoding']
 */
export function notModified(headers: readonly string[], etag: string): Answer {
  const kept: string[] = []
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i] as string
    if (NOT_MODIFIED_HEADERS.includes(name)) {
      kept.push(name, name === 'etag' ? etag : (headers[i + 1] as string))
    }
  }
  return new Answer(304, undefined, undefined, kept)
}
