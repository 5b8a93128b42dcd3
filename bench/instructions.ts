/**
 * npm run bench:instructions [-- --workloads W5,W1] [--targets floor,service] [--requests 10000]
 *   [--runs 2] [--store memory|file] [--keep DIR]
 *
 * Counts the user-space instructions a server executes per request, with valgrind's callgrind.
 * Unlike req/s on a shared VM (whose cores drift 10-30% within seconds), the count repeats to
 * within about 1% between processes, so it can tell apart changes of 1-2%; what it cannot see is
 * time spent in the kernel, waiting on memory, or on other threads (V8 runs with
 * --single-threaded here).
 *
 * For every workload and target, `runs` fresh servers under callgrind, one after another
 * (pinned to CPU 1 and this driver to CPU 0, where taskset and 2 CPUs are there), each
 * preloaded as in the bench and sent the workload's request over 4 keep-alive connections
 * `requests` times to warm the JIT up (a target with metrics is scraped halfway), then `requests`
 * times more. callgrind_control dumps the counts after the warm-up and after the measured
 * requests, so the second dump divided by `requests` is the steady-state cost of one request;
 * the median over runs is printed, and each run's figure too. Needs `valgrind` (Debian: apt-get
 * install valgrind); about a minute and a half per run. With --keep DIR the callgrind files stay
 * in DIR, for `callgrind_annotate`: NAME.callgrind.2 is the measured requests alone
 * (V8's builtins and runtime, libuv, llhttp and the kernel interface have symbols; JIT-compiled
 * JavaScript shows as '???').
 *
 * --store file gives every server a journal of its own (DATA_FILE, a fresh file in the run's
 * directory, every write fsynced before its answer); the count still covers the server's user
 * space alone, so it leaves out the fsync's time in the kernel.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { send } from './http-client.js'
import { median, thousands } from './numbers.js'
import { preload } from './preload.js'
import {
  choosePinning,
  type Pinning,
  SERVER_HOST,
  startServer,
  type Target,
  targetFromSpec,
} from './server-process.js'
import { type LoadRequest, WORKLOADS, type Workload } from './workloads.js'

const CONNECTIONS = 4

/** Where the servers keep their notes: in memory, or in a journal (DATA_FILE). */
type Store = 'memory' | 'file'

/**
 * Connection timeouts of 5 minutes for the service and the floor (Fastify's keep-alive is 72 s
 * already). Under valgrind on a busy machine (load average 19-25, 2026-11-26) a server spent
 * over 5 s in one stretch without polling its sockets (with --single-threaded, V8 compiles on
 * the main thread); libuv then runs its timers before it reads, so node:http's keep-alive
 * timeout (5 s, armed after each answer) fired on connections whose next request was already
 * waiting, and the preload met ECONNRESET. The floor's W6 preload (100,000 creates) was still
 * reset with only the keep-alive timeout raised; the headers timeout (60 s) is the likely one,
 * raised too. A timeout's value does not change what a request costs: the timers are armed and
 * checked the same way.
 */
const PATIENT_TIMEOUTS = {
  KEEP_ALIVE_TIMEOUT_MS: '300000',
  HEADERS_TIMEOUT_MS: '300000',
  REQUEST_TIMEOUT_MS: '300000',
}

/** Sends `request` `count` times over the agent's connections; every answer must be 2xx. */
async function drive(
  port: number,
  request: LoadRequest,
  count: number,
  agent: Agent,
): Promise<void> {
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
  await Promise.all(Array.from({ length: CONNECTIONS }, worker))
}

/**
 * `callgrind_control ARGS PID`, which reaches the process through valgrind's gdbserver. Its pipes
 * are named after the prefix, $LOGNAME or $USER, and $HOST, so callgrind_control gets the same
 * as startServer's minimal environment gives the server: HOST=127.0.0.1 (where the service
 * listens) and no user. It exits 0 even when it reaches nothing, so success is its "OK.".
 */
function callgrindControl(pid: number, prefix: string, ...args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      'callgrind_control',
      [`--vgdb-prefix=${prefix}`, ...args, String(pid)],
      { timeout: 60_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOST: SERVER_HOST } },
      (err, stdout) => {
        const failed = err ?? (/^\s*OK\.\s*$/m.test(stdout) ? null : new Error(stdout.trim()))
        if (failed === null) resolve()
        else reject(new Error(`callgrind_control ${args.join(' ')} ${pid}: ${failed.message}`))
      },
    )
  })
}

/** The instruction total of one callgrind dump, which must come from process `pid`. */
function instructionsIn(file: string, pid: number): number {
  const text = readFileSync(file, 'utf8')
  if (!new RegExp(`^pid: ${pid}$`, 'm').test(text)) throw new Error(`${file} is not from ${pid}`)
  const summary = /^summary:\s+(\d+)/m.exec(text)
  if (summary?.[1] === undefined) throw new Error(`no summary in ${file}`)
  return Number(summary[1])
}

/**
 * Instructions per request of one server process in its steady state: preloaded, warmed up with
 * `requests` requests, then counted over `requests` more. The count covers the measured requests
 * alone, not the start-up, preload, warm-up or shutdown, which the earlier way (the totals of two
 * processes, one stopped after the warm-up, subtracted) left to cancel out between processes.
 */
async function instructionsPerRequest(
  target: Target,
  workload: Workload,
  requests: number,
  dir: string,
  run: number,
  pinning: Pinning | undefined,
  store: Store,
): Promise<number> {
  const out = join(dir, `${target.id}-${workload.id}-${run}.callgrind`)
  const vgdb = join(dir, `vgdb-${target.id}-${workload.id}-${run}`)
  const journal = join(dir, `${target.id}-${workload.id}-${run}.journal`)
  // A kept directory may hold the dumps and journal of an earlier invocation.
  for (const file of [out, `${out}.1`, `${out}.2`, journal]) rmSync(file, { force: true })
  // The count per request depends on how many requests the server finds waiting each time it
  // polls, so the load must keep it saturated: the server gets a CPU of its own and this driver
  // the other. With two servers and the driver squeezed onto one CPU, one build gave 80,700 to
  // 104,700 instructions per PATCH; pinned, one at a time, 91,500 to 91,600.
  const server = await startServer(target, pinning?.serverCpu, '/dev/null', ['--single-threaded'], {
    prefix: [
      'valgrind',
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      `--vgdb-prefix=${vgdb}`,
      '-q',
    ],
    // Under valgrind on a machine at load average 14-20 (2026-12-04) the service took over 120 s
    // to start answering; the bound only says when to give up.
    startTimeoutMs: 600_000,
    // callgrind writes its counts as the process exits.
    stopGraceMs: 60_000,
    env: store === 'file' ? { ...PATIENT_TIMEOUTS, DATA_FILE: journal } : PATIENT_TIMEOUTS,
  })
  // One agent, so one set of keep-alive connections, for the warm-up and the measured requests
  // alike. With a new agent per phase, the measured requests began on new sockets, and Node's
  // HTTP code deoptimizes then ('wrong map' in onParserExecuteCommon, resOnFinish and
  // setStreamTimeout, seen with --trace-deopt outside valgrind, in the floor and the service
  // alike) and is compiled again, on the main thread with --single-threaded: V8's compiler took
  // 11,273 of the service's 87,836 instructions per measured W1 GET (the floor's: 2,198).
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  try {
    const request = workload.request(await preload(server.port, workload.preload))
    // The warm-up comes in two halves with, for a target with metrics, a scrape between them,
    // as Prometheus would have scraped by then. The first scrape loads prom-client, and like any
    // request Fastify serves, it sends new shapes through Node's HTTP code that the fast lane's
    // requests run hot, so V8 deoptimizes and recompiles: about 20,000 more instructions per
    // request over the next 10,000 requests. The second half lets that settle.
    await drive(server.port, request, Math.ceil(requests / 2), agent)
    if (target.scrapeMetrics === true) {
      const answer = await send(server.port, 'GET', '/metrics', { timeoutMs: 60_000 })
      if (answer.status !== 200) throw new Error(`GET /metrics answered ${answer.status}`)
    }
    await drive(server.port, request, Math.floor(requests / 2), agent)
    // A dump writes the counts so far to `${out}.1` and zeroes them; the second one, to
    // `${out}.2`, holds the measured requests alone.
    await callgrindControl(server.pid, vgdb, '--dump=warm-up')
    await drive(server.port, request, requests, agent)
    await callgrindControl(server.pid, vgdb, '--dump=measured')
    return instructionsIn(`${out}.2`, server.pid) / requests
  } finally {
    agent.destroy()
    await server.stop()
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      workloads: { type: 'string', default: 'W5' },
      targets: { type: 'string', default: 'floor,service' },
      requests: { type: 'string', default: '10000' },
      runs: { type: 'string', default: '2' },
      store: { type: 'string', default: 'memory' },
      keep: { type: 'string' },
    },
  })
  const requests = Number(values.requests)
  if (!Number.isInteger(requests) || requests < 100) throw new Error('--requests must be >= 100')
  const runs = Number(values.runs)
  if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer')
  const store = values.store
  if (store !== 'memory' && store !== 'file') throw new Error('--store must be memory or file')
  const workloads = values.workloads.split(',').map((id) => {
    const workload = WORKLOADS.find((w) => w.id === id.trim().toUpperCase())
    if (workload === undefined) throw new Error(`unknown workload ${id}`)
    return workload
  })
  const targets = values.targets.split(',').map((spec) => targetFromSpec(spec.trim()))
  const pinning = choosePinning(availableParallelism())
  const width = Math.max(10, ...targets.map((t) => t.id.length))
  const keep = values.keep
  if (keep !== undefined) mkdirSync(keep, { recursive: true })
  const dir = keep ?? mkdtempSync(join(tmpdir(), 'notes-instructions-'))
  try {
    for (const workload of workloads) {
      console.log(
        `${workload.id}  ${workload.title}  (${requests} requests measured, store: ${store})`,
      )
      const perRequest = new Map<string, number>()
      for (const target of targets) {
        // One process at a time: see instructionsPerRequest.
        const counts: number[] = []
        for (let run = 1; run <= runs; run++) {
          counts.push(
            await instructionsPerRequest(target, workload, requests, dir, run, pinning, store),
          )
        }
        const cost = median(counts)
        perRequest.set(target.id, cost)
        const floor = perRequest.get('floor')
        const ratio =
          floor === undefined || target.id === 'floor'
            ? ''
            : `  floor/${target.id} ${(floor / cost).toFixed(3)} (1.0: as few as the floor)`
        const each = counts.length > 1 ? `  (runs: ${counts.map(thousands).join(', ')})` : ''
        console.log(
          `  ${target.id.padEnd(width)} ${thousands(cost).padStart(9)} instructions/request${ratio}${each}`,
        )
      }
    }
  } finally {
    if (keep === undefined) rmSync(dir, { recursive: true, force: true })
    else console.log(`callgrind files kept in ${keep}`)
  }
}

await main()
