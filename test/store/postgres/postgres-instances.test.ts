import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import type { Change } from '../../../src/store/types.js'
import { type ServerProcess, startServer } from '../../hostile/server-process.js'
import { createTestDatabase, postgresAvailable } from '../../support/postgres-cluster.js'

/** Three instances of the service on one database behave as one service. */
if (postgresAvailable('PostgreSQL multi-instance tests')) {
  describe('three instances on one PostgreSQL database', () => {
    let url: string
    let instances: ServerProcess[] = []
    const base = (i: number) => `http://127.0.0.1:${(instances[i] as ServerProcess).port}`

    before(async () => {
      url = await createTestDatabase()
      instances = await Promise.all(
        [0, 1, 2].map(() => startServer({ env: { DATABASE_URL: url } })),
      )
    })
    after(async () => {
      await Promise.all(instances.map((instance) => instance.stop()))
    })

    const post = async (i: number, body: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${base(i)}/api/note`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      })
      return { status: response.status, headers: response.headers, body: await response.text() }
    }

    it('gives unique time-based ids to concurrent creates spread over the instances', async () => {
      const sentAt = Date.now()
      const answers = await Promise.all(Array.from({ length: 240 }, (_, n) => post(n % 3, { n })))
      const receivedAt = Date.now()
      assert.deepEqual(
        answers.map((a) => a.status),
        answers.map(() => 200),
      )
      const ids = answers.map((a) => (JSON.parse(a.body) as { data: { id: number } }).data.id)
      assert.equal(new Set(ids).size, 240)
      for (const id of ids)
        assert.ok(id >= sentAt, `${id} is not below the creation time ${sentAt}`)
      // Ids run ahead of the clock only by the creates that shared a millisecond.
      assert.ok(Math.max(...ids) <= receivedAt + 240, 'ids stay near the clock')
      const list = await (await fetch(`${base(2)}/api/note`)).json()
      assert.deepEqual(
        (list as { data: { id: number }[] }).data.map((note) => note.id).sort(),
        [...ids].sort(),
      )
    })

    it('serves a note created on one instance at once from the others', async () => {
      for (let n = 0; n < 30; n++) {
        const created = await post(n % 3, { read: n })
        const { id } = (JSON.parse(created.body) as { data: { id: number } }).data
        for (const other of [(n + 1) % 3, (n + 2) % 3]) {
          const response = await fetch(`${base(other)}/api/note/${id}`)
          assert.equal(response.status, 200)
          assert.equal(await response.text(), created.body)
          assert.equal(response.headers.get('etag'), created.headers.get('etag'))
        }
      }
    })

    it('lets exactly one of two PATCHes with the same If-Match win, on two instances', async () => {
      for (let n = 0; n < 15; n++) {
        const created = await post(0, { race: n })
        const { id } = (JSON.parse(created.body) as { data: { id: number } }).data
        const etag = created.headers.get('etag') as string
        const patch = (i: number) =>
          fetch(`${base(i)}/api/note/${id}`, {
            method: 'PATCH',
            headers: { 'content-type': 'application/json', 'if-match': etag },
            body: JSON.stringify({ winner: i }),
          })
        const [a, b] = await Promise.all([patch(1), patch(2)])
        assert.deepEqual([a.status, b.status].sort(), [200, 412])
        const winner = a.status === 200 ? 1 : 2
        const stored = await fetch(`${base(0)}/api/note/${id}`)
        assert.deepEqual(await stored.json(), { data: { race: n, id, winner } })
      }
    })

    it('replays an Idempotency-Key sent to another instance', async () => {
      const first = await post(0, { once: true }, { 'idempotency-key': 'shared-key-1' })
      const again = await post(1, { once: true }, { 'idempotency-key': 'shared-key-1' })
      assert.equal(first.status, 200)
      assert.deepEqual([again.status, again.body], [200, first.body])
      assert.equal(again.headers.get('idempotent-replayed'), 'true')
      const other = await post(2, { once: false }, { 'idempotency-key': 'shared-key-1' })
      assert.equal(other.status, 422)
    })

    it('creates once when the same Idempotency-Key reaches every instance at the same moment', async () => {
      // A repeat that arrives while the first is being applied waits for it. The
      // store's create locks the clock row before it looks the key up, so the repeats wait for
      // the first commit and then replay it.
      const before = (await (await fetch(`${base(0)}/api/note`)).json()) as { data: unknown[] }
      const answers = await Promise.all(
        [0, 1, 2, 0, 1, 2].map((i) =>
          post(i, { race: 'key' }, { 'idempotency-key': 'raced-key-1' }),
        ),
      )
      assert.deepEqual(
        answers.map((a) => a.status),
        [200, 200, 200, 200, 200, 200],
      )
      const firstBody = answers[0]?.body
      assert.ok(answers.every((a) => a.body === firstBody))
      assert.equal(answers.filter((a) => a.headers.get('idempotent-replayed') === null).length, 1)
      const list = (await (await fetch(`${base(2)}/api/note`)).json()) as { data: unknown[] }
      assert.equal(list.data.length, before.data.length + 1)
    })

    it('shows readers on every instance all of a batch or none of it', async () => {
      const batch = (i: number, tag: string, key?: string) =>
        fetch(`${base(i)}/api/batch`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(key === undefined ? {} : { 'idempotency-key': key }),
          },
          body: JSON.stringify({
            requests: Array.from({ length: 10 }, (_, n) => ({
              method: 'POST',
              url: '/api/note',
              body: { tag, n },
            })),
          }),
        })
      let writing = true
      const reads: number[] = []
      const reader = (async () => {
        while (writing) {
          const list = (await (await fetch(`${base(2)}/api/note`)).json()) as {
            data: { tag?: string }[]
          }
          const counts = new Map<string, number>()
          for (const note of list.data) {
            if (note.tag?.startsWith('whole-') === true) {
              counts.set(note.tag, (counts.get(note.tag) ?? 0) + 1)
            }
          }
          for (const [tag, count] of counts) assert.equal(count, 10, `${tag} seen in part`)
          reads.push(counts.size)
        }
      })()
      const writers = [0, 1].map(async (i) => {
        for (let j = 0; j < 15; j++) assert.equal((await batch(i, `whole-${i}-${j}`)).status, 200)
      })
      await Promise.all(writers)
      writing = false
      await reader
      assert.ok(reads.length > 3 && reads.some((n) => n > 0 && n < 30), `reads saw ${reads}`)
      // One key, one batch, whichever instances it reaches at once.
      const answers = await Promise.all([0, 1, 2].map((i) => batch(i, 'keyed', 'batch-key')))
      const bodies = await Promise.all(answers.map((answer) => answer.text()))
      assert.deepEqual(
        answers.map((answer) => answer.status),
        [200, 200, 200],
      )
      assert.equal(new Set(bodies).size, 1)
      const list = (await (await fetch(`${base(0)}/api/note`)).json()) as {
        data: { tag?: string }[]
      }
      assert.equal(list.data.filter((note) => note.tag === 'keyed').length, 10)
    })

    it('holds MAX_NOTES across instances', async () => {
      const capped = await createTestDatabase()
      const small = await Promise.all(
        [0, 1].map(() => startServer({ env: { DATABASE_URL: capped, MAX_NOTES: '10' } })),
      )
      try {
        const statuses = await Promise.all(
          Array.from({ length: 16 }, async (_, n) => {
            const response = await fetch(
              `http://127.0.0.1:${(small[n % 2] as ServerProcess).port}/api/note`,
              { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' },
            )
            await response.arrayBuffer()
            return response.status
          }),
        )
        assert.deepEqual(
          [statuses.filter((s) => s === 200).length, statuses.filter((s) => s === 507).length],
          [10, 6],
        )
      } finally {
        await Promise.all(small.map((instance) => instance.stop()))
      }
    })

    it('tells each subscriber of each instance every change once, in the same order, across a listener reconnect', async () => {
      const stores = [0, 1, 2].map(
        () => new PostgresNoteStore({ url, maxNotes: 1_000_000, maxBytes: 1 << 28, pollMs: 200 }),
      )
      const seen: Change[][] = [[], [], []]
      await Promise.all(stores.map((store) => store.open()))
      const sequenceOf = (token: string) => Number.parseInt(token.split('.')[1] as string, 36)
      const start = sequenceOf(await (stores[0] as PostgresNoteStore).version())
      const stops = stores.map((store, i) => store.subscribe((c) => seen[i]?.push(c)))
      try {
        const write = async (n: number) => {
          const store = stores[n % 3] as PostgresNoteStore
          const note = await store.create({ feed: n })
          const { id } = JSON.parse(note.json) as { id: number }
          if (n % 4 === 0) await store.update(id, { changed: true })
          if (n % 5 === 0) await store.delete(id)
        }
        await Promise.all(Array.from({ length: 30 }, (_, n) => write(n)))
        // Cut every LISTEN connection: the listeners reconnect and catch up from the history.
        await terminateListeners(url)
        await Promise.all(Array.from({ length: 30 }, (_, n) => write(30 + n)))
        const end = sequenceOf(await (stores[0] as PostgresNoteStore).version())
        const deadline = Date.now() + 30_000
        while (seen.some((s) => s.length < end - start) && Date.now() < deadline) await sleep(20)
        const expected = Array.from({ length: end - start }, (_, i) => start + 1 + i)
        for (const changes of seen) {
          assert.deepEqual(
            changes.map((c) => c.sequence),
            expected,
          )
        }
        assert.deepEqual(seen[1], seen[0])
        assert.deepEqual(seen[2], seen[0])
      } finally {
        for (const stop of stops) stop()
        await Promise.all(stores.map((store) => store.close()))
      }
    })
  })
}

/** Cuts the LISTEN connections to the database at `url` (the cluster may serve other tests). */
async function terminateListeners(url: string): Promise<void> {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const listening =
    "FROM pg_stat_activity WHERE query = 'LISTEN notes_changes' AND datname = current_database()"
  try {
    // The three listen once each has connected, which a busy machine may take a while to do.
    for (const giveUpAt = Date.now() + 20_000; Date.now() < giveUpAt; await sleep(20)) {
      const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n ${listening}`)
      if (rows[0]?.n === 3) break
    }
    const { rowCount } = await client.query(`SELECT pg_terminate_backend(pid) ${listening}`)
    assert.equal(rowCount, 3)
  } finally {
    await client.end()
  }
}
