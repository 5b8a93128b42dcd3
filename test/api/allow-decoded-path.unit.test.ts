import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { pathOf } from '../../src/api/request-target.js'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'

function app() {
  return buildApp({
    store: new MemoryNoteStore({ maxNotes: 10, maxBytes: 10_000 }),
    config: DEFAULT_CONFIG,
  })
}

describe('405 and OPTIONS on a percent-encoded path', () => {
  // The router decodes '/api/%6eote' to '/api/note'; Allow used to be looked up on the raw URL.
  it('answers OPTIONS /api/%6eote like OPTIONS /api/note', async () => {
    const response = await app().inject({ method: 'OPTIONS', url: '/api/%6eote' })
    assert.equal(response.statusCode, 204)
    assert.equal(response.headers.allow, 'GET, HEAD, OPTIONS, POST')
  })

  it('answers POST /api/note/%37#x with 405 and Allow', async () => {
    const response = await app().inject({ method: 'POST', url: '/api/note/%37#x' })
    assert.equal(response.statusCode, 405)
    assert.equal(response.headers.allow, 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT')
  })
})

describe('pathOf', () => {
  const cases: [string, string][] = [
    ['/api/note?x=1', '/api/note'],
    ['/api/note#frag', '/api/note'],
    ['/api/%6eote', '/api/note'],
    ['/api/note/%37?a=%zz', '/api/note/7'],
    ['/api%2Fnote', '/api%2Fnote'],
    ['/api/note/1%2f2', '/api/note/1%2F2'],
    ['/api/%zz', '/api/%zz'],
  ]
  for (const [url, path] of cases) {
    it(`${url} -> ${path}`, () => assert.equal(pathOf(url), path))
  }
})
