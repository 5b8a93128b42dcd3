import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type CpuBurners, startCpuBurners } from './hostile/cpu-burners.js'
import { sigtermKeepAliveClients } from './hostile/faults.js'

const CLIENTS = 32
const ROUNDS = 3

/**
 * SIGTERM while keep-alive clients loop POSTs resets nobody. Every request that
 * reaches an open connection is answered (with Connection: close), and each client ends only when
 * it is refused a new connection. Run while other processes keep every CPU busy, several times:
 * all 32 clients used to get ECONNRESET.
 */
describe('SIGTERM with keep-alive clients looping POSTs, on a machine with busy CPUs', () => {
  let burners: CpuBurners
  before(() => {
    burners = startCpuBurners(2, 120_000)
  })
  after(() => burners.stop())

  for (let round = 1; round <= ROUNDS; round++) {
    it(`round ${round}: 0 resets, 0 5xx, /readyz 503, exit 0`, async () => {
      const result = await sigtermKeepAliveClients({ clients: CLIENTS, loadMs: 500 })
      assert.deepEqual(
        { ends: result.ends, readyz: result.readyz, exitCode: result.exitCode },
        {
          ends: { ECONNREFUSED: CLIENTS },
          readyz: '503 connection: close',
          exitCode: 0,
        },
      )
      assert.deepEqual(Object.keys(result.statuses), ['200'])
      for (const client of result.clients)
        assert.ok(client.acknowledged > 0, 'each client was served')
    })
  }
})
