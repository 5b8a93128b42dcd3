import assert from 'node:assert/strict'
import { it } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { describeEachStore } from '../support/each-store.js'
import { fakeClock } from '../support/helpers.js'

const JSON_TYPE = { 'content-type': 'application/json' }
const T0 = 1_700_000_000_000

function send(
  app: FastifyInstance,
  method: 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url,
    headers: body === undefined ? headers : { ...JSON_TYPE, ...headers },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  })
}

const data = (response: LightMyRequestResponse): unknown =>
  (JSON.parse(response.body) as { data: unknown }).data

function assertProblem(response: LightMyRequestResponse, status: number, detail: RegExp): void {
  assert.equal(response.statusCode, status, response.body)
  assert.equal(response.headers['content-type'], 'application/problem+json')
  assert.match((JSON.parse(response.body) as { detail: string }).detail, detail)
}

const unquoted = (etag: unknown): string => JSON.parse(String(etag)) as string

describeEachStore('History: /api/note/:id/revisions and restore', (suite) => {
  it('lists every state of a note, newest first, with its version, time and change', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1000) })
    const created = await send(app, 'POST', '/api/note', { title: 'a' })
    const id = (data(created) as { id: number }).id
    const patched = await send(app, 'PATCH', `/api/note/${id}`, { body: 'x' })
    const response = await app.inject(`/api/note/${id}/revisions`)
    assert.equal(response.statusCode, 200, response.body)
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
    assert.deepEqual(data(response), [
      {
        version: unquoted(patched.headers.etag),
        at: new Date(T0 + 1000).toISOString(),
        change: 'updated',
        note: { title: 'a', id, body: 'x' },
      },
      {
        version: unquoted(created.headers.etag),
        at: new Date(T0).toISOString(),
        change: 'created',
        note: { title: 'a', id },
      },
    ])
    assert.equal(response.headers.link, undefined)
    const one = await app.inject(`/api/note/${id}/revisions/${unquoted(created.headers.etag)}`)
    assert.equal(one.statusCode, 200)
    assert.equal(one.headers.etag, created.headers.etag)
    assert.deepEqual(data(one), (data(response) as unknown[])[1])
    const again = await app.inject({
      url: `/api/note/${id}/revisions/${unquoted(created.headers.etag)}`,
      headers: { 'if-none-match': String(created.headers.etag) },
    })
    assert.equal(again.statusCode, 304)
  })

  it('pages the revisions with limit and a Link to the next page', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const id = (data(await send(app, 'POST', '/api/note', { n: 0 })) as { id: number }).id
    for (let n = 1; n < 5; n++) await send(app, 'PATCH', `/api/note/${id}`, { n })
    const seen: number[] = []
    let url: string | undefined = `/api/note/${id}/revisions?limit=2`
    for (let pages = 0; url !== undefined; pages++) {
      assert.ok(pages < 5)
      const page: LightMyRequestResponse = await app.inject(url)
      assert.equal(page.statusCode, 200, page.body)
      for (const revision of data(page) as { note: { n: number } }[]) seen.push(revision.note.n)
      const link = page.headers.link as string | undefined
      url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
      if (link !== undefined) assert.ok(url?.startsWith(`/api/note/${id}/revisions?limit=2&after=`))
    }
    assert.deepEqual(seen, [4, 3, 2, 1, 0])
    assertProblem(await app.inject(`/api/note/${id}/revisions?limit=0`), 400, /^limit must be/)
    assertProblem(await app.inject(`/api/note/${id}/revisions?after=%22x`), 400, /^after must be/)
  })

  it('answers the empty 404 for a note that does not exist, or is deleted', async () => {
    const { app } = suite.buildApp()
    const id = (data(await send(app, 'POST', '/api/note', {})) as { id: number }).id
    for (const url of [
      `/api/note/${id + 1}/revisions`,
      '/api/note/abc/revisions',
      `/api/note/${id + 1}/revisions/a.1`,
    ]) {
      const response = await app.inject(url)
      assert.equal(response.statusCode, 404, url)
      assert.equal(response.body, '')
    }
    await send(app, 'DELETE', `/api/note/${id}`)
    assert.equal((await app.inject(`/api/note/${id}/revisions`)).statusCode, 404)
  })

  it('restores a revision as a new write that honours If-Match, and keeps the history', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const created = await send(app, 'POST', '/api/note', { title: 'first', tag: 1 })
    const id = (data(created) as { id: number }).id
    const edited = await send(app, 'PUT', `/api/note/${id}`, { title: 'second', extra: true })
    const version = unquoted(created.headers.etag)
    const stale = await send(
      app,
      'POST',
      `/api/note/${id}/restore`,
      { version },
      {
        'if-match': String(created.headers.etag),
      },
    )
    assert.equal(stale.statusCode, 412)
    const restored = await send(
      app,
      'POST',
      `/api/note/${id}/restore`,
      { version },
      {
        'if-match': String(edited.headers.etag),
      },
    )
    assert.equal(restored.statusCode, 200, restored.body)
    assert.deepEqual(data(restored), { title: 'first', tag: 1, id })
    assert.notEqual(restored.headers.etag, created.headers.etag)
    assert.equal((await app.inject(`/api/note/${id}`)).body, restored.body)
    const revisions = data(await app.inject(`/api/note/${id}/revisions`)) as { change: string }[]
    assert.deepEqual(
      revisions.map((revision) => revision.change),
      ['updated', 'updated', 'created'],
    )
    assertProblem(
      await send(app, 'POST', `/api/note/${id}/restore`, { version: 'nope.1' }),
      404,
      /has no revision "nope\.1"/,
    )
    assertProblem(await send(app, 'POST', `/api/note/${id}/restore`, {}), 400, /"version"/)
  })
})

describeEachStore('Trash: /api/trash', (suite) => {
  it('keeps a deleted note, answers the contract before and after, and lists it', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const id = (data(await send(app, 'POST', '/api/note', { keep: 'me' })) as { id: number }).id
    const other = (data(await send(app, 'POST', '/api/note', { other: 1 })) as { id: number }).id
    const deleted = await send(app, 'DELETE', `/api/note/${id}`)
    assert.equal(deleted.statusCode, 200)
    assert.equal(deleted.body, `{"data":"${id}"}`)
    const gone = await app.inject(`/api/note/${id}`)
    assert.equal(gone.statusCode, 404)
    assert.equal(gone.body, '')
    assert.equal((await send(app, 'DELETE', `/api/note/${id}`)).statusCode, 404)
    const trash = await app.inject('/api/trash')
    assert.equal(trash.statusCode, 200, trash.body)
    assert.equal(trash.headers['x-total-count'], '1')
    const [item] = data(trash) as { deleted_at: string; note: unknown }[]
    assert.deepEqual(item?.note, { keep: 'me', id })
    assert.match(item?.deleted_at ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.equal((await app.inject('/api/note')).body, `{"data":[{"other":1,"id":${other}}]}`)
  })

  it('puts a note back with its id, content and history, at the end of the list', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const id = (data(await send(app, 'POST', '/api/note', { v: 1 })) as { id: number }).id
    await send(app, 'PATCH', `/api/note/${id}`, { v: 2 })
    const other = (data(await send(app, 'POST', '/api/note', {})) as { id: number }).id
    await send(app, 'DELETE', `/api/note/${id}`)
    const restored = await send(app, 'POST', `/api/trash/${id}/restore`)
    assert.equal(restored.statusCode, 200, restored.body)
    assert.deepEqual(data(restored), { v: 2, id })
    assert.ok(typeof restored.headers.etag === 'string')
    assert.equal((await app.inject(`/api/note/${id}`)).headers.etag, restored.headers.etag)
    assert.equal(
      (await app.inject('/api/note')).body,
      `{"data":[{"id":${other}},{"v":2,"id":${id}}]}`,
    )
    const revisions = data(await app.inject(`/api/note/${id}/revisions`)) as { note: unknown }[]
    assert.deepEqual(
      revisions.map((revision) => revision.note),
      [
        { v: 2, id },
        { v: 2, id },
        { v: 1, id },
      ],
    )
    assert.equal((await send(app, 'POST', `/api/trash/${id}/restore`)).statusCode, 404)
  })

  it('refuses a restore over a live note with 409, and purges one or all', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const ids: number[] = []
    for (let n = 0; n < 3; n++)
      ids.push((data(await send(app, 'POST', '/api/note', { n })) as { id: number }).id)
    const [a, b, c] = ids as [number, number, number]
    await send(app, 'DELETE', `/api/note/${a}`)
    await send(app, 'PATCH', `/api/note/${b}`, { id: a })
    assertProblem(
      await send(app, 'POST', `/api/trash/${a}/restore`),
      409,
      new RegExp(`id ${a} exists`),
    )
    const purged = await send(app, 'DELETE', `/api/trash/${a}`)
    assert.equal(purged.statusCode, 204)
    assert.equal((await send(app, 'DELETE', `/api/trash/${a}`)).statusCode, 404)
    await send(app, 'DELETE', `/api/note/${c}`)
    await send(app, 'DELETE', `/api/note/${a}`)
    const emptied = await send(app, 'DELETE', '/api/trash')
    assert.equal(emptied.statusCode, 200)
    assert.deepEqual(data(emptied), { purged: 2 })
    assert.deepEqual(data(await app.inject('/api/trash')), [])
  })

  it('counts the trash toward the caps: 507 until it is emptied', async () => {
    const { app } = suite.buildApp({ maxNotes: 2 }, { maxNotes: 2 })
    const id = (data(await send(app, 'POST', '/api/note', {})) as { id: number }).id
    await send(app, 'POST', '/api/note', {})
    await send(app, 'DELETE', `/api/note/${id}`)
    assertProblem(await send(app, 'POST', '/api/note', {}), 507, /empty the trash/)
    await send(app, 'DELETE', '/api/trash')
    assert.equal((await send(app, 'POST', '/api/note', {})).statusCode, 200)
  })

  it('removes a deleted note for good with TRASH_DAYS=0', async () => {
    const { app } = suite.buildApp({ trashDays: 0, maxNotes: 1 }, { maxNotes: 1 })
    const id = (data(await send(app, 'POST', '/api/note', {})) as { id: number }).id
    await send(app, 'DELETE', `/api/note/${id}`)
    assert.deepEqual(data(await app.inject('/api/trash')), [])
    assert.equal((await send(app, 'POST', '/api/note', {})).statusCode, 200)
  })

  it('pages the trash, most recently deleted first', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(T0, 1) })
    const ids: number[] = []
    for (let n = 0; n < 5; n++)
      ids.push((data(await send(app, 'POST', '/api/note', { n })) as { id: number }).id)
    for (const id of ids) await send(app, 'DELETE', `/api/note/${id}`)
    const seen: number[] = []
    let url: string | undefined = '/api/trash?limit=2'
    for (let pages = 0; url !== undefined; pages++) {
      assert.ok(pages < 5)
      const page: LightMyRequestResponse = await app.inject(url)
      assert.equal(page.headers['x-total-count'], '5')
      for (const item of data(page) as { note: { n: number } }[]) seen.push(item.note.n)
      const link = page.headers.link as string | undefined
      url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1]
    }
    assert.deepEqual(seen, [4, 3, 2, 1, 0])
    assertProblem(await app.inject('/api/trash?after=x'), 400, /^after must be/)
  })
})
