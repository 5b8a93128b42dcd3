import { needsAccessKey } from '../ops/access-keys.js'
import { DOCS_PAGE_FILE_NAMES, NO_SUCH_FILE } from '../ops/api-docs.js'
import { NO_SUCH_PAGE_FILE } from '../ops/notes-page.js'
import { RATE_LIMIT_EXEMPT } from '../ops/rate-limits.js'
import { eventsPathItem } from './openapi-events.js'
import { DEFAULT_LIMIT, MAX_LIMIT, MAX_Q_LENGTH } from './page-query.js'
import { PROBLEM_CONTENT_TYPE, problem } from './problem.js'

export interface OpenApiOptions {
  /** The service's version, for `info.version`. */
  version: string
  /** Whether `/metrics` is served. */
  metrics: boolean
  /** Whether `/docs` is served. */
  docs: boolean
  /** Whether the notes page is served at `/`. */
  ui?: boolean
  /** Whether access keys are on (API_KEYS, API_READ_KEYS): adds the security scheme, 401 and 403. */
  accessKeys?: boolean
  /** Whether rate limits are on (RATE_LIMIT): adds 429. */
  rateLimits?: boolean
}

/** An OpenAPI 3.1 document, as plain JSON data. */
export interface OpenApiDocument {
  openapi: string
  info: Record<string, unknown>
  tags: { name: string; description: string }[]
  paths: Record<string, Record<string, unknown>>
  components: Record<string, Record<string, unknown>>
  security?: Record<string, string[]>[]
}

const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` })
const schema = (name: string) => ref('schemas', name)
const response = (name: string) => ref('responses', name)
const requestIdHeader = { 'X-Request-Id': ref('headers', 'RequestId') }

/** A response with a JSON body of `body` and the X-Request-Id header every response carries. */
function jsonResponse(description: string, body: object, mediaType = 'application/json') {
  return { description, headers: requestIdHeader, content: { [mediaType]: { schema: body } } }
}

/** A problem JSON response, with the body the service sends as its example. */
function problemResponse(description: string, status: number, exampleDetail: string) {
  return {
    description,
    headers: requestIdHeader,
    content: {
      [PROBLEM_CONTENT_TYPE]: {
        schema: schema('Problem'),
        example: problem(status, exampleDetail),
      },
    },
  }
}

const DESCRIPTION = `An in-memory notes store. A note is a JSON object with any fields plus an integer \`id\` that the service sets.

- Every success is \`200\` with \`application/json; charset=utf-8\` and the payload under \`data\`.
- A missing note is \`404\` with **no body at all** (\`Content-Length: 0\`, no Content-Type).
- Every other error is RFC 9457 problem JSON (\`application/problem+json\`): \`400\` malformed body or URL, \`413\` body over the limit, \`415\` body that is not JSON, \`507\` store full, \`404\` a path that is not served, and \`405\` with an \`Allow\` header for a method a path does not accept (for example \`PUT /api/note\`).
- Bodies are JSON objects in UTF-8, sent as \`application/json\` or any \`application/*+json\`; no body at all counts as \`{}\`.
- \`HEAD\` works wherever \`GET\` does; \`OPTIONS\` answers \`204\` with \`Allow\`. A trailing slash names the same resource (\`/api/note/\`).
- Each response carries \`X-Request-Id\`: the caller's own, when it is 1 to 128 characters of \`A-Z a-z 0-9 _ . : @ / + = ~ -\`, or a generated one (a random prefix and a counter, \`3f9a0c1b7d2e-1f\`). It is on every log line of the request.
- With \`Accept-Encoding\` naming \`br\` or \`gzip\` (q-values honoured, \`*\` included; \`br\` when both are as welcome), a JSON answer over 1 KiB comes compressed, with \`Content-Encoding\`. The list, its pages and every answer over 1 KiB carry \`Vary: Accept-Encoding\`, compressed or not. A compressed answer's ETag has the coding inside the quotes (\`"<token>-br"\`): \`If-None-Match\` is compared with the ETag of the representation asked for, and \`If-Match\` takes any of them.`

const ACCESS_KEYS_DESCRIPTION = `
- Every request under \`/api/\` (but this document) and to \`/metrics\` needs \`Authorization: Bearer <key>\` with an access key: without one, or with a key that is not valid, or with two Authorization headers, the answer is \`401\` with \`WWW-Authenticate: Bearer\`. A read key may only \`GET\` and \`HEAD\`: anything else with it is \`403\`. \`OPTIONS\`, the probes, the \`/docs\` page and the notes page at \`/\` need no key.`

const RATE_LIMITS_DESCRIPTION = `
- Requests are rate limited per access key (per client address without one): every answer but the probes' carries \`RateLimit-Limit\` (requests per window), \`RateLimit-Remaining\` and \`RateLimit-Reset\` (seconds until the window ends); past the limit the answer is \`429\` with \`Retry-After\` (seconds).`

/** Operations a read key may call; every other guarded operation can answer 403. */
const READ_OPERATIONS = new Set(['get', 'head'])

interface Operation {
  responses: Record<string, unknown>
  security?: Record<string, string[]>[]
}

/**
 * Adds what access keys and rate limits answer to every operation they apply to:
 * 401/403 and the security requirement, 429.
 */
function addAccessAndLimits(paths: OpenApiDocument['paths'], options: OpenApiOptions): void {
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, value] of Object.entries(item)) {
      if (typeof value !== 'object' || value === null || !('responses' in value)) continue
      const operation = value as Operation
      if (options.accessKeys === true) {
        if (!needsAccessKey(path)) {
          operation.security = []
        } else {
          operation.responses['401'] = response('Unauthorized')
          if (!READ_OPERATIONS.has(method)) operation.responses['403'] = response('Forbidden')
        }
      }
      if (options.rateLimits === true && !RATE_LIMIT_EXEMPT.has(path)) {
        operation.responses['429'] = response('TooManyRequests')
      }
    }
  }
}

/**
 * The API's OpenAPI 3.1 description, written by hand so it states the contract exactly
 * (the routes carry no JSON schemas: validation would change their behaviour and cost time).
 * `test/openapi.test.ts` checks it against the OpenAPI schema and against the routes served.
 */
export function buildOpenApiDocument(options: OpenApiOptions): OpenApiDocument {
  // On each operation, not on the path item: Swagger UI 5 shows path-level parameters of an
  // OpenAPI 3.1 document as nameless inputs and sends '/api/note/{id}' literally.
  const noteParameters = [ref('parameters', 'NoteId'), ref('parameters', 'RequestId')]
  const listParameters = [ref('parameters', 'RequestId')]
  const pageParameters = [
    ref('parameters', 'Limit'),
    ref('parameters', 'After'),
    ref('parameters', 'Order'),
    ref('parameters', 'Q'),
    ref('parameters', 'IfNoneMatch'),
    ...listParameters,
  ]
  const readParameters = [
    ...noteParameters,
    ref('parameters', 'IfNoneMatch'),
    ref('parameters', 'IfModifiedSince'),
  ]
  const writeParameters = [
    ...noteParameters,
    ref('parameters', 'IfMatch'),
    ref('parameters', 'IfUnmodifiedSince'),
  ]
  const readHeaders = {
    ...requestIdHeader,
    ETag: ref('headers', 'ETag'),
    'Cache-Control': ref('headers', 'CacheControl'),
  }
  const bodyErrors = {
    '400': response('BadRequest'),
    '413': response('PayloadTooLarge'),
    '415': response('UnsupportedMediaType'),
    '507': response('InsufficientStorage'),
  }

  const paths: OpenApiDocument['paths'] = {
    '/api/note': {
      description: 'The notes, in the order they were created. Other methods answer 405.',
      get: {
        tags: ['notes'],
        operationId: 'listNotes',
        summary: 'List notes',
        parameters: pageParameters,
        description:
          'Every stored note, oldest first; `data` is `[]` when there are none. With `limit` (or `after`), one page: keyset paging on list position, so a walk that follows `Link: rel="next"` visits every note that exists throughout it exactly once, whatever is written meanwhile. `order=desc` walks from the newest; `q` keeps the notes with a string value (at any depth, keys excluded) containing the text, case-insensitively. Other query parameters are ignored.',
        responses: {
          '200': {
            ...jsonResponse('The notes, or one page of them.', schema('NoteListEnvelope')),
            headers: {
              ...readHeaders,
              'Notes-Version': ref('headers', 'NotesVersion'),
              'X-Total-Count': ref('headers', 'TotalCount'),
              Link: ref('headers', 'Link'),
            },
          },
          '304': response('NotModified'),
          '400': response('BadPageQuery'),
        },
      },
      post: {
        tags: ['notes'],
        operationId: 'createNote',
        summary: 'Create a note',
        parameters: [...listParameters, ref('parameters', 'IdempotencyKey')],
        description:
          'Stores the body fields plus a new `id`: the time in ms since the Unix epoch, raised when needed so that no two notes share one. An `id` in the body is replaced.',
        requestBody: ref('requestBodies', 'NoteFields'),
        responses: {
          '200': {
            ...jsonResponse('The note as stored.', schema('NoteEnvelope')),
            headers: {
              ...requestIdHeader,
              ETag: ref('headers', 'ETag'),
              'Idempotent-Replayed': ref('headers', 'IdempotentReplayed'),
            },
          },
          ...bodyErrors,
          '422': response('IdempotencyKeyReused'),
        },
      },
    },
    '/api/note/{id}': {
      description:
        'One note, found by the `id` in the path read as a decimal integer. Other methods answer 405.',
      get: {
        tags: ['notes'],
        operationId: 'getNote',
        summary: 'Get a note',
        parameters: readParameters,
        responses: {
          '200': {
            ...jsonResponse('The note.', schema('NoteEnvelope')),
            headers: { ...readHeaders, 'Last-Modified': ref('headers', 'LastModified') },
          },
          '304': response('NotModified'),
          '400': response('BadUrl'),
          '404': response('NoteNotFound'),
        },
      },
      patch: {
        tags: ['notes'],
        operationId: 'updateNote',
        summary: 'Update a note',
        parameters: writeParameters,
        description:
          'Merges the body fields over the note: each replaces the stored field of the same name, the others stay. An `id` in the body is merged too, and the note is then found at its new id. With `Content-Type: application/merge-patch+json` the body is an RFC 7396 merge patch instead: `null` removes a field, objects merge recursively, arrays replace.',
        requestBody: ref('requestBodies', 'NotePatch'),
        responses: {
          '200': {
            ...jsonResponse('The note after the merge.', schema('NoteEnvelope')),
            headers: { ...requestIdHeader, ETag: ref('headers', 'ETag') },
          },
          '404': response('NoteNotFound'),
          '412': response('PreconditionFailed'),
          ...bodyErrors,
        },
      },
      delete: {
        tags: ['notes'],
        operationId: 'deleteNote',
        summary: 'Delete a note',
        parameters: writeParameters,
        responses: {
          '200': jsonResponse(
            'The note was deleted; `data` is the `id` path segment as sent, a string.',
            schema('DeletedEnvelope'),
          ),
          '400': response('BadUrl'),
          '404': response('NoteNotFound'),
          '412': response('PreconditionFailed'),
        },
      },
    },
    '/api/events': eventsPathItem(),
    '/healthz': {
      get: {
        tags: ['operations'],
        operationId: 'checkLiveness',
        summary: 'Liveness probe',
        description: 'Answers while the process can serve requests at all.',
        responses: {
          '200': jsonResponse('The process is alive.', statusSchema('ok')),
        },
      },
    },
    '/readyz': {
      get: {
        tags: ['operations'],
        operationId: 'checkReadiness',
        summary: 'Readiness probe',
        description:
          '200 while the service takes traffic; 503 from the moment it starts shutting down.',
        responses: {
          '200': jsonResponse('Ready for traffic.', statusSchema('ready')),
          '503': response('ServiceUnavailable'),
        },
      },
    },
    '/api/openapi.json': {
      get: {
        tags: ['operations'],
        operationId: 'getOpenApiDocument',
        summary: 'This document',
        responses: {
          '200': jsonResponse('The OpenAPI 3.1 document.', { type: 'object' }),
        },
      },
    },
  }
  if (options.metrics) {
    paths['/metrics'] = {
      get: {
        tags: ['operations'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description:
          'Prometheus text format 0.0.4: `http_requests_total` and `http_request_duration_seconds` by method, route and status code; `notes_stored`, `notes_stored_bytes`, `notes_capacity_remaining`, `notes_capacity_remaining_bytes`; process and Node.js metrics.',
        responses: {
          '200': jsonResponse('The metrics.', { type: 'string' }, 'text/plain'),
        },
      },
    }
  }
  if (options.docs) {
    paths['/docs'] = {
      get: {
        tags: ['operations'],
        operationId: 'showApiReference',
        summary: 'API reference page',
        description:
          'Swagger UI rendering this document, which it reads from `/api/openapi.json`. Its files are under `/docs/static/`.',
        responses: {
          '200': fixedFileResponse('An HTML page.', {
            'text/html': { schema: { type: 'string' } },
          }),
          '304': response('NotModified'),
        },
      },
    }
    paths['/docs/static/{file}'] = {
      get: {
        tags: ['operations'],
        operationId: 'getApiReferenceFile',
        summary: 'A file of the API reference page',
        description: 'The scripts, styles and icons of Swagger UI, served from this service.',
        parameters: [
          {
            name: 'file',
            in: 'path',
            required: true,
            description: 'The name of the file.',
            schema: { type: 'string', enum: DOCS_PAGE_FILE_NAMES },
          },
        ],
        responses: {
          '200': fixedFileResponse('The file.', {
            'text/css': { schema: { type: 'string' } },
            'text/javascript': { schema: { type: 'string' } },
            'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } },
          }),
          '304': response('NotModified'),
          '404': problemResponse('The page has no file of this name.', 404, NO_SUCH_FILE),
        },
      },
    }
  }

  if (options.ui === true) {
    paths['/'] = {
      get: {
        tags: ['operations'],
        operationId: 'showNotesPage',
        summary: 'The notes page',
        description:
          'A page for people that lists, creates, edits and deletes notes and follows changes live, through this API. Its files are under `/ui/`; it loads nothing from another host.',
        responses: {
          '200': fixedFileResponse('An HTML page.', {
            'text/html': { schema: { type: 'string' } },
          }),
          '304': response('NotModified'),
        },
      },
    }
    paths['/ui/{file}'] = {
      get: {
        tags: ['operations'],
        operationId: 'getNotesPageFile',
        summary: 'A file of the notes page',
        description:
          'The scripts, style and icon of the notes page, brotli- or gzip-compressed when the client accepts it.',
        parameters: [
          {
            name: 'file',
            in: 'path',
            required: true,
            description: 'The name of the file, as the page links it.',
            schema: { type: 'string', examples: ['main.js', 'style.css'] },
          },
        ],
        responses: {
          '200': fixedFileResponse('The file.', {
            'text/css': { schema: { type: 'string' } },
            'text/javascript': { schema: { type: 'string' } },
            'image/svg+xml': { schema: { type: 'string' } },
          }),
          '304': response('NotModified'),
          '404': problemResponse('The page has no file of this name.', 404, NO_SUCH_PAGE_FILE),
        },
      },
    }
  }
  addAccessAndLimits(paths, options)
  const document: OpenApiDocument = {
    openapi: '3.1.0',
    info: {
      title: 'notes-service',
      version: options.version,
      description:
        DESCRIPTION +
        (options.accessKeys === true ? ACCESS_KEYS_DESCRIPTION : '') +
        (options.rateLimits === true ? RATE_LIMITS_DESCRIPTION : ''),
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: [
      { name: 'notes', description: 'Create, read, update and delete notes.' },
      { name: 'operations', description: 'Probes, metrics and this description.' },
    ],
    paths,
    components: {
      schemas: {
        Note: {
          type: 'object',
          description:
            'A note: the fields it was created with, as sent, plus `id`. Only a PATCH that sends an `id` can make `id` something other than an integer.',
          required: ['id'],
          properties: {
            id: {
              type: 'integer',
              description: 'Set at creation: the time in ms since the Unix epoch, unique.',
              examples: [1_767_225_600_000],
            },
          },
          additionalProperties: true,
          examples: [{ title: 'Buy milk', done: false, id: 1_767_225_600_000 }],
        },
        NoteFields: {
          type: 'object',
          description: 'Any JSON object; its fields are stored as sent.',
          additionalProperties: true,
          examples: [{ title: 'Buy milk', done: false }],
        },
        NoteEnvelope: envelope(schema('Note')),
        NoteListEnvelope: envelope({ type: 'array', items: schema('Note') }),
        DeletedEnvelope: envelope({
          type: 'string',
          pattern: '^-?[0-9]+$',
          description: 'The `id` path segment as received, after percent-decoding.',
          examples: ['1767225600000'],
        }),
        Problem: {
          type: 'object',
          description: 'RFC 9457 problem details.',
          required: ['type', 'title', 'status', 'detail'],
          properties: {
            type: { type: 'string', const: 'about:blank' },
            title: { type: 'string', description: 'The reason phrase of the status code.' },
            status: { type: 'integer', description: 'The HTTP status code.' },
            detail: { type: 'string', description: 'What went wrong and what to change.' },
          },
          additionalProperties: false,
        },
      },
      parameters: {
        NoteId: {
          name: 'id',
          in: 'path',
          required: true,
          description:
            'The id of the note, as a decimal integer (`^-?[0-9]+$`; leading zeros allowed). Anything else matches no note: 404.',
          schema: { type: 'string' },
          example: '1767225600000',
        },
        Limit: {
          name: 'limit',
          in: 'query',
          required: false,
          description:
            'Answer one page of at most this many notes, with `Link: rel="next"` while more follow.',
          schema: { type: 'integer', minimum: 1, maximum: MAX_LIMIT },
        },
        After: {
          name: 'after',
          in: 'query',
          required: false,
          description: `The opaque cursor from a \`Link: rel="next"\` URL: the page starts after the last note of the one before. Alone, pages by ${DEFAULT_LIMIT}. A cursor that is not one of ours is a 400.`,
          schema: { type: 'string' },
        },
        Order: {
          name: 'order',
          in: 'query',
          required: false,
          description: '`desc` walks from the newest note; alone, it reverses the whole list.',
          schema: { type: 'string', enum: ['asc', 'desc'] },
        },
        Q: {
          name: 'q',
          in: 'query',
          required: false,
          description:
            'Keep only the notes with a string value, at any depth (keys excluded), that contains this text, compared case-insensitively. X-Total-Count then counts the matches.',
          schema: { type: 'string', minLength: 1, maxLength: MAX_Q_LENGTH },
        },
        IfNoneMatch: {
          name: 'If-None-Match',
          in: 'header',
          required: false,
          description: 'ETags the client holds (or `*`): 304 with no body while one is current.',
          schema: { type: 'string' },
        },
        IfModifiedSince: {
          name: 'If-Modified-Since',
          in: 'header',
          required: false,
          description:
            'An HTTP date: 304 when the note was not written after it (ignored with If-None-Match).',
          schema: { type: 'string' },
        },
        IfMatch: {
          name: 'If-Match',
          in: 'header',
          required: false,
          description:
            'Write only if the note still has one of these ETags (or any, with `*`); else 412 and nothing changes. Of two writes with the same If-Match, exactly one succeeds.',
          schema: { type: 'string' },
        },
        IfUnmodifiedSince: {
          name: 'If-Unmodified-Since',
          in: 'header',
          required: false,
          description:
            'An HTTP date: write only if the note was not written after it; else 412 (ignored with If-Match).',
          schema: { type: 'string' },
        },
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'Apply this create at most once: a repeat with the same key and body within 24 hours answers the first answer again (with `Idempotent-Replayed: true`) and creates nothing; the same key with another body is a 422. 1 to 255 visible ASCII characters.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
        RequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description:
            'Your id for this request, echoed back and logged; replaced by a generated one unless it is 1 to 128 characters of `A-Z a-z 0-9 _ . : @ / + = ~ -`.',
          schema: { type: 'string', maxLength: 128 },
        },
      },
      requestBodies: {
        NoteFields: {
          description:
            'A JSON object in UTF-8, as `application/json` or any `application/*+json`. No body at all counts as `{}`.',
          required: false,
          content: { 'application/json': { schema: schema('NoteFields') } },
        },
        NotePatch: {
          description:
            'A JSON object in UTF-8. No body at all counts as `{}`. As `application/json` or any other `application/*+json`: a shallow merge, each field replacing the stored one (a `null` is stored as `null`).',
          required: false,
          content: {
            'application/json': { schema: schema('NoteFields') },
            'application/merge-patch+json': {
              schema: {
                ...schema('NoteFields'),
                description:
                  'An RFC 7396 JSON Merge Patch: a `null` removes the field, an object merges recursively into the stored field (into `{}` when that is absent or not an object), any other value (an array too) replaces it. Removing `id` leaves a note that no id finds but the list still holds; `__proto__` is a plain field at any depth.',
              },
            },
          },
        },
      },
      headers: {
        RequestId: {
          description:
            'The id of the request: the X-Request-Id sent, when acceptable, else a generated one.',
          schema: { type: 'string' },
        },
        ETag: {
          description:
            'A strong validator of the content: send it back in If-None-Match to get a 304 while it is unchanged.',
          schema: { type: 'string' },
        },
        CacheControl: {
          description:
            '`no-cache`: a client may keep the answer but must revalidate it (If-None-Match).',
          schema: { type: 'string', const: 'no-cache' },
        },
        LastModified: {
          description: 'When the note was last written (If-Modified-Since, If-Unmodified-Since).',
          schema: { type: 'string' },
        },
        NotesVersion: {
          description:
            "The store's version this answer is at: changes on every write, on every instance. Open `/api/events?since=<it>` to hear every later change.",
          schema: { type: 'string' },
        },
        TotalCount: {
          description: 'Notes stored, or notes matching `q`.',
          schema: { type: 'integer' },
        },
        Link: {
          description: 'While more follow: `</api/note?...&after=...>; rel="next"`, the next page.',
          schema: { type: 'string' },
        },
        IdempotentReplayed: {
          description:
            '`true` when this answer repeats the first answer to the same Idempotency-Key.',
          schema: { type: 'string', const: 'true' },
        },
        Allow: {
          description: 'The methods the path accepts.',
          schema: { type: 'string', examples: ['DELETE, GET, HEAD, OPTIONS, PATCH'] },
        },
        ContentEncoding: {
          description:
            'The coding of a compressed body: `br` or `gzip`, as Accept-Encoding asked. Absent on an uncompressed body.',
          schema: { type: 'string', enum: ['br', 'gzip'] },
        },
        Vary: {
          description:
            '`Accept-Encoding` on the list, its pages and every answer over 1 KiB: another Accept-Encoding may get another representation (with another ETag).',
          schema: { type: 'string', examples: ['Accept-Encoding'] },
        },
      },
      responses: {
        NoteNotFound: {
          description: 'No note has this id. The body is empty: Content-Length 0, no Content-Type.',
          headers: requestIdHeader,
        },
        NotModified: {
          description:
            'If-None-Match names the current ETag: the copy the client holds is current. No body.',
          headers: { ...requestIdHeader, ETag: ref('headers', 'ETag') },
        },
        BadRequest: problemResponse(
          'The body is not valid UTF-8, not valid JSON, not a JSON object, or nested too deep; or the URL has a malformed percent-encoding.',
          400,
          'The request body must be a JSON object, not an array.',
        ),
        BadPageQuery: problemResponse(
          'A bad `limit`, `after`, `order` or `q`: the detail names it and what it accepts.',
          400,
          'limit must be a whole number from 1 to 1000; got "0".',
        ),
        PreconditionFailed: {
          ...problemResponse(
            'If-Match or If-Unmodified-Since does not hold: the note was changed meanwhile, and nothing was written. ETag is the current one.',
            412,
            'The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now "k2x9q1.7". GET it, and send that ETag in If-Match to write over it.',
          ),
          headers: { ...requestIdHeader, ETag: ref('headers', 'ETag') },
        },
        IdempotencyKeyReused: problemResponse(
          'The Idempotency-Key was used before with a different body; nothing was created.',
          422,
          'This Idempotency-Key was already used with a different request body. Send a new key for a new note, or the same body to repeat the first request.',
        ),
        BadUrl: problemResponse(
          'The URL has a malformed percent-encoding.',
          400,
          'The URL has a malformed percent-encoding.',
        ),
        MethodNotAllowed: {
          ...problemResponse(
            'The path does not accept this method (any path here, any method not listed for it). `Allow` lists those it does.',
            405,
            'PUT is not allowed here; use GET, HEAD, OPTIONS, POST.',
          ),
          headers: { ...requestIdHeader, Allow: ref('headers', 'Allow') },
        },
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
        InsufficientStorage: problemResponse(
          'The store is full (MAX_NOTES or MAX_STORE_BYTES); nothing was changed.',
          507,
          'The store holds its maximum of 1000000 notes. Delete notes to make room.',
        ),
        ServiceUnavailable: problemResponse(
          'The service is starting or shutting down.',
          503,
          'The service is shutting down. Send requests to another instance.',
        ),
      },
    },
  }
  if (options.accessKeys === true) {
    document.components.securitySchemes = {
      accessKey: {
        type: 'http',
        scheme: 'bearer',
        description:
          'An access key from API_KEYS (may read and write) or API_READ_KEYS (may only GET and HEAD).',
      },
    }
    document.security = [{ accessKey: [] }]
    Object.assign(document.components.headers as object, {
      WwwAuthenticate: {
        description: 'The scheme to authenticate with.',
        schema: { type: 'string', const: 'Bearer' },
      },
    })
    Object.assign(document.components.responses as object, {
      Unauthorized: {
        ...problemResponse(
          'No access key, a key that is not valid, or more than one Authorization header.',
          401,
          'This API needs an access key: send Authorization: Bearer <key>.',
        ),
        headers: { ...requestIdHeader, 'WWW-Authenticate': ref('headers', 'WwwAuthenticate') },
      },
      Forbidden: problemResponse(
        'The access key may only read (GET, HEAD).',
        403,
        'This access key may only read (GET, HEAD); send a key that may write to change notes.',
      ),
    })
  }
  if (options.rateLimits === true) {
    Object.assign(document.components.headers as object, {
      RetryAfter: {
        description: 'Seconds until the client may send requests again.',
        schema: { type: 'integer', minimum: 0 },
      },
      RateLimitLimit: {
        description: 'Requests allowed per window (RATE_LIMIT).',
        schema: { type: 'integer', minimum: 1 },
      },
      RateLimitRemaining: {
        description: 'Requests left in the current window.',
        schema: { type: 'integer', minimum: 0 },
      },
      RateLimitReset: {
        description: 'Seconds until the current window ends.',
        schema: { type: 'integer', minimum: 0 },
      },
    })
    Object.assign(document.components.responses as object, {
      TooManyRequests: {
        ...problemResponse(
          'Past the rate limit (RATE_LIMIT requests per RATE_LIMIT_WINDOW_MS) of this access key, or of this client address without one.',
          429,
          'Too many requests: the limit is 100 per 60 s; retry after 42 s.',
        ),
        headers: {
          ...requestIdHeader,
          'Retry-After': ref('headers', 'RetryAfter'),
          'RateLimit-Limit': ref('headers', 'RateLimitLimit'),
          'RateLimit-Remaining': ref('headers', 'RateLimitRemaining'),
          'RateLimit-Reset': ref('headers', 'RateLimitReset'),
        },
      },
    })
  }
  return document
}

/** A 200 of the /docs page, which carries an ETag for revalidation. */
function fixedFileResponse(description: string, content: object) {
  return { description, headers: { ...requestIdHeader, ETag: ref('headers', 'ETag') }, content }
}

function envelope(data: object) {
  return {
    type: 'object',
    required: ['data'],
    properties: { data },
    additionalProperties: false,
  }
}

function statusSchema(status: string) {
  return {
    type: 'object',
    required: ['status'],
    properties: { status: { const: status } },
    additionalProperties: false,
  }
}
