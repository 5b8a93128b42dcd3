import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { authorizationsOf, bearerToken, requestPath } from '../api/request-target.js'

export interface AccessKeysOptions {
  /** Keys that may read and write (API_KEYS). */
  keys: readonly string[]
  /** Keys that may only read: GET and HEAD (API_READ_KEYS). */
  readKeys: readonly string[]
}

/**
 * What a request may do. `key` names the access key it carries, when that is one of ours, as
 * 'API_KEYS#1' or 'API_READ_KEYS#2' (the position in the list, never the key): rate limits
 * count per key with it.
 */
export type Access =
  | { readonly allowed: true; readonly key: string | undefined }
  | {
      readonly allowed: false
      readonly status: 401 | 403
      readonly detail: string
      readonly key: string | undefined
    }

/** A configured key: the SHA-256 of its text, and what a request carrying it is answered. */
interface Grant {
  digest: Buffer
  write: boolean
  allowed: Access
  /** A write with a read key. */
  readOnly: Access
}

/** Methods a read key may use (the change feed, when it comes, is a GET). */
export const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD'])

const OPEN: Access = Object.freeze({ allowed: true, key: undefined })
const READ_ONLY =
  'This access key may only read (GET, HEAD); send a key that may write to change notes.'

const refused = (detail: string): Access =>
  Object.freeze({ allowed: false, status: 401, detail, key: undefined })
const MISSING = refused('This API needs an access key: send Authorization: Bearer <key>.')
const DUPLICATE = refused('Send one Authorization header, not several.')
const MALFORMED = refused(
  'The Authorization header must be Bearer <key>: the word Bearer, a space, and the key.',
)
const UNKNOWN = refused(
  'The access key is not valid; send Authorization: Bearer <key> with a key that is.',
)

/** The paths that need a key: '/api' and '/metrics', and everything under them. */
const GUARDED = /^\/(?:api|metrics)(?:\/|$)/

/**
 * The paths under /api/ that stay open: the OpenAPI document is the same for every caller, holds
 * no notes, and is what tells a client (and the /docs page) that it needs a key.
 */
const OPEN_PATHS = new Set(['/api/openapi.json'])

/** Whether a request to this path needs a key while keys are on: '/api/note/{id}' -> true. */
export function needsAccessKey(path: string): boolean {
  return GUARDED.test(path) && !OPEN_PATHS.has(path)
}

/**
 * Who may do what, when access keys are on: the one decision, which the Fastify
 * hook and the fast lane both call. Every request under /api/ and /metrics needs
 * `Authorization: Bearer <key>` with one of the keys; a read key may only GET and HEAD. OPTIONS
 * stays open (a browser sends CORS preflights without credentials; it answers only Allow), and
 * so does everything else: /healthz, /readyz, /docs and the OpenAPI document.
 *
 * Keys are compared in constant time: the SHA-256 of the key presented against the SHA-256 of
 * every configured key, all of them, with crypto.timingSafeEqual (fixed length, so how long or
 * how alike the presented key is tells nothing). No key is ever kept in an answer or a log line.
 */
export class AccessKeys {
  readonly #grants: Grant[]

  constructor({ keys, readKeys }: AccessKeysOptions) {
    const grant = (text: string, write: boolean, key: string): Grant => ({
      digest: digestOf(text),
      write,
      allowed: Object.freeze({ allowed: true, key }),
      readOnly: Object.freeze({ allowed: false, status: 403, detail: READ_ONLY, key }),
    })
    this.#grants = [
      ...keys.map((text, i) => grant(text, true, `API_KEYS#${i + 1}`)),
      ...readKeys.map((text, i) => grant(text, false, `API_READ_KEYS#${i + 1}`)),
    ]
  }

  /**
   * The decision for `method` on `path` (decoded, without the query) with every Authorization
   * header sent (none, one, or several, which is refused: which one would count is ambiguous).
   * GET /api/note with 'Bearer <a read key>' -> allowed; POST with it -> 403; no header -> 401;
   * GET /healthz with anything -> allowed.
   */
  decide(method: string, path: string, authorizations: readonly string[]): Access {
    const guarded = method !== 'OPTIONS' && needsAccessKey(path)
    if (authorizations.length === 0) return guarded ? MISSING : OPEN
    if (authorizations.length > 1) return guarded ? DUPLICATE : OPEN
    const token = bearerToken(authorizations[0] as string)
    if (token === undefined) return guarded ? MALFORMED : OPEN
    const grant = this.#find(token)
    if (grant === undefined) return guarded ? UNKNOWN : OPEN
    if (!guarded || grant.write || READ_METHODS.has(method)) return grant.allowed
    return grant.readOnly
  }

  /**
   * The decision for a request as node:http hands it over. `route` is the pattern the router
   * matched ('/api/note/:id'), when it did: what is served decides, however the URL spelled it
   * ('/%61pi/note', 'http://host/api/note').
   */
  decideFor(request: IncomingMessage, route?: string): Access {
    const path = route ?? requestPath(request.url ?? '/')
    return this.decide(request.method ?? 'GET', path, authorizationsOf(request))
  }

  /** Compares with every key, without stopping at a match, so the time taken tells nothing. */
  #find(token: string): Grant | undefined {
    const digest = digestOf(token)
    let found: Grant | undefined
    for (const grant of this.#grants) {
      if (timingSafeEqual(digest, grant.digest) && found === undefined) found = grant
    }
    return found
  }
}

function digestOf(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest()
}
