import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { Answer } from '../../src/api/answer.js'
import { NoteOperations } from '../../src/api/note-operations.js'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import type { MaybePromise, NoteFields } from '../../src/store/types.js'
import { describeEachStore } from '../support/each-store.js'
import { fakeClock, injectThroughServer, type SuiteContext } from '../support/helpers.js'

/** A fixture's one change to the meaning of create and delete: a header each, and 201 on create. */
class WithReceipt extends NoteOperations {
  override create(fields: NoteFields): MaybePromise<Answer> {
    return then(super.create(fields), (answer) =>
      answer.status === 200
        ? new Answer(201, answer.contentType, answer.body, ['x-receipt', 'created'])
        : answer,
    )
  }

  override delete(id: number | undefined, segment: string): MaybePromise<Answer> {
    return then(
      super.delete(id, segment),
      (answer) =>
        new Answer(answer.status, answer.contentType, answer.body, [
          'x-receipt',
          `deleted ${segment}`,
        ]),
    )
  }
}

function then(
  answer: MaybePromise<Answer>,
  next: (answer: Answer) => Answer,
): MaybePromise<Answer> {
  return answer instanceof Promise ? answer.then(next) : next(answer)
}

/** An app on a fresh store with the fixture's operations, counting what reaches Fastify's router. */
function appWithReceipts(suite: SuiteContext): {
  app: FastifyInstance
  reachedFastify: () => number
} {
  const store = suite.buildStore({ maxNotes: 10, maxBytes: 10_000, now: fakeClock(5000, 1) })
  const app = buildApp({ store, config: DEFAULT_CONFIG, operations: new WithReceipt(store) })
  let reached = 0
  app.addHook('onRequest', (_request, _reply, done) => {
    reached++
    done()
  })
  return { app, reachedFastify: () => reached }
}

describeEachStore(
  'NoteOperations: one change to an operation reaches both lanes',
  (suite) => {
    it('answers a changed create and delete the same through Fastify and through the fast lane', async () => {
      const viaFastify = appWithReceipts(suite)
      const viaServer = appWithReceipts(suite)
      const send = injectThroughServer(viaServer.app)
      const post = {
        method: 'POST' as const,
        url: '/api/note',
        headers: { 'content-type': 'application/json' },
        payload: '{"title":"a"}',
      }

      const fromFastify = await viaFastify.app.inject(post)
      const fromLane = await send(post)
      for (const response of [fromFastify, fromLane]) {
        assert.equal(response.statusCode, 201)
        assert.equal(response.headers['x-receipt'], 'created')
        assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
        assert.equal(response.body, '{"data":{"title":"a","id":5000}}')
      }

      const remove = { method: 'DELETE' as const, url: '/api/note/005000' }
      for (const response of [await viaFastify.app.inject(remove), await send(remove)]) {
        assert.equal(response.statusCode, 200)
        assert.equal(response.headers['x-receipt'], 'deleted 005000')
        assert.equal(response.body, '{"data":"005000"}')
      }

      // The fast lane took both of its requests: the changed answers did not come from Fastify.
      assert.equal(viaFastify.reachedFastify(), 2)
      assert.equal(viaServer.reachedFastify(), 0)
      await Promise.all([viaFastify.app.close(), viaServer.app.close()])
    })
  },
  // Each case goes through both lanes itself.
  { lanes: false },
)

// On the memory store only: it reads the operations' synchronous answers.
describe('NoteOperations: the contract answers', () => {
  it('keeps the contract answers when nothing is changed', async () => {
    const store = new MemoryNoteStore({
      maxNotes: 10,
      maxBytes: 10_000,
      now: fakeClock(7, 1),
      epoch: 'e',
    })
    const operations = new NoteOperations(store)
    assert.deepEqual(operations.get(undefined), new Answer(404, undefined, undefined))
    const created = operations.create({ a: 1 }) as Answer
    assert.deepEqual(
      [created.status, created.contentType, created.body, created.headers],
      [200, 'application/json; charset=utf-8', '{"data":{"a":1,"id":7}}', ['etag', '"e.1"']],
    )
    const listed = operations.list() as Answer
    assert.equal(listed.body?.toString(), '{"data":[{"a":1,"id":7}]}')
    // The same list text gives the same Answer, so its bytes are encoded once.
    assert.equal(operations.list(), listed)
    assert.equal((operations.delete(7, '07') as Answer).body, '{"data":"07"}')
    assert.equal((operations.delete(7, '7') as Answer).status, 404)
  })
})

describe('NoteOperations: the pages kept', () => {
  it('never answers a page kept at an older version, though another page was kept meanwhile', async () => {
    const inner = new MemoryNoteStore({
      maxNotes: 10,
      maxBytes: 10_000,
      now: fakeClock(1, 1),
      epoch: 'e',
    })
    // A store whose version is read as a networked one's is, the test deciding when it answers.
    let gate: Promise<void> = Promise.resolve()
    const store = new Proxy(inner, {
      get(target, key) {
        if (key === 'version') {
          return async () => {
            await gate
            return target.version()
          }
        }
        const value: unknown = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const operations = new NoteOperations(store)
    const body = async (answer: MaybePromise<Answer>) => (await answer).body?.toString()
    inner.create({ n: 1 })
    assert.equal(await body(operations.list('limit=10')), '{"data":[{"n":1,"id":1}]}')
    inner.create({ n: 2 })
    let open = () => {}
    gate = new Promise((resolve) => {
      open = resolve
    })
    // Kept at e.1: it stands only if the store is still there, which the version will tell.
    const first = operations.list('limit=10')
    // Meanwhile another page is read and kept, at e.2.
    assert.equal(await body(operations.list('limit=5')), '{"data":[{"n":1,"id":1},{"n":2,"id":2}]}')
    open()
    assert.equal(await body(first), '{"data":[{"n":1,"id":1},{"n":2,"id":2}]}')
  })
})
