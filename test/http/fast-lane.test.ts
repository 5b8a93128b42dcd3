import assert from 'node:assert/strict'
import { it } from 'node:test'
import fc from 'fast-check'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { InjectOptions } from 'light-my-request'
import type { Config } from '../../src/config/config.js'
import { describeEachStore } from '../support/each-store.js'
import { fakeClock, injectThroughServer, type SuiteContext } from '../support/helpers.js'

/** Headers that differ between two answers to the same request for reasons other than the app. */
const PER_RESPONSE = new Set(['date', 'x-request-id'])

/** What a caller can observe of a response, minus the per-response headers. */
function observed(response: LightMyRequestResponse): unknown {
  const headers = Object.entries(response.headers)
    .filter(([name]) => !PER_RESPONSE.has(name))
    .sort(([a], [b]) => a.localeCompare(b))
  return { status: response.statusCode, headers, body: response.body }
}

/** Two apps on identical stores: one reached through Fastify, one through the server listener. */
function twins(
  suite: SuiteContext,
  keys: Partial<Config> = {},
): {
  viaFastify: FastifyInstance
  viaServer: (options: InjectOptions | string) => Promise<LightMyRequestResponse>
  counted: { fastify: number }
} {
  // Same limits and clock, so the two stores hand out the same ids.
  const make = (): FastifyInstance =>
    suite.buildApp(
      { maxNotes: 50, bodyLimit: 4096, maxDepth: 8, ...keys },
      { now: fakeClock(1000, 1) },
    ).app
  const viaFastify = make()
  const served = make()
  const counted = { fastify: 0 }
  served.addHook('onRequest', (_request, _reply, done) => {
    counted.fastify++
    done()
  })
  return { viaFastify, viaServer: injectThroughServer(served), counted }
}

const ID = fc.constantFrom('1000', '1001', '1002', '1003', '999', '-1', '0', '01000', '5e3')
const PATH = fc.oneof(
  fc.constant('/api/note'),
  fc.constant('/api/note/'),
  fc.constant('/api/note?x=1'),
  ID.map((id) => `/api/note/${id}`),
  ID.map((id) => `/api/note/${id}/`),
  ID.map((id) => `/api/note/${id}?q`),
  fc.constant('/api/note/%31000'),
  fc.constant('/api/notes'),
  // The same routes in a notebook the path names: the caller's own (`me`), or one not theirs.
  fc.constantFrom('me', 'AAAAAAAAAAAAAAAAAAAAAA', 'm%65', 'me/').chain((nb) =>
    fc.oneof(
      fc.constant(`/api/notebooks/${nb}/note`),
      fc.constant(`/api/notebooks/${nb}/note?limit=1`),
      ID.map((id) => `/api/notebooks/${nb}/note/${id}`),
    ),
  ),
)
const CONTENT_TYPE = fc.constantFrom(
  undefined,
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'Application/JSON',
  'application/merge-patch+json',
  'text/plain',
)
const BODY = fc.oneof(
  fc.constant(undefined),
  fc.constant(''),
  fc
    .dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
    .map((fields) => JSON.stringify(fields)),
  fc.constantFrom(
    '{"id":1001}',
    '{"id":"1000"}',
    '{"__proto__":{"x":1}}',
    '[1,2]',
    'null',
    '{"a":',
    '{"a":[[[[[[[[[[1]]]]]]]]]]}',
    `{"big":"${'x'.repeat(5000)}"}`,
  ),
)
const REQUEST = fc.record({
  method: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'PUT'),
  url: PATH,
  contentType: CONTENT_TYPE,
  body: BODY,
})

type Request = typeof REQUEST extends fc.Arbitrary<infer R> ? R : never

const KEYS: Partial<Config> = { apiKeys: ['k-write'], apiReadKeys: ['k-read'] }
const AUTHORIZATION = fc.constantFrom(
  undefined,
  'Bearer k-write',
  'bearer k-write ',
  'Bearer k-read',
  'Bearer k-wrong',
  'Basic k-write',
  ['Bearer k-write', 'Bearer k-write'],
)

function toInject({ method, url, contentType, body }: Request): InjectOptions {
  const headers: Record<string, string> = {}
  if (contentType !== undefined) headers['content-type'] = contentType
  return {
    method: method as NonNullable<InjectOptions['method']>,
    url,
    headers,
    ...(body === undefined ? {} : { payload: body }),
  }
}

/** Runs of a property: a fresh PostgreSQL schema costs ~0.1 s, and each run makes two. */
const runs = (suite: SuiteContext, memory: number): number =>
  suite.store === 'postgres' ? memory / 10 : memory

describeEachStore(
  'the fast lane',
  (suite) => {
    it('answers every request as Fastify does: status, headers and body', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(REQUEST, { minLength: 1, maxLength: 25 }), async (requests) => {
          const { viaFastify, viaServer } = twins(suite)
          for (const request of [...requests, { method: 'GET', url: '/api/note' } as Request]) {
            const options = toInject(request)
            const expected = await viaFastify.inject(options)
            const actual = await viaServer(options)
            assert.deepEqual(observed(actual), observed(expected), JSON.stringify(request))
            assert.equal(typeof actual.headers['x-request-id'], 'string')
          }
        }),
        { numRuns: runs(suite, 150) },
      )
    })

    it('answers as Fastify does with access keys on, whatever the Authorization', async () => {
      const KEYED_REQUEST = fc.record({ request: REQUEST, authorization: AUTHORIZATION })
      await fc.assert(
        fc.asyncProperty(
          fc.array(KEYED_REQUEST, { minLength: 1, maxLength: 25 }),
          async (steps) => {
            const { viaFastify, viaServer } = twins(suite, KEYS)
            for (const { request, authorization } of steps) {
              const options = toInject(request)
              if (authorization !== undefined) {
                options.headers = { ...options.headers, authorization } as NonNullable<
                  typeof options.headers
                >
              }
              const expected = await viaFastify.inject(options)
              const actual = await viaServer(options)
              assert.deepEqual(observed(actual), observed(expected), JSON.stringify(options))
            }
          },
        ),
        { numRuns: runs(suite, 100) },
      )
    })

    it("serves everyday note requests without Fastify's request pipeline", async () => {
      const { viaServer, counted } = twins(suite)
      const json = { 'content-type': 'application/json' }
      const everyday: InjectOptions[] = [
        { method: 'POST', url: '/api/note', headers: json, payload: '{"title":"a"}' },
        { method: 'GET', url: '/api/note' },
        { method: 'GET', url: '/api/note?limit=1&order=desc' },
        { method: 'GET', url: '/api/note', headers: { 'if-none-match': '"e.1"' } },
        { method: 'GET', url: '/api/note/1000' },
        { method: 'GET', url: '/api/note/424242' },
        { method: 'PATCH', url: '/api/note/1000', headers: json, payload: '{"body":"b"}' },
        { method: 'PATCH', url: '/api/note/1000', headers: json, payload: '{"body":' },
        { method: 'DELETE', url: '/api/note/1000' },
        { method: 'POST', url: '/api/notebooks/me/note', headers: json, payload: '{"t":"b"}' },
        { method: 'GET', url: '/api/notebooks/me/note?limit=1' },
        { method: 'GET', url: '/api/notebooks/me/note/1001' },
        { method: 'PATCH', url: '/api/notebooks/me/note/1001', headers: json, payload: '{}' },
        { method: 'DELETE', url: '/api/notebooks/me/note/1001' },
        { method: 'GET', url: '/api/notebooks/AAAAAAAAAAAAAAAAAAAAAA/note/1001' },
      ]
      for (const request of everyday) await viaServer(request)
      assert.equal(counted.fastify, 0)
    })

    it('hands everything else to Fastify', async () => {
      const { viaServer, counted } = twins(suite)
      const others: InjectOptions[] = [
        { method: 'HEAD', url: '/api/note' },
        { method: 'OPTIONS', url: '/api/note/1' },
        { method: 'GET', url: '/api/note/' },
        { method: 'GET', url: '/api/note/?limit=1' },
        { method: 'GET', url: '/api/note/%31' },
        { method: 'GET', url: '/api/note/abc' },
        { method: 'PUT', url: '/api/note/1' },
        {
          method: 'POST',
          url: '/api/note',
          headers: { 'content-type': 'text/plain' },
          payload: 'x',
        },
        { method: 'POST', url: '/api/note' },
        { method: 'DELETE', url: '/api/note/1', headers: { 'content-type': 'application/json' } },
        // A merge patch is Fastify's to parse and apply, whatever its case or charset.
        ...['application/merge-patch+json', 'Application/Merge-Patch+JSON; charset=utf-8'].map(
          (type) => ({
            method: 'PATCH' as const,
            url: '/api/note/1',
            headers: { 'content-type': type },
            payload: '{"a":null}',
          }),
        ),
        { method: 'GET', url: '/healthz' },
      ]
      for (const request of others) await viaServer(request)
      assert.equal(counted.fastify, others.length)
    })

    it('gives ids from the same sequence as Fastify, and echoes a caller id', async () => {
      const { app } = suite.buildApp()
      const viaServer = injectThroughServer(app)
      const fast = (await viaServer('/api/note')).headers['x-request-id'] as string
      const slow = (await app.inject('/api/note')).headers['x-request-id'] as string
      const [prefix, count] = fast.split('-') as [string, string]
      assert.equal(slow, `${prefix}-${(Number.parseInt(count, 36) + 1).toString(36)}`)
      const echoed = await viaServer({
        url: '/api/note/1',
        headers: { 'x-request-id': 'web-1:42' },
      })
      assert.equal(echoed.headers['x-request-id'], 'web-1:42')
    })
  },
  // Each case compares both lanes itself.
  // Which requests the lane takes is the subject here: a user token's first request never does.
  { lanes: false, notebook: false },
)
