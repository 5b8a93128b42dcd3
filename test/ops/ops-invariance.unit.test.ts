import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { FastifyInstance, InjectOptions } from 'fastify'
import type { Config } from '../../src/config/config.js'
import { buildOpsApp } from '../support/ops-app.js'

/** Requests covering every answer of /api/note and /api/note/:id, ids from a fixed clock. */
const SCRIPT: InjectOptions[] = [
  { method: 'POST', url: '/api/note', payload: { title: 'a', id: 'mine' } },
  {
    method: 'POST',
    url: '/api/note/',
    payload: '',
    headers: { 'content-type': 'application/json' },
  },
  { method: 'POST', url: '/api/note', payload: 'x', headers: { 'content-type': 'text/plain' } },
  {
    method: 'POST',
    url: '/api/note',
    payload: '{"a":',
    headers: { 'content-type': 'application/json' },
  },
  {
    method: 'POST',
    url: '/api/note',
    payload: '[1]',
    headers: { 'content-type': 'application/json' },
  },
  { method: 'POST', url: '/api/note', payload: { big: 'x'.repeat(300) } },
  { method: 'POST', url: '/api/note', payload: { third: true } },
  { method: 'POST', url: '/api/note', payload: { fourth: true } },
  { method: 'GET', url: '/api/note' },
  { method: 'HEAD', url: '/api/note' },
  { method: 'GET', url: '/api/note/1000' },
  { method: 'GET', url: '/api/note/01000?x=1' },
  { method: 'GET', url: '/api/note/999' },
  { method: 'GET', url: '/api/note/abc' },
  { method: 'GET', url: '/api/note/%zz' },
  { method: 'PATCH', url: '/api/note/1001', payload: { title: 'b' } },
  {
    method: 'PATCH',
    url: '/api/note/1001',
    payload: 'x',
    headers: { 'content-type': 'text/plain' },
  },
  { method: 'PATCH', url: '/api/note/5', payload: {} },
  { method: 'DELETE', url: '/api/note/1000' },
  { method: 'DELETE', url: '/api/note/1000' },
  { method: 'PUT', url: '/api/note' },
  { method: 'POST', url: '/api/note/1001' },
  { method: 'OPTIONS', url: '/api/note' },
  { method: 'OPTIONS', url: '/api/note/1001' },
  { method: 'GET', url: '/api/notes' },
]

interface Answer {
  status: number
  headers: Record<string, unknown>
  body: string
}

async function run(
  app: FastifyInstance,
  extraHeaders: Record<string, string> = {},
): Promise<Answer[]> {
  const answers: Answer[] = []
  for (const [i, request] of SCRIPT.entries()) {
    const response = await app.inject({
      ...request,
      headers: { ...request.headers, ...extraHeaders, 'x-request-id': `step-${i}` },
    })
    const { date: _date, ...headers } = response.headers
    answers.push({ status: response.statusCode, headers, body: response.body })
  }
  return answers
}

function appWith(overrides: Partial<Config>): FastifyInstance {
  let t = 1000
  // Three notes fit (507 on the fourth), bodies over 256 bytes are refused (413).
  const limits = { maxNotes: 3, bodyLimit: 256 }
  return buildOpsApp({ ...limits, ...overrides }, undefined, () => t++).app
}

describe('the operational features leave /api/note as it is', () => {
  it('gives every note request the same answer with metrics, docs and CORS on or off', async () => {
    const reference = await run(appWith({ metrics: false, docs: false, corsOrigin: [] }))
    assert.deepEqual(
      reference.map((answer) => answer.status),
      [
        200, 200, 415, 400, 400, 413, 200, 507, 200, 200, 200, 200, 404, 404, 400, 200, 415, 404,
        200, 404, 405, 405, 204, 204, 404,
      ],
    )
    for (const overrides of [{ metrics: true }, { docs: true }, { metrics: true, docs: true }]) {
      assert.deepEqual(await run(appWith(overrides)), reference, JSON.stringify(overrides))
    }
    // With CORS on, a request without Origin only gains the headers that tell caches and
    // browsers about CORS.
    const withCors = await run(appWith({ corsOrigin: ['https://app.example'] }))
    for (const [i, answer] of withCors.entries()) {
      // Fastify answers an unreadable URL (400) before any hook, so without CORS headers.
      if (answer.status === 400 && answer.body.includes('percent-encoding')) continue
      // The list varies by Accept-Encoding too, with CORS or without.
      const vary = reference[i]?.headers.vary
      assert.equal(answer.headers.vary, vary === undefined ? 'Origin' : `Origin, ${String(vary)}`)
      assert.equal(
        answer.headers['access-control-expose-headers'],
        'X-Request-Id, Allow, ETag, Notes-Version, X-Total-Count, Link, Idempotent-Replayed, Retry-After, Location, Content-Range, Content-Disposition, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires',
      )
      if (vary === undefined) delete answer.headers.vary
      else answer.headers.vary = vary
      delete answer.headers['access-control-expose-headers']
    }
    assert.deepEqual(withCors, reference)
  })
  it('gives the same answers with access keys on, to a request with a write key', async () => {
    const reference = await run(appWith({}))
    const keyed = await run(appWith({ apiKeys: ['k-write'], apiReadKeys: ['k-read'] }), {
      authorization: 'Bearer k-write',
    })
    assert.deepEqual(keyed, reference)
  })

  it('gives the same answers with rate limits on, but for the RateLimit headers', async () => {
    const reference = await run(appWith({}))
    const limited = await run(appWith({ rateLimit: 1000 }))
    let counted = 0
    for (const answer of limited) {
      // Fastify answers an unreadable URL (400) before any hook: not counted, no RateLimit headers.
      if (answer.status === 400 && answer.body.includes('percent-encoding')) continue
      counted++
      assert.equal(answer.headers['ratelimit-limit'], '1000')
      assert.equal(answer.headers['ratelimit-remaining'], String(1000 - counted))
      delete answer.headers['ratelimit-limit']
      delete answer.headers['ratelimit-remaining']
      delete answer.headers['ratelimit-reset']
    }
    assert.deepEqual(limited, reference)
  })
})
