import assert from 'node:assert/strict'
import { type AddressInfo, createServer, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import pg from 'pg'
import { buildApp } from '../../../src/app.js'
import { DEFAULT_CONFIG } from '../../../src/config/config.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { startServer } from '../../hostile/server-process.js'
import { freePort, PostgresCluster, postgresAvailable } from '../../support/postgres-cluster.js'

/** What start-up wrote on stderr before it exited, from startServer's rejection. */
async function startUpFailure(env: Record<string, string>): Promise<string> {
  try {
    const instance = await startServer({ env })
    await instance.stop()
  } catch (err) {
    const message = (err as Error).message
    assert.match(message, /^the server exited \(1\) before listening; stderr: /)
    return message.replace(/^the server exited \(1\) before listening; stderr: /, '')
  }
  assert.fail('the server started')
}

/** Runs `statements` in turn on the database of `url` (the cluster's superuser's). */
async function superuser(url: string, ...statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    for (const statement of statements) await client.query(statement)
  } finally {
    await client.end()
  }
}

/**
 * A database that cannot be reached, or refuses the login: what the log and the start-up line
 * say. They name the cause and where (an operator's first question), never the password, and no
 * setting the user did not set.
 */
if (postgresAvailable('PostgreSQL connection errors')) {
  describe('PostgreSQL connection errors', () => {
    let cluster: PostgresCluster
    before(async () => {
      cluster = await PostgresCluster.start({ durable: false })
      await cluster.addPasswordRole('writer', 'right-pw')
    })
    after(async () => {
      await cluster.destroy()
    })

    it('logs the cause and where of a 503 (connection refused at host:port), and answers without them', async () => {
      const port = await freePort()
      const store = new PostgresNoteStore({
        url: `postgres://postgres:secret-pw@127.0.0.1:${port}/notes`,
        maxNotes: 10,
        maxBytes: 1 << 20,
      })
      const lines: Record<string, unknown>[] = []
      const stream = { write: (line: string) => void lines.push(JSON.parse(line)) }
      const app = buildApp({ store, config: DEFAULT_CONFIG, logger: { level: 'info', stream } })
      try {
        const response = await app.inject('/api/note')
        assert.equal(response.statusCode, 503)
        assert.deepEqual(JSON.parse(response.body), {
          type: 'about:blank',
          title: 'Service Unavailable',
          status: 503,
          detail: 'The database cannot be reached right now. Retry in 1 s.',
        })
        const logged = lines.filter((line) => line.statusCode === 503 && 'condition' in line)
        assert.deepEqual(
          logged.map(({ level, condition, cause, msg }) => ({ level, condition, cause, msg })),
          [
            {
              level: 40,
              condition: '503 StoreUnavailableError',
              cause: `connection refused at 127.0.0.1:${port}`,
              msg: `request answered 503: The database cannot be reached right now. Retry in 1 s. Cause: connection refused at 127.0.0.1:${port}`,
            },
          ],
        )
        assert.doesNotMatch(JSON.stringify(lines), /secret-pw/)
      } finally {
        await app.close()
        await store.close()
      }
    })

    it('refuses to start on a wrong port in one line: how long it tried, the timeout as set, the cause and where', async () => {
      const port = await freePort()
      const line = await startUpFailure({
        DATABASE_URL: `postgres://notes:secret-pw@127.0.0.1:${port}/notes`,
        DATABASE_CONNECT_TIMEOUT_MS: '600',
        DATABASE_CONNECT_RETRY_MS: '100',
      })
      assert.match(
        line,
        new RegExp(
          `^notes-service: cannot open the database postgres://notes:\\*\\*\\*@127\\.0\\.0\\.1:${port}/notes: gave up after \\d+(\\.\\d)? s \\(DATABASE_CONNECT_TIMEOUT_MS=600\\): connection refused at 127\\.0\\.0\\.1:${port}\\n$`,
        ),
      )
      assert.doesNotMatch(line, /secret-pw/)
    })

    it('gives up when DATABASE_CONNECT_TIMEOUT_MS says, on a closed port, and says so', async () => {
      const port = await freePort()
      const started = Date.now()
      const line = await startUpFailure({
        DATABASE_URL: `postgres://notes@127.0.0.1:${port}/notes`,
        DATABASE_CONNECT_TIMEOUT_MS: '2000',
      })
      const elapsed = Date.now() - started
      // Attempts at 0, 0.5, 1 and 1.5 s, then the wait to 2 s (it stopped at 1.5 s, and said so).
      assert.match(
        line,
        new RegExp(
          `^notes-service: cannot open the database postgres://notes@127\\.0\\.0\\.1:${port}/notes: gave up after 2(\\.1)? s \\(DATABASE_CONNECT_TIMEOUT_MS=2000\\): connection refused at 127\\.0\\.0\\.1:${port}\\n$`,
        ),
      )
      assert.ok(elapsed >= 2000, `exited after ${elapsed} ms`)
    })

    it('gives up when DATABASE_CONNECT_TIMEOUT_MS says, on an address that never answers, and says so', async () => {
      // Takes connections and never writes a byte, as a host that stopped responding.
      const held: Socket[] = []
      const silent = createServer((socket) => void held.push(socket))
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
      const { port } = silent.address() as AddressInfo
      try {
        const started = Date.now()
        const line = await startUpFailure({
          DATABASE_URL: `postgres://notes@127.0.0.1:${port}/notes`,
          DATABASE_CONNECT_TIMEOUT_MS: '3000',
        })
        const elapsed = Date.now() - started
        // An attempt bounded at 2 s, 0.5 s of wait, one bounded at the 0.5 s left: 3 s (each
        // bounded at 2 s, it was 4.5 s, and the cause read 'the database closed the connection').
        assert.match(
          line,
          new RegExp(
            `^notes-service: cannot open the database postgres://notes@127\\.0\\.0\\.1:${port}/notes: gave up after 3(\\.1)? s \\(DATABASE_CONNECT_TIMEOUT_MS=3000\\): no answer within the connect timeout at 127\\.0\\.0\\.1:${port}\\n$`,
          ),
        )
        assert.ok(elapsed >= 3000, `exited after ${elapsed} ms`)
        assert.equal(held.length, 2, 'two attempts')
      } finally {
        for (const socket of held) socket.destroy()
        await new Promise((resolve) => silent.close(resolve))
      }
    })

    it('refuses to start on a wrong password at once, saying so, with no setting the user did not set', async () => {
      const started = Date.now()
      const line = await startUpFailure({
        DATABASE_URL: `postgres://writer:wrong-pw@127.0.0.1:${cluster.port}/writer`,
      })
      assert.equal(
        line,
        `notes-service: cannot open the database postgres://writer:***@127.0.0.1:${cluster.port}/writer: password authentication failed for user "writer"\n`,
      )
      // Not a retry until DATABASE_CONNECT_TIMEOUT_MS's default (30 s): a password does not heal.
      assert.ok(Date.now() - started < 10_000, `exited after ${Date.now() - started} ms`)
    })

    it('refuses to start on a database the role does not own, saying what to grant or own, and starts once that is done', async () => {
      await superuser(
        cluster.url(),
        'CREATE ROLE visitor LOGIN',
        'CREATE DATABASE visited OWNER postgres',
        'CREATE DATABASE owned OWNER postgres',
      )
      const advice = (database: string) =>
        `notes-service: cannot open the database postgres://visitor@127.0.0.1:${cluster.port}/${database}: permission denied for database ${database}: the role visitor may not create the service's tables in the database ${database}. As a superuser, either make the role its owner: ALTER DATABASE "${database}" OWNER TO "visitor"; or, connected to ${database}, grant what start-up needs: GRANT CREATE ON DATABASE "${database}" TO "visitor"; GRANT CREATE ON SCHEMA "public" TO "visitor";\n`
      for (const database of ['visited', 'owned']) {
        const url = `postgres://visitor@127.0.0.1:${cluster.port}/${database}`
        assert.equal(await startUpFailure({ DATABASE_URL: url }), advice(database))
      }
      // Each of the two ways the line gives, as it gives them.
      await superuser(cluster.url(), 'ALTER DATABASE "owned" OWNER TO "visitor"')
      await superuser(
        cluster.url('visited'),
        'GRANT CREATE ON DATABASE "visited" TO "visitor"',
        'GRANT CREATE ON SCHEMA "public" TO "visitor"',
      )
      for (const database of ['visited', 'owned']) {
        const instance = await startServer({
          env: { DATABASE_URL: `postgres://visitor@127.0.0.1:${cluster.port}/${database}` },
        })
        try {
          const response = await fetch(`http://127.0.0.1:${instance.port}/readyz`)
          assert.equal(response.status, 200, database)
        } finally {
          await instance.stop()
        }
      }
    })

    it('opens with the right password (the role is reachable: the wrong one is what failed)', async () => {
      const instance = await startServer({
        env: { DATABASE_URL: `postgres://writer:right-pw@127.0.0.1:${cluster.port}/writer` },
      })
      try {
        const response = await fetch(`http://127.0.0.1:${instance.port}/readyz`)
        assert.equal(response.status, 200)
      } finally {
        await instance.stop()
      }
    })
  })
}
