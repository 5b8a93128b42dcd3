/**
 * npm run bench [-- --quick] [--rounds N] [--duration S] [--warmup S] [--connections N]
 *   [--workloads W1,W3,W7] [--targets service,floor,fastify-etag,fastify]
 *   [--generator wrk|autocannon]
 *
 * For every workload and round, starts a fresh server of each target (in an order that rotates
 * per round), preloads it over HTTP, warms it up, then drives it from a separate load-generator
 * process and reads the server's RSS. Prints one table per workload (medians over rounds), the
 * ratios service/floor, service/fastify-etag and service/fastify (medians of the per-round
 * ratios), and the targets: against the floor and against Fastify with @fastify/etag, the two
 * that do the service's job (plain Fastify sends no validators and is shown for reference).
 * W7, W8 and W10 run the service alone, each leg (the workload and the one it is compared with)
 * on its own fresh server, interleaved in the same way; their ratios are leg over leg. W9, the
 * change feed, runs last, as `npm run bench:events` (bench/events.ts) in its own process: its
 * 1,000 stream clients must not share this driver's event loop.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg, setPriority, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { send } from './http-client.js'
import { chooseGenerator, type LoadResult } from './load.js'
import { median, thousands } from './numbers.js'
import { BenchCluster, type BenchDatabase } from './postgres-bench.js'
import { countNotes, preload } from './preload.js'
import {
  choosePinning,
  clockTicks,
  cpuTimes,
  idleShare,
  type RunningServer,
  startServer,
  TARGETS,
  type Target,
  type TargetId,
  targetFromSpec,
} from './server-process.js'
import {
  type LoadRequest,
  type PreloadedIds,
  RELATIVE_WORKLOADS,
  type RelativeWorkload,
  WORKLOADS,
  type Workload,
  type WorkloadId,
} from './workloads.js'

interface Settings {
  /** A measured run whose server was busy less than this share of the time is measured again. */
  minBusy: number
  /** At most this many repeats per run, and none once the run has taken budgetS seconds. */
  retries: number
  budgetS: number
  /** Run every server with --cpu-prof, profiles in .bench-results/profiles. */
  cpuProf: boolean
  rounds: number
  /** Measured seconds per target and round, split into `slices` interleaved slices. */
  durationS: number
  slices: number
  warmupS: number
  connections: number
  workloads: Workload[]
  /** W9: run bench/events.ts at the end, for this many seconds of writes (0: not run). */
  eventsS: number
  /** W7, W8, W10: the service against its own figures. */
  relative: RelativeWorkload[]
  targets: Target[]
  /** Where the servers keep their notes: their own memory, or a database of the bench's cluster. */
  store: 'memory' | 'postgres'
  /** DATABASE_POOL_SIZE of every server (--store postgres). */
  poolSize: number
}

/** One server of a round: a target of a workload, or a leg of a relative workload. */
interface Participant {
  /** The target's id, or the leg's label. */
  id: string
  target: Target
  preload: number
  request: (ids: PreloadedIds) => LoadRequest
  /** Read the list's ETag after the preload (W7). */
  listEtag: boolean
}

/** One run of one target on one workload. */
interface Measurement {
  load: LoadResult
  /** Requests/s of each slice, in slice order (kept in the raw results, for analysis). */
  sliceRps: number[]
  /** Server RSS after the measured run, in bytes. */
  rss: number
  /** Server RSS when it had just started, before the preload. */
  rssAtStart: number
  notes: number
  /** Server CPU time (user + system) per response in the measured run, in microseconds. */
  cpuUsPerRequest: number
  /** Server CPU time over wall time in the measured run: 1 when it had its CPU to itself. */
  busy: number
  /** --store postgres: the cluster's CPU time per response, in microseconds. */
  pgCpuUsPerRequest?: number
  /** --store postgres: the most connections the server's database had, sampled mid-slice. */
  connections?: number
  /** --store postgres: the load generator's CPU (its whole CPU's busy time) per response, us. */
  generatorCpuUsPerRequest?: number
}

const MB = 1024 * 1024
const MEMORY_TARGET_PER_100K = 70 * MB
/**
 * Service/fastify-etag throughput the service must reach on every workload: the idiomatic Fastify
 * peer doing the same job (validators, 304). Plain Fastify does less and has no target.
 */
const PEER_TARGET = 1.0
/** METRICS=true may cost under 5% of W1's throughput. */
const METRICS_TARGET = 0.95
const WORKLOAD_W1_NOTES = 1_000
const WORKLOAD_W6_NOTES = 100_000
/** --store postgres: service/fastify-pg throughput the service must reach (issue 17). */
const POSTGRES_TARGETS: Partial<Record<WorkloadId, number>> = { W1: 1.5, W3: 5, W4: 3, W6: 1.5 }

/** --store postgres: the cluster of the run, destroyed when the run ends, however it ends. */
let cluster: BenchCluster | undefined

function parseSettings(argv: string[]): Settings & { generator?: 'wrk' | 'autocannon' } {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      slices: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      workloads: { type: 'string' },
      targets: { type: 'string' },
      generator: { type: 'string' },
      'cpu-prof': { type: 'boolean', default: false },
      'min-busy': { type: 'string' },
      store: { type: 'string', default: 'memory' },
      instances: { type: 'string' },
      'pool-size': { type: 'string' },
    },
  })
  const number = (raw: string | undefined, fallback: number): number => {
    if (raw === undefined) return fallback
    const value = Number(raw)
    if (!Number.isFinite(value) || value <= 0) throw new Error(`not a positive number: ${raw}`)
    return value
  }
  const quick = values.quick === true
  const store = values.store
  if (store !== 'memory' && store !== 'postgres') {
    throw new Error(`--store must be memory or postgres, not ${store}`)
  }
  const postgres = store === 'postgres'
  // W7, W8 and W10 compare the service with itself on the memory store, and W9 runs the memory
  // service too: not run on PostgreSQL.
  const allIds = (postgres ? WORKLOADS : [...WORKLOADS, ...RELATIVE_WORKLOADS, { id: 'W9' }])
    .map((w) => w.id)
    .join(',')
  const workloadIds = (values.workloads ?? allIds).split(',').map((id) => id.trim().toUpperCase())
  for (const id of workloadIds) {
    if (!allIds.split(',').includes(id)) throw new Error(`unknown workload ${id}`)
  }
  const workloads = WORKLOADS.filter((w) => workloadIds.includes(w.id))
  const relative = RELATIVE_WORKLOADS.filter((w) => workloadIds.includes(w.id))
  const targets = (
    values.targets ?? (postgres ? 'service,fastify-pg' : 'service,floor,fastify-etag,fastify')
  )
    .split(',')
    .map((spec) => targetFromSpec(spec.trim()))
  const instances = Math.round(number(values.instances, 1))
  if (instances > 1) {
    if (!postgres) throw new Error('--instances needs --store postgres')
    // The same service, `instances` processes on one database, compared with one in each round.
    targets.push({
      ...TARGETS.service,
      id: `service-x${instances}`,
      description: `${instances} processes of the service on one database, the load split evenly`,
      instances,
    })
  }
  const generator = values.generator
  if (generator !== undefined && generator !== 'wrk' && generator !== 'autocannon') {
    throw new Error(`--generator must be wrk or autocannon, not ${generator}`)
  }
  return {
    cpuProf: values['cpu-prof'] === true,
    minBusy: number(values['min-busy'], 0.85),
    retries: 2,
    budgetS: quick ? 95 : 510,
    rounds: Math.round(number(values.rounds, quick ? 1 : 5)),
    durationS: number(values.duration, quick ? 2 : 3),
    slices: Math.round(number(values.slices, quick ? 2 : 3)),
    warmupS: number(values.warmup, 1),
    connections: Math.round(number(values.connections, 50)),
    workloads,
    relative,
    eventsS: workloadIds.includes('W9') ? (quick ? 3 : 10) : 0,
    targets,
    store,
    poolSize: Math.round(number(values['pool-size'], 10)),
    ...(generator === undefined ? {} : { generator }),
  }
}

/**
 * Resolves once the server has used less than a tenth of a CPU over 50 ms, or after 5 s.
 */
async function untilIdle(server: RunningServer): Promise<void> {
  const deadline = Date.now() + 5000
  let before = server.cpuSeconds()
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    const now = server.cpuSeconds()
    if (!(now - before >= 0.005)) return
    before = now
  }
}

/**
 * Awaits `running` while scraping the server's /metrics half a second in and then once a second,
 * as Prometheus would (every 15 s by default). A scrape that fails fails the run.
 */
async function scrapedWhile<T>(port: number, running: Promise<T>): Promise<T> {
  const scrapes: Promise<void>[] = []
  const scrape = (): void => {
    scrapes.push(
      send(port, 'GET', '/metrics').then(({ status, body }) => {
        if (status !== 200 || !body.includes('http_requests_total')) {
          throw new Error(`GET /metrics answered ${status}`)
        }
      }),
    )
  }
  let timer = setTimeout(function next() {
    scrape()
    timer = setTimeout(next, 1000)
  }, 500)
  try {
    return await running
  } finally {
    clearTimeout(timer)
    await Promise.all(scrapes)
  }
}

/** Slices of one target's run as one result: totals, and latency percentiles as slice medians. */
function combine(slices: LoadResult[]): LoadResult {
  const requests = slices.reduce((sum, l) => sum + l.requests, 0)
  const durationS = slices.reduce((sum, l) => sum + l.durationS, 0)
  return {
    requests,
    durationS,
    rps: requests / durationS,
    p50Ms: median(slices.map((l) => l.p50Ms)),
    p99Ms: median(slices.map((l) => l.p99Ms)),
    errors: slices.reduce((sum, l) => sum + l.errors, 0),
    non2xx: slices.reduce((sum, l) => sum + l.non2xx, 0),
  }
}

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown'
  } catch {
    return 'unknown'
  }
}

/** 'abc' padded to width, right-aligned unless it is the first column. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join('  ')
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n')
}

const fixed = (value: number, digits: number): string =>
  Number.isFinite(value) ? value.toFixed(digits) : '-'

async function main(): Promise<void> {
  const settings = parseSettings(process.argv.slice(2))
  const generator = chooseGenerator(settings.generator)
  const cpus = availableParallelism()
  const pinning = choosePinning(cpus)
  const priority = raisePriority()
  const logDir = mkdtempSync(join(tmpdir(), 'notes-bench-logs-'))
  const startedAt = Date.now()
  let retried = 0

  const say = (text: string): void => {
    process.stdout.write(`${text}\n`)
  }
  say('notes-service benchmark')
  say(`machine: ${cpus} CPUs (${cpuModel()}), node ${process.version}, ${process.platform}`)
  say(`load average before the run: ${loadText()} (other work on the machine disturbs the figures)`)
  say(`load generator: ${generator.name} ${generator.version}, ${settings.connections} connections`)
  say(
    pinning === undefined
      ? 'pinning: none (needs Linux, taskset and 2 CPUs); server and generator share the CPUs'
      : `pinning: taskset, every server on CPU ${pinning.serverCpu}; load generator, preload and this driver on CPU ${pinning.generatorCpu}`,
  )
  say(
    priority === undefined
      ? 'priority: normal (raising it needs root or CAP_SYS_NICE)'
      : `priority: nice ${priority} for this driver and everything it starts, to keep other work on the machine from stealing the CPUs`,
  )
  say(
    `runs: ${settings.rounds} round(s) per workload; each round starts a fresh server of every target, ` +
      `preloads them over HTTP and warms each up for ${settings.warmupS} s, then measures each for ` +
      `${settings.durationS} s in ${settings.slices} interleaved slices (rotating order), so drift of ` +
      `the machine hits all targets alike; a ratio is the median of the rounds' ratios`,
  )
  if (settings.store === 'postgres') {
    cluster = await BenchCluster.start(pinning?.serverCpu)
    say(`store: ${cluster.description}; DATABASE_POOL_SIZE=${settings.poolSize} for every server`)
  }
  for (const target of settings.targets) say(`  ${target.id}: ${target.description}`)
  say('')

  const results: Record<string, Record<string, Measurement[]>> = {}
  const summary: string[][] = []
  const postgresSummary: string[][] = []
  /** --store postgres: preloaded databases by target script and note count. */
  const templates = new Map<string, { name: string; ids: PreloadedIds }>()
  const ratioRows: { workload: Workload; floor: number; peer: number; fastify: number }[] = []

  /** Every round of one workload: each participant's measurements, by its id. */
  async function measureRounds(
    workloadId: string,
    participants: Participant[],
  ): Promise<Record<string, Measurement[]>> {
    const runs: Record<string, Measurement[]> = {}
    for (const p of participants) runs[p.id] = []
    for (let round = 0; round < settings.rounds; round++) {
      const measured = await measureRound(workloadId, participants, round)
      for (const p of participants) {
        const measurement = measured.get(p.id) as Measurement
        runs[p.id]?.push(measurement)
        process.stderr.write(
          `  ${workloadId} round ${round + 1}/${settings.rounds} ${p.id}: ` +
            `${thousands(measurement.load.rps)} req/s\n`,
        )
      }
    }
    results[workloadId] = runs
    return runs
  }

  for (const workload of settings.workloads) {
    const participants = settings.targets.map((target) => ({
      id: target.id,
      target,
      preload: workload.preload,
      request: workload.request,
      listEtag: false,
    }))
    const runs = await measureRounds(workload.id, participants)
    if (settings.store === 'postgres') printPostgresWorkload(workload, runs)
    else printWorkload(workload, runs)
  }

  const relativeRows: string[][] = []
  const service = targetFromSpec('service')
  for (const workload of settings.relative) {
    const participants = workload.legs.map((leg) => ({
      id: leg.label,
      target: service,
      preload: leg.preload,
      request: leg.request,
      listEtag: true,
    }))
    printRelative(workload, await measureRounds(workload.id, participants))
  }

  /**
   * --store postgres: a database that a server of the participant's target has preloaded over
   * HTTP, made in the first round and copied (CREATE DATABASE ... TEMPLATE) for every round, so
   * each round still gets a fresh database but pays for durable creates once (100,000 notes take
   * minutes through the reference's one-insert-per-request). Undefined when nothing is preloaded.
   */
  async function preloadedTemplate(
    benchCluster: BenchCluster,
    participant: Participant,
    logFile: string,
  ): Promise<{ name: string; ids: PreloadedIds } | undefined> {
    if (participant.preload === 0) return undefined
    const key = `${participant.target.script} ${participant.preload}`
    const known = templates.get(key)
    if (known !== undefined) return known
    const database = await benchCluster.createDatabase()
    const server = await startServer(participant.target, pinning?.serverCpu, logFile, [], {
      env: { DATABASE_URL: database.url, DATABASE_POOL_SIZE: String(settings.poolSize) },
    })
    try {
      // More connections than the memory bench's 4: creates wait for their commit's flush.
      const ids = await preload(server.port, participant.preload, 32)
      const made = { name: database.name, ids }
      templates.set(key, made)
      return made
    } finally {
      await server.stop()
    }
  }

  /** `items` rotated left by `by`: every target goes first in turn. */
  function rotated<T>(items: readonly T[], by: number): T[] {
    return items.map((_, i) => items[(i + by) % items.length] as T)
  }

  /**
   * One round of a workload: a fresh server of every target, each preloaded, checked and warmed
   * up, then each driven for `slices` slices of durationS / slices seconds, the targets taking
   * turns slice by slice. Noise on this machine comes and goes within seconds, so measuring the
   * targets interleaved, rather than one after the other, puts them under the same conditions.
   */
  async function measureRound(
    workloadId: string,
    participants: Participant[],
    round: number,
  ): Promise<Map<string, Measurement>> {
    interface Prepared {
      id: string
      target: Target
      /** The first of `servers`: the one preloaded and checked. */
      server: RunningServer
      servers: RunningServer[]
      rssAtStart: number
      request: LoadRequest
      slices: LoadResult[]
      cpuSeconds: number
      /** --store postgres: the servers' database, the cluster's and the generator's CPU time. */
      database: BenchDatabase | undefined
      pgCpuSeconds: number
      generatorCpuSeconds: number
      connections: number
    }
    const prepared: Prepared[] = []
    const started: RunningServer[] = []
    const stopAll = async (): Promise<void> => {
      await Promise.all(started.map((server) => server.stop()))
    }
    const stopOnSignal = (): void => {
      void stopAll()
        .then(() => cluster?.destroy())
        .then(() => process.exit(130))
    }
    process.once('SIGINT', stopOnSignal)
    process.once('SIGTERM', stopOnSignal)
    const logFiles: string[] = []
    try {
      for (const participant of rotated(participants, round)) {
        const { target } = participant
        const logFile =
          target.id === 'service-logged' ? join(logDir, `${target.id}.log`) : '/dev/null'
        if (logFile !== '/dev/null') logFiles.push(logFile)
        const profileDir = join(
          '.bench-results',
          'profiles',
          `${workloadId}-${participant.id}-${round + 1}`,
        )
        const flags = settings.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []
        const template =
          cluster === undefined ? undefined : await preloadedTemplate(cluster, participant, logFile)
        const database = await cluster?.createDatabase(template?.name)
        const launch =
          database === undefined
            ? {}
            : {
                env: {
                  DATABASE_URL: database.url,
                  DATABASE_POOL_SIZE: String(settings.poolSize),
                },
              }
        const servers: RunningServer[] = []
        for (let i = 0; i < (target.instances ?? 1); i++) {
          const server = await startServer(target, pinning?.serverCpu, logFile, flags, launch)
          started.push(server)
          servers.push(server)
        }
        const server = servers[0] as RunningServer
        const rssAtStart = server.rss()
        const ids =
          template === undefined
            ? await preload(server.port, participant.preload)
            : { ...template.ids }
        if (participant.listEtag) {
          const head = await send(server.port, 'HEAD', '/api/note', { timeoutMs: 60_000 })
          const etag = head.headers.etag
          if (typeof etag === 'string') ids.listEtag = etag
        }
        const request = participant.request(ids)
        prepared.push({
          id: participant.id,
          target,
          server,
          servers,
          rssAtStart,
          request,
          slices: [],
          cpuSeconds: 0,
          database,
          pgCpuSeconds: 0,
          generatorCpuSeconds: 0,
          connections: 0,
        })
        const check = await send(server.port, request.method, request.path, {
          ...(request.body === undefined ? {} : { body: request.body }),
          ...(request.headers === undefined ? {} : { headers: request.headers }),
          timeoutMs: 60_000,
        })
        if (check.status !== (request.status ?? 200)) {
          throw new Error(
            `${participant.id} answered ${check.status} to ${request.method} ${request.path}`,
          )
        }
      }
      const optionsFor = (p: Prepared, durationS: number) => ({
        port: p.server.port,
        request: p.request,
        connections: settings.connections,
        cpu: pinning?.generatorCpu,
        durationS,
      })
      /** Load for `durationS` seconds, with /metrics scraped meanwhile on a target with metrics. */
      const drive = (p: Prepared, durationS: number): Promise<LoadResult> => {
        if (p.servers.length > 1) return driveEach(p, durationS)
        const running = generator.run(optionsFor(p, durationS))
        return p.target.scrapeMetrics === true ? scrapedWhile(p.server.port, running) : running
      }
      /**
       * Several instances: one generator per instance, all at once, the connections split evenly;
       * requests add up, the latency percentiles are the worst instance's.
       */
      const driveEach = async (p: Prepared, durationS: number): Promise<LoadResult> => {
        const connections = Math.max(1, Math.round(settings.connections / p.servers.length))
        const results = await Promise.all(
          p.servers.map((server) =>
            generator.run({ ...optionsFor(p, durationS), port: server.port, connections }),
          ),
        )
        const requests = results.reduce((sum, r) => sum + r.requests, 0)
        const wall = Math.max(...results.map((r) => r.durationS))
        return {
          requests,
          durationS: wall,
          rps: results.reduce((sum, r) => sum + r.rps, 0),
          p50Ms: Math.max(...results.map((r) => r.p50Ms)),
          p99Ms: Math.max(...results.map((r) => r.p99Ms)),
          errors: results.reduce((sum, r) => sum + r.errors, 0),
          non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
        }
      }
      const serversCpu = (p: Prepared): number =>
        p.servers.reduce((sum, server) => sum + server.cpuSeconds(), 0)
      const allIdle = async (p: Prepared): Promise<void> => {
        for (const server of p.servers) await untilIdle(server)
      }
      for (const p of prepared) {
        // A metrics target is scraped from the warm-up on, as Prometheus does: the first scrape
        // loads prom-client and makes V8 recompile the hot path, a one-off that is not what
        // metrics cost per request.
        await drive(p, settings.warmupS)
        await allIdle(p)
      }
      const sliceS = settings.durationS / settings.slices
      for (let slice = 0; slice < settings.slices; slice++) {
        for (const p of rotated(prepared, slice)) {
          // A saturated server on its own CPU is busy nearly all the time; much less means
          // something else took the CPU (or starved the generator), so the slice is measured
          // again, a bounded number of times.
          let attempt = 0
          for (;;) {
            const cpuBefore = serversCpu(p)
            const pgBefore = cluster?.cpuSeconds() ?? 0
            const serverCpu = pinning?.serverCpu
            const timesBefore = serverCpu === undefined ? undefined : cpuTimes(serverCpu)
            const generatorBefore =
              pinning === undefined ? undefined : cpuTimes(pinning.generatorCpu)
            // The database's connections, counted halfway through the slice.
            const counted =
              p.database === undefined
                ? Promise.resolve(0)
                : new Promise<void>((resolve) => setTimeout(resolve, sliceS * 500)).then(() =>
                    cluster === undefined || p.database === undefined
                      ? 0
                      : cluster.connections(p.database.name),
                  )
            const load = await drive(p, sliceS)
            const cpuSeconds = serversCpu(p) - cpuBefore
            const pgCpuSeconds = (cluster?.cpuSeconds() ?? 0) - pgBefore
            const connections = await counted
            // PostgreSQL shares the servers' CPU: a server waiting for it is not disturbed.
            const busy = (cpuSeconds + pgCpuSeconds) / load.durationS
            // A server that left its CPU idle was waiting for the generator (W3's service sends
            // 1.2 MB answers faster than wrk reads them): measuring again would change nothing.
            const idle =
              serverCpu === undefined || timesBefore === undefined
                ? Number.NaN
                : idleShare(timesBefore, cpuTimes(serverCpu))
            const retry =
              serverCpu !== undefined &&
              busy < settings.minBusy &&
              !(idle > 1 - settings.minBusy) &&
              attempt < settings.retries &&
              Date.now() - startedAt < settings.budgetS * 1000
            if (retry) {
              attempt++
              retried++
              process.stderr.write(
                `  ${workloadId} ${p.id}: server busy ${(busy * 100).toFixed(0)}%, its CPU idle ${(idle * 100).toFixed(0)}%, measuring again\n`,
              )
              continue
            }
            p.slices.push(load)
            p.cpuSeconds += cpuSeconds
            p.pgCpuSeconds += pgCpuSeconds
            p.connections = Math.max(p.connections, connections)
            if (generatorBefore !== undefined && pinning !== undefined) {
              const after = cpuTimes(pinning.generatorCpu)
              const busyTicks =
                after.total - generatorBefore.total - (after.idle - generatorBefore.idle)
              p.generatorCpuSeconds += busyTicks / clockTicks()
            }
            // A slow server (fastify on W6 takes ~12 ms a request) is still answering the
            // requests in flight when the generator stops; the next target must not share the
            // CPU with that.
            await allIdle(p)
            break
          }
        }
      }
      const measured = new Map<string, Measurement>()
      for (const p of prepared) {
        const load = combine(p.slices)
        const preloaded = participants.find((q) => q.id === p.id)?.preload ?? 0
        const notes = workloadId === 'W4' ? await countNotes(p.server.port) : preloaded
        measured.set(p.id, {
          load,
          sliceRps: p.slices.map((slice) => slice.rps),
          rss: p.server.rss(),
          rssAtStart: p.rssAtStart,
          notes,
          cpuUsPerRequest: (p.cpuSeconds / load.requests) * 1e6,
          busy: p.cpuSeconds / load.durationS,
          ...(p.database === undefined
            ? {}
            : {
                busy: (p.cpuSeconds + p.pgCpuSeconds) / load.durationS,
                pgCpuUsPerRequest: (p.pgCpuSeconds / load.requests) * 1e6,
                connections: p.connections,
                generatorCpuUsPerRequest: (p.generatorCpuSeconds / load.requests) * 1e6,
              }),
        })
      }
      return measured
    } finally {
      process.off('SIGINT', stopOnSignal)
      process.off('SIGTERM', stopOnSignal)
      await stopAll()
      for (const file of logFiles) rmSync(file, { force: true })
    }
  }

  function printWorkload(workload: Workload, runs: Record<string, Measurement[]>): void {
    const rows = settings.targets.map((target) => {
      const ms = runs[target.id] ?? []
      const rss = median(ms.map((m) => m.rss))
      return [
        target.id,
        thousands(median(ms.map((m) => m.load.rps))),
        fixed(median(ms.map((m) => m.load.p50Ms)), 2),
        fixed(median(ms.map((m) => m.load.p99Ms)), 2),
        String(ms.reduce((sum, m) => sum + m.load.errors, 0)),
        String(ms.reduce((sum, m) => sum + m.load.non2xx, 0)),
        fixed(rss / MB, 1),
        thousands(median(ms.map((m) => m.rss / m.notes))),
        thousands(median(ms.map((m) => m.notes))),
        fixed(median(ms.map((m) => m.cpuUsPerRequest)), 1),
        fixed(median(ms.map((m) => m.busy * 100)), 0),
      ]
    })
    say(`${workload.id}  ${workload.title}`)
    say(
      table(
        [
          'target',
          'req/s',
          'p50 ms',
          'p99 ms',
          'errors',
          'non-2xx',
          'RSS MB',
          'RSS B/note',
          'notes',
          'CPU us/req',
          'busy %',
        ],
        rows,
      ),
    )
    const floor = ratio(runs, 'floor')
    const peer = ratio(runs, 'fastify-etag')
    const fastify = ratio(runs, 'fastify')
    say(
      `ratio service/floor ${fixed(floor, 2)} (median${eachRound(runs, 'floor')}; target >= ` +
        `${workload.floorTarget}), service/fastify-etag ${fixed(peer, 2)} ` +
        `(median${eachRound(runs, 'fastify-etag')}; target >= ${PEER_TARGET}), ` +
        `service/fastify ${fixed(fastify, 2)} (median${eachRound(runs, 'fastify')}; ` +
        'no target: it sends no validators)',
    )
    say(
      `CPU-cost ratio (other's CPU us/req / service's; steadier when the machine is shared): ` +
        `floor ${fixed(cpuRatio(runs, 'floor'), 2)}, ` +
        `fastify-etag ${fixed(cpuRatio(runs, 'fastify-etag'), 2)}, ` +
        `fastify ${fixed(cpuRatio(runs, 'fastify'), 2)}`,
    )
    for (const target of settings.targets) {
      if (['service', 'floor', 'fastify-etag', 'fastify', 'service-metrics'].includes(target.id))
        continue
      const rounds = eachRound(runs, target.id)
      say(
        `ratio service/${target.id} ${fixed(ratio(runs, target.id), 2)}${rounds && ` (median${rounds})`}`,
      )
    }
    if (runs['service-metrics'] !== undefined) {
      const cost = ratio(runs, 'service', 'service-metrics')
      say(
        `metrics: service-metrics/service ${fixed(cost, 3)} (target >= ${METRICS_TARGET}: ` +
          `METRICS=true costs under 5%) ${verdict(cost, METRICS_TARGET)}`,
      )
    }
    say('')
    ratioRows.push({ workload, floor, peer, fastify })
    summary.push([
      workload.id,
      thousands(median((runs.service ?? []).map((m) => m.load.rps))),
      thousands(median((runs.floor ?? []).map((m) => m.load.rps))),
      thousands(median((runs['fastify-etag'] ?? []).map((m) => m.load.rps))),
      thousands(median((runs.fastify ?? []).map((m) => m.load.rps))),
      `${fixed(floor, 2)} ${verdict(floor, workload.floorTarget)}`,
      `>= ${workload.floorTarget}`,
      `${fixed(peer, 2)} ${verdict(peer, PEER_TARGET)}`,
      `>= ${PEER_TARGET}`,
      fixed(fastify, 2),
    ])
  }

  /**
   * --store postgres: each target's figures, with the cluster's CPU per response beside the
   * server's and the connections its database had; service/fastify-pg against its target, and
   * service-xN/service when --instances is given.
   */
  function printPostgresWorkload(workload: Workload, runs: Record<string, Measurement[]>): void {
    const med = (ms: Measurement[], f: (m: Measurement) => number | undefined): number =>
      median(ms.map((m) => f(m) ?? Number.NaN))
    const rows = settings.targets.map((target) => {
      const ms = runs[target.id] ?? []
      const instances = target.instances ?? 1
      return [
        target.id,
        thousands(med(ms, (m) => m.load.rps)),
        fixed(
          med(ms, (m) => m.load.p50Ms),
          2,
        ),
        fixed(
          med(ms, (m) => m.load.p99Ms),
          2,
        ),
        String(ms.reduce((sum, m) => sum + m.load.errors, 0)),
        String(ms.reduce((sum, m) => sum + m.load.non2xx, 0)),
        thousands(med(ms, (m) => m.notes)),
        `${instances > 1 ? `${instances}x` : ''}${settings.poolSize} / ${fixed(
          Math.max(...ms.map((m) => m.connections ?? Number.NaN)),
          0,
        )}`,
        fixed(
          med(ms, (m) => m.cpuUsPerRequest),
          1,
        ),
        fixed(
          med(ms, (m) => m.pgCpuUsPerRequest),
          1,
        ),
        fixed(
          med(ms, (m) => m.generatorCpuUsPerRequest),
          1,
        ),
        fixed(
          med(ms, (m) => m.busy * 100),
          0,
        ),
      ]
    })
    say(`${workload.id}  ${workload.title}`)
    say(
      table(
        [
          'target',
          'req/s',
          'p50 ms',
          'p99 ms',
          'errors',
          'non-2xx',
          'notes',
          'pool / conns',
          'server CPU us/req',
          'PG CPU us/req',
          'generator CPU us/req',
          'busy %',
        ],
        rows,
      ),
    )
    const goal = POSTGRES_TARGETS[workload.id]
    const reference = ratio(runs, 'fastify-pg')
    say(
      `ratio service/fastify-pg ${fixed(reference, 2)} (median${eachRound(runs, 'fastify-pg')}; ` +
        `${goal === undefined ? 'no target' : `target >= ${goal}`})` +
        (goal === undefined ? '' : ` ${verdict(reference, goal)}`),
    )
    const cpuOf = (m: Measurement | undefined): number =>
      m === undefined ? Number.NaN : m.cpuUsPerRequest + (m.pgCpuUsPerRequest ?? 0)
    const totalCpu = median(
      (runs.service ?? []).map((m, i) => cpuOf(runs['fastify-pg']?.[i]) / cpuOf(m)),
    )
    say(
      `CPU-cost ratio (fastify-pg's server + PG CPU us/req / the service's): ${fixed(totalCpu, 2)}`,
    )
    const many = settings.targets.find((t) => (t.instances ?? 1) > 1)
    let instancesRatio = Number.NaN
    if (many !== undefined) {
      const rounds = roundRatios(runs, 'service', many.id)
      instancesRatio = median(rounds)
      say(
        `ratio ${many.id}/service ${fixed(instancesRatio, 2)}` +
          (rounds.length > 1
            ? ` (median of rounds ${rounds.map((r) => fixed(r, 2)).join(' ')})`
            : ''),
      )
    }
    say('')
    postgresSummary.push([
      workload.id,
      thousands(median((runs.service ?? []).map((m) => m.load.rps))),
      thousands(median((runs['fastify-pg'] ?? []).map((m) => m.load.rps))),
      `${fixed(reference, 2)} ${goal === undefined ? '' : verdict(reference, goal)}`.trim(),
      goal === undefined ? '-' : `>= ${goal}`,
      ...(many === undefined
        ? []
        : [
            thousands(median((runs[many.id] ?? []).map((m) => m.load.rps))),
            fixed(instancesRatio, 2),
          ]),
    ])
  }

  /** A relative workload's legs, then each of its ratios with its target. */
  function printRelative(workload: RelativeWorkload, runs: Record<string, Measurement[]>): void {
    say(`${workload.id}  ${workload.title}`)
    say(
      table(
        ['leg', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'notes', 'CPU us/req', 'busy %'],
        workload.legs.map((leg) => {
          const ms = runs[leg.label] ?? []
          return [
            leg.label,
            thousands(median(ms.map((m) => m.load.rps))),
            fixed(median(ms.map((m) => m.load.p50Ms)), 2),
            fixed(median(ms.map((m) => m.load.p99Ms)), 2),
            String(ms.reduce((sum, m) => sum + m.load.errors, 0)),
            thousands(leg.preload),
            fixed(median(ms.map((m) => m.cpuUsPerRequest)), 1),
            fixed(median(ms.map((m) => m.busy * 100)), 0),
          ]
        }),
      ),
    )
    for (const goal of workload.targets) {
      const ratios = roundRatios(runs, goal.over, goal.of)
      const value = median(ratios)
      const met =
        goal.within !== undefined
          ? Math.abs(1 - value) <= goal.within
          : value >= (goal.atLeast ?? Number.NEGATIVE_INFINITY)
      const wanted =
        goal.within !== undefined ? `within ${goal.within * 100}% of 1` : `>= ${goal.atLeast}`
      const verdictText = Number.isFinite(value) ? (met ? 'ok' : 'MISSED') : ''
      say(
        `ratio ${goal.of}/${goal.over} ${fixed(value, 2)} (median` +
          `${ratios.length > 1 ? ` of rounds ${ratios.map((r) => fixed(r, 2)).join(' ')}` : ''}` +
          `; target ${wanted}: ${goal.why}) ${verdictText}`,
      )
      // The same comparison by CPU per response, which moves less when other work takes the CPU.
      const cpu = median(
        (runs[goal.of] ?? []).flatMap((m, i) => {
          const r = runs[goal.over]?.[i]
          return r === undefined ? [] : [r.cpuUsPerRequest / m.cpuUsPerRequest]
        }),
      )
      say(`  CPU-cost ratio (${goal.over}'s CPU us/req / ${goal.of}'s): ${fixed(cpu, 2)}`)
      relativeRows.push([
        workload.id,
        `${goal.of}/${goal.over}`,
        `${fixed(value, 2)} ${verdictText}`,
        wanted,
        fixed(cpu, 2),
      ])
    }
    say('')
  }

  /** `of` req/s / other req/s in each round (both measured in the same round). */
  function roundRatios(
    runs: Record<string, Measurement[]>,
    other: string,
    of: TargetId | string = 'service',
  ): number[] {
    const service = runs[of] ?? []
    const reference = runs[other] ?? []
    return service.flatMap((m, i) => {
      const r = reference[i]
      return r === undefined ? [] : [m.load.rps / r.load.rps]
    })
  }

  /**
   * The ratio quoted: the median over rounds of `of` req/s / other req/s, each round's slices
   * summed. (A median over single slice pairs was tried: with three targets in rotation, a pair
   * is adjacent in two of the three orders, and the ratio depended on the order, 0.99 against
   * 0.88 in one run, so the pooled median leaned on the majority order. A round's sum gives every
   * target every position once.)
   */
  function ratio(runs: Record<string, Measurement[]>, other: string, of?: TargetId): number {
    return median(roundRatios(runs, other, of))
  }

  /** ' of rounds 0.91 1.02 0.88' (nothing with one round): the values the ratio is the median of. */
  function eachRound(runs: Record<string, Measurement[]>, other: string): string {
    const ratios = roundRatios(runs, other)
    return ratios.length > 1 ? ` of rounds ${ratios.map((r) => fixed(r, 2)).join(' ')}` : ''
  }

  /** Median over rounds of other's CPU per request / service's: > 1 when the service is cheaper. */
  function cpuRatio(runs: Record<string, Measurement[]>, other: TargetId): number {
    const service = runs.service ?? []
    const reference = runs[other] ?? []
    return median(
      service.flatMap((m, i) => {
        const r = reference[i]
        return r === undefined ? [] : [r.cpuUsPerRequest / m.cpuUsPerRequest]
      }),
    )
  }

  if (summary.length > 0) {
    say('Summary (req/s medians; ratios are medians of per-round ratios)')
    say(
      table(
        [
          'workload',
          'service',
          'floor',
          'fastify-etag',
          'fastify',
          'service/floor',
          'target',
          'service/fastify-etag',
          'target',
          'service/fastify',
        ],
        summary,
      ),
    )
    say(
      "floor and fastify-etag do the service's job (ETag, Last-Modified, Cache-Control and 304 on " +
        "a note's GET); plain fastify sends no validators, a reference without a target",
    )
  }
  if (postgresSummary.length > 0) {
    const many = settings.targets.find((t) => (t.instances ?? 1) > 1)
    say('Summary, --store postgres (req/s medians; ratios are medians of per-round ratios)')
    say(
      table(
        [
          'workload',
          'service',
          'fastify-pg',
          'service/fastify-pg',
          'target',
          ...(many === undefined ? [] : [many.id, `${many.id}/service`]),
        ],
        postgresSummary,
      ),
    )
  }
  if (relativeRows.length > 0) {
    say('')
    say('The service against its own figures (same rounds, interleaved slices)')
    say(table(['workload', 'ratio', 'value', 'target', 'CPU-cost ratio'], relativeRows))
  }
  const w6 = settings.store === 'memory' ? results.W6 : undefined
  if (w6 !== undefined) {
    const w1 = results.W1
    say('')
    say('Memory with 100,000 small notes (W6, RSS read after the load)')
    say(
      w1 === undefined
        ? 'notes MB per 100k: RSS growth from the freshly started server (run W1 too for the better figure)'
        : 'notes MB per 100k: (RSS after W6 - RSS after W1) / 99,000 notes * 100,000; both runs ' +
            'took the same GET load, so the difference is what the extra 99,000 notes cost',
    )
    const medianRss = (ms: Measurement[] | undefined): number =>
      median((ms ?? []).map((m) => m.rss))
    say(
      table(
        ['target', 'RSS MB', 'RSS at start MB', 'notes MB per 100k', 'target'],
        settings.targets.map((target) => {
          const ms = w6[target.id] ?? []
          const rss = medianRss(ms)
          const perNote =
            w1 === undefined
              ? median(ms.map((m) => (m.rss - m.rssAtStart) / m.notes))
              : (rss - medianRss(w1[target.id])) / (WORKLOAD_W6_NOTES - WORKLOAD_W1_NOTES)
          const per100k = perNote * 100_000
          return [
            target.id,
            fixed(rss / MB, 1),
            fixed(median(ms.map((m) => m.rssAtStart)) / MB, 1),
            fixed(per100k / MB, 1),
            target.id === 'service' ? `<= 70 ${verdict(MEMORY_TARGET_PER_100K / per100k, 1)}` : '',
          ]
        }),
      ),
    )
  }
  const events = settings.eventsS > 0 ? runEventsBench(settings.eventsS, say) : undefined
  const elapsed = (Date.now() - startedAt) / 1000
  say('')
  say(
    `finished in ${elapsed.toFixed(0)} s; load average now ${loadText()}; ` +
      `${retried} run(s) measured again because the server was busy < ${settings.minBusy * 100}% ` +
      'while something else had its CPU',
  )

  mkdirSync('.bench-results', { recursive: true })
  const file = join(
    '.bench-results',
    `bench-${new Date(startedAt).toISOString().replace(/[:.]/g, '-')}.json`,
  )
  writeFileSync(
    file,
    JSON.stringify(
      {
        startedAt: new Date(startedAt).toISOString(),
        machine: { cpus, cpu: cpuModel(), node: process.version, platform: process.platform },
        generator: { name: generator.name, version: generator.version },
        pinning: pinning ?? null,
        settings: {
          ...settings,
          workloads: [
            ...[...settings.workloads, ...settings.relative].map((w) => w.id),
            ...(events === undefined ? [] : ['W9']),
          ],
          targets: settings.targets.map((t) => t.id),
        },
        ratios: ratioRows.map((r) => ({
          workload: r.workload.id,
          floor: r.floor,
          fastifyEtag: r.peer,
          fastify: r.fastify,
        })),
        results,
        ...(events === undefined ? {} : { W9: events }),
      },
      null,
      2,
    ),
  )
  say(`raw results: ${file}`)
  rmSync(logDir, { recursive: true, force: true })
}

/**
 * W9: bench/events.ts in a child process (1,000 streams, 1,000 writes a second for `seconds`),
 * its report passed through; returns that report and whether W9 met its targets.
 */
function runEventsBench(
  seconds: number,
  say: (text: string) => void,
): { ok: boolean; report: string } {
  say('')
  say('W9: the change feed (npm run bench:events)')
  const script = new URL('./events.js', import.meta.url).pathname
  const child = spawnSync(process.execPath, [script, '--duration', String(seconds)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: (seconds + 120) * 1000,
  })
  const report = child.stdout ?? ''
  say(report.trimEnd())
  const ok = child.status === 0
  if (!ok && child.error !== undefined) say(`W9 did not finish: ${child.error.message}`)
  return { ok, report }
}

/** '0.12 0.30 0.41': the 1, 5 and 15 minute load averages. */
function loadText(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')
}

/** Nice -10 for the driver (servers and generators inherit it), when allowed; the value or undefined. */
function raisePriority(): number | undefined {
  try {
    setPriority(-10)
    return -10
  } catch {
    return undefined
  }
}

function verdict(ratio: number, target: number): string {
  if (!Number.isFinite(ratio)) return ''
  return ratio >= target ? 'ok' : 'MISSED'
}

try {
  await main()
} finally {
  await cluster?.destroy()
}
