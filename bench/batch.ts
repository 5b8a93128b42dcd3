/**
 * Creates in batches against creates one by one: the real service (`dist/src/server.js`) started
 * fresh for each leg, one client on one keep-alive connection sending one request at a time (as
 * an app importing notes would), the legs alternating in order per round.
 * - one by one: POST /api/note with a ~100-byte note, again and again;
 * - batched: POST /api/batch with `size` such creates, again and again.
 * Each leg creates the same number of notes (so that both end with a store of the same size) and
 * reports notes created per second; the ratio batched / one by one is the gain.
 *
 * `postgres` keeps each leg's notes in a fresh database of one throwaway PostgreSQL cluster
 * (durable commits); `file` in a journal (DATA_FILE) in a temporary directory.
 *
 *   npm run compile && node dist/bench/batch.js [rounds=3] [notes=50000] [memory|postgres|file] [size=100]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { send } from './http-client.js'
import { BenchCluster } from './postgres-bench.js'
import { spawnService } from './spawn-service.js'

const ROUNDS = Number(process.argv[2] ?? 3)
const NOTES = Number(process.argv[3] ?? 50_000)
const STORE = process.argv[4] ?? 'memory'
if (STORE !== 'memory' && STORE !== 'postgres' && STORE !== 'file') {
  throw new Error(`the store is memory, postgres or file, not ${STORE}`)
}
const SIZE = Number(process.argv[5] ?? 100)
const NOTE = { title: 'a note', body: 'x'.repeat(80) }
const ONE = JSON.stringify(NOTE)
const BATCH = JSON.stringify({
  requests: Array.from({ length: SIZE }, () => ({ method: 'POST', url: '/api/note', body: NOTE })),
})
const CLUSTER = STORE === 'postgres' ? await BenchCluster.start(undefined) : undefined
const FILES = STORE === 'file' ? mkdtempSync(join(tmpdir(), 'notes-bench-batch-')) : undefined
let legs = 0

/** Notes per second at which one client creates NOTES notes, after a warm-up of a tenth as many. */
async function leg(batched: boolean): Promise<number> {
  const service = await spawnService({
    MAX_NOTES: '5000000',
    MAX_STORE_BYTES: '469762048',
    BODY_LIMIT: String(64 * 1024 * 1024),
    ...(CLUSTER === undefined ? {} : { DATABASE_URL: (await CLUSTER.createDatabase()).url }),
    ...(FILES === undefined ? {} : { DATA_FILE: join(FILES, `leg-${++legs}.journal`) }),
  })
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  try {
    const { port } = service
    const path = batched ? '/api/batch' : '/api/note'
    const body = batched ? BATCH : ONE
    const perRequest = batched ? SIZE : 1
    const run = async (count: number): Promise<void> => {
      for (let notes = 0; notes < count; notes += perRequest) {
        const answer = await send(port, 'POST', path, { agent, body, timeoutMs: 60_000 })
        if (answer.status !== 200) {
          throw new Error(`${path} answered ${answer.status}: ${answer.body}`)
        }
      }
    }
    await run(NOTES / 10)
    const start = performance.now()
    await run(NOTES)
    return NOTES / ((performance.now() - start) / 1000)
  } finally {
    agent.destroy()
    await service.stop()
  }
}

console.log(`batches of ${SIZE} creates against one by one, store: ${STORE}`)
try {
  const ratios: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const rates = new Map<boolean, number>()
    for (const batched of round % 2 === 0 ? [false, true] : [true, false]) {
      rates.set(batched, await leg(batched))
    }
    const one = rates.get(false) as number
    const many = rates.get(true) as number
    ratios.push(many / one)
    console.log(
      `round ${round + 1}: one by one ${Math.round(one)} notes/s, batched ${Math.round(many)} notes/s, batched/one ${(many / one).toFixed(1)}`,
    )
  }
  ratios.sort((a, b) => a - b)
  console.log(`median batched/one: ${(ratios[Math.floor(ratios.length / 2)] as number).toFixed(1)}`)
} finally {
  await CLUSTER?.destroy()
  if (FILES !== undefined) rmSync(FILES, { recursive: true, force: true })
}
