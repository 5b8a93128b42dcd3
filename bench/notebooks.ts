/**
 * Shared notebooks, measured on the real service (`dist/src/server.js`, user tokens with
 * AUTH_JWT_SECRET), autocannon (50 connections) in its own process:
 * - get: GET of one note of 1,000 by a member in a shared notebook
 *   (`/api/notebooks/:nb/note/:id`, a token already seen) against the same GET in the caller's
 *   default notebook (`/api/note/:id`), alternating in one service, `rounds` times each;
 * - access (PostgreSQL only): 3 instances on one database; 200 times, a member with a stream of the
 *   notebook open on every instance is removed on the first: the time from the removal's answer to
 *   each stream's `revoked` and end (p50, p99), and whether any instance answered the member's next
 *   request with anything but the 404;
 * - all: one stream of every notebook for a user in 50 notebooks against one stream of one
 *   notebook, writes at `rate` a second for `seconds` spread over the notebooks: the time from a
 *   write's answer to its event on the stream (p50, p99).
 *
 *   npm run compile && node dist/bench/notebooks.js [get,access,all] [memory|postgres] \
 *     [rounds=3] [seconds=8] [rate=200]
 */
import { execFileSync } from 'node:child_process'
import { request as httpRequest } from 'node:http'
import { fileURLToPath } from 'node:url'
import { SignJWT } from 'jose'
import { send } from './http-client.js'
import { BenchCluster } from './postgres-bench.js'
import { type SpawnedService, spawnService } from './spawn-service.js'

const PARTS = (process.argv[2] ?? 'get,access,all').split(',')
const STORE = process.argv[3] ?? 'memory'
if (STORE !== 'memory' && STORE !== 'postgres') throw new Error('the store is memory or postgres')
const ROUNDS = Number(process.argv[4] ?? 3)
const SECONDS = Number(process.argv[5] ?? 8)
const RATE = Number(process.argv[6] ?? 200)
const SECRET = 'bench-secret-of-32-bytes-or-more-000000'
const AUTOCANNON = fileURLToPath(new URL('../../node_modules/.bin/autocannon', import.meta.url))
const CLUSTER = STORE === 'postgres' ? await BenchCluster.start(undefined) : undefined

const tokenOf = (sub: string): Promise<string> =>
  new SignJWT({ sub })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('2h')
    .sign(Buffer.from(SECRET))

const bearer = async (sub: string) => ({ authorization: `Bearer ${await tokenOf(sub)}` })

async function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; data: Record<string, unknown> }> {
  const answer = await send(port, method, path, {
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${answer.body}`)
  const parsed = answer.body === '' ? {} : (JSON.parse(answer.body) as { data: unknown })
  return { status: answer.status, data: (parsed as { data: Record<string, unknown> }).data }
}

async function start(url?: string): Promise<SpawnedService> {
  return spawnService({
    AUTH_JWT_SECRET: SECRET,
    ...(url === undefined ? {} : { DATABASE_URL: url }),
  })
}

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] as number
}
const ms = (value: number) => `${value.toFixed(1)} ms`

/** autocannon on `path` for SECONDS with `headers`: requests a second. */
function load(port: number, path: string, headers: Record<string, string>): number {
  const args = [
    '-c',
    '50',
    ...Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    `http://127.0.0.1:${port}${path}`,
  ]
  execFileSync(AUTOCANNON, ['-d', '1', ...args], { stdio: 'ignore' })
  const result = JSON.parse(
    execFileSync(AUTOCANNON, ['-d', String(SECONDS), '-j', ...args]).toString(),
  ) as { requests: { average: number }; non2xx: number }
  if (result.non2xx > 0) throw new Error(`${path}: ${result.non2xx} answers were not 2xx`)
  return result.requests.average
}

async function fill(port: number, path: string, headers: Record<string, string>, count: number) {
  let id = 0
  for (let n = 0; n < count; n++) {
    const { data } = await call(port, 'POST', path, headers, { n, body: 'x'.repeat(100) })
    id = data.id as number
  }
  return id
}

async function sharedGet(): Promise<void> {
  const service = await start((await CLUSTER?.createDatabase())?.url)
  try {
    const { port } = service
    const ann = await bearer('ann')
    const bob = await bearer('bob')
    const { data: nb } = await call(port, 'POST', '/api/notebooks', ann, { name: 'Shared' })
    await call(port, 'PUT', `/api/notebooks/${String(nb.id)}/members/bob`, ann, { role: 'editor' })
    const own = await fill(port, '/api/note', bob, 1000)
    const shared = await fill(port, `/api/notebooks/${String(nb.id)}/note`, bob, 1000)
    const paths = {
      default: `/api/note/${own}`,
      shared: `/api/notebooks/${String(nb.id)}/note/${shared}`,
    }
    const ratios: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const order =
        round % 2 === 0 ? (['default', 'shared'] as const) : (['shared', 'default'] as const)
      const rps = new Map<string, number>()
      for (const leg of order) rps.set(leg, load(port, paths[leg], bob))
      const ratio = (rps.get('shared') as number) / (rps.get('default') as number)
      ratios.push(ratio)
      console.log(
        `get round ${round + 1}: default ${Math.round(rps.get('default') as number)} req/s, shared ${Math.round(rps.get('shared') as number)} req/s, shared/default ${ratio.toFixed(3)}`,
      )
    }
    console.log(`get median shared/default: ${percentile(ratios, 50).toFixed(3)} (${STORE})`)
  } finally {
    await service.stop()
  }
}

/** An event stream on 127.0.0.1: every event as it arrives, with the time it arrived. */
function stream(
  port: number,
  path: string,
  headers: Record<string, string>,
  onEvent: (event: string, data: string, at: number) => void,
): Promise<{ ended: Promise<number>; close: () => void }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`${path}: ${res.statusCode}`))
      res.setEncoding('utf8')
      let text = ''
      res.on('data', (chunk: string) => {
        const at = performance.now()
        text += chunk
        let end = text.indexOf('\n\n')
        while (end !== -1) {
          const block = text.slice(0, end)
          text = text.slice(end + 2)
          const event = /^event: (.*)$/m.exec(block)?.[1]
          const data = /^data: (.*)$/m.exec(block)?.[1]
          if (block.startsWith('retry:')) opened()
          else if (event !== undefined) onEvent(event, data ?? '', at)
          end = text.indexOf('\n\n')
        }
      })
      const ended = new Promise<number>((done) => res.once('close', () => done(performance.now())))
      let isOpen = false
      const opened = () => {
        if (isOpen) return
        isOpen = true
        resolve({ ended, close: () => req.destroy() })
      }
    })
    req.on('error', reject)
    req.end()
  })
}

async function accessChanges(): Promise<void> {
  if (CLUSTER === undefined) {
    console.log('access: PostgreSQL only (a change reaching other instances); skipped on memory')
    return
  }
  const { url } = await CLUSTER.createDatabase()
  const services = [await start(url), await start(url), await start(url)]
  try {
    const ports = services.map((service) => service.port)
    const [first] = ports as [number]
    const ann = await bearer('ann')
    const bob = await bearer('bob')
    const { data: nb } = await call(first, 'POST', '/api/notebooks', ann, { name: 'Changing' })
    const id = String(nb.id)
    const latencies: number[] = []
    let stale = 0
    for (let change = 0; change < 200; change++) {
      await call(first, 'PUT', `/api/notebooks/${id}/members/bob`, ann, { role: 'viewer' })
      const streams = await Promise.all(
        ports.map((port) => stream(port, `/api/notebooks/${id}/events`, bob, () => {})),
      )
      await call(first, 'DELETE', `/api/notebooks/${id}/members/bob`, ann)
      const removed = performance.now()
      for (const port of ports) {
        const next = await send(port, 'GET', `/api/notebooks/${id}/note`, { headers: bob })
        if (next.status !== 404) stale++
      }
      for (const ended of await Promise.all(streams.map((open) => open.ended))) {
        latencies.push(ended - removed)
      }
    }
    console.log(
      `access: 200 removals, 3 instances: stream ended after the removal's answer p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}, max ${ms(Math.max(...latencies))}; next requests not 404: ${stale} of 600`,
    )
  } finally {
    await Promise.all(services.map((service) => service.stop()))
  }
}

/** Writes at RATE a second for SECONDS, each to `pathOf(n)`; the delivery times on the stream. */
async function delivery(all: boolean): Promise<number[]> {
  const service = await start((await CLUSTER?.createDatabase())?.url)
  try {
    const { port } = service
    const ann = await bearer('ann')
    const paths = ['/api/note']
    if (all) {
      for (let n = 1; n < 50; n++) {
        const { data } = await call(port, 'POST', '/api/notebooks', ann, { name: `nb ${n}` })
        paths.push(`/api/notebooks/${String(data.id)}/note`)
      }
    }
    const sent = new Map<number, number>()
    const latencies: number[] = []
    const open = await stream(
      port,
      all ? '/api/events?notebooks=all' : '/api/events',
      ann,
      (event, data, at) => {
        if (event !== 'created') return
        const parsed = JSON.parse(data) as { note?: { n: number }; n?: number }
        const n = (parsed.note ?? (parsed as { n: number })).n
        const start = sent.get(n)
        if (start !== undefined) latencies.push(at - start)
      },
    )
    const writes = RATE * SECONDS
    const interval = 1000 / RATE
    const began = performance.now()
    const inFlight: Promise<unknown>[] = []
    for (let n = 0; n < writes; n++) {
      const due = began + n * interval
      const wait = due - performance.now()
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      const path = paths[n % paths.length] as string
      sent.set(n, performance.now())
      inFlight.push(call(port, 'POST', path, ann, { n }))
    }
    await Promise.all(inFlight)
    const deadline = performance.now() + 5000
    while (latencies.length < writes && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    open.close()
    if (latencies.length < writes) throw new Error(`${writes - latencies.length} events never came`)
    return latencies
  } finally {
    await service.stop()
  }
}

async function allNotebooks(): Promise<void> {
  const results = new Map<boolean, number[][]>([
    [false, []],
    [true, []],
  ])
  for (let round = 0; round < ROUNDS; round++) {
    for (const all of round % 2 === 0 ? [false, true] : [true, false]) {
      ;(results.get(all) as number[][]).push(await delivery(all))
    }
  }
  for (const all of [false, true]) {
    const latencies = (results.get(all) as number[][]).flat()
    console.log(
      `${all ? 'all: one stream of 50 notebooks' : 'all: one stream of 1 notebook  '}: ${RATE} writes/s for ${SECONDS} s x ${ROUNDS}, write sent -> event p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))} (${STORE})`,
    )
  }
}

console.log(`notebooks bench: ${PARTS.join(', ')} on ${STORE}, node ${process.version}`)
try {
  if (PARTS.includes('get')) await sharedGet()
  if (PARTS.includes('access')) await accessChanges()
  if (PARTS.includes('all')) await allNotebooks()
} finally {
  await CLUSTER?.destroy()
}
