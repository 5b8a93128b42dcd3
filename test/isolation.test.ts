import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { ISOLATION_SECRET, ISOLATION_SERVICE_KEY, runIsolation } from './hostile/isolation-run.js'
import { randomSeed } from './hostile/prng.js'
import { errorLogs, type ServerProcess, startServer } from './hostile/server-process.js'
import { createTestDatabase, postgresAvailable } from './support/postgres-cluster.js'

const TOKENS = { AUTH_JWT_SECRET: ISOLATION_SECRET, API_KEYS: ISOLATION_SERVICE_KEY }

/**
 * The isolation run's short form, against the real service with user tokens on: 4 users and a
 * service key in their default notebooks and in shared ones they make, rename, delete, join (by
 * the owner's PUT or an invitation), change roles in and leave; every answer checked against each
 * notebook's model, and nothing of a notebook in a non-member's answers, headers or streams (a
 * removed member's stream gets `revoked` and ends); on memory, on DATA_FILE, and on PostgreSQL
 * with two instances that each request picks between. `npm run fuzz -- --users 5 [--store
 * journal | --store postgres --instances 2]` is the long form.
 */
describe('isolation between notebooks (a short random run)', () => {
  const servers: ServerProcess[] = []
  after(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGTERM')))
  })

  async function run(env: Record<string, string>, instances: number): Promise<void> {
    const started = await Promise.all(
      Array.from({ length: instances }, () => startServer({ env: { ...env, ...TOKENS } })),
    )
    servers.push(...started)
    const seed = randomSeed()
    const stats = await runIsolation({
      host: '127.0.0.1',
      ports: started.map((server) => server.port),
      seed,
      requests: 3_000,
      users: 4,
    })
    assert.equal(stats.requests > 2_500, true, `seed ${seed}: ${stats.requests} requests`)
    assert.ok(stats.crossings > 300, `seed ${seed}: only ${stats.crossings} crossing requests`)
    // The notebooks' part came up: made, shared, left and revoked.
    const shared = {
      made: stats.notebooksMade > 3,
      joins: stats.joins > 15,
      removals: stats.removals > 5,
      revoked: stats.revoked > 3,
    }
    assert.deepEqual(
      shared,
      { made: true, joins: true, removals: true, revoked: true },
      `seed ${seed}: ${JSON.stringify(stats)}`,
    )
    for (const server of started) assert.deepEqual(errorLogs(server.logs), [])
  }

  it('keeps every notebook to its caller through 3,000 mixed requests, on memory', {
    timeout: 120_000,
  }, async () => {
    await run({}, 1)
  })

  it('keeps every notebook to its caller through 3,000 mixed requests, on DATA_FILE', {
    timeout: 120_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'notes-isolation-'))
    try {
      await run({ DATA_FILE: join(dir, 'notes.journal') }, 1)
    } finally {
      await Promise.all(servers.splice(0).map((server) => server.stop('SIGTERM')))
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('keeps every notebook to its caller through 3,000 mixed requests, on PostgreSQL with two instances', {
    timeout: 180_000,
    skip: !postgresAvailable('the isolation run on PostgreSQL'),
  }, async () => {
    await run({ DATABASE_URL: await createTestDatabase() }, 2)
  })
})
