/**
 * The same workloads on the three ways to keep notes: memory, a journal (DATA_FILE, every write
 * fsynced before its answer) and PostgreSQL (durable commits, a throwaway cluster). The real
 * service (`dist/src/server.js`) is started fresh for each leg, the legs alternate in order per
 * round, autocannon (50 connections) runs in its own process. Workloads as `npm run bench`'s:
 * - W1: GET one note of 1,000;      - W3: GET the list of 10,000 small notes;
 * - W4: POST a ~100-byte note;      - W5: PATCH a note of 1,000;
 * - W6: GET the last-created note of 100,000.
 * Preloads are made with POST /api/batch, 1,000 notes a request. Each round prints req/s per
 * store, then the medians of file/memory and file/postgres.
 *
 *   npm run compile && node dist/bench/stores.js [rounds=3] [seconds=8] [W1,W3,W4,W5,W6] \
 *     [memory,file,postgres]
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { send } from './http-client.js'
import { BenchCluster } from './postgres-bench.js'
import { spawnService } from './spawn-service.js'

type Store = 'memory' | 'file' | 'postgres'
type Workload = 'W1' | 'W3' | 'W4' | 'W5' | 'W6'
const ROUNDS = Number(process.argv[2] ?? 3)
const SECONDS = Number(process.argv[3] ?? 8)
const WORKLOADS = (process.argv[4] ?? 'W1,W3,W4,W5,W6').split(',') as Workload[]
const STORES = (process.argv[5] ?? 'memory,file,postgres').split(',') as Store[]
for (const store of STORES) {
  if (!['memory', 'file', 'postgres'].includes(store)) throw new Error(`no store ${store}`)
}
const SMALL_NOTE = JSON.stringify({ title: 'a note', body: 'x'.repeat(80) })
const PRELOAD: Record<Workload, number> = { W1: 1_000, W3: 10_000, W4: 0, W5: 1_000, W6: 100_000 }
const AUTOCANNON = fileURLToPath(new URL('../../node_modules/.bin/autocannon', import.meta.url))
const CLUSTER = STORES.includes('postgres') ? await BenchCluster.start(undefined) : undefined
const FILES = mkdtempSync(join(tmpdir(), 'notes-bench-stores-'))
let legs = 0

/** Creates `count` small notes, 1,000 a batch; answers the ids of the middle and the last. */
async function preload(port: number, count: number): Promise<{ middle: number; last: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const ids: number[] = []
  const requests = Array.from({ length: 1000 }, () => ({
    method: 'POST',
    url: '/api/note',
    body: JSON.parse(SMALL_NOTE) as unknown,
  }))
  for (let made = 0; made < count; made += 1000) {
    const body = JSON.stringify({ requests: requests.slice(0, Math.min(1000, count - made)) })
    const answer = await send(port, 'POST', '/api/batch', { agent, body, timeoutMs: 60_000 })
    if (answer.status !== 200) throw new Error(`the preload answered ${answer.status}`)
    for (const one of (JSON.parse(answer.body) as { data: { body: { data: { id: number } } }[] })
      .data) {
      ids.push(one.body.data.id)
    }
  }
  agent.destroy()
  return { middle: ids[Math.floor(ids.length / 2)] ?? 0, last: ids.at(-1) ?? 0 }
}

async function leg(workload: Workload, store: Store): Promise<number> {
  const service = await spawnService({
    MAX_NOTES: '5000000',
    MAX_STORE_BYTES: '469762048',
    ...(store === 'postgres' ? { DATABASE_URL: (await CLUSTER?.createDatabase())?.url ?? '' } : {}),
    ...(store === 'file' ? { DATA_FILE: join(FILES, `leg-${++legs}.journal`) } : {}),
  })
  try {
    const { port } = service
    const ids = await preload(port, PRELOAD[workload])
    const args = ['-c', '50']
    if (workload === 'W4') {
      args.push('-m', 'POST', '-H', 'content-type: application/json', '-b', SMALL_NOTE)
    } else if (workload === 'W5') {
      args.push(
        '-m',
        'PATCH',
        '-H',
        'content-type: application/json',
        '-b',
        '{"title":"note edited"}',
      )
    }
    const path =
      workload === 'W3' ? '/api/note' : `/api/note/${workload === 'W6' ? ids.last : ids.middle}`
    args.push(`http://127.0.0.1:${port}${workload === 'W4' ? '/api/note' : path}`)
    execFileSync(AUTOCANNON, ['-d', '2', ...args], { stdio: 'ignore' })
    const result = JSON.parse(
      execFileSync(AUTOCANNON, ['-d', String(SECONDS), '-j', ...args]).toString(),
    ) as { requests: { average: number }; non2xx: number }
    if (result.non2xx > 0) throw new Error(`${workload}: ${result.non2xx} answers were not 2xx`)
    return result.requests.average
  } finally {
    await service.stop()
  }
}

const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number

console.log(`stores: ${STORES.join(', ')}; ${ROUNDS} rounds of ${SECONDS} s`)
try {
  for (const workload of WORKLOADS) {
    const ratios = new Map<string, number[]>()
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? STORES : [...STORES].reverse()
      const rps = new Map<Store, number>()
      for (const store of order) rps.set(store, await leg(workload, store))
      console.log(
        `${workload} round ${round + 1}: ${STORES.map((s) => `${s} ${Math.round(rps.get(s) ?? 0)}`).join(', ')} req/s`,
      )
      const file = rps.get('file')
      for (const other of ['memory', 'postgres'] as const) {
        const base = rps.get(other)
        if (file === undefined || base === undefined) continue
        const list = ratios.get(other) ?? []
        list.push(file / base)
        ratios.set(other, list)
      }
    }
    for (const [other, list] of ratios) {
      console.log(`${workload} median file/${other}: ${median(list).toFixed(3)}`)
    }
  }
} finally {
  await CLUSTER?.destroy()
  rmSync(FILES, { recursive: true, force: true })
}
