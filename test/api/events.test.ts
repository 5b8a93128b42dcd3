import assert from 'node:assert/strict'
import {
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { type AppOptions, buildApp } from '../../src/app.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import type { MemoryStoreOptions } from '../../src/store/memory/options.js'
import type { Change, NoteStore } from '../../src/store/types.js'
import { describeEachStore } from '../support/each-store.js'
import { type SuiteContext, TEST_EPOCH } from '../support/helpers.js'
import { PromisedNoteStore } from '../support/promised-store.js'
import { type SseClient as Client, SseClient, type SseMessage } from '../support/sse-client.js'

interface Feed {
  app: FastifyInstance
  store: NoteStore
  port: number
  base: string
}

/** An app listening on 127.0.0.1 (streams need a real socket), closed when the test ends. */
async function listenFeed(
  t: TestContext,
  suite: Pick<SuiteContext, 'buildStore'>,
  config: Partial<Config> = {},
  feed: AppOptions['feed'] = {},
  makeStore: (options: MemoryStoreOptions) => NoteStore = suite.buildStore,
): Promise<Feed> {
  const settings = { ...DEFAULT_CONFIG, ...config }
  const store = makeStore({
    maxNotes: settings.maxNotes,
    maxBytes: settings.maxStoreBytes,
    historyLimit: settings.changeHistory,
    epoch: TEST_EPOCH,
  })
  const app = buildApp({ store, config: settings, feed })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const port = (app.server.address() as AddressInfo).port
  return { app, store, port, base: `http://127.0.0.1:${port}` }
}

/**
 * Waits until a feed that admits one stream (MAX_EVENT_STREAMS 1) has let go of the one it had:
 * a stream opened meanwhile is refused with 503.
 */
async function untilLetGo(port: number): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const probe = await SseClient.open(port, '/api/events')
    const status = probe.status
    probe.close()
    if (status === 200) return
    assert.equal(status, 503)
    assert.ok(Date.now() < deadline, 'the stream that stopped reading was never let go')
    await sleep(20)
  }
}

/**
 * A paused client the feed has let go of: once it reads again it finds its stream cut off
 * (before all `total` changes after `since`), and streams resumed from the last event id it has
 * bring the rest, so that together they are exactly the history after `since`. It resumes as
 * often as it is cut off, as an EventSource would (a machine that other test files keep busy can
 * hold up a resumed stream past the stall bound too), each time with at least one event more.
 */
async function assertResumesAfterCutOff(
  t: TestContext,
  port: number,
  client: Client,
  store: NoteStore,
  since: string,
  total: number,
): Promise<void> {
  client.response.resume()
  await client.closed()
  assert.equal(client.ended, 'aborted')
  const received = eventsOf(client)
  assert.ok(received.length < total, `all ${received.length} events arrived: never cut off`)
  for (let resumes = 1; received.length < total; resumes++) {
    assert.ok(resumes <= 10, `resumed ${resumes - 1} times, ${received.length} of ${total} events`)
    const resumed = await openAdmitted(t, port, { 'last-event-id': received.at(-1)?.id ?? since })
    const left = total - received.length
    await resumed.until((c) => eventsOf(c).length >= left || c.ended !== false)
    const brought = eventsOf(resumed)
    assert.ok(brought.length > 0, `a resumed stream ended with nothing (${resumed.ended})`)
    received.push(...brought)
    resumed.close()
  }
  assert.deepEqual(received, await expectedAfter(store, since))
}

/**
 * Opens a stream on a feed that admits one, once the stream before it is gone; `paused`, it
 * reads nothing of the body.
 */
async function openAdmitted(
  t: TestContext,
  port: number,
  headers: Record<string, string>,
  paused = false,
): Promise<Client> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const client = await SseClient.open(port, '/api/events', headers, 'GET', { paused })
    t.after(() => client.close())
    if (client.status === 200) return client
    client.close()
    assert.ok(Date.now() < deadline, `refused with ${client.status}`)
    await sleep(20)
  }
}

/** Opens a stream and closes it when the test ends. */
async function openStream(
  t: TestContext,
  port: number,
  path = '/api/events',
  headers: Record<string, string> = {},
): Promise<Client> {
  const client = await SseClient.open(port, path, headers)
  t.after(() => client.close())
  return client
}

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** One request on its own connection, closed after it: no idle keep-alive holds a close up. */
function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${path}`,
      {
        method,
        agent: false,
        headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      },
      (response) => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => {
          text += chunk
        })
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }),
        )
        response.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
}

async function create(base: string, body: unknown): Promise<{ id: number }> {
  const response = await call(base, 'POST', '/api/note', body)
  assert.equal(response.status, 200)
  return (JSON.parse(response.body) as { data: { id: number } }).data
}

/** The messages a store's history says a stream started after `since` must get. */
async function expectedAfter(store: NoteStore, since: string): Promise<SseMessage[]> {
  const changes = (await store.changesSince(since, 1_000_000)) as readonly Change[]
  return changes.map(asMessage)
}

/** Every call, and every change reported, come late, as from a database across a network. */
class LateNoteStore extends PromisedNoteStore {
  #seed = 7

  /** 0 to `max` ms, from a fixed sequence (a linear congruential generator). */
  #delay(max: number): number {
    this.#seed = (this.#seed * 1_103_515_245 + 12_345) % 2_147_483_648
    return this.#seed % (max + 1)
  }

  override subscribe(listener: (change: Change) => void): () => void {
    let queue = Promise.resolve()
    return super.subscribe((change) => {
      // In order, each after its own delay: a change may be reported after a read that has it.
      const delay = this.#delay(8)
      queue = queue.then(() => sleep(delay)).then(() => listener(change))
    })
  }

  override async version(): Promise<string> {
    const version = await super.version()
    await sleep(this.#delay(3))
    return version
  }

  override async changesSince(
    since: string,
    limit: number,
  ): Promise<readonly Change[] | undefined> {
    const changes = await super.changesSince(since, limit)
    await sleep(this.#delay(3))
    return changes
  }
}

function asMessage(change: Change): SseMessage {
  return { event: change.type, id: change.version, data: change.data, retry: undefined }
}

const eventsOf = (client: Client): SseMessage[] =>
  client.messages.filter((m) => m.event !== undefined)

describeEachStore(
  'GET /api/events',
  (suite) => {
    it('streams every change as an event: created, updated, deleted, each with its version and JSON', async (t) => {
      const { port, base } = await listenFeed(t, suite)
      const client = await openStream(t, port)
      assert.equal(client.status, 200)
      assert.equal(client.headers['content-type'], 'text/event-stream; charset=utf-8')
      assert.equal(client.headers['cache-control'], 'no-cache')
      assert.equal(client.headers['x-accel-buffering'], 'no')
      assert.equal(client.headers['transfer-encoding'], 'chunked')
      assert.equal(client.headers['content-length'], undefined)
      assert.match(String(client.headers['x-request-id']), /^[0-9a-f]{12}-[0-9a-z]+$/)
      // It opens with the reconnection delay and the version it starts after, as the id of a
      // message with data: a client that records ids only from such messages has it too.
      await client.until((c) => c.messages.length === 1)
      assert.equal(client.text, 'retry: 2000\nid: e.0\ndata: {"version":"e.0"}\n\n')

      const { id } = await create(base, { title: 'a' })
      assert.equal((await call(base, 'PATCH', `/api/note/${id}`, { done: true })).status, 200)
      assert.equal((await call(base, 'DELETE', `/api/note/${id}`)).status, 200)
      await client.events(3)
      assert.equal(
        client.text,
        'retry: 2000\nid: e.0\ndata: {"version":"e.0"}\n\n' +
          `event: created\nid: e.1\ndata: {"title":"a","id":${id}}\n\n` +
          `event: updated\nid: e.2\ndata: {"title":"a","id":${id},"done":true}\n\n` +
          `event: deleted\nid: e.3\ndata: {"id":${id}}\n\n`,
      )
    })

    it('starts with the next change when no token is given', async (t) => {
      const { port, base } = await listenFeed(t, suite)
      await create(base, { n: 1 })
      await create(base, { n: 2 })
      const client = await openStream(t, port)
      await client.until((c) => c.messages.length === 1)
      assert.deepEqual(client.messages, [
        { event: undefined, id: 'e.2', data: '{"version":"e.2"}', retry: '2000' },
      ])
      const third = await create(base, { n: 3 })
      assert.deepEqual(await client.events(1), [
        { event: 'created', id: 'e.3', data: `{"n":3,"id":${third.id}}`, retry: undefined },
      ])
    })

    it('resumes after the token in Last-Event-ID, or in since, and the header wins', async (t) => {
      const { port, base, store } = await listenFeed(t, suite)
      for (let n = 1; n <= 5; n++) await create(base, { n })
      const bySince = await openStream(t, port, '/api/events?since=e.2')
      const byHeader = await openStream(t, port, '/api/events', { 'last-event-id': 'e.3' })
      const both = await openStream(t, port, '/api/events?since=e.1', { 'last-event-id': 'e.4' })
      assert.deepEqual(await bySince.events(3), await expectedAfter(store, 'e.2'))
      assert.deepEqual(await byHeader.events(2), await expectedAfter(store, 'e.3'))
      assert.deepEqual(await both.events(1), await expectedAfter(store, 'e.4'))
      // No id line at the start: the client already has its token.
      assert.ok(bySince.text.startsWith('retry: 2000\n\nevent: created\nid: e.3\n'))
      // Then live, without a gap or a repeat.
      await create(base, { n: 6 })
      assert.deepEqual(await bySince.events(4), await expectedAfter(store, 'e.2'))
      assert.deepEqual(await byHeader.events(3), await expectedAfter(store, 'e.3'))
      // The current version: nothing to replay, live from there.
      const current = await openStream(t, port, `/api/events?since=${await store.version()}`)
      await create(base, { n: 7 })
      assert.deepEqual(await current.events(1), await expectedAfter(store, 'e.6'))
    })

    for (const [name, token] of [
      ['of another store', 'x9.1'],
      ['ahead of the store', 'e.zz'],
      ['that is not a version', 'nonsense'],
    ] as const) {
      it(`begins with a reset (and then goes on live) for a token ${name}`, async (t) => {
        const { port, base } = await listenFeed(t, suite)
        await create(base, { n: 1 })
        const client = await openStream(t, port, `/api/events?since=${token}`)
        await client.events(1)
        assert.equal(
          client.text,
          `retry: 2000\n\nevent: reset\nid: e.1\ndata: {"version":"${token}"}\n\n`,
        )
        const { id } = await create(base, { n: 2 })
        assert.deepEqual((await client.events(2))[1], {
          event: 'created',
          id: 'e.2',
          data: `{"n":2,"id":${id}}`,
          retry: undefined,
        })
      })
    }

    it('begins with a reset for a token older than the history kept (CHANGE_HISTORY)', async (t) => {
      const { port, base, store } = await listenFeed(t, suite, { changeHistory: 3 })
      for (let n = 1; n <= 8; n++) await create(base, { n })
      const tooOld = await openStream(t, port, '/api/events', { 'last-event-id': 'e.4' })
      const kept = await openStream(t, port, '/api/events', { 'last-event-id': 'e.5' })
      assert.deepEqual(await tooOld.events(1), [
        { event: 'reset', id: 'e.8', data: '{"version":"e.4"}', retry: undefined },
      ])
      assert.deepEqual(await kept.events(3), await expectedAfter(store, 'e.5'))
    })

    for (const [what, path, headers, detail] of [
      [
        'a since with characters no token has',
        '/api/events?since=a%20b',
        {},
        'since must be one version token, as Notes-Version or an event id gives it (1 to 256 characters of A-Z a-z 0-9 . _ ~ -).',
      ],
      [
        'an empty since',
        '/api/events?since=',
        {},
        'since must be one version token, as Notes-Version or an event id gives it (1 to 256 characters of A-Z a-z 0-9 . _ ~ -).',
      ],
      [
        'two since parameters',
        '/api/events?since=e.1&since=e.2',
        {},
        'since must be one version token, as Notes-Version or an event id gives it (1 to 256 characters of A-Z a-z 0-9 . _ ~ -).',
      ],
      [
        'a Last-Event-ID with characters no token has',
        '/api/events',
        { 'last-event-id': 'e.1,e.2' },
        'Last-Event-ID must be an event id this feed sent (1 to 256 characters of A-Z a-z 0-9 . _ ~ -).',
      ],
    ] as const) {
      it(`answers 400 naming the parameter for ${what}`, async (t) => {
        const { port } = await listenFeed(t, suite)
        const client = await openStream(t, port, path, headers)
        await client.closed()
        assert.equal(client.status, 400)
        assert.equal(client.headers['content-type'], 'application/problem+json')
        assert.deepEqual(JSON.parse(client.text), {
          type: 'about:blank',
          title: 'Bad Request',
          status: 400,
          detail,
        })
      })
    }

    for (const [kind, makeStore, tuning] of [
      [`the ${suite.store} store`, undefined, {}],
      // A memory store made late on purpose: on PostgreSQL, the store itself is the late one.
      ...(suite.store === 'memory'
        ? ([
            [
              'a store that answers late and reports changes late (history read 7 at a time)',
              (options: MemoryStoreOptions) => new LateNoteStore(options),
              { historyPage: 7 },
            ],
          ] as const)
        : []),
    ] as const) {
      it(`sends every change after Notes-Version exactly once, in order, to clients that join during concurrent writes, with ${kind}`, async (t) => {
        const { port, base, store } = await listenFeed(t, suite, {}, tuning, makeStore)
        const ids: number[] = []
        for (let n = 0; n < 20; n++) ids.push((await create(base, { n })).id)
        let written = 0
        const writer = async (seed: number): Promise<void> => {
          for (let i = 0; i < 60; i++) {
            const pick = ids[(seed * 7 + i * 13) % ids.length] as number
            const op = (seed + i) % 3
            if (op === 0) ids.push((await create(base, { seed, i })).id)
            const answer =
              op === 0
                ? { status: 200 }
                : op === 1
                  ? await call(base, 'PATCH', `/api/note/${pick}`, { seed, i })
                  : await call(base, 'DELETE', `/api/note/${pick}`)
            // A note deleted by another writer answers 404 and changes nothing.
            if (answer.status === 200) written++
          }
        }
        const readers: { since: string; client: Client }[] = []
        const reader = async (delayMs: number, how: 'since' | 'header' | 'none'): Promise<void> => {
          await sleep(delayMs)
          if (how === 'none') {
            // From the next change: the opening message names the version it starts after.
            const client = await openStream(t, port)
            await client.until((c) => c.messages.length > 0)
            readers.push({ since: client.messages[0]?.id as string, client })
            return
          }
          const list = await call(base, 'GET', '/api/note')
          const since = list.headers['notes-version'] as string
          const client =
            how === 'since'
              ? await openStream(t, port, `/api/events?since=${since}`)
              : await openStream(t, port, '/api/events', { 'last-event-id': since })
          readers.push({ since, client })
        }
        const first = await openStream(t, port)
        await first.until((c) => c.messages.length === 1)
        await Promise.all([
          writer(1),
          writer(2),
          writer(3),
          writer(4),
          reader(0, 'since'),
          reader(20, 'header'),
          reader(40, 'since'),
          reader(80, 'header'),
          reader(120, 'since'),
          reader(10, 'none'),
          reader(60, 'none'),
          reader(100, 'none'),
        ])
        const final = await store.version()
        const all = [{ since: first.messages[0]?.id as string, client: first }, ...readers]
        for (const { since, client } of all) {
          await client.until((c) => eventsOf(c).at(-1)?.id === final || since === final)
          assert.deepEqual(
            eventsOf(client),
            await expectedAfter(store, since),
            `stream since ${since}`,
          )
        }
        assert.equal(eventsOf(first).length, written)
        assert.ok(written > 150, `only ${written} writes succeeded`)
      })
    }

    it('sends a comment every heartbeat interval', async (t) => {
      const { port } = await listenFeed(t, suite, {}, { heartbeatMs: 30 })
      const client = await openStream(t, port)
      await client.until((c) => c.comments >= 2)
      assert.ok(
        client.text.startsWith('retry: 2000\nid: e.0\ndata: {"version":"e.0"}\n\n:\n\n:\n\n'),
      )
    })

    it('refuses a stream beyond MAX_EVENT_STREAMS with 503 and Retry-After, and takes one again when a stream ends', async (t) => {
      const { port } = await listenFeed(t, suite, { maxEventStreams: 2 })
      const one = await openStream(t, port)
      await openStream(t, port)
      const refused = await openStream(t, port)
      await refused.closed()
      assert.equal(refused.status, 503)
      assert.equal(refused.headers['retry-after'], '10')
      assert.equal(refused.headers['content-type'], 'application/problem+json')
      assert.deepEqual(JSON.parse(refused.text), {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'The service serves at most 2 event streams at once; retry after 10 s.',
      })
      one.close()
      for (let attempt = 0; ; attempt++) {
        const again = await openStream(t, port)
        if (again.status === 200) break
        // The server may not have seen the close yet.
        assert.ok(attempt < 50, 'a stream was refused long after another had closed')
        await sleep(20)
      }
    })

    it('cuts off a client that stops reading once its backlog passes the bound, and the client resumes from its last id without loss', async (t) => {
      // One stream at a time, so that the feed letting go of this one shows as one more admitted.
      const { port, base, store } = await listenFeed(
        t,
        suite,
        { maxEventStreams: 1 },
        { maxBacklogBytes: 64 * 1024, stallMs: 1000 },
      )
      const slow = await openStream(t, port)
      await slow.until((c) => c.messages.length === 1)
      const since = slow.messages[0]?.id as string
      await create(base, { n: -1 })
      await slow.until((c) => eventsOf(c).length === 1)
      slow.response.pause()
      const big = 'x'.repeat(200 * 1024)
      for (let n = 0; n < 100; n++) await create(base, { n, big })
      // Live, it is cut off at the bound; caught up again from the history (on PostgreSQL a
      // stream that sees a gap is), it is cut off when it has read nothing for stallMs.
      await untilLetGo(port)
      await assertResumesAfterCutOff(t, port, slow, store, since, 101)
    })

    it('sends the history as fast as its client reads, and cuts off a client that reads none of it for a while', async (t) => {
      const { port, base, store } = await listenFeed(
        t,
        suite,
        { maxEventStreams: 1 },
        // 3 s: the steady reader runs in this process, which other test files may starve for a
        // second; the stalled one waits a few seconds more to be let go.
        { maxBacklogBytes: 64 * 1024, stallMs: 3000 },
      )
      const since = await store.version()
      const big = 'x'.repeat(100 * 1024)
      for (let n = 0; n < 60; n++) await create(base, { n, big })
      // A reader slower than the history: paced, never cut off.
      const steady = await openStream(t, port, '/api/events', { 'last-event-id': since })
      for (let seen = 0; seen < 20; seen = eventsOf(steady).length) {
        steady.response.pause()
        await sleep(20)
        steady.response.resume()
        await steady.until((c) => eventsOf(c).length > seen)
      }
      await steady.events(60)
      assert.equal(steady.ended, false)
      assert.deepEqual(eventsOf(steady), await expectedAfter(store, since))
      steady.close()
      // A reader that stops: let go, and it resumes where it stopped.
      // Paused from its head on: one paused later may have read megabytes first, and a history
      // that the sockets' buffers hold whole leaves nothing to wait on.
      const stalled = await openAdmitted(t, port, { 'last-event-id': since }, true)
      await untilLetGo(port)
      await assertResumesAfterCutOff(t, port, stalled, store, since, 60)
    })

    it('ends every stream at once when the app closes, so the shutdown is not held up', async (t) => {
      const { app, port, store } = await listenFeed(t, suite)
      const clients = [
        await openStream(t, port),
        await openStream(t, port, '/api/events?since=e.0'),
      ]
      await store.create({ n: 1 })
      for (const client of clients) await client.events(1)
      await app.close()
      for (const client of clients) {
        await client.closed()
        assert.equal(client.ended, true)
      }
      // New connections are refused once closed.
      await assert.rejects(SseClient.open(port), { code: 'ECONNREFUSED' })
    })

    it('answers HEAD with the head of a stream, OPTIONS with Allow, and other methods 405', async (t) => {
      const { port } = await listenFeed(t, suite)
      const head = await SseClient.open(port, '/api/events', {}, 'HEAD')
      await head.closed()
      assert.equal(head.status, 200)
      assert.equal(head.headers['content-type'], 'text/event-stream; charset=utf-8')
      assert.equal(head.headers['content-length'], undefined)
      assert.equal(head.text, '')
      const options = await SseClient.open(port, '/api/events', {}, 'OPTIONS')
      await options.closed()
      assert.equal(options.status, 204)
      assert.equal(options.headers.allow, 'GET, HEAD, OPTIONS')
      const post = await SseClient.open(port, '/api/events', {}, 'POST')
      await post.closed()
      assert.equal(post.status, 405)
      assert.equal(post.headers.allow, 'GET, HEAD, OPTIONS')
    })

    it('needs an access key when keys are on, and a read key may follow the feed', async (t) => {
      const { port, base } = await listenFeed(t, suite, {
        apiKeys: ['sk-w'],
        apiReadKeys: ['sk-r'],
      })
      const anonymous = await openStream(t, port)
      await anonymous.closed()
      assert.equal(anonymous.status, 401)
      assert.equal(anonymous.headers['www-authenticate'], 'Bearer')
      assert.equal(
        JSON.parse(anonymous.text).detail,
        'This API needs an access key: send Authorization: Bearer <key>.',
      )
      const reader = await openStream(t, port, '/api/events', { authorization: 'Bearer sk-r' })
      assert.equal(reader.status, 200)
      const created = await call(
        base,
        'POST',
        '/api/note',
        { a: 1 },
        { authorization: 'Bearer sk-w' },
      )
      const { id } = (JSON.parse(created.body) as { data: { id: number } }).data
      assert.deepEqual(await reader.events(1), [
        { event: 'created', id: 'e.1', data: `{"a":1,"id":${id}}`, retry: undefined },
      ])
    })

    it('carries the CORS and RateLimit headers of every answer, and stays open past the rate window', async (t) => {
      const { port, base } = await listenFeed(t, suite, {
        corsOrigin: ['https://app.example'],
        rateLimit: 2,
        rateLimitWindowMs: 100,
      })
      const client = await openStream(t, port, '/api/events', { origin: 'https://app.example' })
      assert.equal(client.status, 200)
      assert.equal(client.headers['access-control-allow-origin'], 'https://app.example')
      assert.equal(client.headers['ratelimit-limit'], '2')
      await sleep(250)
      const { id } = await create(base, { a: 1 })
      assert.deepEqual(await client.events(1), [
        { event: 'created', id: 'e.1', data: `{"a":1,"id":${id}}`, retry: undefined },
      ])
    })
  },
  { lanes: false, notebookOnPostgres: true },
)

// The stall check's own timing, once: it does not depend on the store.
describe('GET /api/events, in a process that is held up', () => {
  it('does not blame a client for a hold-up of its own process: a stream catching up outlasts a pause longer than the stall bound', async (t) => {
    const { app, port, base, store } = await listenFeed(
      t,
      { buildStore: (options) => new MemoryNoteStore(options) },
      { maxEventStreams: 1 },
      { maxBacklogBytes: 64 * 1024, stallMs: 2000 },
    )
    const since = await store.version()
    const big = 'x'.repeat(100 * 1024)
    for (let n = 0; n < 60; n++) await create(base, { n, big })
    let feedSide: ServerResponse | undefined
    app.server.once('request', (_request: IncomingMessage, response: ServerResponse) => {
      feedSide = response
    })
    const reader = await openStream(t, port, '/api/events', { 'last-event-id': since })
    // As soon as the feed waits for the reader (its backlog over half the bound), before the
    // reader has had a chance to read, the whole process stops for longer than the stall bound,
    // as a long garbage collection or a starved machine would stop it.
    await new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + 30_000
      const check = (): void => {
        if ((feedSide?.writableLength ?? 0) > 32 * 1024) {
          for (const until = performance.now() + 3500; performance.now() < until; );
          resolve()
        } else if (Date.now() > deadline) {
          reject(new Error('the feed never waited for the reader'))
        } else {
          setImmediate(check)
        }
      }
      check()
    })
    await reader.until((c) => eventsOf(c).length === 60 || c.ended !== false)
    assert.equal(reader.ended, false, 'cut off for a hold-up of the process it runs in')
    assert.deepEqual(eventsOf(reader), await expectedAfter(store, since))
  })
})
