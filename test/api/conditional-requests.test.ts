import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { noneMatch } from '../../src/api/conditional.js'
import { describeEachStore } from '../support/each-store.js'
import { fakeClock, JSON_HEADERS } from '../support/helpers.js'

// 2023-11-14T22:13:20.000Z, then 1 ms later per clock read.
const T0 = 1_700_000_000_000
const T0_DATE = 'Tue, 14 Nov 2023 22:13:20 GMT'

function problemOf(response: LightMyRequestResponse): { status: number; detail: string } {
  assert.equal(response.headers['content-type'], 'application/problem+json')
  return JSON.parse(response.body) as { status: number; detail: string }
}

describe('noneMatch: If-None-Match against an ETag (the rule the API and the pages share)', () => {
  const cases: [string | undefined, string, boolean][] = [
    ['"v.1"', '"v.1"', true],
    ['"v.0", W/"v.1"', '"v.1"', true],
    [' "v.0" ,"v.1" ', '"v.1"', true],
    ['*', '"v.1"', true],
    ['"v.1"', '"v.1-br"', false],
    ['"v.1-br"', '"v.1"', false],
    ['v.1', '"v.1"', false],
    ['', '"v.1"', false],
    [undefined, '"v.1"', false],
  ]
  for (const [header, etag, matches] of cases) {
    it(`${JSON.stringify(header)} against ${etag}: ${matches}`, () => {
      assert.equal(noneMatch(header, etag), matches)
    })
  }
})

describeEachStore('versions and conditional requests', (suite) => {
  const setUp = async () => {
    const { app, store } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const created = await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: JSON_HEADERS,
      payload: '{"title":"a"}',
    })
    return { app, store, created }
  }

  it('gives a created note an ETag, and its GET the same ETag, Last-Modified and no-cache', async () => {
    const { app, created } = await setUp()
    assert.equal(created.statusCode, 200)
    assert.equal(created.headers.etag, '"e.1"')
    assert.equal(created.body, `{"data":{"title":"a","id":${T0}}}`)
    const read = await app.inject(`/api/note/${T0}`)
    assert.equal(read.statusCode, 200)
    assert.equal(read.headers.etag, '"e.1"')
    assert.equal(read.headers['last-modified'], T0_DATE)
    assert.equal(read.headers['cache-control'], 'no-cache')
    assert.equal(read.body, `{"data":{"title":"a","id":${T0}}}`)
  })

  it('answers 304 with the validators and no body to a matching If-None-Match, GET and HEAD', async () => {
    const { app } = await setUp()
    for (const [method, header] of [
      ['GET', '"e.1"'],
      ['GET', 'W/"e.1"'],
      ['GET', '"x", "e.1"'],
      ['GET', '*'],
      ['HEAD', '"e.1"'],
    ] as const) {
      const response = await app.inject({
        method,
        url: `/api/note/${T0}`,
        headers: { 'if-none-match': header },
      })
      assert.equal(response.statusCode, 304, header)
      assert.equal(response.body, '')
      assert.equal(response.headers.etag, '"e.1"')
      assert.equal(response.headers['last-modified'], T0_DATE)
      assert.equal(response.headers['content-type'], undefined)
    }
    const changed = await app.inject({
      url: `/api/note/${T0}`,
      headers: { 'if-none-match': '"e.0"' },
    })
    assert.equal(changed.statusCode, 200)
  })

  it('honours If-Modified-Since unless If-None-Match is present, and ignores an invalid date', async () => {
    const { app } = await setUp()
    const ask = (headers: Record<string, string>) => app.inject({ url: `/api/note/${T0}`, headers })
    assert.equal((await ask({ 'if-modified-since': T0_DATE })).statusCode, 304)
    assert.equal(
      (await ask({ 'if-modified-since': 'Tue, 14 Nov 2023 22:13:19 GMT' })).statusCode,
      200,
    )
    assert.equal((await ask({ 'if-modified-since': 'yesterday' })).statusCode, 200)
    assert.equal(
      (await ask({ 'if-modified-since': T0_DATE, 'if-none-match': '"other"' })).statusCode,
      200,
    )
  })

  it('answers a missing note with the empty 404 whatever the conditions', async () => {
    const { app } = await setUp()
    for (const headers of [{ 'if-none-match': '*' }, { 'if-match': '"e.1"' }]) {
      for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
        const response = await app.inject({
          method,
          url: '/api/note/5',
          headers: { ...headers, ...(method === 'PATCH' ? JSON_HEADERS : {}) },
          ...(method === 'PATCH' ? { payload: '{}' } : {}),
        })
        assert.equal(response.statusCode, 404)
        assert.equal(response.body, '')
      }
    }
  })

  it('applies a PATCH whose If-Match matches, and answers 412 with the current ETag otherwise', async () => {
    const { app } = await setUp()
    const patch = (ifMatch: string, payload: string) =>
      app.inject({
        method: 'PATCH',
        url: `/api/note/${T0}`,
        headers: { ...JSON_HEADERS, 'if-match': ifMatch },
        payload,
      })
    const first = await patch('"e.1"', '{"body":"b"}')
    assert.equal(first.statusCode, 200)
    assert.equal(first.headers.etag, '"e.2"')
    assert.equal(first.body, `{"data":{"title":"a","id":${T0},"body":"b"}}`)
    // A second writer still holding the first ETag loses, and the note is unchanged.
    const late = await patch('"e.1"', '{"body":"late"}')
    assert.equal(late.statusCode, 412)
    assert.equal(late.headers.etag, '"e.2"')
    const problem = problemOf(late)
    assert.equal(problem.status, 412)
    assert.match(problem.detail, /its ETag is now "e\.2"/)
    assert.equal(
      (await app.inject(`/api/note/${T0}`)).body,
      `{"data":{"title":"a","id":${T0},"body":"b"}}`,
    )
    // '*', a list, an encoded representation's ETag: all match by strong comparison.
    assert.equal((await patch('*', '{"n":1}')).statusCode, 200)
    assert.equal((await patch('"x", "e.3"', '{"n":2}')).statusCode, 200)
    assert.equal((await patch('"e.4-gzip"', '{"n":3}')).statusCode, 200)
    // A weak tag never matches If-Match.
    assert.equal((await patch('W/"e.5"', '{"n":4}')).statusCode, 412)
  })

  it('deletes only under a matching If-Match or If-Unmodified-Since', async () => {
    const { app } = await setUp()
    const remove = (headers: Record<string, string>) =>
      app.inject({ method: 'DELETE', url: `/api/note/${T0}`, headers })
    assert.equal((await remove({ 'if-match': '"e.0"' })).statusCode, 412)
    assert.equal(
      (await remove({ 'if-unmodified-since': 'Tue, 14 Nov 2023 22:13:19 GMT' })).statusCode,
      412,
    )
    const done = await remove({ 'if-unmodified-since': T0_DATE })
    assert.equal(done.statusCode, 200)
    assert.equal(done.body, `{"data":"${T0}"}`)
  })

  it('gives the list Notes-Version, its ETag, the total and no-cache, and 304 while nothing is written', async () => {
    const { app } = await setUp()
    const list = await app.inject('/api/note')
    assert.equal(list.statusCode, 200)
    assert.equal(list.headers['notes-version'], 'e.1')
    assert.equal(list.headers.etag, '"e.1"')
    assert.equal(list.headers['x-total-count'], '1')
    assert.equal(list.headers['cache-control'], 'no-cache')
    assert.equal(list.body, `{"data":[{"title":"a","id":${T0}}]}`)
    const same = await app.inject({ url: '/api/note', headers: { 'if-none-match': '"e.1"' } })
    assert.equal(same.statusCode, 304)
    assert.equal(same.body, '')
    assert.equal(same.headers['notes-version'], 'e.1')
    await app.inject({ method: 'DELETE', url: `/api/note/${T0}` })
    const after = await app.inject({ url: '/api/note', headers: { 'if-none-match': '"e.1"' } })
    assert.equal(after.statusCode, 200)
    assert.equal(after.headers['notes-version'], 'e.2')
    assert.equal(after.headers['x-total-count'], '0')
    assert.equal(after.body, '{"data":[]}')
  })
})
