import { accessKeyHeaders, corsHeaders, headers, rateLimitHeaders } from './headers.js'
import { inNotebookResponses } from './in-notebook.js'
import { withEveryMethod } from './methods.js'
import { notebookHeaders, notebookSchemas } from './notebook-schemas.js'
import { header, type Paths, requestIdHeader, response } from './parts.js'
import {
  accessKeyResponses,
  loadSheddingResponses,
  rateLimitResponses,
  responses,
} from './responses.js'
import { parameters, requestBodies, schemas } from './schemas.js'

export interface OpenApiOptions {
  /** The service's version, for `info.version`. */
  version: string
  /** The paths of every part of the service that is on, each part's own (note-paths.ts ...). */
  paths: readonly Paths[]
  /** With access keys on: which paths need one ('/api/note' -> true, '/healthz' -> false). */
  accessKeys?: { guards: (path: string) => boolean } | undefined
  /**
   * Whether user tokens are on (a notebook per user): the userToken scheme, whose 401s say why a
   * token was refused. `accessKeys` must then be given too (the paths they guard are the same).
   */
  userTokens?: boolean
  /** Whether service keys (API_KEYS, API_READ_KEYS) are set, when user tokens are on. */
  serviceKeys?: boolean
  /** With rate limits on: the paths they leave alone. */
  rateLimits?: { exempt: ReadonlySet<string> } | undefined
  /** Whether CORS is on (CORS_ORIGIN): OPTIONS answers preflights. */
  cors?: boolean
  /** Whether load shedding is on (MAX_EVENT_LOOP_DELAY_MS): any request can get 503. */
  loadShedding?: boolean
}

/** An OpenAPI 3.1 document, as plain JSON data. */
export interface OpenApiDocument {
  openapi: string
  info: Record<string, unknown>
  tags: { name: string; description: string }[]
  paths: Paths
  components: Record<string, Record<string, unknown>>
  security?: Record<string, string[]>[]
}

/**
 * The service's OpenAPI 3.1 description, from the paths each part contributes, written by hand
 * so that it states the contract exactly (the routes carry no JSON schemas: validation would
 * change their behaviour and cost time). Every path also gets HEAD (with GET), OPTIONS and the
 * 405 of every other method (methods.ts). `test/openapi/openapi.unit.test.ts` checks the
 * document against the OpenAPI schema and the routes served;
 * `test/openapi/openapi-responses.unit.test.ts` checks real answers against it.
 */
export function buildOpenApiDocument(options: OpenApiOptions): OpenApiDocument {
  const paths = withEveryMethod(Object.assign({}, ...options.paths))
  addCrossCuttingAnswers(paths, options)
  const document: OpenApiDocument = {
    openapi: '3.1.0',
    info: {
      title: 'notes-service',
      version: options.version,
      description: describe(options),
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: [
      { name: 'notes', description: 'Create, read, update and delete notes; follow changes.' },
      { name: 'files', description: 'Files that notes refer to: upload, list, download, delete.' },
      ...(options.userTokens === true
        ? [{ name: 'notebooks', description: 'Notebooks, their members and invitations.' }]
        : []),
      { name: 'operations', description: 'Probes, metrics, this description and the pages.' },
    ],
    paths,
    components: components(options),
  }
  if (options.userTokens === true) {
    document.security =
      options.serviceKeys === true ? [{ userToken: [] }, { accessKey: [] }] : [{ userToken: [] }]
  } else if (options.accessKeys !== undefined) {
    document.security = [{ accessKey: [] }]
  }
  return document
}

function components(options: OpenApiOptions): OpenApiDocument['components'] {
  const keys = options.accessKeys !== undefined
  const tokens = options.userTokens === true
  const limits = options.rateLimits !== undefined
  const all: OpenApiDocument['components'] = {
    // Notebooks themselves are served with user tokens alone; `me` is served always.
    schemas: { ...schemas(), ...(tokens ? notebookSchemas() : {}) },
    parameters: parameters(),
    requestBodies: requestBodies(),
    headers: {
      ...headers(),
      ...(tokens ? notebookHeaders() : {}),
      ...(keys ? accessKeyHeaders(tokens) : {}),
      ...(limits ? rateLimitHeaders() : {}),
      ...(options.cors === true ? corsHeaders() : {}),
    },
    responses: {
      ...responses(),
      ...inNotebookResponses(),
      ...(options.cors === true ? { Options: corsOptionsResponse() } : {}),
      ...(keys ? accessKeyResponses(tokens, !tokens || options.serviceKeys === true) : {}),
      ...(limits ? rateLimitResponses() : {}),
      ...(options.loadShedding === true ? loadSheddingResponses() : {}),
    },
  }
  const accessKey = {
    type: 'http',
    scheme: 'bearer',
    description: tokens
      ? 'A service key from API_KEYS (may read and write) or API_READ_KEYS (may only GET and HEAD): the shared notebook, which no user token sees.'
      : 'An access key from API_KEYS (may read and write) or API_READ_KEYS (may only GET and HEAD).',
  }
  const userToken = {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description:
      "A user token: a JWT signed with AUTH_JWT_SECRET (HS256) or by a key of the identity provider at AUTH_JWKS_URL, with `exp`, and `iss` and `aud` as configured. Its `sub` is the user: every request acts on that user's notebook alone.",
  }
  if (tokens) {
    all.securitySchemes = options.serviceKeys === true ? { userToken, accessKey } : { userToken }
  } else if (keys) {
    all.securitySchemes = { accessKey }
  }
  return all
}

/** OPTIONS with CORS on: a preflight has no Allow, but the Access-Control-* headers. */
function corsOptionsResponse() {
  return {
    description:
      'The methods this path accepts, in `Allow`. No body. A CORS preflight (Origin and Access-Control-Request-Method) is answered with the Access-Control-* headers instead of Allow.',
    headers: {
      ...requestIdHeader,
      Allow: {
        description: 'The methods the path accepts; not on a preflight.',
        schema: { type: 'string', pattern: '^[A-Z]+(, [A-Z]+)*$' },
      },
      'Access-Control-Allow-Origin': header('AccessControlAllowOrigin'),
      'Access-Control-Allow-Methods': header('AccessControlAllowMethods'),
      'Access-Control-Allow-Headers': header('AccessControlAllowHeaders'),
      'Access-Control-Max-Age': header('AccessControlMaxAge'),
    },
  }
}

/** Operations a read key may call; every other guarded operation can answer 403. */
const READ_OPERATIONS = new Set(['get', 'head'])

/**
 * Adds what applies to every operation of a path: access keys' 401/403 and security
 * requirement (OPTIONS stays open: a browser's preflight carries no key), rate limits' 429,
 * load shedding's 503 (where the operation has no 503 of its own, which carries Retry-After too).
 * Where an operation has a 403 or 429 of its own (a viewer's write, the invitations' limit), the
 * cross-cutting one is named in its description.
 */
function addCrossCuttingAnswers(paths: Paths, options: OpenApiOptions): void {
  const { accessKeys, rateLimits } = options
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (typeof operation !== 'object' || operation === null) continue
      const answers = operation.responses
      if (accessKeys !== undefined) {
        if (method === 'options' || !accessKeys.guards(path)) {
          operation.security = []
        } else {
          answers['401'] = response('Unauthorized')
          const readKeys = options.userTokens !== true || options.serviceKeys === true
          if (readKeys && !READ_OPERATIONS.has(method)) {
            answers['403'] = alsoFor(answers['403'], 'Forbidden', READ_KEY_TEXT)
          }
        }
      }
      if (rateLimits !== undefined && !rateLimits.exempt.has(path)) {
        answers['429'] = alsoFor(answers['429'], 'TooManyRequests', RATE_LIMIT_TEXT)
      }
      if (options.loadShedding === true) answers['503'] ??= response('Overloaded')
    }
  }
}

const READ_KEY_TEXT = 'Or: the access key may only read (GET, HEAD).'
const RATE_LIMIT_TEXT =
  'Or: past the rate limit (RATE_LIMIT requests per RATE_LIMIT_WINDOW_MS), with the RateLimit-* headers.'

/**
 * The cross-cutting response `name` where the operation has none of its own for the status;
 * else its own, whose description then also names `text`'s cause.
 */
function alsoFor(own: unknown, name: string, text: string): unknown {
  if (typeof own !== 'object' || own === null || !('description' in own)) return response(name)
  return { ...own, description: `${String(own.description)} ${text}` }
}

const DESCRIPTION = `A notes store: in memory by default (empty at start, lost at exit), in PostgreSQL when \`DATABASE_URL\` names a database. A note is a JSON object with any fields plus an integer \`id\` that the service sets.

- Every success is \`200\` with \`application/json; charset=utf-8\` and the payload under \`data\`.
- A missing note is \`404\` with **no body at all** (\`Content-Length: 0\`, no Content-Type).
- Every other error is RFC 9457 problem JSON (\`application/problem+json\`): \`400\` malformed body or URL, \`413\` body over the limit, \`415\` body that is not JSON, \`507\` store full, \`503\` with \`Retry-After\` while the PostgreSQL store cannot reach its database, \`404\` a path that is not served, and \`405\` with an \`Allow\` header for a method a path does not accept (for example \`PUT /api/note\`; also methods OpenAPI cannot name).
- Bodies are JSON objects in UTF-8, sent as \`application/json\` or any \`application/*+json\`; no body at all counts as \`{}\`.
- Files (\`/api/files\`) are the exception: an upload's body is the file's bytes, of any media type, answered \`201\` with the file's record; a download answers the bytes as uploaded (\`206\` for a \`Range\`).
- \`HEAD\` works wherever \`GET\` does; \`OPTIONS\` answers \`204\` with \`Allow\`. A trailing slash names the same resource (\`/api/note/\`).
- Each response carries \`X-Request-Id\`: the caller's own, when it is 1 to 128 characters of \`A-Z a-z 0-9 _ . : @ / + = ~ -\`, or a generated one (a random prefix and a counter, \`3f9a0c1b7d2e-1f\`). It is on every log line of the request.
- With \`Accept-Encoding\` naming \`br\` or \`gzip\` (q-values honoured, \`*\` included; \`br\` when both are as welcome), a JSON answer over 1 KiB comes compressed, with \`Content-Encoding\`; with \`identity;q=0\`, smaller ones too. The list, its pages and every answer over 1 KiB carry \`Vary: Accept-Encoding\`, compressed or not. A compressed answer's ETag has the coding inside the quotes (\`"<token>-br"\`): \`If-None-Match\` is compared with the ETag of the representation asked for, and \`If-Match\` takes any of them. The pages at \`/\` and \`/docs\` follow the same rules.`

const ACCESS_KEYS_DESCRIPTION = `
- Every request under \`/api/\` (but this document) and to \`/metrics\` needs \`Authorization: Bearer <key>\` with an access key: without one, or with a key that is not valid, or with two Authorization headers, the answer is \`401\` with \`WWW-Authenticate: Bearer\`. A read key may only \`GET\` and \`HEAD\`: anything else with it is \`403\`. \`OPTIONS\`, the probes, the \`/docs\` page and the notes page at \`/\` need no key.`

const USER_TOKENS_DESCRIPTION = `
- User tokens are on: every request under \`/api/\` (but this document) needs \`Authorization: Bearer <token>\` with a user token (a JWT), or a service key, and acts on one notebook: the token's user's own, or for a service key the shared one. A notebook is a store of its own: the list, pages, \`X-Total-Count\`, \`q\`, \`Notes-Version\`, ETags, the change feed and idempotency keys see its notes alone, and another notebook's note is the empty \`404\`. Ids are unique over the whole service. A token that is missing, malformed, expired, not yet valid, for another issuer or audience, not signed by a known key, not typed as an access token (\`typ\` \`at+jwt\`, or one of \`AUTH_TOKEN_TYPES\`), or an ID token is \`401\` with \`WWW-Authenticate: Bearer error="invalid_token"\` and the reason in \`detail\`; \`503\` with \`Retry-After\` while the identity provider's keys cannot be fetched, or while its key set is refreshed for a key that may be new. \`/metrics\` needs a service key.`

const RATE_LIMITS_DESCRIPTION = `
- Requests are rate limited per access key (per client address without one): every answer but the probes' carries \`RateLimit-Limit\` (requests per window), \`RateLimit-Remaining\` and \`RateLimit-Reset\` (seconds until the window ends); past the limit the answer is \`429\` with \`Retry-After\` (seconds).`

const CORS_DESCRIPTION = `
- CORS is on: an answer to a request whose \`Origin\` is allowed carries \`Access-Control-Allow-Origin\` and \`Access-Control-Expose-Headers\`; a preflight \`OPTIONS\` is \`204\` with \`Access-Control-Allow-Methods\`, \`Access-Control-Allow-Headers\` and \`Access-Control-Max-Age\`.`

const LOAD_SHEDDING_DESCRIPTION = `
- While the event loop lags past \`MAX_EVENT_LOOP_DELAY_MS\`, any request may be answered \`503\` with \`Retry-After\`.`

function describe(options: OpenApiOptions): string {
  return (
    DESCRIPTION +
    (options.userTokens === true
      ? USER_TOKENS_DESCRIPTION
      : options.accessKeys === undefined
        ? ''
        : ACCESS_KEYS_DESCRIPTION) +
    (options.rateLimits === undefined ? '' : RATE_LIMITS_DESCRIPTION) +
    (options.cors === true ? CORS_DESCRIPTION : '') +
    (options.loadShedding === true ? LOAD_SHEDDING_DESCRIPTION : '')
  )
}
