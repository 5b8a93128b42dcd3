import assert from 'node:assert/strict'
import { it } from 'node:test'
import { describeEachStore } from '../support/each-store.js'
import { type buildTestApp, fakeClock, JSON_HEADERS } from '../support/helpers.js'

describeEachStore(
  'Idempotency-Key on POST',
  (suite) => {
    const post = (
      app: ReturnType<typeof buildTestApp>['app'],
      key: string | undefined,
      payload: string,
    ) =>
      app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { ...JSON_HEADERS, ...(key === undefined ? {} : { 'idempotency-key': key }) },
        payload,
      })

    it('creates once and answers a repeat with the first answer and Idempotent-Replayed', async () => {
      const { app, store } = suite.buildApp({}, { now: fakeClock(1000, 1) })
      const first = await post(app, 'order-42', '{"title":"a"}')
      assert.equal(first.statusCode, 200)
      assert.equal(first.body, '{"data":{"title":"a","id":1000}}')
      assert.equal(first.headers['idempotent-replayed'], undefined)
      // The note changes meanwhile; the repeat still gets the first answer.
      await app.inject({
        method: 'PATCH',
        url: '/api/note/1000',
        headers: JSON_HEADERS,
        payload: '{"title":"b"}',
      })
      const again = await post(app, 'order-42', '{"title":"a"}')
      assert.equal(again.statusCode, 200)
      assert.equal(again.body, first.body)
      assert.equal(again.headers.etag, first.headers.etag)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.equal((await store.stats()).notes, 1)
    })

    it('answers 422 for the same key with another body, and creates nothing', async () => {
      const { app, store } = suite.buildApp({}, { now: fakeClock(1000, 1) })
      await post(app, 'k', '{"title":"a"}')
      const other = await post(app, 'k', '{"title":"different"}')
      assert.equal(other.statusCode, 422)
      assert.equal(other.headers['content-type'], 'application/problem+json')
      const problem = JSON.parse(other.body) as { status: number; detail: string }
      assert.equal(problem.status, 422)
      assert.match(problem.detail, /^This Idempotency-Key was already used with a different/)
      assert.equal((await store.stats()).notes, 1)
    })

    it('refuses a key that is empty, too long or not visible ASCII with a 400', async () => {
      const { app, store } = suite.buildApp()
      for (const key of ['', 'x'.repeat(256), 'has space', 'é']) {
        const response = await app.inject({
          method: 'POST',
          url: '/api/note',
          headers: { ...JSON_HEADERS, 'idempotency-key': Buffer.from(key).toString('latin1') },
          payload: '{}',
        })
        assert.equal(response.statusCode, 400, JSON.stringify(key))
        assert.match(
          (JSON.parse(response.body) as { detail: string }).detail,
          /^Idempotency-Key must be 1 to 255 visible ASCII characters/,
        )
      }
      assert.equal((await post(app, 'x'.repeat(255), '{}')).statusCode, 200)
      assert.equal((await store.stats()).notes, 1)
    })

    it('keeps keys apart from each other and from requests without one', async () => {
      const { app, store } = suite.buildApp({}, { now: fakeClock(1000, 1) })
      await post(app, 'a', '{}')
      await post(app, 'b', '{}')
      await post(app, undefined, '{}')
      await post(app, undefined, '{}')
      assert.equal((await store.stats()).notes, 4)
    })
  },
  { notebookOnPostgres: true },
)
