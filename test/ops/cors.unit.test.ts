import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { buildOpsApp } from '../support/ops-app.js'

const ORIGIN = 'https://app.example'
const PREFLIGHT = {
  origin: ORIGIN,
  'access-control-request-method': 'PATCH',
  'access-control-request-headers': 'content-type,x-request-id',
}

/** The response headers of interest here, without date, id and the like. */
function corsHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(headers).filter(
      ([name]) => name.startsWith('access-control-') || name === 'vary',
    ),
  )
}

describe('CORS', () => {
  it('is off by default: no CORS headers, and OPTIONS answers 204 with Allow', async () => {
    const { app } = buildOpsApp()
    const get = await app.inject({ method: 'GET', url: '/api/note', headers: { origin: ORIGIN } })
    // The list varies by Accept (the export) and Accept-Encoding, with or without CORS.
    assert.deepEqual(corsHeaders(get.headers), { vary: 'Accept, Accept-Encoding' })
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/api/note/1',
      headers: PREFLIGHT,
    })
    assert.equal(preflight.statusCode, 204)
    assert.equal(preflight.headers.allow, 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT')
    assert.deepEqual(corsHeaders(preflight.headers), {})
  })

  it('lets a listed origin read responses, and the X-Request-Id and Allow headers', async () => {
    const { app } = buildOpsApp({ corsOrigin: [ORIGIN, 'http://localhost:5173'] })
    const response = await app.inject({
      method: 'GET',
      url: '/api/note',
      headers: { origin: ORIGIN },
    })
    assert.equal(response.statusCode, 200)
    assert.deepEqual(corsHeaders(response.headers), {
      'access-control-allow-origin': ORIGIN,
      'access-control-expose-headers':
        'X-Request-Id, Allow, ETag, Notes-Version, X-Total-Count, Link, Idempotent-Replayed, Retry-After, Location, Content-Range, Content-Disposition, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires',
      vary: 'Origin, Accept, Accept-Encoding',
    })
  })

  it('puts the CORS headers on errors too, so a page can read the problem', async () => {
    const { app } = buildOpsApp({ corsOrigin: [ORIGIN] })
    for (const [method, url, status] of [
      ['GET', '/api/note/1', 404],
      ['PUT', '/api/note', 405],
      ['POST', '/api/note', 415],
    ] as const) {
      const response = await app.inject({
        method,
        url,
        headers: { origin: ORIGIN, 'content-type': 'text/plain' },
        payload: method === 'POST' ? 'x' : '',
      })
      assert.equal(response.statusCode, status)
      assert.equal(response.headers['access-control-allow-origin'], ORIGIN, `${method} ${url}`)
    }
  })

  it('gives an unlisted origin no Access-Control-Allow-Origin', async () => {
    const { app } = buildOpsApp({ corsOrigin: [ORIGIN] })
    const response = await app.inject({
      method: 'GET',
      url: '/api/note',
      headers: { origin: 'https://evil.example' },
    })
    assert.equal(response.statusCode, 200)
    assert.deepEqual(corsHeaders(response.headers), {
      'access-control-expose-headers':
        'X-Request-Id, Allow, ETag, Notes-Version, X-Total-Count, Link, Idempotent-Replayed, Retry-After, Location, Content-Range, Content-Disposition, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires',
      vary: 'Origin, Accept, Accept-Encoding',
    })
  })

  it('answers a preflight 204 with the methods, headers and cache time allowed', async () => {
    const { app } = buildOpsApp({ corsOrigin: [ORIGIN] })
    const response = await app.inject({ method: 'OPTIONS', url: '/api/note/1', headers: PREFLIGHT })
    assert.equal(response.statusCode, 204)
    assert.equal(response.body, '')
    assert.deepEqual(corsHeaders(response.headers), {
      'access-control-allow-origin': ORIGIN,
      'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE',
      'access-control-allow-headers':
        'Content-Type, X-Request-Id, If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, Idempotency-Key, Last-Event-ID, Range, If-Range, Tus-Resumable, Upload-Length, Upload-Offset, Upload-Metadata',
      'access-control-expose-headers':
        'X-Request-Id, Allow, ETag, Notes-Version, X-Total-Count, Link, Idempotent-Replayed, Retry-After, Location, Content-Range, Content-Disposition, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires',
      'access-control-max-age': '600',
      vary: 'Origin',
    })
  })

  it('keeps the usual answer to an OPTIONS that is not a preflight', async () => {
    const { app } = buildOpsApp({ corsOrigin: [ORIGIN] })
    const known = await app.inject({
      method: 'OPTIONS',
      url: '/api/note',
      headers: { origin: ORIGIN },
    })
    assert.equal(known.statusCode, 204)
    assert.equal(known.headers.allow, 'GET, HEAD, OPTIONS, POST')
    assert.equal(known.headers['access-control-allow-origin'], ORIGIN)
    const unknown = await app.inject({ method: 'OPTIONS', url: '/nowhere' })
    assert.equal(unknown.statusCode, 404)
    assert.equal(unknown.headers['content-type'], 'application/problem+json')
  })

  it('answers any origin with * when CORS_ORIGIN is *', async () => {
    const { app } = buildOpsApp({ corsOrigin: ['*'] })
    const exposed =
      'X-Request-Id, Allow, ETag, Notes-Version, X-Total-Count, Link, Idempotent-Replayed, Retry-After, Location, Content-Range, Content-Disposition, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires'
    for (const origin of ['https://anyone.example', 'http://localhost:5173', 'null']) {
      const get = await app.inject({ method: 'GET', url: '/api/note', headers: { origin } })
      assert.equal(get.statusCode, 200, origin)
      assert.equal(get.body, '{"data":[]}')
      // Vary: Origin is not needed with * (the answer is the same for every origin), but harmless.
      assert.deepEqual(
        corsHeaders(get.headers),
        {
          'access-control-allow-origin': '*',
          'access-control-expose-headers': exposed,
          vary: 'Origin, Accept, Accept-Encoding',
        },
        origin,
      )
      const missing = await app.inject({ method: 'GET', url: '/api/note/1', headers: { origin } })
      assert.equal(missing.statusCode, 404, origin)
      assert.equal(missing.body, '')
      assert.deepEqual(
        corsHeaders(missing.headers),
        {
          'access-control-allow-origin': '*',
          'access-control-expose-headers': exposed,
          vary: 'Origin',
        },
        origin,
      )
      const preflight = await app.inject({
        method: 'OPTIONS',
        url: '/api/note/1',
        headers: { ...PREFLIGHT, origin },
      })
      assert.equal(preflight.statusCode, 204, origin)
      assert.equal(preflight.body, '')
      assert.deepEqual(
        corsHeaders(preflight.headers),
        {
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE',
          'access-control-allow-headers':
            'Content-Type, X-Request-Id, If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, Idempotency-Key, Last-Event-ID, Range, If-Range, Tus-Resumable, Upload-Length, Upload-Offset, Upload-Metadata',
          'access-control-expose-headers': exposed,
          'access-control-max-age': '600',
          vary: 'Origin',
        },
        origin,
      )
    }
  })
})
