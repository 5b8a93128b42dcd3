import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { describe, it } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import type { FastifyInstance } from 'fastify'
import type { InjectOptions, Response } from 'light-my-request'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import type { OpenApiDocument } from '../../src/openapi/document.js'
import { PATH_ITEM_METHODS } from '../../src/openapi/parts.js'
import { MemoryFiles } from '../../src/store/memory/memory-files.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { StoreUnavailableError } from '../../src/store/types.js'
import { signed } from '../support/jwks-server.js'

/**
 * Real answers of the app, checked against the OpenAPI document it serves. The document itself is
 * checked with @seriousme/openapi-schema-validator (OpenAPI 3.1's own JSON schema); the bodies and
 * header values with Ajv's JSON Schema 2020-12 (the dialect of OpenAPI 3.1's schemas), compiled
 * from the document as served, so that a $ref resolves as any other tool resolves it. What is
 * OpenAPI's own (which path item and operation a request meets, which response a status picks,
 * media types, required headers, HEAD without a body) is the small matcher below.
 */

const DOCUMENT_ID = 'https://notes-service.invalid/openapi.json'

/** One request and what the app answered. */
interface Exchange {
  request: InjectOptions & { method: string; url: string }
  response: Response
}

/** '/api/note/{id}' -> /^\/api\/note\/[^/]+\/?$/ (a trailing slash names the same resource) */
function templatePattern(template: string): RegExp {
  const source = template
    .split('/')
    .map((part) => (/^\{\w+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(template === '/' ? '^/$' : `^${source}/?$`)
}

// The key of `content` that describes `mediaType`, as OpenAPI picks it: the media type itself,
// else its range ('image/*'), else '*/*' (any); undefined when none does.
// ('image/png', { '*/*': ... }) -> '*/*'
function contentKey(content: Json, mediaType: string): string | undefined {
  const range = `${mediaType.split('/')[0] ?? ''}/*`
  return [mediaType, range, '*/*'].find((key) => key in content)
}

/** '/a~b' -> '~1a~0b' (RFC 6901) */
const escapePointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1')

type Json = Record<string, unknown>

/** Checks exchanges against one OpenAPI document; each check returns what does not match. */
class ResponseChecker {
  readonly #document: OpenApiDocument
  readonly #ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false })
  readonly #compiled = new Map<string, ValidateFunction>()
  readonly #templates: [string, RegExp][]

  constructor(document: OpenApiDocument) {
    this.#document = document
    this.#ajv.addSchema(document as unknown as Json, DOCUMENT_ID)
    // Concrete paths before templated ones, as OpenAPI matches them (/ui/sign-in.json, /ui/{file}).
    this.#templates = Object.keys(document.paths)
      .sort((a, b) => Number(a.includes('{')) - Number(b.includes('{')))
      .map((t) => [t, templatePattern(t)])
  }

  check({ request, response }: Exchange): string[] {
    const method = request.method.toLowerCase()
    const label = `${request.method} ${request.url} -> ${response.statusCode}`
    const path = request.url.split(/[?#]/)[0] ?? ''
    const template = this.#templates.find(([, pattern]) => pattern.test(path))?.[0]
    if (template === undefined) return [`${label}: no path of the document matches`]
    const operationPointer = `/paths/${escapePointer(template)}/${method}`
    const operation = this.#at(operationPointer) as Json | undefined
    if (operation === undefined) return [`${label}: no operation for ${method} ${template}`]
    const responses = operation.responses as Json
    const status = String(response.statusCode)
    const key = status in responses ? status : 'default' in responses ? 'default' : undefined
    if (key === undefined) return [`${label}: status not declared (${Object.keys(responses)})`]
    const [declared, pointer] = this.#resolve(`${operationPointer}/responses/${key}`)
    return [
      ...this.#checkHeaders(declared, pointer, response),
      ...this.#checkContent(method, declared, pointer, response, request.payloadAsStream === true),
      ...this.#checkRequest(operationPointer, request, response),
    ].map((problem) => `${label}: ${problem}`)
  }

  #checkHeaders(declared: Json, pointer: string, response: Response): string[] {
    const problems: string[] = []
    for (const name of Object.keys((declared.headers as Json | undefined) ?? {})) {
      const [headerObject, at] = this.#resolve(`${pointer}/headers/${escapePointer(name)}`)
      const value = response.headers[name.toLowerCase()]
      if (value === undefined) {
        if (headerObject.required === true) problems.push(`required header ${name} missing`)
        continue
      }
      const text = String(value)
      const schema = this.#at(`${at}/schema`) as Json
      const typed = schema.type === 'integer' && /^-?\d+$/.test(text) ? Number(text) : text
      problems.push(...this.#validate(`${at}/schema`, typed, `header ${name}: ${text}`))
    }
    return problems
  }

  /** `streamed`: an endless answer (the change feed), whose head alone is checked. */
  #checkContent(
    method: string,
    declared: Json,
    pointer: string,
    response: Response,
    streamed: boolean,
  ): string[] {
    const content = declared.content as Json | undefined
    const contentType = response.headers['content-type']
    const bodyless = method === 'head' || response.statusCode === 204 || response.statusCode === 304
    if (bodyless && response.rawPayload.length > 0) return ['a body where none may be']
    if (streamed) {
      const mediaType = String(contentType).split(';')[0]?.trim() ?? ''
      return content !== undefined && contentKey(content, mediaType) !== undefined
        ? []
        : [`Content-Type ${contentType}`]
    }
    if (content === undefined) {
      if (contentType !== undefined) return [`Content-Type ${contentType} where none is declared`]
      return response.rawPayload.length === 0 ? [] : ['a body where none is declared']
    }
    if (contentType === undefined) {
      // A response that is either empty or a body (x-may-be-empty, in-notebook.ts) may come empty.
      const mayBeEmpty = declared['x-may-be-empty'] === true && response.rawPayload.length === 0
      return bodyless || mayBeEmpty ? [] : ['no Content-Type']
    }
    const mediaType = String(contentType).split(';')[0]?.trim().toLowerCase() ?? ''
    const key = contentKey(content, mediaType)
    if (key === undefined) return [`Content-Type ${mediaType} not among ${Object.keys(content)}`]
    if (bodyless) return []
    const at = `${pointer}/content/${escapePointer(key)}/schema`
    const body = decoded(response)
    // A range (a file's any type) describes bytes, whatever they hold: checked as a string.
    if (key === mediaType && (mediaType === 'application/json' || mediaType.endsWith('+json'))) {
      return this.#validate(at, JSON.parse(body.toString('utf8')) as unknown, 'body')
    }
    if (mediaType.startsWith('image/') && mediaType !== 'image/svg+xml') return []
    return this.#validate(at, body.toString('utf8'), 'body')
  }

  /** A request the service took (2xx, 304) must be one the operation describes. */
  #checkRequest(
    operationPointer: string,
    request: Exchange['request'],
    response: Response,
  ): string[] {
    const status = response.statusCode
    if (!(status < 300 || status === 304)) return []
    const problems: string[] = []
    const query = new URLSearchParams(request.url.split('?')[1] ?? '')
    const parameters = (this.#at(`${operationPointer}/parameters`) as unknown[] | undefined) ?? []
    for (let i = 0; i < parameters.length; i++) {
      const [parameter, at] = this.#resolve(`${operationPointer}/parameters/${i}`)
      if (parameter.in !== 'query') continue
      const value = query.get(String(parameter.name))
      if (value === null) continue
      const schema = this.#at(`${at}/schema`) as Json
      const typed = schema.type === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value
      problems.push(...this.#validate(`${at}/schema`, typed, `query ${String(parameter.name)}`))
    }
    const requestType = (request.headers as Record<string, string> | undefined)?.['content-type']
    if (requestType !== undefined && request.payload !== undefined && status < 300) {
      const body = this.#at(`${operationPointer}/requestBody`)
      const content =
        body === undefined
          ? undefined
          : (this.#resolve(`${operationPointer}/requestBody`)[0].content as Json)
      const mediaType = requestType.split(';')[0]?.trim().toLowerCase() ?? ''
      if (content === undefined || contentKey(content, mediaType) === undefined) {
        problems.push(`a ${mediaType} request body the operation does not declare`)
      }
    }
    return problems
  }

  #validate(pointer: string, value: unknown, what: string): string[] {
    let validate = this.#compiled.get(pointer)
    if (validate === undefined) {
      validate = this.#ajv.compile({ $ref: `${DOCUMENT_ID}#${pointer}` })
      this.#compiled.set(pointer, validate)
    }
    if (validate(value)) return []
    return [`${what} does not match ${pointer}: ${this.#ajv.errorsText(validate.errors)}`]
  }

  /** The object at `pointer`, following OpenAPI $refs, and the pointer it was found at. */
  #resolve(pointer: string): [Json, string] {
    let at = pointer
    let value = this.#at(at) as Json
    while (typeof value.$ref === 'string') {
      at = value.$ref.slice(1)
      value = this.#at(at) as Json
    }
    return [value, at]
  }

  #at(pointer: string): unknown {
    return pointer
      .split('/')
      .slice(1)
      .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], this.#document)
  }
}

function decoded(response: Response): Buffer {
  const coding = response.headers['content-encoding']
  if (coding === 'br') return brotliDecompressSync(response.rawPayload)
  if (coding === 'gzip') return gunzipSync(response.rawPayload)
  return response.rawPayload
}

/** A memory store whose database is away: every read and write is a 503, readiness too. */
class AwayStore extends MemoryNoteStore {
  override list(): never {
    throw new StoreUnavailableError('The database cannot be reached right now.')
  }
  available(): boolean {
    return false
  }
}

function appWith(overrides: Partial<Config>, store?: MemoryNoteStore): FastifyInstance {
  const config = { ...DEFAULT_CONFIG, ...overrides }
  return buildApp({
    store:
      store ?? new MemoryNoteStore({ maxNotes: config.maxNotes, maxBytes: config.maxStoreBytes }),
    config,
  })
}

/**
 * Sends each request to `app` and checks its answer against the document `app` serves (or
 * `document`): what does not match, and the statuses answered, to show what was covered.
 */
async function check(
  app: FastifyInstance,
  requests: Exchange['request'][],
  document?: OpenApiDocument,
): Promise<{ problems: string[]; statuses: number[] }> {
  const served = (await app.inject({ method: 'GET', url: '/api/openapi.json' })).json()
  const checker = new ResponseChecker(document ?? (served as OpenApiDocument))
  const problems: string[] = []
  const statuses = new Set<number>()
  const streams: Response[] = []
  for (const request of requests) {
    const response = await app.inject(request)
    statuses.add(response.statusCode)
    problems.push(...checker.check({ request, response }))
    if (request.payloadAsStream === true) streams.push(response)
  }
  // The change feed's answers have no end: their heads are checked, then the clients go away.
  for (const stream of streams) stream.raw.res.destroy()
  return { problems, statuses: [...statuses].sort() }
}

const JSON_TYPE = { 'content-type': 'application/json' }
const SMALL = {
  bodyLimit: 2048,
  maxNotes: 4,
  maxEventStreams: 0,
  metrics: true,
  docs: true,
  ui: true,
}

/** Every method OpenAPI can name on every path of the document, with sample path values. */
function everyPathAndMethod(document: OpenApiDocument, id: string): Exchange['request'][] {
  const samples: Record<string, string> = { id, file: 'main.js', nb: 'me' }
  return Object.keys(document.paths).flatMap((template) => {
    const url = template
      .replace('/docs/static/{file}', '/docs/static/swagger-ui.css')
      .replace(/\{(\w+)\}/g, (_, name: string) => samples[name] ?? name)
    return PATH_ITEM_METHODS.map((method) => {
      const request: Exchange['request'] = { method: method.toUpperCase(), url }
      if (method === 'post' || method === 'patch' || method === 'put') {
        return { ...request, headers: JSON_TYPE, payload: '{"title":"t"}' }
      }
      return request
    })
  })
}

/** The note API's answers, one of each that the document lists, and its headers. */
/** POST /api/batch: kept, replayed, refused for a missing note and a stale If-Match, malformed. */
function batchExchanges(): Exchange['request'][] {
  const batch = (requests: unknown, headers: Record<string, string> = {}) => ({
    method: 'POST',
    url: '/api/batch',
    headers: { ...JSON_TYPE, ...headers },
    payload: JSON.stringify({ requests }),
  })
  const create = { method: 'POST', url: '/api/note', body: { b: 1 } }
  return [
    batch([create], { 'idempotency-key': 'b1', 'accept-encoding': 'gzip' }),
    batch([create], { 'idempotency-key': 'b1' }),
    batch([create, { method: 'DELETE', url: '/api/note/1' }]),
    batch([{ method: 'PATCH', url: '/api/note/1', headers: { 'if-match': '*' } }]),
    batch([{ method: 'PUT', url: '/api/note/1' }]),
    batch([{ ...create, headers: { 'content-type': 'text/plain' } }]),
    batch([create, create, create, create, create]),
  ]
}

async function noteExchanges(app: FastifyInstance): Promise<Exchange['request'][]> {
  const created = await app.inject({
    method: 'POST',
    url: '/api/note',
    headers: JSON_TYPE,
    payload: JSON.stringify({ text: 'x'.repeat(1500) }),
  })
  const id = String((created.json() as { data: { id: number } }).data.id)
  const etag = String(created.headers.etag)
  const list = await app.inject({ method: 'GET', url: '/api/note' })
  const note = `/api/note/${id}`
  const br = { 'accept-encoding': 'br' }
  return [
    { method: 'GET', url: '/api/note' },
    { method: 'GET', url: '/api/note/' },
    { method: 'GET', url: '/api/note', headers: br },
    { method: 'GET', url: '/api/note?limit=1&order=desc&q=x' },
    { method: 'GET', url: '/api/note', headers: { accept: 'application/x-ndjson' } },
    { method: 'HEAD', url: '/api/note', headers: { accept: 'application/x-ndjson' } },
    { method: 'GET', url: '/api/note?limit=1', headers: { accept: 'application/x-ndjson' } },
    { method: 'GET', url: '/api/note', headers: { 'if-none-match': String(list.headers.etag) } },
    { method: 'HEAD', url: '/api/note?limit=1' },
    { method: 'GET', url: '/api/note?limit=0' },
    { method: 'GET', url: '/api/note?after=nonsense' },
    { method: 'GET', url: note },
    { method: 'GET', url: note, headers: { 'accept-encoding': 'gzip' } },
    { method: 'GET', url: note, headers: { 'if-none-match': `W/${etag}` } },
    {
      method: 'GET',
      url: note,
      headers: { 'if-modified-since': new Date(Date.now() + 5000).toUTCString() },
    },
    { method: 'HEAD', url: note },
    { method: 'GET', url: '/api/note/1' },
    { method: 'GET', url: '/api/note/abc' },
    { method: 'GET', url: '/api/note/%zz' },
    { method: 'HEAD', url: '/api/note/2' },
    { method: 'POST', url: '/api/note', headers: JSON_TYPE, payload: '{"a":1}' },
    { method: 'POST', url: '/api/note' },
    ...['k1', 'k1'].map((key) => ({
      method: 'POST',
      url: '/api/note',
      headers: { ...JSON_TYPE, 'idempotency-key': key },
      payload: '{"once":true}',
    })),
    {
      method: 'POST',
      url: '/api/note',
      headers: { ...JSON_TYPE, 'idempotency-key': 'k1' },
      payload: '{"once":false}',
    },
    { method: 'POST', url: '/api/note', headers: JSON_TYPE, payload: '[]' },
    { method: 'POST', url: '/api/note', headers: JSON_TYPE, payload: '{"a":' },
    { method: 'POST', url: '/api/note', headers: { 'content-type': 'text/plain' }, payload: 'x' },
    { method: 'POST', url: '/api/note', headers: JSON_TYPE, payload: `"${'x'.repeat(4096)}"` },
    { method: 'PATCH', url: note, headers: JSON_TYPE, payload: '{"done":true}' },
    {
      method: 'PATCH',
      url: note,
      headers: { 'content-type': 'application/merge-patch+json' },
      payload: '{"done":null}',
    },
    { method: 'PATCH', url: note, headers: { ...JSON_TYPE, 'if-match': '"stale"' }, payload: '{}' },
    { method: 'PATCH', url: '/api/note/1', headers: JSON_TYPE, payload: '{}' },
    { method: 'PUT', url: note, headers: JSON_TYPE, payload: '{"title":"whole"}' },
    { method: 'PUT', url: note, headers: { ...JSON_TYPE, 'if-match': '"stale"' }, payload: '{}' },
    { method: 'PUT', url: '/api/note/1', headers: JSON_TYPE, payload: '{}' },
    { method: 'PATCH', url: note, headers: { 'content-type': 'text/plain' }, payload: 'x' },
    { method: 'DELETE', url: note, headers: { 'if-match': '"stale"' } },
    { method: 'DELETE', url: note, headers: { 'content-type': 'text/plain' }, payload: 'x' },
    {
      method: 'DELETE',
      url: note,
      headers: { 'if-unmodified-since': 'Thu, 01 Jan 1970 00:00:00 GMT' },
    },
    { method: 'DELETE', url: note },
    { method: 'DELETE', url: note },
    ...batchExchanges(),
    // The cap of SMALL is 4 notes: these fill it, and the last is refused with 507.
    ...[1, 2, 3, 4].map(() => ({
      method: 'POST',
      url: '/api/note',
      headers: JSON_TYPE,
      payload: '{}',
    })),
  ]
}

/** The change feed, probes, document, pages and metrics, beyond the matrix. */
async function opsExchanges(app: FastifyInstance): Promise<Exchange['request'][]> {
  const docs = await app.inject({ method: 'GET', url: '/docs' })
  const page = await app.inject({ method: 'GET', url: '/', headers: { 'accept-encoding': 'br' } })
  return [
    { method: 'GET', url: '/api/events?since=a%20b' },
    { method: 'GET', url: '/api/events', headers: { 'last-event-id': 'e.1' } },
    { method: 'HEAD', url: '/api/events' },
    { method: 'GET', url: '/healthz' },
    { method: 'GET', url: '/readyz' },
    { method: 'HEAD', url: '/readyz' },
    { method: 'GET', url: '/api/openapi.json' },
    { method: 'GET', url: '/docs/' },
    { method: 'GET', url: '/docs', headers: { 'if-none-match': String(docs.headers.etag) } },
    { method: 'GET', url: '/docs/static/favicon-32x32.png' },
    { method: 'GET', url: '/docs/static/swagger-ui.css', headers: { 'accept-encoding': 'br' } },
    { method: 'GET', url: '/docs/static/swagger-initializer.js' },
    { method: 'GET', url: '/docs/static/nope.js' },
    { method: 'HEAD', url: '/docs/static/nope.js' },
    { method: 'GET', url: '/', headers: { 'accept-encoding': 'br' } },
    {
      method: 'GET',
      url: '/',
      headers: { 'accept-encoding': 'br', 'if-none-match': String(page.headers.etag) },
    },
    { method: 'GET', url: '/ui/icon.svg', headers: { 'accept-encoding': 'gzip, identity;q=0' } },
    { method: 'GET', url: '/ui/style.css' },
    { method: 'GET', url: '/ui/nope.js' },
    { method: 'GET', url: '/ui/client/index.js', headers: { 'accept-encoding': 'br' } },
    { method: 'GET', url: '/ui/client/replica/nope.js' },
    { method: 'GET', url: '/ui/sw.js' },
    { method: 'GET', url: '/ui/manifest.webmanifest' },
    { method: 'GET', url: '/metrics' },
    { method: 'OPTIONS', url: '/api/note/1/' },
  ]
}

describe('real answers, checked against the OpenAPI document the app serves', () => {
  it('serves a document that is valid OpenAPI 3.1', async () => {
    const app = appWith({ ...SMALL, corsOrigin: ['*'], apiKeys: ['k'], rateLimit: 5 })
    const document = (await app.inject({ method: 'GET', url: '/api/openapi.json' })).json()
    const validator = new Validator()
    assert.deepEqual(await validator.validate(document as Json), { valid: true })
    assert.equal(validator.version, '3.1')
  })

  it('matches every method on every path: the routes, HEAD, OPTIONS and the 405s', async () => {
    const app = appWith(SMALL)
    const document = (await app.inject({ method: 'GET', url: '/api/openapi.json' })).json()
    const created = await app.inject({ method: 'POST', url: '/api/note', headers: JSON_TYPE })
    const id = String((created.json() as { data: { id: number } }).data.id)
    const requests = everyPathAndMethod(document as OpenApiDocument, id)
    assert.equal(requests.length, 40 * 8)
    assert.deepEqual(await check(app, requests), {
      problems: [],
      statuses: [200, 201, 204, 400, 404, 405, 412, 503],
    })
  })

  it('matches the note API: pages, conditions, 304, 404, 412, 413, 415, 422, 400s, 507', async () => {
    const app = appWith(SMALL)
    assert.deepEqual(await check(app, await noteExchanges(app)), {
      problems: [],
      statuses: [200, 304, 400, 404, 412, 413, 415, 422, 507],
    })
  })

  it('matches the feed, probes, document, pages and metrics', async () => {
    const app = appWith(SMALL)
    assert.deepEqual(await check(app, await opsExchanges(app)), {
      problems: [],
      statuses: [200, 204, 304, 400, 404, 503],
    })
  })

  it('matches the answers of access keys, CORS and rate limits', async () => {
    const app = appWith({
      ...SMALL,
      corsOrigin: ['https://app.example'],
      apiKeys: ['k'],
      apiReadKeys: ['r'],
      rateLimit: 20,
    })
    const origin = { origin: 'https://app.example' }
    const requests: Exchange['request'][] = [
      { method: 'GET', url: '/api/note' },
      { method: 'GET', url: '/api/note', headers: { authorization: 'Bearer nope' } },
      { method: 'GET', url: '/api/note', headers: { ...origin, authorization: 'Bearer r' } },
      { method: 'DELETE', url: '/api/note/1', headers: { authorization: 'Bearer r' } },
      { method: 'PUT', url: '/api/note', headers: { authorization: 'Bearer r' } },
      { method: 'PUT', url: '/api/note' },
      { method: 'PUT', url: '/api/note', headers: { authorization: 'Bearer k' } },
      { method: 'OPTIONS', url: '/api/note' },
      {
        method: 'OPTIONS',
        url: '/api/note',
        headers: { ...origin, 'access-control-request-method': 'PATCH' },
      },
      { method: 'GET', url: '/metrics' },
      { method: 'GET', url: '/healthz' },
      ...Array.from({ length: 20 }, () => ({ method: 'GET', url: '/docs' })),
    ]
    assert.deepEqual(await check(app, requests), {
      problems: [],
      statuses: [200, 204, 401, 403, 405, 429],
    })
  })

  it('matches the files: uploads, pages, whole, ranged, 304, 404, 416, deletes and the caps', async () => {
    const app = buildApp({
      store: new MemoryNoteStore({ maxNotes: 10, maxBytes: 100_000 }),
      files: new MemoryFiles({ maxFileBytes: 4096, maxNotebookBytes: 10_000, maxBytes: 1 << 20 }),
      config: { ...DEFAULT_CONFIG, ...SMALL, maxFileBytes: 4096 },
    })
    const upload = (payload: string | Buffer, type?: string, base = '/api') => ({
      method: 'POST',
      url: `${base}/files`,
      headers: type === undefined ? {} : { 'content-type': type },
      payload,
    })
    const picture = Buffer.alloc(3000, 7)
    const [text, png, page, json, empty] = ['hello', picture, '<p>hi</p>', '{"a":1}', ''].map(
      (bytes) => createHash('sha256').update(bytes).digest('hex'),
    )
    const file = (id: string | undefined, headers: Record<string, string> = {}) => ({
      method: 'GET',
      url: `/api/files/${id}`,
      headers,
    })
    const requests: Exchange['request'][] = [
      upload('hello', 'text/plain; charset=utf-8'),
      upload(picture, 'image/png'),
      upload('<p>hi</p>', 'text/html'),
      upload('{"a":1}', 'application/json'),
      upload('no type at all'),
      upload('hello', 'text/plain'),
      upload('x', 'png'),
      upload(Buffer.alloc(5000), 'image/png'),
      upload(Buffer.alloc(4000, 1), 'image/png'),
      upload(Buffer.alloc(4000, 2), 'image/png'),
      upload('mine', 'text/plain', '/api/notebooks/me'),
      { method: 'GET', url: '/api/files' },
      { method: 'GET', url: '/api/files?limit=2' },
      { method: 'GET', url: '/api/notebooks/me/files?limit=2&after=2' },
      { method: 'GET', url: '/api/files?limit=0' },
      { method: 'GET', url: '/api/files?after=x' },
      file(text),
      file(png),
      file(page),
      file(json),
      { method: 'HEAD', url: `/api/files/${png}` },
      file(png, { range: 'bytes=0-99' }),
      { method: 'HEAD', url: `/api/files/${png}`, headers: { range: 'bytes=-10' } },
      file(png, { range: 'bytes=0-1,5-6' }),
      file(png, { range: 'bytes=0-1', 'if-range': '"other"' }),
      file(png, { 'if-none-match': `"${png}"` }),
      file(page, { 'if-none-match': `"${page}"` }),
      file(png, { range: 'bytes=3000-' }),
      upload('', 'text/plain'),
      file(empty),
      file(empty, { range: 'bytes=-5' }),
      file('0'.repeat(64)),
      file('nothex'),
      { method: 'GET', url: `/api/notebooks/me/files/${text}` },
      { method: 'GET', url: `/api/notebooks/someone/files/${text}` },
      { method: 'DELETE', url: `/api/files/${json}` },
      { method: 'DELETE', url: `/api/files/${json}` },
      { method: 'DELETE', url: `/api/notebooks/me/files/${page}` },
    ]
    assert.deepEqual(await check(app, requests), {
      problems: [],
      statuses: [200, 201, 204, 206, 304, 400, 404, 413, 416, 507],
    })
  })

  it("matches the change feed's head, for GET as for HEAD", async () => {
    const app = appWith({ ...SMALL, maxEventStreams: 2 })
    const requests: Exchange['request'][] = [
      { method: 'GET', url: '/api/events', payloadAsStream: true },
      { method: 'GET', url: '/api/events?since=e.1', payloadAsStream: true },
      { method: 'GET', url: '/api/events' },
      { method: 'HEAD', url: '/api/events' },
    ]
    assert.deepEqual(await check(app, requests), { problems: [], statuses: [200, 503] })
  })

  it('matches the 503s of a store whose database is away', async () => {
    const app = appWith(SMALL, new AwayStore({ maxNotes: 10, maxBytes: 1_000_000 }))
    const requests: Exchange['request'][] = [
      { method: 'GET', url: '/api/note' },
      { method: 'GET', url: '/readyz' },
      { method: 'GET', url: '/healthz' },
    ]
    assert.deepEqual(await check(app, requests), { problems: [], statuses: [200, 503] })
  })
})

describe('the checker', () => {
  it('matches the notebooks, their members and invitations, and every refusal of theirs', async () => {
    const secret = 'a-secret-of-32-bytes-or-more-000'
    const app = buildApp({
      notebooks: new MemoryNotebooks({
        maxNotes: 10,
        maxBytes: 10_000,
        maxNotebooksPerUser: 3,
        maxMembers: 3,
      }),
      userTokens: new UserTokens({ secret }),
      config: { ...DEFAULT_CONFIG, ...SMALL, apiKeys: ['k'] },
    })
    const exp = Math.floor(Date.now() / 1000) + 3600
    const user = async (sub: string) => ({
      authorization: `Bearer ${await signed(Buffer.from(secret), { alg: 'HS256' }, { sub, exp })}`,
    })
    const [ann, bob, cat, eve] = await Promise.all(['ann', 'bob', 'cat', 'eve'].map(user))
    const as = (
      headers: Record<string, string> | undefined,
      method: string,
      url: string,
      body?: unknown,
    ): Exchange['request'] => ({
      method,
      url,
      headers: { ...headers, ...(body === undefined ? {} : JSON_TYPE) },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    })
    const dataOf = async (request: Exchange['request']) =>
      ((await app.inject(request)).json() as { data: Record<string, string> }).data
    const { id } = await dataOf(as(ann, 'POST', '/api/notebooks', { name: 'Team' }))
    const base = `/api/notebooks/${String(id)}`
    const invite = await dataOf(as(ann, 'POST', `${base}/invites`, { role: 'viewer' }))
    const requests = [
      as(ann, 'GET', '/api/notebooks'),
      as(ann, 'POST', '/api/notebooks', { name: 'Two' }),
      as(ann, 'POST', '/api/notebooks', { name: 'Three' }),
      as(ann, 'POST', '/api/notebooks', { name: '' }),
      as(ann, 'GET', base),
      as(ann, 'PATCH', base, { name: 'Crew' }),
      as(ann, 'PUT', `${base}/members/bob`, { role: 'editor' }),
      as(ann, 'PUT', `${base}/members/ann`, { role: 'viewer' }),
      as(bob, 'GET', `${base}/members`),
      as(bob, 'POST', `${base}/note`, { title: 't' }),
      as(bob, 'DELETE', base),
      as(ann, 'GET', `${base}/invites`),
      as(ann, 'POST', `${base}/invites`, { role: 'viewer', uses: 0 }),
      as(cat, 'POST', `/api/invites/${String(invite?.token)}`),
      as(cat, 'POST', `/api/invites/${String(invite?.token)}`),
      as(cat, 'POST', `${base}/note`, { title: 'mine' }),
      { ...as(bob, 'POST', `${base}/files`), headers: { ...bob, 'content-type': 'image/png' } },
      { ...as(cat, 'POST', `${base}/files`), headers: { ...cat, 'content-type': 'image/png' } },
      as(cat, 'GET', `${base}/files`),
      as(cat, 'DELETE', `${base}/files/${'0'.repeat(64)}`),
      as(bob, 'DELETE', `${base}/files/${'0'.repeat(64)}`),
      as(eve, 'GET', `${base}/files`),
      as(eve, 'GET', `${base}/files/${'0'.repeat(64)}`),
      as(ann, 'PUT', `${base}/members/dan`, { role: 'viewer' }),
      as(eve, 'GET', `${base}/note`),
      as(eve, 'GET', base),
      as(ann, 'DELETE', `${base}/invites/${String(invite?.id)}`),
      as(cat, 'DELETE', `${base}/members/cat`),
      as(ann, 'DELETE', '/api/notebooks/me'),
      as({ authorization: 'Bearer k' }, 'GET', '/api/notebooks'),
      as(ann, 'DELETE', base),
      ...Array.from({ length: 21 }, (_, i) => as(eve, 'POST', `/api/invites/guess${i}`)),
    ]
    assert.deepEqual(await check(app, requests), {
      problems: [],
      statuses: [200, 201, 204, 400, 403, 404, 409, 429, 507],
    })
  })

  it('fails when the document says otherwise than the answers', async () => {
    const app = appWith(SMALL)
    const document = (
      await app.inject({ method: 'GET', url: '/api/openapi.json' })
    ).json() as OpenApiDocument
    const broken = structuredClone(document) as unknown as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
      components: { schemas: Record<string, Json>; headers: Record<string, Json> }
    }
    // A note's id a string, a header the list does not send, PUT /api/note not described.
    const note = broken.components.schemas.Note as { properties: Json }
    note.properties.id = { type: 'string' }
    const list = broken.paths['/api/note'] as Record<string, { responses: Record<string, Json> }>
    const listOk = list.get?.responses['200'] as { headers: Json }
    listOk.headers['X-Missing'] = { required: true, schema: { type: 'string' } }
    delete broken.paths['/api/note']?.put
    await app.inject({ method: 'POST', url: '/api/note', headers: JSON_TYPE, payload: '{}' })
    const { problems } = await check(
      app,
      [
        { method: 'GET', url: '/api/note' },
        { method: 'PUT', url: '/api/note' },
        { method: 'PROPFIND', url: '/api/note' },
      ],
      broken as unknown as OpenApiDocument,
    )
    assert.equal(problems.length, 4, problems.join('\n'))
    assert.match(problems[0] ?? '', /^GET \/api\/note -> 200: required header X-Missing missing$/)
    assert.match(problems[1] ?? '', /^GET \/api\/note -> 200: body does not match .*must be string/)
    assert.equal(problems[2], 'PUT /api/note -> 405: no operation for put /api/note')
    assert.equal(problems[3], 'PROPFIND /api/note -> 405: no operation for propfind /api/note')
  })
})
