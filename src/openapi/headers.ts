/**
 * The document's components.headers. `required: true` marks a header that every answer of a
 * response that names it carries; the others come only sometimes (Link while more pages follow).
 */
export function headers(): Record<string, unknown> {
  const string = (description: string, required = false, extra: object = {}) => ({
    description,
    required,
    schema: { type: 'string', ...extra },
  })
  return {
    RequestId: string(
      'The id of the request: the X-Request-Id sent, when acceptable, else a generated one.',
      true,
      { minLength: 1 },
    ),
    ETag: string(
      'A strong validator of the content: send it back in If-None-Match to get a 304 while it is unchanged. A compressed representation has its own (`"<token>-br"`, `"<token>-gzip"`).',
      true,
      { pattern: '^"[^"]*"$' },
    ),
    CacheControl: string(
      '`no-cache`: a client may keep the answer but must revalidate it (If-None-Match).',
      true,
      { const: 'no-cache' },
    ),
    LastModified: string(
      'When the note was last written (If-Modified-Since, If-Unmodified-Since).',
      true,
      { pattern: ' GMT$' },
    ),
    NotesVersion: string(
      "The store's version this answer is at: changes on every write, on every instance. Open `/api/events?since=<it>` to hear every later change.",
      true,
      { pattern: '^[A-Za-z0-9._~-]{1,256}$' },
    ),
    TotalCount: {
      description: 'Notes stored, or notes matching `q`.',
      required: true,
      schema: { type: 'integer', minimum: 0 },
    },
    Link: string(
      'While more follow: `</api/note?...&after=...>; rel="next"`, the next page.',
      false,
      { pattern: '^<[^>]+>; rel="next"$' },
    ),
    IdempotentReplayed: string(
      '`true` when this answer repeats the first answer to the same Idempotency-Key; absent otherwise.',
      false,
      { const: 'true' },
    ),
    Allow: string('The methods the path accepts.', true, {
      examples: ['DELETE, GET, HEAD, OPTIONS, PATCH, PUT'],
      pattern: '^[A-Z]+(, [A-Z]+)*$',
    }),
    ContentEncoding: string(
      'The coding of a compressed body: `br` or `gzip`, as Accept-Encoding asked. Absent on an uncompressed body.',
      false,
      { enum: ['br', 'gzip'] },
    ),
    Vary: string(
      '`Accept-Encoding` on every answer over 1 KiB: another Accept-Encoding may get another representation (with another ETag).',
    ),
    VaryAlways: string(
      '`Accept, Accept-Encoding` on the list and its pages, whatever their size: another Accept may get the export (NDJSON), another Accept-Encoding another representation (with another ETag).',
      true,
      { pattern: 'Accept-Encoding' },
    ),
    RetryAfter: {
      description: 'Seconds until the client may try again.',
      required: true,
      schema: { type: 'integer', minimum: 0 },
    },
  }
}

/** The headers of access keys' 401. */
export function accessKeyHeaders(userTokens = false): Record<string, unknown> {
  return {
    WwwAuthenticate: userTokens
      ? {
          description:
            'The scheme to authenticate with; for a user token that was refused, RFC 6750\'s `error="invalid_token"` and an `error_description` repeating the detail.',
          required: true,
          schema: {
            type: 'string',
            pattern: '^Bearer(?: error="invalid_token", error_description="[^"\\\\]*")?$',
          },
        }
      : {
          description: 'The scheme to authenticate with.',
          required: true,
          schema: { type: 'string', const: 'Bearer' },
        },
  }
}

/** The headers of a 429. */
export function rateLimitHeaders(): Record<string, unknown> {
  const count = (description: string, minimum: number) => ({
    description,
    required: true,
    schema: { type: 'integer', minimum },
  })
  return {
    RateLimitLimit: count('Requests allowed per window (RATE_LIMIT).', 1),
    RateLimitRemaining: count('Requests left in the current window.', 0),
    RateLimitReset: count('Seconds until the current window ends.', 0),
  }
}

/** What a CORS preflight answers (an OPTIONS with Origin and Access-Control-Request-Method). */
export function corsHeaders(): Record<string, unknown> {
  const string = (description: string) => ({ description, schema: { type: 'string' } })
  return {
    AccessControlAllowOrigin: string(
      'The Origin of the request when it is one of CORS_ORIGIN, or `*`; absent for other origins.',
    ),
    AccessControlAllowMethods: string('On a preflight: the methods a page may send.'),
    AccessControlAllowHeaders: string('On a preflight: the request headers a page may send.'),
    AccessControlMaxAge: string('On a preflight: how long, in seconds, a browser may keep it.'),
  }
}
