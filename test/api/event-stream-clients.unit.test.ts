import assert from 'node:assert/strict'
import type { AddressInfo, Socket } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { EventSource as EventSource5 } from 'eventsource'
import { EventSource as EventSource4 } from 'eventsource4'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { TEST_EPOCH } from '../support/helpers.js'

/**
 * The change feed read by the EventSource clients people install, over real sockets: each must
 * resume where it was after a drop that comes before the first change. eventsource 4 records an
 * id only from a message with data, so the feed's opening carries a `data:` line.
 */

/** What both versions of the package have in common, as far as these tests use it. */
interface Received {
  readonly data: string
  readonly lastEventId: string
}

interface Client {
  addEventListener(type: string, listener: (event: Received) => void): void
  close(): void
}

const CLIENTS: readonly [string, (url: string) => Client][] = [
  ['eventsource 4.1.1', (url) => new EventSource4(url)],
  ['eventsource 5', (url) => new EventSource5(url)],
]

interface Feed {
  url: string
  /** The Last-Event-ID header of each request for the feed, in order ('' when absent). */
  lastEventIds: string[]
  /** Cuts every connection open now, as a network drop would. */
  drop(): void
  create(body: Record<string, unknown>): Promise<{ id: number }>
}

async function listenFeed(t: TestContext): Promise<Feed> {
  const store = new MemoryNoteStore({
    maxNotes: DEFAULT_CONFIG.maxNotes,
    maxBytes: DEFAULT_CONFIG.maxStoreBytes,
    historyLimit: DEFAULT_CONFIG.changeHistory,
    epoch: TEST_EPOCH,
  })
  const app = buildApp({ store, config: DEFAULT_CONFIG })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => app.close())
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  const lastEventIds: string[] = []
  app.server.on('request', (request) => {
    if (request.url === '/api/events') {
      lastEventIds.push(String(request.headers['last-event-id'] ?? ''))
    }
  })
  const { port } = app.server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/api/events`,
    lastEventIds,
    drop: () => {
      for (const socket of sockets) socket.destroy()
    },
    create: async (body) => {
      const answer = await app.inject({ method: 'POST', url: '/api/note', payload: body })
      assert.equal(answer.statusCode, 200)
      return (answer.json() as { data: { id: number } }).data
    },
  }
}

/** Resolves with the next event of `type` the client dispatches; rejects after `timeoutMs`. */
function next(client: Client, type: string, timeoutMs = 10_000): Promise<Received> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no ${type} event in ${timeoutMs} ms`)),
      timeoutMs,
    )
    client.addEventListener(type, (event) => {
      clearTimeout(timer)
      resolve(event)
    })
  })
}

describe('GET /api/events read by EventSource clients', () => {
  for (const [name, connect] of CLIENTS) {
    it(`${name}: resumes after a drop before the first change, and receives the change made meanwhile`, async (t) => {
      const feed = await listenFeed(t)
      await feed.create({ title: 'before' })
      const client = connect(feed.url)
      t.after(() => client.close())
      await next(client, 'open')
      // The opening follows the head at once; the client has parsed it well within this.
      await sleep(200)

      const reopened = next(client, 'open')
      feed.drop()
      const { id } = await feed.create({ title: 'meanwhile' })
      const created = next(client, 'created')
      await reopened
      const event = await created
      assert.equal(event.data, `{"title":"meanwhile","id":${id}}`)
      assert.equal(event.lastEventId, 'e.2')
      assert.deepEqual(feed.lastEventIds, ['', 'e.1'])
    })

    it(`${name}: sees the opening as an unnamed message whose id is the version it starts after`, async (t) => {
      const feed = await listenFeed(t)
      await feed.create({ title: 'before' })
      const client = connect(feed.url)
      t.after(() => client.close())
      const opening = await next(client, 'message')
      assert.equal(opening.data, '{"version":"e.1"}')
      assert.equal(opening.lastEventId, 'e.1')
    })
  }
})
