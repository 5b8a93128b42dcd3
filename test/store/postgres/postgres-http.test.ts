import assert from 'node:assert/strict'
import { after, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../../src/app.js'
import { DEFAULT_CONFIG } from '../../../src/config/config.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import type { PostgresStoreOptions } from '../../../src/store/postgres/store-options.js'
import { describeEachLane, type SuiteContext } from '../../support/helpers.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'

/**
 * What only PostgreSQL has, over HTTP: an unreachable database, and stores that share one schema.
 * The HTTP suites themselves run on PostgreSQL through describeEachStore (helpers.ts).
 */
if (postgresAvailable('HTTP API on PostgreSQL')) {
  const url = await testDatabase()
  const stores: PostgresNoteStore[] = []
  after(async () => {
    await Promise.all(stores.map((store) => store.close()))
  })

  const build = (
    suite: SuiteContext,
    options: Partial<PostgresStoreOptions> = {},
  ): { app: FastifyInstance; store: PostgresNoteStore } => {
    const store = new PostgresNoteStore({
      url,
      schema: 'http',
      maxNotes: 1000,
      maxBytes: 1 << 20,
      now: () => 5000,
      poolSize: 2,
      statementTimeoutMs: 1000,
      ...options,
    })
    stores.push(store)
    return { app: suite.inLane(buildApp({ store, config: DEFAULT_CONFIG })), store }
  }

  describeEachLane('the notes API on PostgreSQL', (suite) => {
    it('answers 503 with Retry-After and problem JSON while the database is unreachable, and /readyz 503', async () => {
      const { app } = build(suite, { url: 'postgres://postgres@127.0.0.1:9/nowhere' })
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

  let schemas = 0
  describeEachLane('the epoch option of the PostgreSQL store', (suite) => {
    it('names the versions of a schema the store creates, and no other: one made before keeps its own', async () => {
      const schema = `epoch_${++schemas}`
      const first = build(suite, { schema, epoch: 'first' })
      const created = await first.app.inject({ method: 'POST', url: '/api/note', payload: {} })
      assert.equal(created.headers.etag, '"first.1"')
      // A second instance on the same schema, told another epoch: the schema's own one wins, so
      // both answer the same ETags and versions.
      const second = build(suite, { schema, epoch: 'second' })
      const read = await second.app.inject('/api/note/5000')
      assert.equal(read.headers.etag, '"first.1"')
      assert.equal((await second.app.inject('/api/note')).headers['notes-version'], 'first.1')
    })

    it('is random without it, and differs between schemas', async () => {
      const tags = []
      for (let i = 0; i < 2; i++) {
        const { app } = build(suite, { schema: `epoch_${++schemas}` })
        const created = await app.inject({ method: 'POST', url: '/api/note', payload: {} })
        tags.push(created.headers.etag as string)
      }
      for (const tag of tags) assert.match(tag, /^"[0-9a-f]+\.1"$/)
      assert.notEqual(tags[0], tags[1])
    })
  })
}
