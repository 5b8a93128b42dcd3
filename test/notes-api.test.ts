import assert from 'node:assert/strict'
import { it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { describeEachStore } from './support/each-store.js'
import { dataOf, fakeClock, postNote } from './support/helpers.js'

const JSON_UTF8 = 'application/json; charset=utf-8'

function assertEmptyNotFound(response: LightMyRequestResponse): void {
  assert.equal(response.statusCode, 404)
  assert.equal(response.body, '')
  assert.equal(response.headers['content-length'], '0')
  assert.equal(response.headers['content-type'], undefined)
}

describeEachStore(
  'POST /api/note',
  (suite) => {
    it('returns the note with every body field and an id equal to the creation time', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1_763_000_000_000) })
      const response = await postNote(app, { title: 'a', body: 'b', tags: ['x'], meta: { n: 1 } })
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['content-type'], JSON_UTF8)
      assert.equal(
        response.body,
        '{"data":{"title":"a","body":"b","tags":["x"],"meta":{"n":1},"id":1763000000000}}',
      )
    })

    it('overrides an id sent in the body, in its place', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(5000) })
      const response = await postNote(app, { id: 1, title: 't' })
      assert.equal(response.body, '{"data":{"id":5000,"title":"t"}}')
    })

    it('uses the real clock by default', async () => {
      const { app } = suite.buildApp()
      const before = Date.now()
      const { id } = dataOf(await postNote(app, {})) as { id: number }
      assert.ok(id >= before && id <= Date.now(), `${id} is not between ${before} and now`)
    })

    it('gives thousands of concurrent creates distinct ids, in creation order', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1000) })
      const responses = await Promise.all(
        Array.from({ length: 2000 }, (_, i) => postNote(app, { i })),
      )
      const ids = responses.map((r) => (dataOf(r) as { id: number }).id)
      assert.equal(new Set(ids).size, 2000)
      const listed = dataOf(await app.inject('/api/note')) as { id: number; i: number }[]
      assert.deepEqual(
        listed.map((n) => n.id),
        listed.map((_, i) => 1000 + i),
      )
    })

    it('treats a request with no body at all as {}', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(9) })
      const response = await app.inject({ method: 'POST', url: '/api/note' })
      assert.equal(response.body, '{"data":{"id":9}}')
    })

    it('treats an empty JSON body as {}', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(9) })
      const response = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { 'content-type': 'application/json', 'content-length': '0' },
      })
      assert.equal(response.body, '{"data":{"id":9}}')
    })

    it('stores __proto__, constructor and prototype as plain data, without pollution', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      const payload =
        '{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"isAdmin":true}},"prototype":{"a":1}}'
      const created = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { 'content-type': 'application/json' },
        payload,
      })
      const expected =
        '{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"isAdmin":true}},"prototype":{"a":1},"id":1}'
      assert.equal(created.body, `{"data":${expected}}`)
      assert.equal((await app.inject('/api/note/1')).body, `{"data":${expected}}`)
      assert.equal((await app.inject('/api/note')).body, `{"data":[${expected}]}`)
      assert.equal(({} as Record<string, unknown>).isAdmin, undefined)
      assert.equal(Object.hasOwn(Object.prototype, 'isAdmin'), false)
    })

    it('keeps unicode, escapes and numbers exactly', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      const payload = '{"t":"é€😀\\u0000\\ud800","n":-0.5,"big":12345678901234567890,"e":1e-7}'
      const response = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { 'content-type': 'application/json' },
        payload,
      })
      assert.equal(
        response.body,
        '{"data":{"t":"é€😀\\u0000\\ud800","n":-0.5,"big":12345678901234567000,"e":1e-7,"id":1}}',
      )
    })
  },
  { notebookOnPostgres: true },
)

describeEachStore(
  'GET /api/note',
  (suite) => {
    it('returns an empty array when nothing is stored', async () => {
      const { app } = suite.buildApp()
      const response = await app.inject('/api/note')
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['content-type'], JSON_UTF8)
      assert.equal(response.body, '{"data":[]}')
    })

    it('returns every note in insertion order, and follows later writes', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, { n: 'a' })
      await postNote(app, { n: 'b' })
      assert.equal(
        (await app.inject('/api/note')).body,
        '{"data":[{"n":"a","id":1},{"n":"b","id":2}]}',
      )
      await postNote(app, { n: 'c' })
      await app.inject({ method: 'DELETE', url: '/api/note/1' })
      assert.equal(
        (await app.inject('/api/note')).body,
        '{"data":[{"n":"b","id":2},{"n":"c","id":3}]}',
      )
    })

    it('is the same resource at /api/note/', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      const created = await app.inject({ method: 'POST', url: '/api/note/', payload: { n: 1 } })
      assert.equal(created.body, '{"data":{"n":1,"id":1}}')
      assert.equal((await app.inject('/api/note/')).body, '{"data":[{"n":1,"id":1}]}')
    })

    it('ignores a query string', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, {})
      assert.equal((await app.inject('/api/note?limit=1&x')).body, '{"data":[{"id":1}]}')
    })
  },
  { notebookOnPostgres: true },
)

describeEachStore(
  'GET /api/note/:id',
  (suite) => {
    it('returns the note', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(42) })
      await postNote(app, { t: 'x' })
      const response = await app.inject('/api/note/42')
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['content-type'], JSON_UTF8)
      assert.equal(response.body, '{"data":{"t":"x","id":42}}')
    })

    it('returns 404 with an empty body when the note is missing', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(42) })
      await postNote(app, {})
      assertEmptyNotFound(await app.inject('/api/note/43'))
    })

    for (const [segment, found] of [
      ['007', true],
      ['%37', true],
      ['7/', true],
      ['-0', false],
      ['7abc', false],
      ['0x7', false],
      ['7e0', false],
      ['7.0', false],
      ['abc', false],
      ['%2B7', false],
      ['%E2%80%AE7', false],
      [`${'0'.repeat(5000)}7`, true],
    ] as const) {
      it(`reads /api/note/${segment.length > 20 ? `0...(${segment.length} chars)7` : segment} as ${found ? 'note 7' : 'no note'}`, async () => {
        const { app } = suite.buildApp({}, { now: fakeClock(7) })
        await postNote(app, { t: 'seven' })
        const response = await app.inject(`/api/note/${segment}`)
        if (found) assert.equal(response.body, '{"data":{"t":"seven","id":7}}')
        else assertEmptyNotFound(response)
      })
    }

    it('finds negative ids and ids beyond 32 bits', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, {})
      await postNote(app, {})
      await app.inject({ method: 'PATCH', url: '/api/note/1', payload: { id: -5 } })
      await app.inject({ method: 'PATCH', url: '/api/note/2', payload: { id: 2 ** 40 } })
      assert.equal((await app.inject('/api/note/-5')).body, '{"data":{"id":-5}}')
      assert.equal((await app.inject(`/api/note/${2 ** 40}`)).body, `{"data":{"id":${2 ** 40}}}`)
    })

    it('does not find a note whose id was patched to the string "7"', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(7) })
      await postNote(app, {})
      await app.inject({ method: 'PATCH', url: '/api/note/7', payload: { id: '7' } })
      assertEmptyNotFound(await app.inject('/api/note/7'))
      assert.equal((await app.inject('/api/note')).body, '{"data":[{"id":"7"}]}')
    })

    it('answers HEAD like GET, without a body', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(7) })
      await postNote(app, { t: 'x' })
      const head = await app.inject({ method: 'HEAD', url: '/api/note/7' })
      assert.equal(head.statusCode, 200)
      assert.equal(head.headers['content-type'], JSON_UTF8)
      assert.equal(head.headers['content-length'], String('{"data":{"t":"x","id":7}}'.length))
      assert.equal(head.body, '')
      const missing = await app.inject({ method: 'HEAD', url: '/api/note/8' })
      assert.equal(missing.statusCode, 404)
      assert.equal(missing.body, '')
      const list = await app.inject({ method: 'HEAD', url: '/api/note' })
      assert.equal(list.statusCode, 200)
      assert.equal(list.headers['content-length'], String('{"data":[{"t":"x","id":7}]}'.length))
      assert.equal(list.body, '')
    })
  },
  { notebookOnPostgres: true },
)

describeEachStore(
  'PATCH /api/note/:id',
  (suite) => {
    it('merges the body over the note shallowly and returns it', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(3) })
      await postNote(app, { title: 'old', body: 'keep', nested: { a: 1, b: 2 } })
      const response = await app.inject({
        method: 'PATCH',
        url: '/api/note/3',
        payload: { title: 'new', nested: { c: 3 }, extra: null },
      })
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['content-type'], JSON_UTF8)
      assert.equal(
        response.body,
        '{"data":{"title":"new","body":"keep","nested":{"c":3},"id":3,"extra":null}}',
      )
      assert.equal((await app.inject('/api/note/3')).body, response.body)
    })

    it('keeps the note in its list position', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, { n: 'a' })
      await postNote(app, { n: 'b' })
      await app.inject({ method: 'PATCH', url: '/api/note/1', payload: { n: 'A' } })
      assert.equal(
        (await app.inject('/api/note')).body,
        '{"data":[{"n":"A","id":1},{"n":"b","id":2}]}',
      )
    })

    it('moves the note to a body id: found at the new id only', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, { n: 'a' })
      const moved = await app.inject({ method: 'PATCH', url: '/api/note/1', payload: { id: 77 } })
      assert.equal(moved.body, '{"data":{"n":"a","id":77}}')
      assertEmptyNotFound(await app.inject('/api/note/1'))
      assert.equal((await app.inject('/api/note/77')).body, '{"data":{"n":"a","id":77}}')
    })

    it('acts on the first in list order when two notes share an id', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, { n: 'a' }) // 1
      await postNote(app, { n: 'b' }) // 2
      await app.inject({ method: 'PATCH', url: '/api/note/2', payload: { id: 1 } })
      const patched = await app.inject({
        method: 'PATCH',
        url: '/api/note/1',
        payload: { x: true },
      })
      assert.equal(patched.body, '{"data":{"n":"a","id":1,"x":true}}')
      assert.equal(
        (await app.inject('/api/note')).body,
        '{"data":[{"n":"a","id":1,"x":true},{"n":"b","id":1}]}',
      )
    })

    it('treats a request with no body as {} and changes nothing', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, { n: 'a' })
      const response = await app.inject({ method: 'PATCH', url: '/api/note/1' })
      assert.equal(response.body, '{"data":{"n":"a","id":1}}')
    })

    it('returns 404 with an empty body when the note is missing', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, {})
      assertEmptyNotFound(
        await app.inject({ method: 'PATCH', url: '/api/note/2', payload: { a: 1 } }),
      )
      assertEmptyNotFound(
        await app.inject({ method: 'PATCH', url: '/api/note/x', payload: { a: 1 } }),
      )
      assert.equal((await app.inject('/api/note')).body, '{"data":[{"id":1}]}')
    })
  },
  { notebookOnPostgres: true },
)

describeEachStore(
  'DELETE /api/note/:id',
  (suite) => {
    it('removes the note and answers the :id segment as a string', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(7) })
      await postNote(app, {})
      await postNote(app, {})
      const response = await app.inject({ method: 'DELETE', url: '/api/note/007' })
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['content-type'], JSON_UTF8)
      assert.equal(response.body, '{"data":"007"}')
      assert.equal((await app.inject('/api/note')).body, '{"data":[{"id":8}]}')
      assertEmptyNotFound(await app.inject('/api/note/7'))
    })

    it('answers the percent-decoded segment', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(7) })
      await postNote(app, {})
      assert.equal(
        (await app.inject({ method: 'DELETE', url: '/api/note/%30%37' })).body,
        '{"data":"07"}',
      )
    })

    it('removes only the first of two notes sharing an id', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, { n: 'a' })
      await postNote(app, { n: 'b' })
      await app.inject({ method: 'PATCH', url: '/api/note/2', payload: { id: 1 } })
      assert.equal(
        (await app.inject({ method: 'DELETE', url: '/api/note/1' })).body,
        '{"data":"1"}',
      )
      assert.equal((await app.inject('/api/note')).body, '{"data":[{"n":"b","id":1}]}')
    })

    it('returns 404 with an empty body when the note is missing', async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await postNote(app, {})
      assertEmptyNotFound(await app.inject({ method: 'DELETE', url: '/api/note/2' }))
      assertEmptyNotFound(await app.inject({ method: 'DELETE', url: '/api/note/1e0' }))
      assert.equal((await app.inject('/api/note')).body, '{"data":[{"id":1}]}')
    })
  },
  { notebookOnPostgres: true },
)
