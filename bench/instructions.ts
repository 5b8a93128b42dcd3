/**
 * npm run bench:instructions [-- --workloads W5,W1] [--targets floor,service] [--requests 10000]
 *   [--keep DIR]
 *
 * Counts the user-space instructions a server executes per request, with valgrind's callgrind.
 * Unlike req/s on a shared VM (whose cores drift 10-30% within seconds), the count repeats to
 * about 1% between runs, so it can tell apart changes of 1-2%; what it cannot see is time spent in
 * the kernel, waiting on memory, or on other threads (V8 runs with --single-threaded here).
 *
 * For every workload and target: two fresh servers under callgrind, each preloaded as in the bench
 * and sent the workload's request over 4 keep-alive connections: `requests` times (which warms the
 * JIT up; a target with metrics is scraped halfway), and 2 x `requests` times. The difference of
 * their totals, divided by `requests`, is the steady-state cost of one request. Needs `valgrind`
 * (Debian: apt-get install valgrind); about two minutes per target and workload. With --keep DIR
 * the callgrind files stay in DIR, for `callgrind_annotate` (V8's builtins and runtime, libuv,
 * llhttp and the kernel interface have symbols; JIT-compiled JavaScript shows as '???').
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { send } from './http-client.js'
import { preload } from './preload.js'
import { startServer, type Target, targetFromSpec } from './server-process.js'
import { type LoadRequest, WORKLOADS, type Workload } from './workloads.js'

const CONNECTIONS = 4

/** Sends `request` `count` times over CONNECTIONS keep-alive connections; every answer must be 2xx. */
async function drive(port: number, request: LoadRequest, count: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  let left = count
  const worker = async (): Promise<void> => {
    while (left-- > 0) {
      const options = request.body === undefined ? { agent } : { agent, body: request.body }
      const answer = await send(port, request.method, request.path, {
        ...options,
        timeoutMs: 60_000,
      })
      if (answer.status < 200 || answer.status > 299) {
        throw new Error(`${request.method} ${request.path} answered ${answer.status}`)
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: CONNECTIONS }, worker))
  } finally {
    agent.destroy()
  }
}

/** Total instructions of one server process that served the workload's request `warm`, then `more` times. */
async function countInstructions(
  target: Target,
  workload: Workload,
  warm: number,
  more: number,
  dir: string,
): Promise<number> {
  const out = join(dir, `${target.id}-${workload.id}-${warm + more}.callgrind`)
  const server = await startServer(target, undefined, '/dev/null', ['--single-threaded'], {
    prefix: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${out}`, '-q'],
    startTimeoutMs: 120_000,
    // callgrind writes its counts as the process exits.
    stopGraceMs: 60_000,
  })
  try {
    const request = workload.request(await preload(server.port, workload.preload))
    // The warm-up comes in two halves with, for a target with metrics, a scrape between them,
    // as Prometheus would have scraped by then. The first scrape loads prom-client, and like any
    // request Fastify serves, it sends new shapes through Node's HTTP code that the fast lane's
    // requests run hot, so V8 deoptimizes and recompiles: about 20,000 more instructions per
    // request over the next 10,000 requests. The second half lets that settle.
    await drive(server.port, request, Math.ceil(warm / 2))
    if (target.scrapeMetrics === true) {
      const answer = await send(server.port, 'GET', '/metrics', { timeoutMs: 60_000 })
      if (answer.status !== 200) throw new Error(`GET /metrics answered ${answer.status}`)
    }
    await drive(server.port, request, Math.floor(warm / 2))
    await drive(server.port, request, more)
  } finally {
    await server.stop()
  }
  const summary = /^summary:\s+(\d+)/m.exec(readFileSync(out, 'utf8'))
  if (summary?.[1] === undefined) throw new Error(`no summary in ${out}`)
  return Number(summary[1])
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      workloads: { type: 'string', default: 'W5' },
      targets: { type: 'string', default: 'floor,service' },
      requests: { type: 'string', default: '10000' },
      keep: { type: 'string' },
    },
  })
  const requests = Number(values.requests)
  if (!Number.isInteger(requests) || requests < 100) throw new Error('--requests must be >= 100')
  const workloads = values.workloads.split(',').map((id) => {
    const workload = WORKLOADS.find((w) => w.id === id.trim().toUpperCase())
    if (workload === undefined) throw new Error(`unknown workload ${id}`)
    return workload
  })
  const targets = values.targets.split(',').map((spec) => targetFromSpec(spec.trim()))
  const keep = values.keep
  if (keep !== undefined) mkdirSync(keep, { recursive: true })
  const dir = keep ?? mkdtempSync(join(tmpdir(), 'notes-instructions-'))
  try {
    for (const workload of workloads) {
      console.log(`${workload.id}  ${workload.title}  (${requests} requests measured)`)
      const perRequest = new Map<string, number>()
      for (const target of targets) {
        // Two at a time: the two runs of a target use both cores of a small machine. Both warm
        // up with `requests` requests: under callgrind V8 compiles on the main thread, and it
        // still does after requests/2.
        const [few, many] = await Promise.all([
          countInstructions(target, workload, requests, 0, dir),
          countInstructions(target, workload, requests, requests, dir),
        ])
        const cost = (many - few) / requests
        perRequest.set(target.id, cost)
        const floor = perRequest.get('floor')
        const ratio =
          floor === undefined || target.id === 'floor'
            ? ''
            : `  floor/${target.id} ${(floor / cost).toFixed(3)} (1.0: as few as the floor)`
        console.log(
          `  ${target.id.padEnd(10)} ${Math.round(cost).toLocaleString('en-US').padStart(9)} instructions/request${ratio}`,
        )
      }
    }
  } finally {
    if (keep === undefined) rmSync(dir, { recursive: true, force: true })
    else console.log(`callgrind files kept in ${keep}`)
  }
}

await main()
