import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { after, describe, it } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import type { Config } from '../../src/config/config.js'
import {
  describeEachLane,
  injectThroughServer,
  MEMORY,
  type SuiteContext,
} from '../support/helpers.js'

const WINDOW_MS = 60_000
const json = { 'content-type': 'application/json' }

/** The RateLimit headers of a response, and Retry-After. */
function limitHeaders(response: LightMyRequestResponse | Response): Record<string, unknown> {
  const get = (name: string): unknown =>
    response instanceof Response
      ? (response.headers.get(name) ?? undefined)
      : response.headers[name]
  return {
    limit: get('ratelimit-limit'),
    remaining: get('ratelimit-remaining'),
    reset: get('ratelimit-reset'),
    retryAfter: get('retry-after'),
  }
}

/**
 * Checks RateLimit-Reset: the seconds left of a window that began at the first request, no
 * earlier than `start`, so between what is left of it now and the whole window.
 */
function assertReset(reset: unknown, start: number, label: string): void {
  const seconds = Number(reset)
  const least = Math.ceil((WINDOW_MS - (Date.now() - start)) / 1000)
  assert.ok(
    Number.isInteger(seconds) && seconds >= least && seconds <= WINDOW_MS / 1000,
    `${label}: ${String(reset)}`,
  )
}

function tooMany(max: number, retryAfter: string): string {
  return JSON.stringify({
    type: 'about:blank',
    title: 'Too Many Requests',
    status: 429,
    detail: `Too many requests: the limit is ${max} per 60 s; retry after ${retryAfter} s.`,
  })
}

function limited(suite: SuiteContext, overrides: Partial<Config>) {
  return suite.buildApp({ rateLimitWindowMs: WINDOW_MS, ...overrides })
}

describeEachLane('rate limits', (suite) => {
  it('puts the RateLimit headers on every answer, and counts every request', async () => {
    const { app } = limited(suite, { rateLimit: 100, metrics: true, bodyLimit: 64 })
    const requests: [InjectOptions, number][] = [
      [{ method: 'POST', url: '/api/note', headers: json, payload: '{"a":1}' }, 200],
      [{ method: 'GET', url: '/api/note' }, 200],
      [{ method: 'HEAD', url: '/api/note' }, 200],
      [{ method: 'GET', url: '/api/note/1' }, 404],
      [{ method: 'GET', url: '/api/note/abc' }, 404],
      [{ method: 'PATCH', url: '/api/note/1', headers: json, payload: '{}' }, 404],
      [{ method: 'DELETE', url: '/api/note/1' }, 404],
      [{ method: 'POST', url: '/api/note', headers: json, payload: '[1]' }, 400],
      [{ method: 'POST', url: '/api/note', headers: { 'content-type': 'text/plain' } }, 415],
      [{ method: 'POST', url: '/api/note', headers: json, payload: `"${'x'.repeat(99)}"` }, 413],
      [{ method: 'PUT', url: '/api/note' }, 405],
      [{ method: 'OPTIONS', url: '/api/note/1' }, 204],
      [{ method: 'GET', url: '/nowhere' }, 404],
      [{ method: 'GET', url: '/api/openapi.json' }, 200],
      [{ method: 'GET', url: '/metrics' }, 200],
    ]
    const start = Date.now()
    for (const [i, [request, status]] of requests.entries()) {
      const label = `${request.method} ${request.url}`
      const response = await app.inject(request)
      assert.equal(response.statusCode, status, label)
      const { reset, ...rest } = limitHeaders(response)
      assert.deepEqual(
        rest,
        { limit: '100', remaining: String(100 - i - 1), retryAfter: undefined },
        label,
      )
      assertReset(reset, start, label)
    }
  })

  it('leaves the health checks out: not counted, no RateLimit headers', async () => {
    const { app } = limited(suite, { rateLimit: 2 })
    for (let i = 0; i < 5; i++) {
      for (const url of ['/healthz', '/readyz', '/healthz/']) {
        const response = await app.inject(url)
        assert.equal(response.statusCode, 200)
        assert.deepEqual(limitHeaders(response), {
          limit: undefined,
          remaining: undefined,
          reset: undefined,
          retryAfter: undefined,
        })
      }
    }
    assert.equal((await app.inject('/api/note')).headers['ratelimit-remaining'], '1')
  })

  it('answers 429 past the limit, with Retry-After and problem JSON, and applies nothing', async () => {
    const { app, store } = limited(suite, { rateLimit: 3 })
    const post = { method: 'POST', url: '/api/note', headers: json, payload: '{}' } as const
    for (let i = 0; i < 3; i++) assert.equal((await app.inject(post)).statusCode, 200)
    const start = Date.now()
    for (const request of [post, { method: 'GET', url: '/api/note' } as const, post]) {
      const response = await app.inject(request)
      const retryAfter = response.headers['retry-after'] as string
      const { date: _date, 'x-request-id': id, ...headers } = response.headers
      assert.equal(typeof id, 'string')
      assert.equal(response.statusCode, 429)
      assert.deepEqual(headers, {
        'ratelimit-limit': '3',
        'ratelimit-remaining': '0',
        'ratelimit-reset': retryAfter,
        'retry-after': retryAfter,
        'content-type': 'application/problem+json',
        'content-length': String(tooMany(3, retryAfter).length),
        connection: 'keep-alive',
      })
      assert.equal(response.body, tooMany(3, retryAfter))
      assertReset(retryAfter, start - 1000, request.method)
    }
    assert.equal((await store.stats()).notes, 3)
    assert.equal((await app.inject('/healthz')).statusCode, 200)
  })

  it('counts each client address apart: one past its limit holds back no other', async () => {
    const { app } = limited(suite, { rateLimit: 5 })
    const from = (remoteAddress: string) => app.inject({ url: '/api/note', remoteAddress })
    const statuses: Record<string, number[]> = { a: [], b: [] }
    const remaining: string[] = []
    for (let i = 0; i < 20; i++) {
      statuses.a?.push((await from('192.0.2.1')).statusCode)
      if (i % 4 === 0) {
        const response = await from('192.0.2.2')
        statuses.b?.push(response.statusCode)
        remaining.push(response.headers['ratelimit-remaining'] as string)
      }
    }
    assert.deepEqual(statuses.a, [...Array(5).fill(200), ...Array(15).fill(429)])
    assert.deepEqual(statuses.b, [200, 200, 200, 200, 200])
    assert.deepEqual(remaining, ['4', '3', '2', '1', '0'])
    // An IPv6 client is counted by its /64, as @fastify/rate-limit does.
    for (let i = 0; i < 5; i++) {
      assert.equal((await from(`2001:db8::${i + 1}`)).statusCode, 200)
    }
    assert.equal((await from('2001:db8::ffff')).statusCode, 429)
    assert.equal((await from('2001:db8:0:1::1')).statusCode, 200)
  })

  it('counts per access key when keys are on, and refused keys per address', async () => {
    const { app } = limited(suite, {
      rateLimit: 3,
      apiKeys: ['k-one', 'k-two'],
      apiReadKeys: ['k-read'],
    })
    const send = (authorization: string | undefined, remoteAddress: string, method = 'GET') =>
      app.inject({
        method: method as 'GET',
        url: '/api/note',
        remoteAddress,
        ...(authorization === undefined ? {} : { headers: { authorization, ...json } }),
        ...(method === 'POST' ? { payload: '{}' } : {}),
      })
    // One after another, as requests arrive from the network. (Started together in one tick,
    // @fastify/rate-limit's LocalStore would let each read the count after all of them.)
    const statuses = async (...requests: (() => Promise<LightMyRequestResponse>)[]) => {
      const answers: number[] = []
      for (const request of requests) answers.push((await request()).statusCode)
      return answers
    }
    // One key, from two addresses: one count.
    assert.deepEqual(
      await statuses(
        () => send('Bearer k-one', '192.0.2.1'),
        () => send('Bearer k-one', '192.0.2.2'),
        () => send('Bearer k-one', '192.0.2.1'),
        () => send('Bearer k-one', '192.0.2.2'),
      ),
      [200, 200, 200, 429],
    )
    // The other key, and the read key (its 403 counted under it), from the same addresses.
    assert.deepEqual(
      await statuses(
        () => send('Bearer k-two', '192.0.2.1'),
        () => send('Bearer k-read', '192.0.2.1', 'POST'),
        () => send('Bearer k-read', '192.0.2.1'),
        () => send('Bearer k-read', '192.0.2.1'),
        () => send('Bearer k-read', '192.0.2.1'),
      ),
      [200, 403, 200, 200, 429],
    )
    // Without a valid key, an address has its own count: guessing keys is limited too.
    assert.deepEqual(
      await statuses(
        () => send(undefined, '192.0.2.1'),
        () => send('Bearer guess-1', '192.0.2.1'),
        () => send('Bearer guess-2', '192.0.2.1'),
        () => send('Bearer guess-3', '192.0.2.1'),
        () => send('Bearer k-two', '192.0.2.1'),
        () => send(undefined, '192.0.2.2'),
      ),
      [401, 401, 401, 429, 200, 401],
    )
  })

  it('starts a new count when the window ends', async () => {
    const { app } = suite.buildApp({ rateLimit: 1, rateLimitWindowMs: 1000 })
    let response = await app.inject('/api/note')
    for (let tries = 0; response.statusCode !== 429 && tries < 10; tries++) {
      response = await app.inject('/api/note')
    }
    assert.equal(response.statusCode, 429)
    assert.equal(response.headers['retry-after'], '1')
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const next = await app.inject('/api/note')
    assert.equal(next.statusCode, 200)
    assert.equal(next.headers['ratelimit-remaining'], '0')
  })
})

describe('rate limits and the fast lane', () => {
  it('sends every request through Fastify while rate limits are on, so each is counted', async () => {
    const { app } = limited(MEMORY, { rateLimit: 100 })
    let throughFastify = 0
    app.addHook('onResponse', (_request, _reply, done) => {
      throughFastify++
      done()
    })
    const viaServer = injectThroughServer(app)
    const everyday: InjectOptions[] = [
      { method: 'POST', url: '/api/note', headers: json, payload: '{}' },
      { method: 'GET', url: '/api/note' },
      { method: 'GET', url: '/api/note/1' },
      { method: 'DELETE', url: '/api/note/1' },
    ]
    for (const request of everyday) await viaServer(request)
    assert.equal(throughFastify, everyday.length)
  })
})

describe('rate limits over a real socket', () => {
  it('serves a client under its limit while another floods past its own', async () => {
    const { app } = limited(MEMORY, { rateLimit: 10, apiKeys: ['flooder', 'steady'] })
    await app.listen({ port: 0, host: '127.0.0.1' })
    after(() => app.close())
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/api/note`
    const as = (key: string) => fetch(base, { headers: { authorization: `Bearer ${key}` } })
    const flood = Promise.all(Array.from({ length: 200 }, () => as('flooder')))
    const steady: Response[] = []
    for (let i = 0; i < 5; i++) steady.push(await as('steady'))
    const flooded = await flood
    assert.deepEqual(
      steady.map((response) => [response.status, limitHeaders(response).remaining]),
      [
        [200, '9'],
        [200, '8'],
        [200, '7'],
        [200, '6'],
        [200, '5'],
      ],
    )
    const counts = new Map<number, number>()
    for (const response of flooded) {
      counts.set(response.status, (counts.get(response.status) ?? 0) + 1)
    }
    assert.deepEqual([...counts].sort(), [
      [200, 10],
      [429, 190],
    ])
    const bodies = await Promise.all(flooded.map((response) => response.text()))
    const refused = flooded.findIndex((response) => response.status === 429)
    const headers = flooded[refused]?.headers
    assert.equal(headers?.get('content-type'), 'application/problem+json')
    assert.equal(bodies[refused], tooMany(10, headers?.get('retry-after') as string))
    await Promise.all(steady.map((response) => response.text()))
  })
})

describe('rate limits and access keys with CORS', () => {
  it('lets pages send Authorization and read the headers these features add', async () => {
    const { app } = limited(MEMORY, {
      rateLimit: 10,
      apiKeys: ['k-one'],
      corsOrigin: ['https://app.example'],
    })
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/note',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    })
    assert.equal(preflight.statusCode, 204)
    assert.equal(
      preflight.headers['access-control-allow-headers'],
      'Content-Type, X-Request-Id, If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, Idempotency-Key, Last-Event-ID, Range, If-Range, Tus-Resumable, Upload-Length, Upload-Offset, Upload-Metadata, Authorization',
    )
    const refused = await app.inject({
      url: '/api/note',
      headers: { origin: 'https://app.example' },
    })
    assert.equal(refused.statusCode, 401)
    assert.equal(refused.headers['access-control-allow-origin'], 'https://app.example')
    assert.equal(
      refused.headers['access-control-expose-headers'],
      'X-Request-Id, Allow, ETag, Notes-Version, X-Total-Count, Link, Idempotent-Replayed, Retry-After, Location, Content-Range, Content-Disposition, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires, WWW-Authenticate, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset',
    )
    assert.equal(refused.headers['ratelimit-remaining'], '9')
  })
})
