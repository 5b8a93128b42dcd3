import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { after, describe, it } from 'node:test'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { bearerToken, requestPath } from '../../src/api/request-target.js'
import { buildApp } from '../../src/app.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { WireConnection, type WireResponse } from '../hostile/wire.js'
import {
  buildTestApp,
  describeEachLane,
  fakeClock,
  injectThroughServer,
  MEMORY,
  type SuiteContext,
} from '../support/helpers.js'
import { logCollector } from '../support/ops-app.js'

const WRITE = 'sk-write-7f3a9c'
const WRITE_2 = 'sk-write-2b81d0'
const READ = 'sk-read-5e02aa'
const WRONG = 'sk-wrong-000000'
const SECRETS = [WRITE, WRITE_2, READ, WRONG]
const KEYED: Partial<Config> = { apiKeys: [WRITE, WRITE_2], apiReadKeys: [READ], metrics: true }

const MISSING = 'This API needs an access key: send Authorization: Bearer <key>.'
const DUPLICATE = 'Send one Authorization header, not several.'
const MALFORMED =
  'The Authorization header must be Bearer <key>: the word Bearer, a space, and the key.'
const UNKNOWN = 'The access key is not valid; send Authorization: Bearer <key> with a key that is.'
const READ_ONLY =
  'This access key may only read (GET, HEAD); send a key that may write to change notes.'

interface Credentials {
  name: string
  authorization: string | string[] | undefined
  /** What a request under /api/ with it gets: refused (401 with `detail`), or a key's rights. */
  outcome: 'read' | 'write' | { detail: string }
}

const CREDENTIALS: Credentials[] = [
  { name: 'no key', authorization: undefined, outcome: { detail: MISSING } },
  { name: 'a wrong key', authorization: `Bearer ${WRONG}`, outcome: { detail: UNKNOWN } },
  { name: 'a read key', authorization: `Bearer ${READ}`, outcome: 'read' },
  { name: 'a write key', authorization: `Bearer ${WRITE}`, outcome: 'write' },
  { name: 'the second write key', authorization: `Bearer ${WRITE_2}`, outcome: 'write' },
  // Whitespace around a field value is not part of it (RFC 9110 §5.5); Node drops it on the wire.
  {
    name: 'a write key with a trailing space',
    authorization: `Bearer ${WRITE} `,
    outcome: 'write',
  },
  {
    name: 'a read key with a trailing tab',
    authorization: `Bearer ${READ}\t`,
    outcome: 'read',
  },
  {
    name: 'a write key and one character more',
    authorization: `Bearer ${WRITE}x`,
    outcome: { detail: UNKNOWN },
  },
  {
    name: 'a write key less its last character',
    authorization: `Bearer ${WRITE.slice(0, -1)}`,
    outcome: { detail: UNKNOWN },
  },
  {
    name: 'a write key followed by a space and more',
    authorization: `Bearer ${WRITE} x`,
    outcome: { detail: MALFORMED },
  },
  {
    name: 'a 10,000-character key',
    authorization: `Bearer ${'k'.repeat(10_000)}`,
    outcome: { detail: UNKNOWN },
  },
  { name: 'the scheme in lowercase', authorization: `bearer ${WRITE}`, outcome: 'write' },
  { name: 'the scheme in capitals', authorization: `BEARER ${READ}`, outcome: 'read' },
  {
    name: 'another scheme',
    authorization: `Basic ${Buffer.from(`user:${WRITE}`).toString('base64')}`,
    outcome: { detail: MALFORMED },
  },
  { name: 'the key without a scheme', authorization: WRITE, outcome: { detail: MALFORMED } },
  { name: 'the scheme without a key', authorization: 'Bearer', outcome: { detail: MALFORMED } },
  {
    name: 'two Authorization headers with the same write key',
    authorization: [`Bearer ${WRITE}`, `Bearer ${WRITE}`],
    outcome: { detail: DUPLICATE },
  },
  {
    name: 'two Authorization headers, a write key then a wrong one',
    authorization: [`Bearer ${WRITE}`, `Bearer ${WRONG}`],
    outcome: { detail: DUPLICATE },
  },
  {
    name: 'two Authorization headers, a wrong key then a write key',
    authorization: [`Bearer ${WRONG}`, `Bearer ${WRITE}`],
    outcome: { detail: DUPLICATE },
  },
  {
    name: 'two Authorization headers, a read key then a write key',
    authorization: [`Bearer ${READ}`, `Bearer ${WRITE}`],
    outcome: { detail: DUPLICATE },
  },
]

interface Route {
  request: InjectOptions
  /** Needs a key (under /api/ or /metrics, not OPTIONS, not the OpenAPI document). */
  guarded: boolean
  /** Only the status can be compared with the open API (the metrics differ between apps). */
  statusOnly?: true
}

const json = { 'content-type': 'application/json' }

/** Every route, in an order that leaves something for each to act on; note 1000 is preloaded. */
const ROUTES: Route[] = [
  {
    request: { method: 'POST', url: '/api/note', headers: json, payload: '{"t":1}' },
    guarded: true,
  },
  { request: { method: 'GET', url: '/api/note' }, guarded: true },
  { request: { method: 'HEAD', url: '/api/note' }, guarded: true },
  { request: { method: 'OPTIONS', url: '/api/note' }, guarded: false },
  { request: { method: 'GET', url: '/api/note/1000' }, guarded: true },
  { request: { method: 'HEAD', url: '/api/note/1000' }, guarded: true },
  {
    request: { method: 'PATCH', url: '/api/note/1000', headers: json, payload: '{"d":2}' },
    guarded: true,
  },
  { request: { method: 'OPTIONS', url: '/api/note/1000' }, guarded: false },
  { request: { method: 'DELETE', url: '/api/note/1000' }, guarded: true },
  { request: { method: 'GET', url: '/api/note/1000' }, guarded: true },
  { request: { method: 'PUT', url: '/api/note' }, guarded: true },
  { request: { method: 'GET', url: '/api/nowhere' }, guarded: true },
  { request: { method: 'GET', url: '/metrics' }, guarded: true, statusOnly: true },
  { request: { method: 'HEAD', url: '/metrics' }, guarded: true, statusOnly: true },
  { request: { method: 'GET', url: '/healthz' }, guarded: false },
  { request: { method: 'HEAD', url: '/healthz' }, guarded: false },
  { request: { method: 'GET', url: '/readyz' }, guarded: false },
  { request: { method: 'HEAD', url: '/readyz' }, guarded: false },
  // The document says when keys are on, so only its status is the open API's.
  { request: { method: 'GET', url: '/api/openapi.json' }, guarded: false, statusOnly: true },
]

/** Status, headers (without date and x-request-id) and body. */
function observed(response: LightMyRequestResponse): unknown {
  const { date: _date, 'x-request-id': id, ...headers } = response.headers
  assert.equal(typeof id, 'string')
  return { status: response.statusCode, headers, body: response.body }
}

function refusal(status: 401 | 403, detail: string, method = 'GET'): unknown {
  const title = status === 401 ? 'Unauthorized' : 'Forbidden'
  const body = JSON.stringify({ type: 'about:blank', title, status, detail })
  return {
    status,
    headers: {
      ...(status === 401 ? { 'www-authenticate': 'Bearer' } : {}),
      'content-type': 'application/problem+json',
      'content-length': String(Buffer.byteLength(body)),
      connection: 'keep-alive',
    },
    body: method === 'HEAD' ? '' : body,
  }
}

/** The app with keys, and the same app without, on equal stores holding note 1000. */
function twins(
  suite: SuiteContext,
  overrides: Partial<Config> = {},
): { keyed: FastifyInstance; open: FastifyInstance } {
  const make = (config: Partial<Config>): FastifyInstance => {
    const { app, store } = suite.buildApp({ ...config, ...overrides }, { now: fakeClock(1000, 1) })
    store.create({ title: 'first' })
    return app
  }
  return { keyed: make(KEYED), open: make({ metrics: true }) }
}

function withAuthorization(request: InjectOptions, credentials: Credentials): InjectOptions {
  if (credentials.authorization === undefined) return request
  // light-my-request sends an array as that many headers of the name, as Node would receive them.
  const headers = { ...request.headers, authorization: credentials.authorization }
  return { ...request, headers: headers as NonNullable<InjectOptions['headers']> }
}

describeEachLane('access keys', (suite) => {
  for (const credentials of CREDENTIALS) {
    it(`answers every route as the keys allow, with ${credentials.name}`, async () => {
      const { keyed, open } = twins(suite)
      for (const route of ROUTES) {
        const { request } = route
        const label = `${request.method} ${request.url}`
        const actual = await keyed.inject(withAuthorization(request, credentials))
        const { outcome } = credentials
        if (route.guarded && typeof outcome === 'object') {
          assert.deepEqual(observed(actual), refusal(401, outcome.detail, request.method), label)
        } else if (
          route.guarded &&
          outcome === 'read' &&
          request.method !== 'GET' &&
          request.method !== 'HEAD'
        ) {
          assert.deepEqual(observed(actual), refusal(403, READ_ONLY), label)
        } else {
          // Allowed: exactly the answer of the API without keys.
          const expected = await open.inject(request)
          if (route.statusOnly) assert.equal(actual.statusCode, expected.statusCode, label)
          else assert.deepEqual(observed(actual), observed(expected), label)
        }
      }
      // A refused request changed nothing.
      const authorization = `Bearer ${WRITE}`
      const list = await keyed.inject({ url: '/api/note', headers: { authorization } })
      assert.deepEqual(observed(list), observed(await open.inject('/api/note')))
    })
  }

  it('guards a note route however its URL is spelled', async () => {
    const { keyed, open } = twins(suite)
    const urls = [
      '/api/note/',
      '/api/note?limit=1',
      '/%61pi/note',
      '/api/%6eote',
      '/api/note/%31000',
      '/api/note/01000/',
      '/api/note#fragment',
      '/metrics/',
      '/%6detrics',
    ]
    for (const url of urls) {
      assert.deepEqual(observed(await keyed.inject(url)), refusal(401, MISSING), url)
      const allowed = await keyed.inject({ url, headers: { authorization: `Bearer ${READ}` } })
      const expected = await open.inject(url)
      assert.equal(expected.statusCode, 200, url)
      if (url.includes('etrics')) assert.equal(allowed.statusCode, 200, url)
      else assert.deepEqual(observed(allowed), observed(expected), url)
    }
  })

  it('leaves the API open with no keys configured', async () => {
    const { open } = twins(suite)
    const response = await open.inject({ method: 'POST', url: '/api/note', payload: {} })
    assert.equal(response.statusCode, 200)
  })

  it('refuses writes with a read key when only read keys are set', async () => {
    const { app } = suite.buildApp({ apiReadKeys: [READ] })
    const authorization = `Bearer ${READ}`
    const read = await app.inject({ url: '/api/note', headers: { authorization } })
    assert.equal(read.statusCode, 200)
    const write = await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: { authorization },
      payload: {},
    })
    assert.deepEqual(observed(write), refusal(403, READ_ONLY))
  })
})

describe('access keys and the fast lane', () => {
  it('takes the requests the keys allow, and leaves the refused ones to Fastify', async () => {
    const { keyed } = twins(MEMORY)
    let throughFastify = 0
    // onResponse: the access check answers from an onRequest hook before any added later runs.
    keyed.addHook('onResponse', (_request, _reply, done) => {
      throughFastify++
      done()
    })
    const viaServer = injectThroughServer(keyed)
    const write = { authorization: `Bearer ${WRITE}` }
    const read = { authorization: `Bearer ${READ}` }
    const allowed: InjectOptions[] = [
      { method: 'GET', url: '/api/note', headers: read },
      { method: 'GET', url: '/api/note/1000', headers: read },
      { method: 'POST', url: '/api/note', headers: { ...write, ...json }, payload: '{}' },
      { method: 'PATCH', url: '/api/note/1000', headers: { ...write, ...json }, payload: '{}' },
      { method: 'DELETE', url: '/api/note/1000', headers: write },
    ]
    for (const request of allowed) assert.equal((await viaServer(request)).statusCode, 200)
    assert.equal(throughFastify, 0)
    const refused: [InjectOptions, number][] = [
      [{ method: 'GET', url: '/api/note' }, 401],
      [{ method: 'GET', url: '/api/note/1001', headers: { authorization: 'Bearer x' } }, 401],
      [{ method: 'POST', url: '/api/note', headers: { ...read, ...json }, payload: '{}' }, 403],
      [{ method: 'DELETE', url: '/api/note/1001', headers: read }, 403],
    ]
    for (const [request, status] of refused) {
      assert.equal((await viaServer(request)).statusCode, status)
    }
    assert.equal(throughFastify, refused.length)
  })
})

/** Sends `head` (request line and headers, without the final CRLF) and reads the answer. */
async function exchange(port: number, head: string): Promise<WireResponse> {
  const connection = await WireConnection.open('127.0.0.1', port)
  try {
    connection.write(`${head}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
    const response = await connection.readResponse('GET', 5000)
    assert.notEqual(response, 'closed')
    return response as WireResponse
  } finally {
    connection.destroy()
  }
}

async function listening(config: Partial<Config>): Promise<number> {
  const { app } = buildTestApp(config, { now: fakeClock(1000, 1) })
  await app.listen({ port: 0, host: '127.0.0.1' })
  after(() => app.close())
  return (app.server.address() as AddressInfo).port
}

describe('access keys over a real socket', () => {
  it('refuses two Authorization headers with 401, whichever keys they hold', async () => {
    const port = await listening(KEYED)
    const pairs = [
      [`Authorization: Bearer ${WRITE}`, `Authorization: Bearer ${WRITE}`],
      [`Authorization: Bearer ${WRITE}`, `Authorization: Bearer ${WRONG}`],
      [`Authorization: Bearer ${WRONG}`, `Authorization: Bearer ${WRITE}`],
      [`authorization: Bearer ${READ}`, `AUTHORIZATION: Bearer ${WRITE}`],
    ]
    for (const [first, second] of pairs) {
      for (const target of ['GET /api/note', 'GET /api/note/1', 'GET /metrics']) {
        const response = await exchange(port, `${target} HTTP/1.1\r\n${first}\r\n${second}`)
        assert.equal(response.status, 401, `${target} ${first} ${second}`)
        assert.deepEqual(response.headers.get('www-authenticate'), ['Bearer'])
        assert.deepEqual(JSON.parse(response.body.toString()), {
          type: 'about:blank',
          title: 'Unauthorized',
          status: 401,
          detail: DUPLICATE,
        })
      }
    }
  })

  it('reads the key as HTTP defines the header: scheme in any case, spaces around dropped', async () => {
    const port = await listening(KEYED)
    const cases: [string, number][] = [
      [`GET /api/note HTTP/1.1\r\nAuthorization: Bearer ${WRITE}`, 200],
      [`GET /api/note HTTP/1.1\r\nauthorization: bearer ${WRITE}   `, 200],
      [`GET /api/note HTTP/1.1\r\nAuthorization:\tBeArEr ${READ}\t`, 200],
      [`GET /api/note HTTP/1.1\r\nAuthorization: Bearer ${WRITE}x`, 401],
      [`GET /api/note HTTP/1.1\r\nAuthorization: Bearer ${WRITE} x`, 401],
      [`POST /api/note HTTP/1.1\r\nAuthorization: Bearer ${READ}\r\nContent-Length: 0`, 403],
      [`POST /api/note HTTP/1.1\r\nAuthorization: Bearer ${WRITE}\r\nContent-Length: 0`, 200],
      // The absolute form of the request target (RFC 9112 §3.2.2) is the same resource.
      ['GET http://127.0.0.1/api/note HTTP/1.1', 401],
      [`GET http://127.0.0.1/api/note HTTP/1.1\r\nAuthorization: Bearer ${READ}`, 200],
      ['GET /healthz HTTP/1.1', 200],
    ]
    for (const [head, status] of cases) {
      assert.equal((await exchange(port, head)).status, status, head)
    }
  })
})

describe('access keys in the logs', () => {
  for (const logRequests of [false, true]) {
    it(`never writes a key to the log, at any level (LOG_REQUESTS=${logRequests})`, async () => {
      const { stream, lines } = logCollector()
      const app = buildApp({
        store: new MemoryNoteStore({ maxNotes: 10, maxBytes: 100_000 }),
        config: { ...DEFAULT_CONFIG, ...KEYED, logRequests },
        logger: { level: 'trace', stream },
      })
      // As any code that logs a request's headers would.
      app.addHook('onResponse', (request, _reply, done) => {
        request.log.debug({ headers: request.headers }, 'answered')
        done()
      })
      await app.listen({ port: 0, host: '127.0.0.1' })
      const port = (app.server.address() as AddressInfo).port
      for (const credentials of CREDENTIALS) {
        for (const request of [
          { method: 'POST', url: '/api/note', headers: json, payload: '{}' },
          { method: 'GET', url: '/api/note' },
          { method: 'GET', url: '/healthz' },
        ] satisfies InjectOptions[]) {
          await app.inject(withAuthorization(request, credentials))
          await injectThroughServer(app)(withAuthorization(request, credentials))
        }
      }
      // A request Node's parser refuses, with the key in its raw bytes.
      await exchange(port, `GET /api/note HTTP/1.1\r\nAuthorization: Bearer ${WRITE}\r\nBad Header`)
      await app.close()
      const text = lines.map((line) => JSON.stringify(line)).join('\n')
      for (const secret of SECRETS) assert.equal(text.includes(secret), false, secret)
      const answered = lines.filter((line) => line.msg === 'answered')
      assert.ok(answered.length >= 2 * CREDENTIALS.length)
      const shown = answered.map((line) => (line.headers as Record<string, unknown>).authorization)
      assert.ok(shown.includes('[Redacted]'))
      assert.deepEqual(
        new Set(shown),
        new Set(['[Redacted]', undefined]),
        'every Authorization header is redacted',
      )
    })
  }
})

describe('bearerToken', () => {
  const cases: [string, string | undefined][] = [
    ['Bearer k1', 'k1'],
    ['bearer k1', 'k1'],
    ['BEARER k1', 'k1'],
    ['Bearer   k1', 'k1'],
    [' Bearer k1 ', 'k1'],
    ['Bearer k1\t', 'k1'],
    ['Bearer k1 k2', undefined],
    ['Bearer\tk1', undefined],
    ['Bearer', undefined],
    ['Bearer ', undefined],
    ['Bearerk1', undefined],
    ['Basic k1', undefined],
    ['k1', undefined],
    ['', undefined],
  ]
  for (const [value, token] of cases) {
    it(`reads ${JSON.stringify(value)} as ${JSON.stringify(token)}`, () => {
      assert.equal(bearerToken(value), token)
    })
  }
})

describe('requestPath', () => {
  const cases: [string, string][] = [
    ['/api/note', '/api/note'],
    ['/api/note?x=1', '/api/note'],
    ['/%61pi/note', '/api/note'],
    ['http://host:3000/api/note?x', '/api/note'],
    ['HTTPS://host/metrics', '/metrics'],
    ['http://host', '/'],
    ['/api%2Fnote', '/api%2Fnote'],
  ]
  for (const [url, path] of cases) {
    it(`reads ${url} as ${path}`, () => {
      assert.equal(requestPath(url), path)
    })
  }
})
