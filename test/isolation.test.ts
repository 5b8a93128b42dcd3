import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import { ISOLATION_SECRET, ISOLATION_SERVICE_KEY, runIsolation } from './hostile/isolation-run.js'
import { randomSeed } from './hostile/prng.js'
import { errorLogs, type ServerProcess, startServer } from './hostile/server-process.js'

/**
 * The isolation run's short form, against the real service with user tokens on: 4 users and a
 * service key, every answer checked against each notebook's model, and nothing of one notebook
 * in another's answers, headers or change feed. `npm run fuzz -- --users 5` is the long form.
 */
describe('isolation between notebooks (a short random run)', () => {
  const servers: ServerProcess[] = []
  after(async () => {
    for (const server of servers) await server.stop('SIGTERM')
  })

  it('keeps every notebook to its caller through 3,000 mixed requests', {
    timeout: 120_000,
  }, async () => {
    const server = await startServer({
      env: { AUTH_JWT_SECRET: ISOLATION_SECRET, API_KEYS: ISOLATION_SERVICE_KEY },
    })
    servers.push(server)
    const seed = randomSeed()
    const stats = await runIsolation({
      host: '127.0.0.1',
      ports: [server.port],
      seed,
      requests: 3_000,
      users: 4,
    })
    assert.equal(stats.requests > 2_500, true, `seed ${seed}: ${stats.requests} requests`)
    assert.ok(stats.crossings > 300, `seed ${seed}: only ${stats.crossings} crossing requests`)
    assert.deepEqual(errorLogs(server.logs), [])
  })
})
