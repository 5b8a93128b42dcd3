import { header, problemResponse, requestIdHeader } from './parts.js'

/** The document's components.responses that more than one operation answers. */
export function responses(): Record<string, unknown> {
  return { ...successes(), ...clientErrors(), ...serverErrors() }
}

function successes(): Record<string, unknown> {
  const notModified = (description: string, headers: object) => ({
    description: `If-None-Match names the current ETag: the copy the client holds is current. No body. ${description}`,
    headers: {
      ...requestIdHeader,
      ETag: header('ETag'),
      'Cache-Control': header('CacheControl'),
      ...headers,
    },
  })
  return {
    NoteNotModified: notModified('Also after If-Modified-Since.', {
      'Last-Modified': header('LastModified'),
      Vary: header('Vary'),
    }),
    ListNotModified: notModified('', {
      'Notes-Version': header('NotesVersion'),
      Vary: header('VaryAlways'),
    }),
    NoteNotFound: {
      description: 'No note has this id. The body is empty: Content-Length 0, no Content-Type.',
      headers: requestIdHeader,
    },
    Options: {
      description:
        'The methods this path accepts, in `Allow`. No body. With CORS on, a preflight (Origin and Access-Control-Request-Method) is answered with the Access-Control-* headers instead.',
      headers: { ...requestIdHeader, Allow: header('Allow') },
    },
  }
}

function clientErrors(): Record<string, unknown> {
  return {
    BadRequest: problemResponse(
      'The body is not valid UTF-8, not valid JSON, not a JSON object, or nested too deep; or the URL has a malformed percent-encoding.',
      400,
      'The request body must be a JSON object, not an array.',
    ),
    BadPageQuery: problemResponse(
      'A bad `limit`, `after`, `order` or `q`: the detail names it and what it accepts. An export (Accept: application/x-ndjson) with any of them: an export is the whole notebook.',
      400,
      'limit must be a whole number from 1 to 1000; got "0".',
    ),
    BadUrl: problemResponse(
      'The URL has a malformed percent-encoding.',
      400,
      'The URL has a malformed percent-encoding.',
    ),
    MethodNotAllowed: problemResponse(
      'The path does not accept this method (any method not listed for it, also those OpenAPI cannot name). `Allow` lists those it does.',
      405,
      'PUT is not allowed here; use GET, HEAD, OPTIONS, POST.',
      { Allow: header('Allow') },
    ),
    PreconditionFailed: problemResponse(
      'If-Match or If-Unmodified-Since does not hold: the note was changed meanwhile, and nothing was written. ETag is the current one.',
      412,
      'The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now "k2x9q1.7". GET it, and send that ETag in If-Match to write over it.',
      { ETag: header('ETag'), 'Last-Modified': header('LastModified') },
    ),
    PayloadTooLarge: problemResponse(
      'The body is larger than the limit (BODY_LIMIT, 1 MiB by default).',
      413,
      'The request body is larger than the limit of 1048576 bytes.',
    ),
    UnsupportedMediaType: problemResponse(
      'The body is not JSON (Content-Type is not application/json or application/*+json), or its charset is not UTF-8.',
      415,
      'Send the body as JSON: Content-Type application/json (or application/*+json), in UTF-8.',
    ),
    IdempotencyKeyReused: problemResponse(
      'The Idempotency-Key was used before with a different body; nothing was created.',
      422,
      'This Idempotency-Key was already used with a different request body. Send a new key for a new note, or the same body to repeat the first request.',
    ),
  }
}

function serverErrors(): Record<string, unknown> {
  return {
    InsufficientStorage: problemResponse(
      'The store is full (MAX_NOTES or MAX_STORE_BYTES); nothing was changed.',
      507,
      'The store holds its maximum of 1000000 notes. Delete notes to make room.',
    ),
    StoreUnavailable: problemResponse(
      'The PostgreSQL store (DATABASE_URL) cannot reach its database; nothing was changed. The memory store never answers this.',
      503,
      'The database cannot be reached right now. Retry in 1 s.',
      { 'Retry-After': header('RetryAfter') },
    ),
  }
}

/** What access keys answer: 401 without a valid key, 403 for a read key's write. */
export function accessKeyResponses(userTokens = false, readKeys = true): Record<string, unknown> {
  const responses: Record<string, unknown> = {
    Unauthorized: userTokens
      ? problemResponse(
          'No user token or service key; a token that is malformed, expired, not yet valid, for another issuer or audience, not signed by a known key, not typed as an access token, or an ID token; or more than one Authorization header. `detail` says which.',
          401,
          'The token expired at 2026-11-26T10:00:00Z; get a new one.',
          { 'WWW-Authenticate': header('WwwAuthenticate') },
        )
      : problemResponse(
          'No access key, a key that is not valid, or more than one Authorization header.',
          401,
          'This API needs an access key: send Authorization: Bearer <key>.',
          { 'WWW-Authenticate': header('WwwAuthenticate') },
        ),
    Forbidden: problemResponse(
      'The access key may only read (GET, HEAD).',
      403,
      'This access key may only read (GET, HEAD); send a key that may write to change notes.',
    ),
  }
  // Without read keys (user tokens alone), nothing answers 403.
  if (!readKeys) delete responses.Forbidden
  return responses
}

/** What rate limits answer past the limit. */
export function rateLimitResponses(): Record<string, unknown> {
  return {
    TooManyRequests: problemResponse(
      'Past the rate limit (RATE_LIMIT requests per RATE_LIMIT_WINDOW_MS) of this access key, or of this client address without one.',
      429,
      'Too many requests: the limit is 100 per 60 s; retry after 42 s.',
      {
        'Retry-After': header('RetryAfter'),
        'RateLimit-Limit': header('RateLimitLimit'),
        'RateLimit-Remaining': header('RateLimitRemaining'),
        'RateLimit-Reset': header('RateLimitReset'),
      },
    ),
  }
}

/** What load shedding (MAX_EVENT_LOOP_DELAY_MS) answers while the event loop lags. */
export function loadSheddingResponses(): Record<string, unknown> {
  return {
    Overloaded: problemResponse(
      'The event loop lags behind (MAX_EVENT_LOOP_DELAY_MS): retry after Retry-After seconds.',
      503,
      'The server is overloaded; retry after 1 s.',
      { 'Retry-After': header('RetryAfter') },
    ),
  }
}
