import assert from 'node:assert/strict'
import { it } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describeEachStore } from '../support/each-store.js'
import { fakeClock } from '../support/helpers.js'

const JSON_TYPE = { 'content-type': 'application/json' }
const JSON_UTF8 = 'application/json; charset=utf-8'

function put(
  app: FastifyInstance,
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'PUT', url, headers: { ...JSON_TYPE, ...headers }, payload: body })
}

async function create(app: FastifyInstance, body: string): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url: '/api/note', headers: JSON_TYPE, payload: body })
}

function assertProblem(response: LightMyRequestResponse, status: number, detail: string): void {
  assert.equal(response.statusCode, status, response.body)
  assert.equal(response.headers['content-type'], 'application/problem+json')
  const { title, ...rest } = JSON.parse(response.body) as Record<string, unknown>
  assert.equal(typeof title, 'string')
  assert.deepEqual(rest, { type: 'about:blank', status, detail })
}

describeEachStore('PUT /api/note/:id', (suite) => {
  it("replaces the note's fields with the body's, the id staying the note's, and answers as PATCH does", async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1,"nested":{"x":1}}')
    await create(app, '{"b":1}')
    const response = await put(app, '/api/note/1', '{"c":"new","id":9,"nested":{"y":2}}')
    assert.equal(response.statusCode, 200, response.body)
    assert.equal(response.headers['content-type'], JSON_UTF8)
    assert.equal(response.body, '{"data":{"c":"new","id":1,"nested":{"y":2}}}')
    const read = await app.inject('/api/note/1')
    assert.equal(read.body, response.body)
    assert.equal(response.headers.etag, read.headers.etag)
    assert.equal(
      (await app.inject('/api/note')).body,
      '{"data":[{"c":"new","id":1,"nested":{"y":2}},{"b":1,"id":2}]}',
    )
    assert.equal((await app.inject('/api/note/9')).statusCode, 404)
  })

  it('takes no body as {} and any application/*+json, a merge patch type included, as the whole note', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1}')
    const empty = await app.inject({ method: 'PUT', url: '/api/note/1' })
    assert.equal(empty.body, '{"data":{"id":1}}')
    const patchType = await put(app, '/api/note/1', '{"a":null}', {
      'content-type': 'application/merge-patch+json',
    })
    assert.equal(patchType.body, '{"data":{"a":null,"id":1}}')
  })

  it('honours If-Match and If-Unmodified-Since: 412 with the current ETag, nothing changed', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    const created = await create(app, '{"a":1}')
    const etag = created.headers.etag as string
    const stale = await put(app, '/api/note/1', '{"b":2}', { 'if-match': '"other"' })
    assertProblem(
      stale,
      412,
      `The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now ${etag}. GET it, and send that ETag in If-Match to write over it.`,
    )
    assert.equal(stale.headers.etag, etag)
    const old = await put(app, '/api/note/1', '{"b":2}', {
      'if-unmodified-since': 'Thu, 01 Jan 1970 00:00:00 GMT',
    })
    assert.equal(old.statusCode, 200, old.body)
    const late = await put(app, '/api/note/1', '{"b":3}', { 'if-match': etag })
    assert.equal(late.statusCode, 412)
    assert.equal((await app.inject('/api/note/1')).body, '{"data":{"b":2,"id":1}}')
    const matched = await put(app, '/api/note/1', '{"b":4}', {
      'if-match': old.headers.etag as string,
    })
    assert.equal(matched.body, '{"data":{"b":4,"id":1}}')
    assert.notEqual(matched.headers.etag, old.headers.etag)
  })

  it('answers the empty 404 for a missing note or an id that names none, conditions or not', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    for (const [url, headers] of [
      ['/api/note/1', {}],
      ['/api/note/1', { 'if-match': '*' }],
      ['/api/note/abc', {}],
    ] as const) {
      const response = await put(app, url, '{"a":1}', headers)
      assert.equal(response.statusCode, 404)
      assert.equal(response.body, '')
      assert.equal(response.headers['content-type'], undefined)
      assert.equal(response.headers['content-length'], '0')
    }
    assert.equal((await app.inject('/api/note')).body, '{"data":[]}')
  })

  it('refuses a body that is not a JSON object with a 400, changing nothing', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1}')
    const response = await put(app, '/api/note/1', '[1]')
    assert.equal(response.statusCode, 400)
    assert.equal((await app.inject('/api/note/1')).body, '{"data":{"a":1,"id":1}}')
  })

  it('is one updated change, and a PUT in a batch means what it means alone', async () => {
    const { app, store } = suite.buildApp({}, { now: fakeClock(1) })
    const start = await store.version()
    await create(app, '{"a":1}')
    await put(app, '/api/note/1', '{"b":2}')
    const changes = (await store.changesSince(start, 10)) ?? []
    assert.deepEqual(
      changes.map(({ type, data }) => [type, data]),
      [
        ['created', '{"a":1,"id":1}'],
        ['updated', '{"b":2,"id":1}'],
      ],
    )
    const batch = await app.inject({
      method: 'POST',
      url: '/api/batch',
      headers: JSON_TYPE,
      payload: {
        requests: [
          { method: 'PUT', url: '/api/note/1', body: { c: 3, id: 5 } },
          { method: 'PATCH', url: '/api/note/1', body: { d: 4 } },
        ],
      },
    })
    assert.equal(batch.statusCode, 200, batch.body)
    const answers = (JSON.parse(batch.body) as { data: { body: unknown }[] }).data
    assert.deepEqual(
      answers.map((answer) => answer.body),
      [{ data: { c: 3, id: 1 } }, { data: { c: 3, id: 1, d: 4 } }],
    )
    const refused = await app.inject({
      method: 'POST',
      url: '/api/batch',
      headers: JSON_TYPE,
      payload: {
        requests: [
          { method: 'PUT', url: '/api/note/1', body: { e: 5 } },
          { method: 'PUT', url: '/api/note/2', body: { e: 5 } },
        ],
      },
    })
    assertProblem(
      refused,
      404,
      'requests[1] (PUT /api/note/2): No note has this id. Nothing in the batch was applied.',
    )
    assert.equal((await app.inject('/api/note/1')).body, '{"data":{"c":3,"id":1,"d":4}}')
  })

  // Only the suite in a user's notebook has notebooks to name in a path.
  it('means the same at /api/notebooks/me/note/:id', {
    skip: suite.full !== 'This notebook',
  }, async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1}')
    const response = await put(app, '/api/notebooks/me/note/1', '{"b":2,"id":3}')
    assert.equal(response.statusCode, 200, response.body)
    assert.equal(response.body, '{"data":{"b":2,"id":1}}')
    assert.equal((await app.inject('/api/note/1')).body, response.body)
  })

  it('answers 405 with an Allow that lists PUT for a method a note does not take', async () => {
    const { app } = suite.buildApp()
    const response = await app.inject({ method: 'POST', url: '/api/note/1' })
    assert.equal(response.statusCode, 405)
    assert.equal(response.headers.allow, 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT')
  })
})
