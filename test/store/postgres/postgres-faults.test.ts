import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { StoreUnavailableError } from '../../../src/store/types.js'
import { type ServerProcess, startServer } from '../../hostile/server-process.js'
import { PostgresCluster, postgresAvailable } from '../../support/postgres-cluster.js'

interface Acknowledged {
  id: number
  body: string
}

/**
 * POSTs from `loops` concurrent clients until `until()` is true; the notes answered 200 (also
 * pushed to `acknowledged` as they come), and every status seen.
 */
async function writeLoad(
  port: () => number,
  loops: number,
  until: () => boolean,
  acknowledged: Acknowledged[] = [],
): Promise<{
  acknowledged: Acknowledged[]
  answers: { status: number; retryAfter: string | null; type: string | null; body: string }[]
}> {
  const answers: {
    status: number
    retryAfter: string | null
    type: string | null
    body: string
  }[] = []
  let n = 0
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (!until()) {
        const sent = n++
        try {
          const response = await fetch(`http://127.0.0.1:${port()}/api/note`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ sent }),
          })
          const body = await response.text()
          answers.push({
            status: response.status,
            retryAfter: response.headers.get('retry-after'),
            type: response.headers.get('content-type'),
            body,
          })
          if (response.status === 200) {
            const { data } = JSON.parse(body) as { data: { id: number } }
            acknowledged.push({ id: data.id, body: JSON.stringify(data) })
          } else {
            await sleep(20)
          }
        } catch {
          // The instance is gone (kill -9): nothing was acknowledged for this request.
          await sleep(20)
        }
      }
    }),
  )
  return { acknowledged, answers }
}

async function listOf(port: number): Promise<Map<number, string>> {
  const response = await fetch(`http://127.0.0.1:${port}/api/note`)
  assert.equal(response.status, 200)
  const { data } = (await response.json()) as { data: { id: number }[] }
  return new Map(data.map((note) => [note.id, JSON.stringify(note)]))
}

/** PostgreSQL: what survives, and what clients see, when an instance or the database fails. */
if (postgresAvailable('PostgreSQL fault tests')) {
  describe('PostgreSQL faults', () => {
    let cluster: PostgresCluster
    before(async () => {
      cluster = await PostgresCluster.start()
    })
    after(async () => {
      await cluster.destroy()
    })

    it('keeps every acknowledged note when an instance is killed with SIGKILL under write load', async () => {
      const url = await cluster.createDatabase()
      const [victim, survivor] = (await Promise.all(
        [0, 1].map(() => startServer({ env: { DATABASE_URL: url } })),
      )) as [ServerProcess, ServerProcess]
      try {
        let killed = false
        const soFar: Acknowledged[] = []
        const load = writeLoad(
          () => victim.port,
          8,
          () => killed,
          soFar,
        )
        // The kill comes under load, once writes are being acknowledged: 400 ms, or longer on a
        // machine busy enough that none was yet (at most 20 s).
        await sleep(400)
        for (let waited = 0; soFar.length < 10 && waited < 20_000; waited += 50) {
          await sleep(50)
        }
        victim.child.kill('SIGKILL')
        await victim.exited
        killed = true
        const { acknowledged } = await load
        assert.ok(acknowledged.length > 0, 'some notes were acknowledged before the kill')
        const stored = await listOf(survivor.port)
        for (const note of acknowledged) assert.equal(stored.get(note.id), note.body)
      } finally {
        await Promise.all([victim.stop(), survivor.stop()])
      }
    })

    it('refuses to start, in one line without the password, when the database stays unreachable', async () => {
      const started = Date.now()
      await assert.rejects(
        startServer({
          env: {
            DATABASE_URL: 'postgres://notes:secret-pw@127.0.0.1:9/notes',
            DATABASE_CONNECT_TIMEOUT_MS: '600',
            DATABASE_CONNECT_RETRY_MS: '100',
          },
        }),
        (err: Error) => {
          assert.match(err.message, /the server exited \(1\) before listening/)
          assert.match(
            err.message,
            /notes-service: cannot open the database postgres:\/\/notes:\*\*\*@127\.0\.0\.1:9\/notes: gave up after \d+(\.\d)? s \(DATABASE_CONNECT_TIMEOUT_MS=600\): connection refused at 127\.0\.0\.1:9\n/,
          )
          assert.doesNotMatch(err.message, /secret-pw/)
          return true
        },
      )
      assert.ok(Date.now() - started < 10_000, 'start-up gave up within its bound')
    })

    it('waits at start-up for a database that comes up, then serves', async () => {
      const url = await cluster.createDatabase()
      await cluster.stopServer('fast')
      const starting = startServer({
        env: {
          DATABASE_URL: url,
          DATABASE_CONNECT_TIMEOUT_MS: '20000',
          DATABASE_CONNECT_RETRY_MS: '100',
        },
        timeoutMs: 25_000,
      })
      await sleep(800)
      await cluster.startServer()
      const instance = await starting
      try {
        const response = await fetch(`http://127.0.0.1:${instance.port}/readyz`)
        assert.equal(response.status, 200)
        assert.ok(
          instance.logs.some((line) => line.msg === 'opening the PostgreSQL store'),
          'it said it was opening the store',
        )
      } finally {
        await instance.stop()
      }
    })

    it('answers every write of one note with a 503 in time when the database stops answering', async () => {
      // PATCHes of one note wait for each other in an instance; behind a write that hangs, the
      // wait must end at the statement timeout, not one timeout per write ahead of it.
      const store = new PostgresNoteStore({
        url: await cluster.createDatabase(),
        maxNotes: 100,
        maxBytes: 1 << 20,
        statementTimeoutMs: 300,
        poolSize: 4,
      })
      try {
        const { json } = await store.create({ hot: true })
        const { id } = JSON.parse(json) as { id: number }
        await store.get(id) // both pipelined read connections open
        await store.get(id)
        const thaw = await cluster.freeze()
        let outcomes: { ms: number; unavailable: boolean }[]
        try {
          // Reads too, each on a connection made anew after the last one timed out: pg's connect
          // timeout ('timeout expired') was once answered 500.
          for (let i = 0; i < 3; i++) await assert.rejects(store.get(id), StoreUnavailableError)
          const started = performance.now()
          outcomes = await Promise.all(
            [1, 2, 3, 4, 5, 6].map(async (n) => {
              try {
                await store.update(id, { n })
                return { ms: performance.now() - started, unavailable: false }
              } catch (err) {
                return {
                  ms: performance.now() - started,
                  unavailable: err instanceof StoreUnavailableError,
                }
              }
            }),
          )
        } finally {
          thaw()
        }
        assert.ok(
          outcomes.every((o) => o.unavailable),
          JSON.stringify(outcomes),
        )
        // The first write ends at the client's timeout (statement timeout + 1 s, as the server
        // cannot run its own), about 1.3 s; the five behind it at the statement timeout. Six in
        // turn would take six times as long, 7.8 s: 5 s leaves room for a busy machine.
        const slowest = Math.max(...outcomes.map((o) => o.ms))
        assert.ok(slowest < 5000, `the last 503 came after ${slowest.toFixed(0)} ms`)
        assert.deepEqual(JSON.parse((await store.get(id))?.json ?? '{}'), { hot: true, id })
      } finally {
        await store.close()
      }
    })

    it('answers 503 with Retry-After while PostgreSQL restarts under load, recovers by itself, and loses nothing acknowledged', async () => {
      const url = await cluster.createDatabase()
      const instance = await startServer({ env: { DATABASE_URL: url } })
      try {
        let done = false
        const load = writeLoad(
          () => instance.port,
          4,
          () => done,
        )
        await sleep(300)
        await cluster.stopServer('immediate')
        await sleep(200)
        const down = await fetch(`http://127.0.0.1:${instance.port}/readyz`)
        assert.equal(down.status, 503)
        assert.equal(down.headers.get('content-type'), 'application/problem+json')
        const health = await fetch(`http://127.0.0.1:${instance.port}/healthz`)
        assert.equal(health.status, 200)
        await sleep(500)
        const restartedAt = Date.now()
        await cluster.startServer()
        let recoveredAt = 0
        while (recoveredAt === 0 && Date.now() - restartedAt < 15_000) {
          const response = await fetch(`http://127.0.0.1:${instance.port}/api/note?limit=1`)
          await response.arrayBuffer()
          if (response.status === 200) recoveredAt = Date.now()
          else await sleep(50)
        }
        assert.ok(recoveredAt > 0, 'the service answered 200 again within 15 s')
        await sleep(300)
        done = true
        const { acknowledged, answers } = await load
        const unavailable = answers.filter((a) => a.status === 503)
        assert.ok(unavailable.length > 0, 'writes got 503 while the database was down')
        assert.deepEqual(
          answers.filter((a) => a.status !== 200 && a.status !== 503),
          [],
        )
        for (const answer of unavailable) {
          assert.equal(answer.retryAfter, '1')
          assert.equal(answer.type, 'application/problem+json')
          assert.deepEqual(JSON.parse(answer.body), {
            type: 'about:blank',
            title: 'Service Unavailable',
            status: 503,
            detail: 'The database cannot be reached right now. Retry in 1 s.',
          })
        }
        assert.ok(answers.at(-1)?.status === 200, 'the last writes succeeded')
        const stored = await listOf(instance.port)
        for (const note of acknowledged) assert.equal(stored.get(note.id), note.body)
        process.stderr.write(
          `# PostgreSQL restart: ${acknowledged.length} notes acknowledged, ${unavailable.length} answers 503, 200 again ${recoveredAt - restartedAt} ms after pg_ctl start returned\n`,
        )
      } finally {
        await instance.stop()
      }
    })
  })
}
