import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import { describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { requestIdGenerator } from '../../src/ops/request-id.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { buildOpsApp, logCollector } from '../support/ops-app.js'

/** A generated id: '3f9a0c1b7d2e-1f' (random prefix, counter in base 36). */
const GENERATED = /^[0-9a-f]{12}-[0-9a-z]+$/

function rawRequest(headers: Record<string, string>): IncomingMessage {
  return { headers } as unknown as IncomingMessage
}

describe('requestIdGenerator', () => {
  const requestIdFor = requestIdGenerator()
  const accepted = [
    'b7e2c9a0-1f3d-4c55-9a8e-6f0d2b1c3e4f',
    'web-1:42',
    'YWJj+/=',
    'a',
    'x'.repeat(128),
    'trace_id.span@host~1',
  ]
  for (const id of accepted) {
    it(`keeps ${JSON.stringify(id.length > 20 ? `${id.slice(0, 20)}...` : id)}`, () => {
      assert.equal(requestIdFor(rawRequest({ 'x-request-id': id })), id)
    })
  }

  const refused = ['', 'a b', 'x'.repeat(129), '<script>', 'id"quoted"', 'a, b', 'é', 'tab\there']
  for (const id of refused) {
    it(`replaces ${JSON.stringify(id.length > 20 ? `${id.slice(0, 20)}...` : id)} with a generated id`, () => {
      assert.match(requestIdFor(rawRequest({ 'x-request-id': id })), GENERATED)
    })
  }

  it('generates a different id for each request without one, from a per-app prefix', () => {
    const generate = requestIdGenerator()
    // Past two of the blocks the generator makes its ids in (1,024 at a time).
    const count = 2 * 1024 + 5
    const ids = Array.from({ length: count }, () => generate(rawRequest({})))
    assert.equal(new Set(ids).size, count)
    for (const id of ids) assert.match(id, GENERATED)
    const prefix = ids[0]?.split('-')[0]
    assert.deepEqual(
      ids,
      ids.map((_, i) => `${prefix}-${(i + 1).toString(36)}`),
    )
    const other = requestIdGenerator()(rawRequest({}))
    assert.notEqual(other.split('-')[0], prefix)
  })
})

describe('X-Request-Id', () => {
  it('echoes the caller id on success, on the empty 404 and on problem responses', async () => {
    const { app } = buildOpsApp()
    const cases = [
      { method: 'POST', url: '/api/note', payload: { a: 1 }, status: 200 },
      { method: 'GET', url: '/api/note/1', status: 404 },
      { method: 'PUT', url: '/api/note', status: 405 },
      { method: 'GET', url: '/nowhere', status: 404 },
      { method: 'GET', url: '/healthz', status: 200 },
      { method: 'GET', url: '/api/note/%zz', status: 400 },
    ] as const
    for (const [i, c] of cases.entries()) {
      const id = `test-${i}`
      const response = await app.inject({ ...c, headers: { 'x-request-id': id } })
      assert.equal(response.statusCode, c.status, c.url)
      assert.equal(response.headers['x-request-id'], id, c.url)
    }
  })

  it('keeps the contract 404 without a body or a content type', async () => {
    const { app } = buildOpsApp()
    const response = await app.inject({ method: 'GET', url: '/api/note/1' })
    assert.equal(response.statusCode, 404)
    assert.equal(response.body, '')
    assert.equal(response.headers['content-length'], '0')
    assert.equal(response.headers['content-type'], undefined)
    assert.match(String(response.headers['x-request-id']), GENERATED)
  })

  it('answers a generated id when the caller sends none or an unusable one', async () => {
    const { app } = buildOpsApp()
    const none = await app.inject({ method: 'GET', url: '/api/note' })
    const bad = await app.inject({
      method: 'GET',
      url: '/api/note',
      headers: { 'x-request-id': 'has spaces' },
    })
    assert.match(String(none.headers['x-request-id']), GENERATED)
    assert.match(String(bad.headers['x-request-id']), GENERATED)
    assert.notEqual(none.headers['x-request-id'], bad.headers['x-request-id'])
  })

  it('is on every log line of the request, errors included', async () => {
    const log = logCollector()
    const store = new MemoryNoteStore({ maxNotes: 10, maxBytes: 1024 })
    store.list = () => {
      throw new Error('disk on fire')
    }
    const app = buildApp({
      store,
      config: { ...DEFAULT_CONFIG, logRequests: true },
      logger: { level: 'info', stream: log.stream },
    })
    await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: { 'x-request-id': 'req-42', 'content-type': 'text/plain' },
      payload: 'hello',
    })
    await app.inject({ method: 'GET', url: '/api/note', headers: { 'x-request-id': 'req-43' } })
    assert.deepEqual(
      log.lines.map((line) => [line.reqId, line.msg]),
      [
        ['req-42', 'incoming request'],
        [
          'req-42',
          'request answered 415: Send the body as JSON: Content-Type application/json (or application/*+json), in UTF-8.',
        ],
        ['req-42', 'request completed'],
        ['req-43', 'incoming request'],
        ['req-43', 'request failed'],
        ['req-43', 'request completed'],
      ],
    )
  })
})
