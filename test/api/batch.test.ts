import assert from 'node:assert/strict'
import { it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { describeEachStore } from '../support/each-store.js'
import { type buildTestApp, fakeClock, JSON_HEADERS } from '../support/helpers.js'

type App = ReturnType<typeof buildTestApp>['app']

interface SubAnswer {
  status: number
  headers: Record<string, string>
  body: unknown
}

/** The problem of a refused batch. */
interface Problem {
  status: number
  detail: string
}

describeEachStore('POST /api/batch', (suite) => {
  const batch = (app: App, requests: unknown, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url: '/api/batch',
      headers: { ...JSON_HEADERS, ...headers },
      payload: JSON.stringify(requests === undefined ? {} : { requests }),
    })
  const create = (body: unknown) => ({ method: 'POST', url: '/api/note', body })
  const patch = (id: number | string, body: unknown, headers?: Record<string, string>) => ({
    method: 'PATCH',
    url: `/api/note/${id}`,
    body,
    ...(headers === undefined ? {} : { headers }),
  })
  const remove = (id: number | string, headers?: Record<string, string>) => ({
    method: 'DELETE',
    url: `/api/note/${id}`,
    ...(headers === undefined ? {} : { headers }),
  })
  /** The list and its version, to show that a refused batch changed nothing. */
  const state = async (app: App) => {
    const list = await app.inject({ method: 'GET', url: '/api/note' })
    return { body: list.body, version: list.headers['notes-version'] }
  }
  const answers = (response: LightMyRequestResponse): SubAnswer[] =>
    (JSON.parse(response.body) as { data: SubAnswer[] }).data
  const problemOf = (response: LightMyRequestResponse): Problem => {
    assert.equal(response.headers['content-type'], 'application/problem+json')
    return JSON.parse(response.body) as Problem
  }

  it('applies the requests in order and answers each as it would have been answered alone', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000) })
    await batch(app, [create({ a: 1 }), create({ b: 1 })])
    const response = await batch(app, [
      patch(1000, { x: 1 }),
      create({ c: 1 }),
      patch(1000, { x: null, y: [1] }, { 'Content-Type': 'application/merge-patch+json' }),
      remove('0001001'),
      patch(1002, { d: 2 }, { 'if-match': '*' }),
    ])
    assert.equal(response.statusCode, 200)
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
    const data = answers(response)
    assert.deepEqual(
      data.map(({ status, body }) => [status, body]),
      [
        [200, { data: { a: 1, id: 1000, x: 1 } }],
        [200, { data: { c: 1, id: 1002 } }],
        [200, { data: { a: 1, id: 1000, y: [1] } }],
        [200, { data: '0001001' }],
        [200, { data: { c: 1, id: 1002, d: 2 } }],
      ],
    )
    assert.deepEqual(data[3]?.headers, {})
    // Each note's last ETag in the batch is the one a GET answers now.
    for (const [i, id] of [
      [2, 1000],
      [4, 1002],
    ] as const) {
      const got = await app.inject({ method: 'GET', url: `/api/note/${id}` })
      assert.equal(data[i]?.headers.etag, got.headers.etag)
      assert.deepEqual(data[i]?.body, JSON.parse(got.body))
    }
    const list = await app.inject({ method: 'GET', url: '/api/note' })
    assert.equal(list.body, '{"data":[{"a":1,"id":1000,"y":[1]},{"c":1,"id":1002,"d":2}]}')
    // Five writes, five versions: the last one's is the list's.
    assert.equal(data[4]?.headers.etag, list.headers.etag)
  })

  it('applies nothing when a request fails, and answers its status with a problem naming it', async () => {
    const { app } = suite.buildApp({ maxNotes: 3 }, { now: fakeClock(1000) })
    await batch(app, [create({ a: 1 }), create({ b: 1 })])
    const stale = (await app.inject({ method: 'GET', url: '/api/note/1000' })).headers
      .etag as string
    await app.inject({
      method: 'PATCH',
      url: '/api/note/1000',
      headers: JSON_HEADERS,
      payload: '{"a":2}',
    })
    const before = await state(app)
    const cases: [number, unknown, RegExp][] = [
      [404, remove(5), /^requests\[2\] \(DELETE \/api\/note\/5\): No note has this id\./],
      [404, patch('abc', {}), /^requests\[2\] \(PATCH \/api\/note\/abc\): No note has this id\./],
      [
        412,
        patch(1000, { z: 1 }, { 'If-Match': stale }),
        /^requests\[2\] \(PATCH \/api\/note\/1000\): its If-Match or If-Unmodified-Since does not hold at its place in the batch/,
      ],
      [
        507,
        create({ too: 'many' }),
        new RegExp(
          `^requests\\[2\\] \\(POST /api/note\\): ${suite.full} holds its maximum of 3 notes\\.`,
        ),
      ],
    ]
    for (const [status, failing, detail] of cases) {
      const response = await batch(app, [
        patch(1001, { b: 9 }),
        create({ c: 1 }),
        failing,
        create({ d: 1 }),
      ])
      assert.equal(response.statusCode, status)
      const problem = problemOf(response)
      assert.equal(problem.status, status)
      assert.match(problem.detail, detail)
      assert.match(problem.detail, /Nothing in the batch was applied\.$/)
      assert.deepEqual(await state(app), before)
    }
    // The room the refused batches took is free again.
    const fits = await batch(app, [create({ c: 1 })])
    assert.deepEqual(
      answers(fits).map(({ body }) => body),
      [{ data: { c: 1, id: 1002 } }],
    )
  })

  it('names in a 412 the ETag the note has, never one the refused batch made and undid', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000) })
    const created = await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: JSON_HEADERS,
      payload: '{"a":1}',
    })
    const etag = created.headers.etag as string
    // The first request changes the note, so the second one's If-Match no longer holds there.
    const refused = await batch(app, [
      patch(1000, { x: 1 }),
      patch('1000/', { y: 1 }, { 'If-Match': etag }),
    ])
    assert.equal(refused.statusCode, 412)
    const { detail } = problemOf(refused)
    assert.match(detail, /^requests\[1\] \(PATCH \/api\/note\/1000\/\): its If-Match/)
    assert.ok(
      detail.endsWith(
        `the note's ETag is now ${etag} (send that in If-Match to write over it). Nothing in the batch was applied.`,
      ),
      detail,
    )
    // That ETag still writes; the next version is not one the refused batch showed anyone.
    const written = await batch(app, [patch('1000#top', { y: 1 }, { 'If-Match': etag })])
    assert.equal(written.statusCode, 200)
    assert.notEqual(answers(written)[0]?.headers.etag, etag)
  })

  it('gives a create the id an earlier request of the batch freed, so a later request meets it', async () => {
    let now = 1000
    const { app } = suite.buildApp({}, { now: () => now })
    await batch(app, [create({ a: 1 })])
    // Moved ahead of the clock: the next creates step over 1005 while it is held.
    const moved = await batch(app, [patch(1000, { id: 1005 })])
    const etag = answers(moved)[0]?.headers.etag as string
    now = 1005
    const before = await state(app)
    // Once the DELETE has freed 1005, the create takes it, and the second DELETE meets the new
    // note, whose ETag is not the one the first note had: a 412 there, not a 404.
    const refused = await batch(app, [
      remove(1005),
      create({ b: 1 }),
      remove(1005, { 'If-Match': etag }),
    ])
    assert.equal(refused.statusCode, 412)
    const { detail } = problemOf(refused)
    assert.match(detail, /^requests\[2\] \(DELETE \/api\/note\/1005\): its If-Match/)
    assert.ok(detail.includes(`the note's ETag is now ${etag} `), detail)
    assert.deepEqual(await state(app), before)
    // The same create, kept: it took 1005, the id the refused batch's create had taken too.
    const kept = await batch(app, [remove(1005), create({ b: 1 })])
    assert.equal(kept.statusCode, 200)
    assert.deepEqual(answers(kept)[1]?.body, { data: { b: 1, id: 1005 } })
  })

  it('refuses a batch document that is not one with a 400 naming what is wrong', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000) })
    await batch(app, [create({ a: 1 })])
    const before = await state(app)
    const many = Array.from({ length: 1001 }, () => create({}))
    const cases: [unknown, RegExp][] = [
      [{}, /^"requests" must be an array of 1 to 1000 requests/],
      [{ requests: [] }, /^"requests" must be an array of 1 to 1000/],
      [{ requests: many }, /^"requests" must be an array of 1 to 1000/],
      [{ requests: {} }, /^"requests" must be an array/],
      [{ requests: [create({})], more: 1 }, /^The batch has an unknown member "more"/],
      [{ requests: [create({}), 7] }, /^requests\[1\] must be an object/],
      [
        { requests: [{ method: 'GET', url: '/api/note' }] },
        /^requests\[0\]\.method must be "POST", "PUT", "PATCH" or "DELETE"/,
      ],
      [{ requests: [{ method: 'post', url: '/api/note' }] }, /^requests\[0\]\.method must be/],
      [
        { requests: [{ method: 'POST', url: '/api/note/1' }] },
        /^requests\[0\]\.url must be "\/api\/note" for a POST/,
      ],
      [
        { requests: [{ method: 'DELETE', url: '/api/note' }] },
        /^requests\[0\]\.url must be "\/api\/note\/\{id\}" for a DELETE/,
      ],
      [
        { requests: [{ method: 'DELETE', url: '/api/note/1/2' }] },
        /^requests\[0\]\.url must be "\/api\/note\/\{id\}"/,
      ],
      [
        { requests: [{ method: 'DELETE', url: '/api/note/%E0%A4%A' }] },
        /^requests\[0\]\.url has a malformed percent-encoding/,
      ],
      [{ requests: [{ method: 'DELETE' }] }, /^requests\[0\]\.url must be a string/],
      [
        { requests: [{ ...create([1]) }] },
        /^requests\[0\]\.body must be a JSON object, not an array/,
      ],
      [
        { requests: [{ ...create('x') }] },
        /^requests\[0\]\.body must be a JSON object, not a string/,
      ],
      [{ requests: [{ ...create({}), headers: [] }] }, /^requests\[0\]\.headers must be an object/],
      [
        { requests: [{ ...create({}), headers: { 'if-match': 1 } }] },
        /^requests\[0\]\.headers\["if-match"\] must be a string/,
      ],
      [
        { requests: [{ ...create({}), header: {} }] },
        /^requests\[0\] has an unknown member "header"/,
      ],
      [
        { requests: [{ ...create({}), headers: { 'Idempotency-Key': 'k' } }] },
        /^requests\[0\] carries an Idempotency-Key; send it on the batch/,
      ],
    ]
    for (const [document, detail] of cases) {
      const response = await app.inject({
        method: 'POST',
        url: '/api/batch',
        headers: JSON_HEADERS,
        payload: JSON.stringify(document),
      })
      assert.equal(response.statusCode, 400, JSON.stringify(document).slice(0, 80))
      assert.match(problemOf(response).detail, detail)
    }
    const textual = await batch(app, [{ ...create({}), headers: { 'content-type': 'text/plain' } }])
    assert.equal(textual.statusCode, 415)
    assert.match(
      problemOf(textual).detail,
      /^requests\[0\]: Content-Type "text\/plain" is not supported/,
    )
    const notJson = await app.inject({
      method: 'POST',
      url: '/api/batch',
      headers: JSON_HEADERS,
      payload: '[1]',
    })
    assert.equal(notJson.statusCode, 400)
    assert.deepEqual(await state(app), before)
  })

  it('takes 1,000 requests, and note bodies as deep as a request alone may send', async () => {
    const { app, store } = suite.buildApp({ maxDepth: 4 }, { now: fakeClock(1000) })
    const thousand = await batch(
      app,
      Array.from({ length: 1000 }, (_, n) => create({ n })),
    )
    assert.equal(thousand.statusCode, 200)
    assert.equal(answers(thousand).length, 1000)
    assert.equal((await store.stats()).notes, 1000)
    const deepest = { a: [[[[1]]]] } // nests 4
    const deep = await batch(app, [create(deepest), patch(1000, deepest)])
    assert.equal(deep.statusCode, 200)
    const tooDeep = await batch(app, [create({ a: [[[[[1]]]]] })])
    assert.equal(tooDeep.statusCode, 400)
    assert.equal((await store.stats()).notes, 1001)
  })

  it('applies a batch at most once per Idempotency-Key', async () => {
    const { app, store } = suite.buildApp({}, { now: fakeClock(1000) })
    const requests = [create({ a: 1 }), create({ b: 1 })]
    const first = await batch(app, requests, { 'idempotency-key': 'import-7' })
    assert.equal(first.statusCode, 200)
    assert.equal(first.headers['idempotent-replayed'], undefined)
    await batch(app, [remove(1000)])
    const again = await batch(app, requests, { 'idempotency-key': 'import-7' })
    assert.equal(again.statusCode, 200)
    assert.equal(again.body, first.body)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.equal((await store.stats()).notes, 1)
    const other = await batch(app, [create({ a: 2 })], { 'idempotency-key': 'import-7' })
    assert.equal(other.statusCode, 422)
    // One key cannot stand for a create and a batch with the same body.
    const created = await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: { ...JSON_HEADERS, 'idempotency-key': 'import-7' },
      payload: JSON.stringify({ requests }),
    })
    assert.equal(created.statusCode, 422)
    const bad = await batch(app, requests, { 'idempotency-key': 'has space' })
    assert.equal(bad.statusCode, 400)
    assert.equal((await store.stats()).notes, 1)
  })

  it('tells the change feed of every request of a kept batch, in order, and of nothing else', async () => {
    const { app, store } = suite.buildApp({}, { now: fakeClock(1000) })
    const start = await store.version()
    await batch(app, [create({ a: 1 }), create({ b: 1 })])
    await batch(app, [patch(1000, { x: 1 }), remove(9)])
    await batch(app, [patch(1000, { y: 1 }), remove(1001)])
    const changes = (await store.changesSince(start, 100)) ?? []
    assert.deepEqual(
      changes.map(({ type, data }) => [type, data]),
      [
        ['created', '{"a":1,"id":1000}'],
        ['created', '{"b":1,"id":1001}'],
        ['updated', '{"a":1,"id":1000,"y":1}'],
        ['deleted', '{"id":1001}'],
      ],
    )
  })
})
