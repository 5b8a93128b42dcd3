import assert from 'node:assert/strict'
import { it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  MemoryReplicaStorage,
  type NoteResult,
  NotesClient,
  type NotesClientOptions,
  Replica,
  type ReplicaEvent,
} from '../../../src/client/index.js'
import type { Config } from '../../../src/config/config.js'
import { NOWHERE, Relay, serve } from '../../support/client-relay.js'
import { describeEachStore } from '../../support/each-store.js'
import type { SuiteContext } from '../../support/helpers.js'

/**
 * The replica against a real service on 127.0.0.1 (through a TCP relay that can cut
 * connections, lose answers, or lead nowhere, as a network that is down would).
 */

const QUICK: Pick<NotesClientOptions, 'retries'> = { retries: { limit: 2, maxDelayMs: 200 } }

interface Setup {
  /** A client straight to the service (another writer). */
  direct: NotesClient
  relay: Relay
  open(storage?: MemoryReplicaStorage, options?: Partial<NotesClientOptions>): Promise<Replica>
}

async function setup(
  t: TestContext,
  suite: SuiteContext,
  config: Partial<Config> = {},
): Promise<Setup> {
  const { app } = suite.buildApp(config)
  const port = await serve(t, app)
  const relay = await Relay.start(port)
  const replicas: Replica[] = []
  t.after(async () => {
    for (const replica of replicas) await replica.stop()
    await relay.close()
  })
  return {
    direct: new NotesClient({ baseUrl: `http://127.0.0.1:${port}`, ...QUICK }),
    relay,
    async open(storage = new MemoryReplicaStorage(), options = {}) {
      const client = new NotesClient({ baseUrl: relay.url, ...QUICK, ...options })
      const replica = await Replica.open({ client, storage, maxDelayMs: 200 })
      replicas.push(replica)
      return replica
    },
  }
}

/** The notes of the local view, as the service lists them. */
function view(replica: Replica): unknown[] {
  return replica.notes().map((entry) => entry.note)
}

async function serviceNotes(direct: NotesClient): Promise<unknown[]> {
  return (await direct.list()).notes
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!check()) {
    assert.ok(Date.now() < deadline, `never: ${what}`)
    await sleep(10)
  }
}

const timeout = (): { signal: AbortSignal } => ({ signal: AbortSignal.timeout(10_000) })

describeEachStore(
  'Replica',
  (suite) => {
    it('takes writes at once, keeps its keys, and sends them when started', async (t) => {
      const { direct, open } = await setup(t, suite)
      await direct.create({ title: 'from the service' })
      const replica = await open()
      const events: ReplicaEvent['type'][] = []
      const unsubscribe = replica.subscribe((event) => events.push(event.type))
      assert.deepEqual(replica.notes(), [])
      const a = await replica.create({ title: 'Milk', id: 5 })
      assert.match(a.key, /^local:/)
      assert.equal(a.id, undefined)
      assert.deepEqual(a.note, { title: 'Milk' })
      assert.equal(a.pending, true)
      const b = await replica.create({ title: 'Bread', tags: ['x'] })
      await replica.update(a.key, { title: 'Oat milk' })
      await replica.update(b.key, { tags: null, more: { a: 1 } }, { mergePatch: true })
      assert.deepEqual(view(replica), [{ title: 'Oat milk' }, { title: 'Bread', more: { a: 1 } }])
      assert.equal(replica.waiting, 4)
      assert.deepEqual(
        replica.search('MILK').map((entry) => entry.key),
        [a.key],
      )
      assert.deepEqual(replica.search('title'), [], 'keys are not searched')
      await assert.rejects(replica.update(a.key, { id: 3 }), TypeError)
      await assert.rejects(replica.update('n:1', { x: 1 }), RangeError)
      assert.ok(events.includes('change') && events.includes('waiting'))

      await replica.sync(timeout())
      assert.equal(replica.waiting, 0)
      assert.equal(replica.online, true)
      assert.ok(events.includes('online'))
      const service = await serviceNotes(direct)
      assert.equal(service.length, 3)
      assert.deepEqual(view(replica), service)
      const after = replica.get(a.key)
      assert.equal(after?.key, a.key, 'a local create keeps its key')
      assert.equal(typeof after?.id, 'number')
      assert.equal(after?.pending, false)
      const first = replica.notes()[0]
      assert.match(first?.key ?? '', /^n:\d+$/)

      await replica.delete(a.key)
      assert.equal(replica.get(a.key), undefined)
      await replica.sync(timeout())
      assert.deepEqual(view(replica), await serviceNotes(direct))
      assert.equal((await serviceNotes(direct)).length, 2)

      // Another writer's change reaches the view through the feed.
      const other = await direct.create({ title: 'elsewhere' })
      await until(() => replica.get(`n:${other.note.id}`) !== undefined, 'the feed brings it')
      unsubscribe()
      await replica.stop()
    })

    it('shows its own writes without flicker while they go and come back', async (t) => {
      const { direct, open } = await setup(t, suite)
      const seeded = await direct.create({ title: 'v1' })
      const replica = await open()
      await replica.sync(timeout())
      const key = `n:${seeded.note.id}`
      const shown: unknown[] = []
      let localKey = ''
      replica.subscribe((event) => {
        if (event.type !== 'change') return
        shown.push(replica.get(key)?.note.title)
        if (localKey !== '') shown.push(replica.get(localKey)?.note.title)
      })
      await replica.update(key, { title: 'v2' })
      await replica.update(key, { title: 'v3' })
      localKey = (await replica.create({ title: 'made here' })).key
      await replica.sync(timeout())
      assert.ok(shown.length > 4)
      const titles = shown.filter((title) => title !== 'made here')
      assert.deepEqual([...new Set(titles)], ['v2', 'v3'], 'v1 never comes back')
      assert.ok(
        shown.slice(shown.indexOf('made here')).every((title) => title !== undefined),
        'the local create never vanishes',
      )
      assert.deepEqual(view(replica), await serviceNotes(direct))
    })

    it('shows a create once while the feed brings it back before its answer', async (t) => {
      const { open } = await setup(t, suite)
      // Answers to POSTs are held until the feed has brought the change back (at most 20 s). The
      // feed may bring it before the answer's head is here, so an event from the moment the POST
      // is sent counts: the create's own events come before it is sent, and nothing else writes.
      let sent = false
      let echoed = (): void => {}
      const echo = new Promise<void>((resolve) => {
        echoed = resolve
      })
      const slow: typeof fetch = async (input, init) => {
        if (init?.method === 'POST') sent = true
        const response = await fetch(input, init)
        if (init?.method === 'POST') {
          await Promise.race([echo, sleep(20_000, undefined, { ref: false })])
        }
        return response
      }
      const replica = await open(new MemoryReplicaStorage(), { fetch: slow })
      await replica.sync(timeout())
      replica.start()
      let most = 0
      let sawEcho = false
      replica.subscribe(() => {
        const shown = replica.notes().filter((entry) => entry.note.title === 'once').length
        most = Math.max(most, shown)
        if (sent && replica.waiting > 0) {
          sawEcho = true
          echoed()
        }
      })
      await replica.create({ title: 'once' })
      await replica.sync(timeout())
      assert.ok(sawEcho, 'the feed brought the note back while its answer was on its way')
      assert.equal(most, 1, 'the create showed once throughout')
      assert.equal(replica.notes().filter((entry) => entry.note.title === 'once').length, 1)
    })

    it('queues while the service cannot be reached, and sends when it can', async (t) => {
      const { direct, relay, open } = await setup(t, suite)
      const target = relay.target
      relay.target = NOWHERE
      const replica = await open()
      replica.start()
      await replica.create({ n: 1 })
      const b = await replica.create({ n: 2 })
      await replica.update(b.key, { n: 3 })
      await sleep(300)
      assert.equal(replica.online, false)
      assert.equal(replica.waiting, 3)
      assert.deepEqual(await serviceNotes(direct), [])
      relay.target = target
      await replica.sync(timeout())
      assert.equal(replica.online, true)
      const service = await serviceNotes(direct)
      assert.deepEqual(
        service.map((note) => (note as { n: number }).n),
        [1, 3],
      )
      assert.deepEqual(view(replica), service)
    })

    it('sends a run of queued writes as one batch, and a refused batch write by write', async (t) => {
      const { direct, open } = await setup(t, suite)
      const paths: string[] = []
      const recording: typeof fetch = (input, init) => {
        paths.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`)
        return fetch(input, init)
      }
      const old = await direct.create({ title: 'old' })
      const replica = await open(undefined, { fetch: recording })
      await replica.sync(timeout())
      await replica.stop()
      await replica.create({ title: 'a' })
      await replica.create({ title: 'b' })
      await replica.update(`n:${old.note.id}`, { title: 'old, edited' })
      paths.length = 0
      await replica.sync(timeout())
      // The update of a note known from the list only (which carries no ETag) reads the note
      // for its ETag first; then the two creates and the update go as one batch.
      assert.deepEqual(
        paths.filter((path) => !path.startsWith('GET') || path.startsWith('GET /api/note/')),
        [`GET /api/note/${old.note.id}`, 'POST /api/batch'],
      )
      assert.deepEqual(view(replica), await serviceNotes(direct))
      await replica.stop()

      // Changed there, the same field differently: the update is merged with the service's
      // version (read when the feed shows the change, or when the batch meets its 412), which
      // leaves nothing to write but a conflict on that field; the create after it is sent.
      await direct.update(old.note.id, { title: 'theirs' }, { ifMatch: false })
      await replica.update(`n:${old.note.id}`, { title: 'mine' })
      await replica.create({ title: 'c' })
      paths.length = 0
      await replica.sync(timeout())
      const writes = paths.filter((path) => !path.startsWith('GET') && path !== 'POST /api/batch')
      assert.deepEqual(writes, ['POST /api/note'])
      assert.equal(replica.conflicts.length, 1)
      assert.equal(replica.conflicts[0]?.theirs?.title, 'theirs')
      assert.equal(replica.conflicts[0]?.mine?.title, 'mine')
      assert.deepEqual(replica.conflicts[0]?.paths, ['/title'])
      const titles = (await serviceNotes(direct)).map((note) => (note as { title: string }).title)
      assert.deepEqual(titles, ['theirs', 'a', 'b', 'c'])
    })

    it('applies a create whose answer was lost once', async (t) => {
      const { direct, relay, open } = await setup(t, suite)
      const replica = await open()
      await replica.sync(timeout())
      relay.plan.push('lose-answer')
      await replica.create({ title: 'once' })
      await replica.sync(timeout())
      const service = await serviceNotes(direct)
      assert.equal(service.length, 1)
      assert.deepEqual(view(replica), service)
    })

    it('sends each write once across a restart in the middle of the outbox', async (t) => {
      const { direct, open } = await setup(t, suite)
      const storage = new MemoryReplicaStorage()
      // Every create reaches the service, and its answer is lost: the replica then stops (a crash)
      // with all three writes still queued.
      let applied = 0
      const losing: typeof fetch = async (input, init) => {
        const response = await fetch(input, init)
        if (init?.method !== 'POST') return response
        await response.arrayBuffer()
        applied++
        throw new TypeError('fetch failed')
      }
      const first = await open(storage, { retries: { limit: 0 }, fetch: losing })
      await first.sync(timeout())
      const seeded = await direct.create({ title: 'seeded' })
      await until(() => first.notes().length === 1, 'the feed brings the seeded note')
      const created = await first.create({ title: 'new' })
      await first.update(`n:${seeded.note.id}`, { title: 'seeded, edited' })
      await first.update(created.key, { title: 'new, edited' })
      await until(() => applied >= 1, 'the create is sent')
      await first.stop()
      assert.equal(first.waiting, 3)

      const second = await open(storage)
      assert.equal(second.waiting, 3)
      assert.deepEqual(view(second), view(first))
      await second.sync(timeout())
      assert.deepEqual(second.conflicts, [])
      const service = await serviceNotes(direct)
      assert.deepEqual(
        service.map((note) => (note as { title: string }).title),
        ['seeded, edited', 'new, edited'],
      )
      assert.deepEqual(view(second), service)
      assert.equal(second.get(created.key)?.note.title, 'new, edited', 'the key survives')
    })

    it('merges what it can, keeps a conflict on the rest, and resolves it each of three ways', async (t) => {
      const { direct, open } = await setup(t, suite)
      const replica = await open()
      const made: NoteResult[] = []
      for (const title of ['mine', 'theirs', 'merged', 'deleted']) {
        made.push(await direct.create({ title, body: 'v1' }))
      }
      await replica.sync(timeout())
      await replica.stop()
      const key = (i: number) => `n:${made[i]?.note.id}`
      for (const [i, result] of made.slice(0, 3).entries()) {
        await direct.update(result.note.id, { body: 'their edit' }, { ifMatch: false })
        await replica.update(key(i), { body: 'my edit', extra: true })
      }
      await direct.delete(made[3]?.note.id as number, { ifMatch: false })
      await replica.update(key(3), { body: 'my edit' })
      const conflicts: string[] = []
      replica.subscribe((event) => {
        if (event.type === 'conflict') conflicts.push(event.type)
      })
      await replica.sync(timeout())
      assert.ok(conflicts.length > 0)
      assert.equal(replica.waiting, 0)
      const byEntry = new Map(replica.conflicts.map((conflict) => [conflict.entry, conflict]))
      assert.equal(byEntry.size, 4)
      const first = byEntry.get(key(0))
      assert.equal(first?.status, 412)
      // Both changed the body's one word: that is the conflict. My new field was merged, and is
      // on the service already.
      assert.deepEqual(first?.paths, ['/body'])
      assert.deepEqual(first?.mine, {
        title: 'mine',
        body: 'my edit',
        id: made[0]?.note.id,
        extra: true,
      })
      assert.deepEqual(first?.theirs, {
        title: 'mine',
        body: 'their edit',
        id: made[0]?.note.id,
        extra: true,
      })
      const gone = byEntry.get(key(3))
      assert.equal(gone?.status, 404)
      assert.equal(gone?.theirs, null)
      assert.deepEqual(gone?.paths, [''])
      // The view keeps my version until resolved; writes to it wait (folded into the conflict).
      assert.equal(replica.get(key(0))?.note.body, 'my edit')
      assert.equal(replica.get(key(0))?.pending, true)
      await replica.update(key(0), { later: 1 })
      assert.equal(replica.conflicts.find((c) => c.entry === key(0))?.mine?.later, 1)
      assert.equal(replica.waiting, 0)

      await replica.resolve(first?.key as string, 'mine')
      await replica.resolve(byEntry.get(key(1))?.key as string, 'theirs')
      await replica.resolve(byEntry.get(key(2))?.key as string, {
        note: { title: 'merged', body: 'their edit + my edit' },
      })
      await replica.resolve(gone?.key as string, 'mine')
      await assert.rejects(replica.resolve('c:nothing', 'mine'), RangeError)
      await replica.sync(timeout())
      assert.deepEqual(replica.conflicts, [])
      const service = (await serviceNotes(direct)) as Record<string, unknown>[]
      assert.deepEqual(view(replica), service)
      assert.deepEqual(
        service.map(({ id: _, ...fields }) => fields),
        [
          { title: 'mine', body: 'my edit', extra: true, later: 1 },
          { title: 'theirs', body: 'their edit', extra: true },
          { title: 'merged', body: 'their edit + my edit' },
          { title: 'deleted', body: 'my edit' },
        ],
      )
      assert.equal(replica.get(key(3))?.note.title, 'deleted', 're-created under the same key')
    })

    it('reloads on a reset without losing the outbox', async (t) => {
      const { direct, open } = await setup(t, suite, { changeHistory: 2 })
      const storage = new MemoryReplicaStorage()
      const first = await open(storage)
      const kept = await direct.create({ title: 'kept' })
      const doomed = await direct.create({ title: 'doomed' })
      await first.sync(timeout())
      await first.stop()
      await first.update(`n:${kept.note.id}`, { title: 'kept, edited offline' })
      await first.create({ title: 'offline create' })
      for (let i = 0; i < 4; i++) await direct.create({ title: `more ${i}` })
      await direct.delete(doomed.note.id, { ifMatch: false })
      const second = await open(storage)
      const events: string[] = []
      second.subscribe((event) => events.push(event.type))
      await second.sync(timeout())
      assert.ok(events.includes('reset'))
      const service = await serviceNotes(direct)
      assert.equal(service.length, 6)
      assert.deepEqual(view(second), service)
      assert.ok(
        service.some((note) => (note as { title: string }).title === 'kept, edited offline'),
      )
      assert.ok(service.some((note) => (note as { title: string }).title === 'offline create'))
    })

    it('stops and closes: no timers, later calls refused, sync aborts', async (t) => {
      const { relay, open } = await setup(t, suite)
      relay.target = NOWHERE
      const replica = await open()
      await replica.create({ x: 1 })
      const controller = new AbortController()
      const syncing = replica.sync({ signal: controller.signal })
      await sleep(50)
      controller.abort(new Error('gave up'))
      await assert.rejects(syncing, /gave up/)
      await replica.close()
      await assert.rejects(replica.create({ y: 1 }), /closed/)
    })
  },
  { lanes: false, notebook: false },
)
