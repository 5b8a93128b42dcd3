import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { send } from './http-client.js'

export type TargetId =
  | 'service'
  | 'twin'
  | 'floor'
  | 'floor-kept'
  | 'fastify'
  | 'fastify-etag'
  | 'fastify-pg'
  | 'service-logged'
  | 'service-metrics'
  | 'service-no-history'

export interface Target {
  /** A TargetId, or the name of an ad-hoc target given as name=path/to/server.js. */
  id: string
  description: string
  /** Compiled entry point, run with `node`. */
  script: string
  /** Added to the minimal environment the bench gives every server. */
  env: Record<string, string>
  /** The bench scrapes its `/metrics` once a second while it drives it. */
  scrapeMetrics?: boolean
  /** Given to node before the script. */
  nodeFlags?: string[]
  /** Processes started on the same database, the load split between them (--store postgres). */
  instances?: number
}

/** Where every server listens (its HOST). */
export const SERVER_HOST = '127.0.0.1'

const here = (relative: string): string => fileURLToPath(new URL(relative, import.meta.url))

export const TARGETS: Readonly<Record<TargetId, Target>> = {
  service: {
    id: 'service',
    description: 'node dist/src/server.js, default configuration, JSON logs to /dev/null',
    script: here('../src/server.js'),
    env: {},
  },
  twin: {
    id: 'twin',
    description: 'the service again, same build: how far two identical servers differ here',
    script: here('../src/server.js'),
    env: {},
  },
  floor: {
    id: 'floor',
    description: 'plain node:http, notes as JSON strings in a Map, list joined per request',
    script: here('./floor-server.js'),
    env: {},
  },
  'floor-kept': {
    id: 'floor-kept',
    description:
      'the floor with src/http/tick-shapes.ts loaded first (--import), as the service has it',
    script: here('./floor-server.js'),
    env: {},
    nodeFlags: ['--import', new URL('../src/http/tick-shapes.js', import.meta.url).href],
  },
  fastify: {
    id: 'fastify',
    description: 'straightforward Fastify: array of objects, find/findIndex, reply.send(object)',
    script: here('./fastify-server.js'),
    env: {},
  },
  'fastify-etag': {
    id: 'fastify-etag',
    description:
      'idiomatic Fastify doing the same job: @fastify/etag (SHA-1 ETag, 304), Last-Modified, Cache-Control, notes in a Map',
    script: here('./fastify-etag-server.js'),
    env: {},
  },
  'fastify-pg': {
    id: 'fastify-pg',
    description:
      'straightforward Fastify + pg Pool: one query per request, jsonb rows, reply.send(object)',
    script: here('./fastify-pg-server.js'),
    env: {},
  },
  'service-logged': {
    id: 'service-logged',
    description: 'the service with LOG_REQUESTS=true, JSON logs to a file',
    script: here('../src/server.js'),
    env: { LOG_REQUESTS: 'true' },
  },
  'service-metrics': {
    id: 'service-metrics',
    description: 'the service with METRICS=true, /metrics scraped once a second under load',
    script: here('../src/server.js'),
    env: { METRICS: 'true' },
    scrapeMetrics: true,
  },
  'service-no-history': {
    id: 'service-no-history',
    description: 'the service with history and trash off (NOTE_HISTORY=0, TRASH_DAYS=0)',
    script: here('../src/server.js'),
    env: { NOTE_HISTORY: '0', TRASH_DAYS: '0' },
  },
}

/**
 * 'service' -> the service; 'before=/tmp/old/dist/src/server.js' -> that build of the service,
 * run like the service (to compare two builds in one alternating run).
 */
export function targetFromSpec(spec: string): Target {
  const eq = spec.indexOf('=')
  if (eq === -1) {
    const target = TARGETS[spec as TargetId]
    if (target === undefined) {
      throw new Error(
        `unknown target ${spec}; use ${Object.keys(TARGETS).join(', ')} or name=server.js`,
      )
    }
    return target
  }
  const id = spec.slice(0, eq)
  const script = spec.slice(eq + 1)
  if (!existsSync(script)) throw new Error(`${script} does not exist`)
  return { id, description: `${script}, run like the service`, script, env: {} }
}

/** CPU pinning: where servers and the load generator run, or undefined when not pinned. */
export interface Pinning {
  serverCpu: number
  generatorCpu: number
}

/** `taskset -c N` prefix for a command, or none when not pinning. */
export function pinned(
  cpu: number | undefined,
  command: string,
  args: string[],
): [string, string[]] {
  return cpu === undefined ? [command, args] : ['taskset', ['-c', String(cpu), command, ...args]]
}

/** Pins servers to CPU 1 and everything else to CPU 0, on Linux with taskset and 2+ CPUs. */
export function choosePinning(cpus: number): Pinning | undefined {
  if (process.platform !== 'linux' || cpus < 2) return undefined
  try {
    execFileSync('taskset', ['-p', '-c', '0', String(process.pid)], { stdio: 'ignore' })
  } catch {
    return undefined
  }
  return { serverCpu: 1, generatorCpu: 0 }
}

/** A port nobody listens on right now, chosen by the OS. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      probe.close(() => resolve(port))
    })
  })
}

export interface RunningServer {
  target: Target
  port: number
  pid: number
  /** Resident set size of the server process now, in bytes. */
  rss: () => number
  /** CPU time the server process has used so far (user + system), in seconds; NaN if unknown. */
  cpuSeconds: () => number
  stop: () => Promise<void>
}

/** How a server is run when it is not run as plain `node`, and how patient to be with it. */
export interface Launch {
  /** A command and its arguments that run node, e.g. valgrind's: `[...prefix, node, ...]`. */
  prefix?: string[]
  /** How long to wait for the first answer; 10 s by default. */
  startTimeoutMs?: number
  /** How long stop() waits after SIGTERM before SIGKILL; 5 s by default. */
  stopGraceMs?: number
  /** Added to the target's environment (DATABASE_URL of this start). */
  env?: Record<string, string>
}

/**
 * Starts a target in its own process (pinned when `cpu` is given), with a minimal environment,
 * stdout to `logFile` (not a TTY, so the service logs JSON as shipped), and waits until it answers.
 */
export async function startServer(
  target: Target,
  cpu: number | undefined,
  logFile: string,
  nodeFlags: string[] = [],
  launch: Launch = {},
): Promise<RunningServer> {
  const port = await freePort()
  const out = openSync(logFile, 'w')
  const argv = [
    ...(launch.prefix ?? []),
    process.execPath,
    ...(target.nodeFlags ?? []),
    ...nodeFlags,
    target.script,
  ]
  const [command, args] = pinned(cpu, argv[0] as string, argv.slice(1))
  const child = spawn(command, args, {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      NODE_ENV: 'production',
      HOST: SERVER_HOST,
      PORT: String(port),
      ...target.env,
      ...launch.env,
    },
    stdio: ['ignore', out, 'pipe'],
  })
  closeSync(out)
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    if (stderr.length < 10_000) stderr += text
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const pid = child.pid
  if (pid === undefined) throw new Error(`could not start ${target.id}`)
  try {
    await waitUntilAnswering(port, child, launch.startTimeoutMs ?? 10_000)
  } catch (err) {
    child.kill('SIGKILL')
    throw new Error(`${target.id} did not start: ${(err as Error).message}\n${stderr}`)
  }
  return {
    target,
    port,
    pid,
    rss: () => residentBytes(pid),
    cpuSeconds: () => cpuSeconds(pid),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), launch.stopGraceMs ?? 5_000)
      await exited
      clearTimeout(timer)
    },
  }
}

async function waitUntilAnswering(
  port: number,
  child: ChildProcess,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (child.exitCode !== null) throw new Error(`exited with code ${child.exitCode}`)
    try {
      // Refused at once until it listens; a slow first answer (under valgrind) gets 5 s.
      if ((await send(port, 'GET', '/api/note', { timeoutMs: 5_000 })).status === 200) return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`no answer on port ${port} in ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** RSS of a process in bytes: /proc on Linux, `ps` elsewhere. */
function residentBytes(pid: number): number {
  const status = `/proc/${pid}/status`
  if (existsSync(status)) {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(status, 'utf8'))
    if (match?.[1] !== undefined) return Number(match[1]) * 1024
  }
  const kb = execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' })
  return Number(kb.trim()) * 1024
}

/** utime + stime of a process from /proc/PID/stat (Linux), in seconds. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const ticks = Number(fields[11]) + Number(fields[12])
    return ticks / clockTicks()
  } catch {
    return Number.NaN
  }
}

let ticksPerSecond: number | undefined

/** sysconf(_SC_CLK_TCK), the unit of /proc/PID/stat times: 100 almost everywhere. */
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond =
        Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

/** Idle and total time of one CPU so far, in clock ticks, from /proc/stat (Linux); NaN if unknown. */
export interface CpuTimes {
  idle: number
  total: number
}

/**
 * `cpuN` line of /proc/stat: user nice system idle iowait irq softirq steal (guest time is
 * already within user). Idle is idle + iowait.
 */
export function cpuTimes(cpu: number): CpuTimes {
  try {
    const line = readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`cpu${cpu} `))
    const ticks = (line ?? '').trim().split(/\s+/).slice(1, 9).map(Number)
    if (ticks.length < 8 || ticks.some((t) => !Number.isFinite(t))) throw new Error('no cpu line')
    const idle = (ticks[3] as number) + (ticks[4] as number)
    return { idle, total: ticks.reduce((sum, t) => sum + t, 0) }
  } catch {
    return { idle: Number.NaN, total: Number.NaN }
  }
}

/** Share of the time between two readings that the CPU sat idle (NaN if unknown). */
export function idleShare(before: CpuTimes, after: CpuTimes): number {
  const total = after.total - before.total
  return total > 0 ? (after.idle - before.idle) / total : Number.NaN
}
