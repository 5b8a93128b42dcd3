import assert from 'node:assert/strict'
import { after, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../src/app.js'
import { DEFAULT_CONFIG } from '../src/config/config.js'
import { PostgresNoteStore } from '../src/store/postgres/store.js'
import { describeEachLane, inLane } from './helpers.js'
import { PostgresCluster, postgresAvailable } from './postgres-cluster.js'

const JSON_UTF8 = 'application/json; charset=utf-8'

/** The HTTP API on the PostgreSQL store, through both lanes (Fastify and the fast lane). */
if (postgresAvailable('HTTP API on PostgreSQL')) {
  const cluster = await PostgresCluster.start()
  const url = await cluster.createDatabase()
  const stores: PostgresNoteStore[] = []
  let schemas = 0
  after(async () => {
    await Promise.all(stores.map((store) => store.close()))
    await cluster.destroy()
  })

  const build = (storeUrl = url): { app: FastifyInstance; store: PostgresNoteStore } => {
    const store = new PostgresNoteStore({
      url: storeUrl,
      schema: `http_${++schemas}`,
      maxNotes: 1000,
      maxBytes: 1 << 20,
      now: () => 5000,
      poolSize: 2,
      statementTimeoutMs: 1000,
    })
    stores.push(store)
    return { app: inLane(buildApp({ store, config: DEFAULT_CONFIG })), store }
  }

  describeEachLane('the notes API on PostgreSQL', () => {
    it('creates, reads, lists, patches and deletes as the spec says', async () => {
      const { app } = build()
      const post = (body: object) => app.inject({ method: 'POST', url: '/api/note', payload: body })
      const created = await post({ title: 'a', id: 'mine' })
      assert.deepEqual(
        [created.statusCode, created.headers['content-type'], created.body],
        [200, JSON_UTF8, '{"data":{"title":"a","id":5000}}'],
      )
      await post({ title: 'b' })
      const got = await app.inject('/api/note/5000')
      assert.equal(got.body, '{"data":{"title":"a","id":5000}}')
      assert.equal(got.headers.etag, created.headers.etag)
      assert.equal(got.headers['last-modified'], new Date(5000).toUTCString())
      const list = await app.inject('/api/note')
      assert.equal(list.body, '{"data":[{"title":"a","id":5000},{"title":"b","id":5001}]}')
      assert.equal(list.headers['x-total-count'], '2')
      const patched = await app.inject({
        method: 'PATCH',
        url: '/api/note/5001',
        payload: { done: true },
      })
      assert.equal(patched.body, '{"data":{"title":"b","id":5001,"done":true}}')
      const deleted = await app.inject({ method: 'DELETE', url: '/api/note/005000' })
      assert.equal(deleted.body, '{"data":"005000"}')
      const missing = await app.inject('/api/note/5000')
      assert.deepEqual(
        [missing.statusCode, missing.body, missing.headers['content-type']],
        [404, '', undefined],
      )
    })

    it('answers 412 to a stale If-Match and 304 to a matching If-None-Match', async () => {
      const { app } = build()
      const created = await app.inject({ method: 'POST', url: '/api/note', payload: { n: 1 } })
      const etag = created.headers.etag as string
      const fresh = await app.inject({
        method: 'PATCH',
        url: '/api/note/5000',
        headers: { 'if-match': etag },
        payload: { n: 2 },
      })
      assert.equal(fresh.statusCode, 200)
      const stale = await app.inject({
        method: 'PATCH',
        url: '/api/note/5000',
        headers: { 'if-match': etag },
        payload: { n: 3 },
      })
      assert.equal(stale.statusCode, 412)
      assert.equal(stale.headers.etag, fresh.headers.etag)
      const notModified = await app.inject({
        url: '/api/note/5000',
        headers: { 'if-none-match': fresh.headers.etag as string },
      })
      assert.deepEqual([notModified.statusCode, notModified.body], [304, ''])
    })

    it('pages with a Link to the next page, and searches with q', async () => {
      const { app } = build()
      for (const title of ['Milk', 'bread', 'BREAD rolls', 'eggs']) {
        await app.inject({ method: 'POST', url: '/api/note', payload: { title } })
      }
      const first = await app.inject('/api/note?limit=2')
      assert.equal(first.body, '{"data":[{"title":"Milk","id":5000},{"title":"bread","id":5001}]}')
      const next = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link))?.[1] as string
      const second = await app.inject(next)
      assert.equal(
        second.body,
        '{"data":[{"title":"BREAD rolls","id":5002},{"title":"eggs","id":5003}]}',
      )
      assert.equal(second.headers.link, undefined)
      const search = await app.inject('/api/note?q=Bread')
      assert.equal(
        search.body,
        '{"data":[{"title":"bread","id":5001},{"title":"BREAD rolls","id":5002}]}',
      )
      assert.equal(search.headers['x-total-count'], '2')
    })

    it('answers 503 with Retry-After and problem JSON while the database is unreachable, and /readyz 503', async () => {
      const { app } = build('postgres://postgres@127.0.0.1:9/nowhere')
      for (const request of [
        { method: 'GET', url: '/api/note' },
        { method: 'GET', url: '/api/note/1' },
        { method: 'POST', url: '/api/note', payload: { a: 1 } },
        { method: 'PATCH', url: '/api/note/1', payload: { a: 1 } },
        { method: 'DELETE', url: '/api/note/1' },
      ] as const) {
        const response = await app.inject(request)
        assert.equal(response.statusCode, 503, `${request.method} ${request.url}`)
        assert.equal(response.headers['retry-after'], '1')
        assert.equal(response.headers['content-type'], 'application/problem+json')
        assert.deepEqual(JSON.parse(response.body), {
          type: 'about:blank',
          title: 'Service Unavailable',
          status: 503,
          detail: 'The database cannot be reached right now. Retry in 1 s.',
        })
      }
      const ready = await app.inject('/readyz')
      assert.equal(ready.statusCode, 503)
      assert.equal((await app.inject('/healthz')).statusCode, 200)
    })
  })
}
