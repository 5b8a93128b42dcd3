import assert from 'node:assert/strict'
import { createHmac, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { type AppOptions, buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import {
  type ChangeEvent,
  ConflictError,
  mergeNotes,
  NoteNotFoundError,
  NotesClient,
  type NotesClientOptions,
  NotesNetworkError,
  NotesProblem,
} from '../../src/client/index.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { openJournaledStore } from '../../src/store/journal/journaled-notebooks.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { Relay } from '../support/client-relay.js'
import { describeEachStore } from '../support/each-store.js'
import { TEST_EPOCH } from '../support/helpers.js'

/** Listens on 127.0.0.1 (port 0 unless given), closed when the test ends; answers its URL. */
async function serve(t: TestContext, app: FastifyInstance, port = 0): Promise<string> {
  await app.listen({ port, host: '127.0.0.1' })
  t.after(() => closeNow(app))
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

/**
 * Closes an app without the keep-alive grace a shutdown gives clients (the client's idle
 * connections would hold each test for the keep-alive timeout).
 */
async function closeNow(app: FastifyInstance): Promise<void> {
  const closing = app.close()
  app.server.closeAllConnections()
  await closing
}

/** An app on a memory store with the shipped defaults but `config`. */
function memoryApp(config: Partial<Config> = {}, options: Partial<AppOptions> = {}) {
  const settings = { ...DEFAULT_CONFIG, ...config }
  const store = new MemoryNoteStore({
    maxNotes: settings.maxNotes,
    maxBytes: settings.maxStoreBytes,
    epoch: TEST_EPOCH,
  })
  return { app: buildApp({ store, config: settings, ...options }), store }
}

interface Sent {
  method: string
  url: string
  headers: Headers
}

/** A fetch that records what the client sends (and the answers' headers) before sending it. */
function recordingFetch(): { fetch: typeof fetch; sent: Sent[]; answers: Headers[] } {
  const sent: Sent[] = []
  const answers: Headers[] = []
  return {
    sent,
    answers,
    fetch: async (input, init) => {
      sent.push({
        method: init?.method ?? 'GET',
        url: String(input),
        headers: new Headers(init?.headers),
      })
      const response = await fetch(input, init)
      answers.push(response.headers)
      return response
    },
  }
}

/** Fast retries, so that a test waits what the service asks and no more. */
const QUICK: Pick<NotesClientOptions, 'retries'> = { retries: { limit: 3, maxDelayMs: 3_000 } }

/** Takes `count` events of a feed. */
async function take(feed: AsyncIterator<ChangeEvent>, count: number): Promise<ChangeEvent[]> {
  const events: ChangeEvent[] = []
  while (events.length < count) {
    const { done, value } = await feed.next()
    if (done === true) throw new Error(`the feed ended after ${events.length} events`)
    events.push(value)
  }
  return events
}

/** An HS256 JWT for `sub`, valid for an hour. */
function userToken(secret: string, sub: string): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub, exp: Math.floor(Date.now() / 1000) + 3600 })}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

/** Waits until `check()` holds, for at most 5 s. */
async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!check()) {
    assert.ok(Date.now() < deadline, `never: ${what}`)
    await sleep(10)
  }
}

describeEachStore(
  'NotesClient',
  (suite) => {
    async function client(t: TestContext, options: Partial<NotesClientOptions> = {}) {
      const { app } = suite.buildApp()
      const baseUrl = await serve(t, app)
      return { baseUrl, client: new NotesClient({ baseUrl, ...QUICK, ...options }) }
    }

    it('creates, gets, lists, updates and deletes, with ETags and versions', async (t) => {
      const { client: notes } = await client(t)
      const created = await notes.create({ title: 'Buy bread', id: 'ignored' })
      assert.equal(typeof created.note.id, 'number')
      assert.deepEqual(created.note, { title: 'Buy bread', id: created.note.id })
      assert.match(created.etag ?? '', /^"[^"]+"$/)
      assert.equal(created.replayed, false)
      const id = created.note.id

      assert.deepEqual(await notes.get(id), {
        note: created.note,
        etag: created.etag,
        replayed: false,
      })
      const list = await notes.list()
      assert.deepEqual(list.notes, [created.note])
      assert.equal(list.total, 1)
      assert.match(list.version ?? '', /^\S+$/)

      const updated = await notes.update(id, { done: true })
      assert.deepEqual(updated.note, { title: 'Buy bread', id, done: true })
      assert.notEqual(updated.etag, created.etag)
      assert.equal(notes.etagOf(id), updated.etag)
      const merged = await notes.update(id, { done: null }, { mergePatch: true })
      assert.deepEqual(merged.note, { title: 'Buy bread', id })

      assert.equal(await notes.delete(id), String(id))
      assert.equal(await notes.get(id), undefined)
      const after = await notes.list()
      assert.deepEqual(after.notes, [])
      assert.notEqual(after.version, list.version)
    })

    it('answers undefined for a missing note, and throws NoteNotFoundError on its writes', async (t) => {
      const { client: notes } = await client(t)
      assert.equal(await notes.get(12345), undefined)
      await assert.rejects(notes.update(12345, { a: 1 }), (err: unknown) => {
        assert.ok(err instanceof NoteNotFoundError)
        assert.ok(err instanceof NotesProblem)
        assert.equal(err.status, 404)
        assert.equal(err.title, 'Not Found')
        return true
      })
      await assert.rejects(notes.delete(12345), NoteNotFoundError)
    })

    it('throws the service problems as NotesProblem with status, title, detail, type', async (t) => {
      const { client: notes } = await client(t)
      await assert.rejects(notes.list({ q: '' }), (err: unknown) => {
        assert.ok(err instanceof NotesProblem)
        assert.equal(err.status, 400)
        assert.equal(err.title, 'Bad Request')
        assert.equal(err.type, 'about:blank')
        assert.match(err.detail, /\bq\b/)
        assert.equal(err.headers.get('content-type'), 'application/problem+json')
        return true
      })
    })

    it('walks pages following Link: rel=next, in either order and with q', async (t) => {
      const { client: notes } = await client(t)
      const ids: number[] = []
      for (const title of ['a1', 'b2', 'a3', 'b4', 'a5'])
        ids.push((await notes.create({ title })).note.id)
      const walk = async (options: Parameters<NotesClient['pages']>[0]) => {
        const pages: number[][] = []
        for await (const page of notes.pages(options)) {
          pages.push(page.notes.map((note) => note.id))
          assert.equal(page.next === undefined, pages.flat().length === page.total)
        }
        return pages
      }
      assert.deepEqual(await walk({ limit: 2 }), [ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)])
      assert.deepEqual(await walk({ limit: 2, order: 'desc' }), [
        [ids[4], ids[3]],
        [ids[2], ids[1]],
        [ids[0]],
      ])
      assert.deepEqual(await walk({ limit: 2, q: 'A' }), [[ids[0], ids[2]], [ids[4]]])
      assert.deepEqual(
        (await notes.list({ order: 'desc', q: 'b' })).notes.map((n) => n.id),
        [ids[3], ids[1]],
      )
    })

    it('replaces a note whole with PUT under the If-Match last seen: a merged note after a conflict', async (t) => {
      const recorded = recordingFetch()
      const { baseUrl, client: mine } = await client(t, { fetch: recorded.fetch })
      const theirs = new NotesClient({ baseUrl })
      const base = (await mine.create({ title: 'Plan', body: 'the cat sat', old: 1 })).note
      const seen = mine.etagOf(base.id)
      const edited = { title: 'Plan', body: 'the black cat sat' }
      const changed = await theirs.update(base.id, { body: 'the cat sat down' })
      await assert.rejects(mine.replace(base.id, edited), ConflictError)
      const current = (await mine.get(base.id))?.note ?? {}
      const { merged, conflicts } = mergeNotes(base, { ...edited, id: base.id }, current)
      assert.deepEqual(conflicts, [])
      const sent = await mine.replace(base.id, merged)
      assert.deepEqual(sent.note, { title: 'Plan', body: 'the black cat sat down', id: base.id })
      assert.equal(mine.etagOf(base.id), sent.etag)
      assert.deepEqual(
        recorded.sent.filter((s) => s.method === 'PUT').map((s) => s.headers.get('if-match')),
        [seen, changed.etag],
      )
      await assert.rejects(mine.replace(12345, {}), NoteNotFoundError)
    })

    it('sends the ETag it last saw as If-Match, and throws ConflictError after a change elsewhere', async (t) => {
      const recorded = recordingFetch()
      const { baseUrl, client: mine } = await client(t, { fetch: recorded.fetch })
      const theirs = new NotesClient({ baseUrl })
      const { note } = await theirs.create({ body: 'draft 1' })
      const seen = await mine.get(note.id)
      const changed = await theirs.update(note.id, { body: 'theirs' })
      await assert.rejects(mine.update(note.id, { body: 'mine' }), (err: unknown) => {
        assert.ok(err instanceof ConflictError)
        assert.equal(err.status, 412)
        assert.equal(err.currentEtag, changed.etag)
        return true
      })
      const patch = recorded.sent.find((s) => s.method === 'PATCH')
      assert.equal(patch?.headers.get('if-match'), seen?.etag)
      await assert.rejects(mine.delete(note.id), ConflictError)
      // Told otherwise: '*' matches any existing note; false sends no If-Match.
      const forced = await mine.update(note.id, { body: 'mine' }, { ifMatch: '*' })
      assert.equal(forced.note.body, 'mine')
      // Theirs saw the ETag of its own write, which mine has since replaced: a conflict for it too.
      await assert.rejects(theirs.update(note.id, { body: 'theirs again' }), ConflictError)
      await theirs.update(note.id, { body: 'theirs again' }, { ifMatch: '*' })
      assert.equal(
        (await mine.update(note.id, { body: 'mine again' }, { ifMatch: false })).note.body,
        'mine again',
      )
      const last = recorded.sent.at(-1)
      assert.equal(last?.headers.get('if-match'), null)
      assert.deepEqual(
        recorded.sent.map((s) => [s.method, s.headers.get('if-match')]),
        [
          ['GET', null],
          ['PATCH', seen?.etag],
          ['DELETE', seen?.etag],
          ['PATCH', '*'],
          ['PATCH', null],
        ],
      )
    })

    it('sends an Idempotency-Key with every create: a repeat is answered again, not applied', async (t) => {
      const recorded = recordingFetch()
      const { client: notes } = await client(t, { fetch: recorded.fetch })
      const first = await notes.create({ title: 'Pay rent' }, { idempotencyKey: 'order-42' })
      const again = await notes.create({ title: 'Pay rent' }, { idempotencyKey: 'order-42' })
      assert.deepEqual(again, { ...first, replayed: true })
      await notes.create({ title: 'Other' })
      const keys = recorded.sent.map((s) => s.headers.get('idempotency-key') ?? '')
      assert.equal(keys[0], 'order-42')
      assert.match(
        keys[2] ?? '',
        /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      )
      assert.equal((await notes.list()).total, 2)
    })

    it('follows the change feed from a list version, in order', async (t) => {
      const { client: notes } = await client(t)
      const { version } = await notes.list()
      const feed = notes.events({ since: version })
      t.after(() => feed.return())
      const { note } = await notes.create({ title: 'x' })
      await notes.update(note.id, { title: 'y' })
      await notes.delete(note.id)
      const events = await take(feed, 3)
      assert.deepEqual(
        events.map(({ version: _, ...rest }) => rest),
        [
          { type: 'created', note: { title: 'x', id: note.id } },
          { type: 'updated', note: { title: 'y', id: note.id } },
          { type: 'deleted', id: note.id },
        ],
      )
      assert.equal(feed.lastEventId, events[2]?.version)
      assert.equal((await notes.list()).version, events[2]?.version)
    })

    it('sends a batch once, adding If-Match from what it saw', async (t) => {
      const recorded = recordingFetch()
      const { client: notes } = await client(t, { fetch: recorded.fetch })
      const { note, etag } = await notes.create({ title: 'a' })
      const probe = await fetch(new URL('/api/batch', recorded.sent[0]?.url), { method: 'POST' })
      await probe.body?.cancel()
      if (probe.status === 404) {
        t.skip('POST /api/batch is not in this build yet')
        return
      }
      const result = await notes.batch([
        { method: 'POST', url: '/api/note', body: { title: 'b' } },
        { method: 'PATCH', url: `/api/note/${note.id}`, body: { title: 'a2' } },
      ])
      assert.equal(result.replayed, false)
      assert.deepEqual(
        result.answers.map((a) => a.status),
        [200, 200],
      )
      const batchSent = recorded.sent.at(-1)
      assert.match(batchSent?.headers.get('idempotency-key') ?? '', /^[0-9a-f-]{36}$/)
      const patchAnswer = result.answers[1]
      assert.deepEqual(patchAnswer?.body, { data: { title: 'a2', id: note.id } })
      assert.equal(notes.etagOf(note.id), patchAnswer?.headers.etag)
      assert.notEqual(notes.etagOf(note.id), etag)
      // The If-Match was the ETag of the create: a stale one now, so the same batch fails whole.
      await assert.rejects(
        notes.batch([
          { method: 'DELETE', url: `/api/note/${note.id}`, headers: { 'if-match': etag ?? '' } },
        ]),
        (err: unknown) =>
          err instanceof NotesProblem && err.status === 412 && /requests\[0\]/.test(err.detail),
      )
      assert.equal((await notes.list()).total, 2)
    })
  },
  { lanes: false, notebook: false },
)

describe('NotesClient over a connection that fails', () => {
  it('retries a create whose answer was lost, and exactly one note exists', async (t) => {
    const { app } = memoryApp()
    const base = await serve(t, app)
    const relay = await Relay.start(Number(new URL(base).port))
    t.after(() => relay.close())
    relay.plan.push('lose-answer')
    const recorded = recordingFetch()
    const notes = new NotesClient({ baseUrl: relay.url, fetch: recorded.fetch, ...QUICK })
    const created = await notes.create({ title: 'once' })
    assert.equal(created.replayed, true)
    assert.equal(recorded.sent.length, 2)
    assert.equal(
      recorded.sent[0]?.headers.get('idempotency-key'),
      recorded.sent[1]?.headers.get('idempotency-key'),
    )
    const list = await new NotesClient({ baseUrl: base }).list()
    assert.deepEqual(list.notes, [created.note])
  })

  it('does not send an unconditional PATCH again after a lost answer', async (t) => {
    const { app } = memoryApp()
    const base = await serve(t, app)
    const direct = new NotesClient({ baseUrl: base })
    const { note } = await direct.create({ n: 1 })
    const relay = await Relay.start(Number(new URL(base).port))
    t.after(() => relay.close())
    relay.plan.push('lose-answer')
    const recorded = recordingFetch()
    const notes = new NotesClient({ baseUrl: relay.url, fetch: recorded.fetch, ...QUICK })
    await assert.rejects(notes.update(note.id, { n: 2 }), NotesNetworkError)
    assert.equal(recorded.sent.length, 1)
    assert.deepEqual((await direct.get(note.id))?.note, { n: 2, id: note.id })
  })

  it('sends a conditional DELETE again after a lost answer, and counts the 404 as done', async (t) => {
    const { app } = memoryApp()
    const base = await serve(t, app)
    const relay = await Relay.start(Number(new URL(base).port))
    t.after(() => relay.close())
    const recorded = recordingFetch()
    const notes = new NotesClient({ baseUrl: relay.url, fetch: recorded.fetch, ...QUICK })
    const { note } = await notes.create({ n: 1 })
    relay.plan.push('lose-answer')
    relay.cutAll()
    assert.equal(await notes.delete(note.id), String(note.id))
    assert.deepEqual(
      recorded.sent.map((s) => [s.method, s.headers.get('if-match') !== null]),
      [
        ['POST', false],
        ['DELETE', true],
        ['DELETE', true],
      ],
    )
    assert.equal((await notes.list()).total, 0)
  })

  it('sends a conditional PATCH again after a lost answer: applied once, then refused as a conflict with itself', async (t) => {
    const { app } = memoryApp()
    const base = await serve(t, app)
    const relay = await Relay.start(Number(new URL(base).port))
    t.after(() => relay.close())
    const notes = new NotesClient({ baseUrl: relay.url, ...QUICK })
    const { note, etag } = await notes.create({ n: 1 })
    relay.plan.push('lose-answer')
    relay.cutAll()
    const refused = await notes.update(note.id, { n: 2 }).then(
      () => assert.fail('the repeat was applied'),
      (err: unknown) => err,
    )
    assert.ok(refused instanceof ConflictError)
    const now = await new NotesClient({ baseUrl: base }).get(note.id)
    assert.deepEqual(now?.note, { n: 2, id: note.id })
    assert.equal(refused.currentEtag, now?.etag)
    assert.notEqual(refused.currentEtag, etag)
  })

  it('waits the Retry-After of a 503 (seconds) before trying again', async (t) => {
    const { app } = memoryApp()
    const base = await serve(t, app)
    const relay = await Relay.start(Number(new URL(base).port))
    t.after(() => relay.close())
    const problem =
      '{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"busy"}'
    relay.plan.push(
      `HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/problem+json\r\nContent-Length: ${problem.length}\r\nConnection: close\r\n\r\n${problem}`,
    )
    const notes = new NotesClient({ baseUrl: relay.url, ...QUICK })
    const started = performance.now()
    const { note } = await notes.create({ title: 'after the wait' })
    const waited = performance.now() - started
    // The lower bound is the check; the upper one only rules out waiting much longer.
    assert.ok(waited >= 990 && waited < 10_000, `waited ${waited} ms for Retry-After: 1`)
    assert.equal(relay.connections, 2)
    assert.deepEqual((await notes.list()).notes, [note])
  })

  it('waits the Retry-After of a 429 (RATE_LIMIT) before trying again', async (t) => {
    // A window long enough for three calls to fall in it on a machine other test files keep busy.
    const { app } = memoryApp({ rateLimit: 2, rateLimitWindowMs: 4_000 })
    const baseUrl = await serve(t, app)
    const recorded = recordingFetch()
    const notes = new NotesClient({
      baseUrl,
      fetch: recorded.fetch,
      retries: { limit: 3, maxDelayMs: 5_000 },
    })
    await notes.list()
    await notes.list()
    const started = performance.now()
    await notes.list()
    const waited = performance.now() - started
    const refused = recorded.answers[2]
    const asked = Number(refused?.get('retry-after')) * 1000
    assert.equal(recorded.answers.length, 4)
    assert.ok(asked >= 1_000, `Retry-After ${refused?.get('retry-after')}`)
    assert.ok(waited >= asked - 10 && waited < asked + 5_000, `waited ${waited} ms for ${asked}`)
  })

  it('throws the 503 at once when its Retry-After is longer than maxDelayMs', async (t) => {
    const relay = await Relay.start(1)
    t.after(() => relay.close())
    relay.plan.push(
      'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    )
    const notes = new NotesClient({ baseUrl: relay.url, retries: { maxDelayMs: 1_000 } })
    const started = performance.now()
    await assert.rejects(notes.list(), (err: unknown) => {
      assert.ok(err instanceof NotesProblem)
      assert.equal(err.status, 503)
      assert.equal(err.headers.get('retry-after'), '120')
      return true
    })
    assert.ok(performance.now() - started < 10_000, 'waited for a Retry-After of 120 s')
  })

  it('stops waiting when its signal aborts', async (t) => {
    const relay = await Relay.start(1)
    t.after(() => relay.close())
    relay.plan.push(
      'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    )
    const notes = new NotesClient({ baseUrl: relay.url, retries: { maxDelayMs: 10_000 } })
    const started = performance.now()
    await assert.rejects(notes.list({ signal: AbortSignal.timeout(100) }), { name: 'TimeoutError' })
    assert.ok(performance.now() - started < 3_000, 'waited past the abort')
  })

  it("aborts every call when the client's own signal aborts", async (t) => {
    const relay = await Relay.start(1)
    t.after(() => relay.close())
    relay.plan.push(
      'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
    )
    const controller = new AbortController()
    const notes = new NotesClient({ baseUrl: relay.url, signal: controller.signal })
    const pending = notes.create({ a: 1 })
    await until(() => relay.connections === 1, 'the create was sent')
    controller.abort(new Error('client closed'))
    await assert.rejects(pending, { message: 'client closed' })
    await assert.rejects(notes.list(), { message: 'client closed' })
  })

  it('gives up on a service that cannot be reached after the retries, as NotesNetworkError', async () => {
    const relay = await Relay.start(1)
    const url = relay.url
    await relay.close()
    const notes = new NotesClient({ baseUrl: url, retries: { limit: 2, maxDelayMs: 50 } })
    await assert.rejects(notes.get(1), (err: unknown) => {
      assert.ok(err instanceof NotesNetworkError)
      assert.match(err.message, /after 3 tries/)
      return true
    })
  })
})

describe('NotesClient.events', () => {
  it('resumes across cuts and a restart of the service, with no gap and no duplicate', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'notes-client-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const path = join(dir, 'notes.journal')
    const open = () =>
      openJournaledStore({ path, maxNotes: 1_000, maxBytes: 1 << 20, historyLimit: 1_000 })
    const store = open()
    const first = buildApp({ store, config: DEFAULT_CONFIG })
    const base = await serve(t, first)
    const port = Number(new URL(base).port)
    const relay = await Relay.start(port)
    t.after(() => relay.close())
    const writer = new NotesClient({ baseUrl: base, ...QUICK })
    const reader = new NotesClient({ baseUrl: relay.url, retries: { maxDelayMs: 200 } })
    const feed = reader.events({ since: (await writer.list()).version })
    t.after(() => feed.return())

    const created: number[] = []
    const write = async (count: number) => {
      for (let i = 0; i < count; i++)
        created.push((await writer.create({ n: created.length })).note.id)
    }
    await write(3)
    const seen = await take(feed, 2)
    relay.cutAll()
    await write(3)
    seen.push(...(await take(feed, 3)))
    await closeNow(first)
    await store.close()
    const again = open()
    t.after(() => again.close())
    await serve(t, buildApp({ store: again, config: DEFAULT_CONFIG }), port)
    await write(3)
    relay.cutAll()
    await write(1)
    seen.push(...(await take(feed, 5)))
    assert.deepEqual(
      seen.map((event) => (event.type === 'created' ? event.note.id : event.type)),
      created,
    )
    assert.equal(new Set(seen.map((event) => event.version)).size, 10)
    assert.equal(feed.lastEventId, (await writer.list()).version)
  })

  it('yields a reset when the history no longer reaches back', async (t) => {
    const settings = { ...DEFAULT_CONFIG }
    const store = new MemoryNoteStore({
      maxNotes: 100,
      maxBytes: 1 << 20,
      historyLimit: 2,
      epoch: TEST_EPOCH,
    })
    const baseUrl = await serve(t, buildApp({ store, config: settings }))
    const notes = new NotesClient({ baseUrl })
    const { version } = await notes.list()
    for (let i = 0; i < 4; i++) await notes.create({ i })
    const feed = notes.events({ since: version })
    t.after(() => feed.return())
    const current = (await notes.list()).version
    assert.deepEqual(await take(feed, 1), [{ type: 'reset', version: current }])
  })

  it('ends, closing its connection, on return() while a next() waits, and when its signal aborts', async (t) => {
    const { app } = memoryApp()
    const base = await serve(t, app)
    const relay = await Relay.start(Number(new URL(base).port))
    t.after(() => relay.close())
    const notes = new NotesClient({ baseUrl: relay.url })
    const feed = notes.events()
    const waiting = feed.next()
    await until(() => relay.open === 1, 'the feed connected')
    await feed.return()
    assert.deepEqual(await waiting, { done: true, value: undefined })
    await until(() => relay.open === 0, 'the feed closed its connection')

    const controller = new AbortController()
    const seen: ChangeEvent[] = []
    const following = (async () => {
      for await (const event of notes.events({ signal: controller.signal })) seen.push(event)
    })()
    await until(() => relay.open === 1, 'the second feed connected')
    await new NotesClient({ baseUrl: base }).create({ a: 1 })
    await until(() => seen.length === 1, 'the change arrived')
    controller.abort()
    await following
    await until(() => relay.open === 0, 'the second feed closed its connection')
  })

  it('ends with the problem when the feed refuses the request', async (t) => {
    const { app } = memoryApp({ apiKeys: ['k'] })
    const baseUrl = await serve(t, app)
    const feed = new NotesClient({ baseUrl }).events()
    await assert.rejects(
      feed.next(),
      (err: unknown) => err instanceof NotesProblem && err.status === 401,
    )
  })
})

describe('NotesClient with access keys and user tokens', () => {
  it('sends a service key as a Bearer token, and reads a 401 as a problem without it', async (t) => {
    const { app } = memoryApp({ apiKeys: ['write-key'], apiReadKeys: ['read-key'] })
    const baseUrl = await serve(t, app)
    const { note } = await new NotesClient({ baseUrl, token: 'write-key' }).create({ a: 1 })
    const reader = new NotesClient({ baseUrl, token: 'read-key' })
    assert.deepEqual((await reader.get(note.id))?.note, note)
    await assert.rejects(
      reader.create({ b: 2 }),
      (err: unknown) => err instanceof NotesProblem && err.status === 403,
    )
    await assert.rejects(new NotesClient({ baseUrl }).list(), (err: unknown) => {
      assert.ok(err instanceof NotesProblem)
      assert.equal(err.status, 401)
      assert.equal(err.headers.get('www-authenticate'), 'Bearer')
      return true
    })
  })

  it("acts in each user's own notebook with user tokens, given as a string or a function", async (t) => {
    const secret = randomUUID() + randomUUID()
    const notebooks = new MemoryNotebooks({ maxNotes: 100, maxBytes: 1 << 20 })
    const app = buildApp({
      notebooks,
      userTokens: new UserTokens({ secret }),
      config: DEFAULT_CONFIG,
    })
    const baseUrl = await serve(t, app)
    let calls = 0
    const alice = new NotesClient({
      baseUrl,
      token: async () => {
        calls++
        return userToken(secret, 'alice')
      },
    })
    const bob = new NotesClient({ baseUrl, token: userToken(secret, 'bob') })
    const { note } = await alice.create({ owner: 'alice' })
    assert.deepEqual((await alice.list()).notes, [note])
    assert.deepEqual((await bob.list()).notes, [])
    assert.equal(await bob.get(note.id), undefined)
    assert.equal(calls, 2)
    const feed = alice.events({ since: (await alice.list()).version })
    t.after(() => feed.return())
    await alice.update(note.id, { seen: true })
    assert.deepEqual((await take(feed, 1))[0]?.type, 'updated')
    await assert.rejects(
      new NotesClient({ baseUrl, token: 'not.a.token' }).list(),
      (err: unknown) => err instanceof NotesProblem && err.status === 401 && /JWT/.test(err.detail),
    )
  })
})
