/**
 * What the client library costs over a bare fetch, from Node against the service on the memory
 * store (its own process): requests per second of `client.get(id)` against `fetch` of the same
 * URL and `.json()` (W1-like: one note of 1,000), and of `client.create(fields)` against a bare
 * POST of the same body (W4-like), and a bare POST with an Idempotency-Key (what the service
 * does more for every client create). Rounds alternate the legs; medians are reported. Target:
 * the client within 5% of the bare fetch. Then the client's own cost per call, with fetch stubbed
 * by a canned Response (no network): what it adds to a fetch, whatever the machine's load.
 *
 * Last, the replica's sync of 1,000 writes that each meet a newer version with no true conflict
 * (bench/replica-merge.ts): requests per write (target: at most 2) and time.
 *
 *   npm run compile && node dist/bench/client.js [--rounds 5] [--seconds 3] [--concurrency 16]
 */
import { randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import { NotesClient } from '../src/client/index.js'
import { median, thousands } from './numbers.js'
import { replicaMergeFigure } from './replica-merge.js'
import { startServer, TARGETS } from './server-process.js'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
  },
})
const rounds = Number(values.rounds)
const seconds = Number(values.seconds)
const concurrency = Number(values.concurrency)

/**
 * Requests per second of `once`, run by `concurrency` loops for `seconds`, and this process's
 * CPU time per request in µs (the client's own cost, less swayed by a busy machine than a rate).
 */
async function rate(once: () => Promise<unknown>): Promise<{ perSecond: number; cpuUs: number }> {
  const end = performance.now() + seconds * 1000
  let count = 0
  const loop = async () => {
    while (performance.now() < end) {
      await once()
      count++
    }
  }
  const started = performance.now()
  const cpu = process.cpuUsage()
  await Promise.all(Array.from({ length: concurrency }, loop))
  const used = process.cpuUsage(cpu)
  return {
    perSecond: count / ((performance.now() - started) / 1000),
    cpuUs: (used.user + used.system) / count,
  }
}

const server = await startServer(TARGETS.service, undefined, '/dev/null')
try {
  const baseUrl = `http://127.0.0.1:${server.port}`
  const client = new NotesClient({ baseUrl })
  const ids: number[] = []
  for (let i = 0; i < 1_000; i++)
    ids.push((await client.create({ title: `note ${i}`, body: 'x'.repeat(60) })).note.id)
  const id = ids[500] as number
  const url = `${baseUrl}/api/note/${id}`
  const body = { title: 'a new note', body: 'x'.repeat(70) }
  const post = (headers: Record<string, string>) => async () => {
    const response = await fetch(`${baseUrl}/api/note`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    })
    if (response.status !== 200) throw new Error(`POST answered ${response.status}`)
    return response.json()
  }
  const legs: Record<string, () => Promise<unknown>> = {
    'W1 bare fetch': async () => {
      const response = await fetch(url)
      if (response.status !== 200) throw new Error(`GET answered ${response.status}`)
      return response.json()
    },
    'W1 client.get': () => client.get(id),
    'W4 bare POST': post({}),
    'W4 bare POST + key': () => post({ 'idempotency-key': randomUUID() })(),
    'W4 client.create': () => client.create(body),
  }
  // Warm-up: JIT and connections.
  for (const once of Object.values(legs)) {
    const end = performance.now() + 500
    while (performance.now() < end) await once()
  }
  const results = new Map<string, number[]>(Object.keys(legs).map((name) => [name, []]))
  const cpuCosts = new Map<string, number[]>(Object.keys(legs).map((name) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    // Alternate the order of the legs from round to round.
    const names = Object.keys(legs)
    if (round % 2 === 1) names.reverse()
    for (const name of names) {
      const { perSecond, cpuUs } = await rate(legs[name] as () => Promise<unknown>)
      results.get(name)?.push(perSecond)
      cpuCosts.get(name)?.push(cpuUs)
    }
    process.stderr.write(`round ${round + 1}/${rounds} done\n`)
  }
  const medians = new Map([...results].map(([name, rates]) => [name, median(rates)]))
  const cpuMedians = new Map([...cpuCosts].map(([name, costs]) => [name, median(costs)]))
  for (const [name, rates] of results) {
    console.log(
      `${name.padEnd(20)} ${thousands(medians.get(name) ?? Number.NaN).padStart(8)} req/s (rounds: ${rates.map(thousands).join(', ')}); client CPU ${(cpuMedians.get(name) ?? Number.NaN).toFixed(0)} µs/request`,
    )
  }
  const ratio = (a: string, b: string) => ((medians.get(a) ?? 0) / (medians.get(b) ?? 1)).toFixed(3)
  console.log(`client.get / bare fetch:         ${ratio('W1 client.get', 'W1 bare fetch')}`)
  console.log(`client.create / bare POST:       ${ratio('W4 client.create', 'W4 bare POST')}`)
  console.log(`client.create / bare POST + key: ${ratio('W4 client.create', 'W4 bare POST + key')}`)
  const cpuRatio = (a: string, b: string) =>
    ((cpuMedians.get(a) ?? 0) / (cpuMedians.get(b) ?? 1)).toFixed(3)
  console.log(
    `client CPU per request, get / bare:    ${cpuRatio('W1 client.get', 'W1 bare fetch')}`,
  )
  console.log(
    `client CPU per request, create / bare: ${cpuRatio('W4 client.create', 'W4 bare POST + key')}`,
  )
  const merges = []
  for (let round = 0; round < rounds; round++) merges.push(await replicaMergeFigure(baseUrl, 1_000))
  const perWrite = merges.map((figure) => figure.requests / figure.writes)
  const times = merges.map((figure) => figure.ms)
  console.log(
    `replica sync of 1,000 merged writes (no true conflict): ${median(perWrite).toFixed(3)} requests per write (max ${Math.max(...perWrite).toFixed(3)}), ${median(times).toFixed(0)} ms (rounds: ${times.map((ms) => ms.toFixed(0)).join(', ')})`,
  )
} finally {
  await server.stop()
}

/** µs per call of `once`, run one at a time `count` times. */
async function perCall(once: () => Promise<unknown>, count: number): Promise<number> {
  const started = performance.now()
  for (let i = 0; i < count; i++) await once()
  return ((performance.now() - started) * 1000) / count
}

const canned = JSON.stringify({ data: { title: 'note 500', body: 'x'.repeat(60), id: 1 } })
const stub: typeof fetch = async () =>
  new Response(canned, {
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', etag: '"k.5"' },
  })
const stubbed = new NotesClient({ baseUrl: 'http://127.0.0.1:1', fetch: stub })
const calls: Record<string, () => Promise<unknown>> = {
  'stub + .json()': async () => (await stub('http://127.0.0.1:1/api/note/1')).json(),
  'client.get': () => stubbed.get(1),
  'client.create': () => stubbed.create({ title: 'a new note', body: 'x'.repeat(70) }),
}
for (const once of Object.values(calls)) await perCall(once, 20_000)
const costs = new Map<string, number[]>(Object.keys(calls).map((name) => [name, []]))
for (let round = 0; round < rounds * 2; round++) {
  for (const [name, once] of Object.entries(calls))
    costs.get(name)?.push(await perCall(once, 20_000))
}
console.log('fetch stubbed (no network), µs per call, median and best of rounds:')
for (const [name, values] of costs) {
  console.log(
    `  ${name.padEnd(16)} ${median(values).toFixed(1).padStart(6)} ${Math.min(...values)
      .toFixed(1)
      .padStart(6)}`,
  )
}
