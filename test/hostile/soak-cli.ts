/**
 * npm run soak [-- --duration 60] [-- --connections 50] [-- --keep 1000] [-- --faults on|off]
 *   [-- --store memory|postgres|file]
 * The long forms: a soak of the real service (default 60 s after a 10 s warm-up), then the
 * faults under heavier load. Prints the figures of each and exits 1 if any check failed.
 * --store postgres runs each on a fresh database of a throwaway PostgreSQL cluster (durable
 * commits; default 30 s after a 5 s warm-up), and the faults that concern the store: SIGTERM under
 * load (in-flight writes answered) and the capacity caps. --store file keeps the notes in a journal
 * (DATA_FILE) and checks, beside the rest, that compaction keeps the file's size bounded.
 */
import { statSync } from 'node:fs'
import { get } from 'node:http'
import { checkCapacity, checkDeadline, checkSigterm, checkSoak, checkStall } from './checks.js'
import { counts, integerFlag, parseFlags } from './cli-args.js'
import {
  capacityUnderLoad,
  sigtermUnderLoad,
  sigtermWithStuckRequest,
  stallFaults,
} from './faults.js'
import { errorLogs, startServer } from './server-process.js'
import { runSoak } from './soak-run.js'
import { openStore, storeKind } from './store-option.js'

const flags = parseFlags(process.argv.slice(2), [
  'duration',
  'warmup',
  'connections',
  'keep',
  'faults',
  'store',
])
const kind = storeKind(flags.store)
const onPostgres = kind === 'postgres'
const durationS = integerFlag(flags, 'duration', onPostgres ? 30 : 60)
const warmupS = integerFlag(flags, 'warmup', onPostgres ? 5 : 10)
const connections = integerFlag(flags, 'connections', 50)
const keep = integerFlag(flags, 'keep', 1000)
const withFaults = (flags.faults ?? 'on') !== 'off'

let failed = 0
function report(name: string, problems: string[]): void {
  if (problems.length === 0) {
    console.log(`  PASS ${name}`)
  } else {
    failed++
    for (const problem of problems) console.log(`  FAIL ${name}: ${problem}`)
  }
}
/** Most a compacted journal may hold: twice the live data, or 1 MiB, plus 4 MiB written since. */
const journalBound = (live: number): number => Math.max(2 * live, 1024 * 1024) + 4 * 1024 * 1024
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(2)} MiB`

const store = await openStore(kind)
try {
  await soakAndFaults()
} finally {
  await store.destroy()
}

async function soakAndFaults(): Promise<void> {
  console.log(
    `soak (store: ${store.description}): ${connections} keep-alive connections (+4 pipelining 10 deep), ${warmupS} s warm-up, ${durationS} s measured`,
  )
  const server = await startServer({
    probe: true,
    // The change history is bounded, and filled during the warm-up, so the heap check sees leaks
    // rather than the history growing to its bound (10,000 changes by default).
    // Bounded history, revisions and trash, filled in the warm-up (see test/soak.test.ts).
    env: { ...store.env, CHANGE_HISTORY: '1000', NOTE_HISTORY: '4', TRASH_DAYS: '0.00002' },
  })
  const soak = await runSoak({
    server,
    durationS,
    warmupS,
    connections,
    keep,
    pipeliningConnections: 4,
  })
  // The journal's size against the notes it holds: compaction keeps it under about twice the
  // live data (nothing below 1 MiB is compacted), plus what was written since the last one.
  let journal: { bytes: number; live: number } | undefined
  if (store.env.DATA_FILE !== undefined) {
    // A connection of its own, closed at once: a keep-alive one would linger into the shutdown.
    const list = await new Promise<Buffer>((resolve, reject) => {
      get({ host: '127.0.0.1', port: server.port, path: '/api/note', agent: false }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => resolve(Buffer.concat(chunks)))
      }).on('error', reject)
    })
    journal = { live: list.length, bytes: statSync(store.env.DATA_FILE).size }
  }
  const stopAt = Date.now()
  const exit = await server.stop()
  console.log(
    `  requests: ${soak.requests} (${Math.round(soak.requests / (durationS + 1))}/s); by status: ${counts(soak.byStatus)}; errors ${soak.errors}, timeouts ${soak.timeouts}, mismatches ${soak.mismatches}`,
  )
  console.log(
    `  pipelined: ${soak.pipelined.requests}; by status: ${counts(soak.pipelined.byStatus)}; errors ${soak.pipelined.errors}`,
  )
  console.log(
    `  notes: created ${soak.created}, deleted ${soak.deleted}, expected ${soak.expected}, found exact ${soak.found}, missing ${soak.missing}, changed ${soak.changed}, unexpected ${soak.unexpected}`,
  )
  console.log(
    `  heap after forced GC: ${mib(soak.heapAfterWarmup)} after warm-up, ${mib(soak.heapAfterSoak)} after the soak (${(((soak.heapAfterSoak - soak.heapAfterWarmup) / soak.heapAfterWarmup) * 100).toFixed(1)}%); open fds ${soak.fdsAfterWarmup}, then ${soak.fdsAfterSoak}${soak.heapAfterMore === undefined ? '' : `; ${mib(soak.heapAfterMore)} after half as much load again`}`,
  )
  console.log(
    `  SIGTERM -> exit ${exit.code ?? exit.signal} in ${exit.at - stopAt} ms; error log lines ${errorLogs(server.logs).length}`,
  )
  if (journal !== undefined) {
    console.log(
      `  journal: ${mib(journal.bytes)} on disk for ${mib(journal.live)} of notes (bound ${mib(journalBound(journal.live))})`,
    )
  }
  report('soak', [
    ...checkSoak(soak),
    ...(journal === undefined || journal.bytes <= journalBound(journal.live)
      ? []
      : [`the journal grew to ${mib(journal.bytes)}, past compaction's bound`]),
    ...(exit.code === 0 ? [] : [`exit code ${exit.code}`]),
    ...errorLogs(server.logs).map((entry) => `logged ${JSON.stringify(entry)}`),
  ])

  if (withFaults) {
    console.log(
      `faults: SIGTERM under ${connections} connections of load, with 40 requests caught half sent`,
    )
    const sigterm = await sigtermUnderLoad({
      loadMs: 5000,
      connections,
      inFlight: 20,
      env: await store.fresh(),
    })
    console.log(
      `  load answered: ${counts(sigterm.load)}; unanswered after SIGTERM: ${sigterm.loadErrors} (${counts(sigterm.loadErrorCodes)})`,
    )
    console.log(
      `  the server began ${sigterm.began} requests: ${sigterm.unanswered} unanswered, ${sigterm.answered5xx} answered 5xx`,
    )
    console.log(
      `  in flight: ${counts(sigterm.inFlight)}, ${sigterm.inFlightConnectionClose} with Connection: close; new connection: ${sigterm.newConnection}`,
    )
    console.log(
      `  took SIGTERM after ${sigterm.tookSignalMs ?? 'never'} ms; stopped ${sigterm.stoppedAfterAnswersMs ?? 'never'} ms after the last in-flight answer; exit ${sigterm.exitCode} ${sigterm.shutdownMs} ms after SIGTERM, ${sigterm.afterAnswersMs} ms after that answer (seen by the harness after ${sigterm.seenMs} ms; its event loop blocked up to ${sigterm.harnessLagMs} ms)`,
    )
    report('SIGTERM under load', checkSigterm(sigterm, 40, 10_000))

    if (onPostgres) {
      // A half-sent request never reaches the store, and the probe's stall blocks the event loop
      // before any store call: the same code on both stores, checked on memory.
      console.log(
        'faults not run on PostgreSQL (store-independent, run them on memory): SIGTERM with a stuck request, event-loop stall',
      )
    } else {
      const deadline = await sigtermWithStuckRequest(3000)
      console.log(
        `faults: SIGTERM with a stuck request, SHUTDOWN_TIMEOUT_MS=3000: exit ${deadline.exitCode} after ${deadline.shutdownMs} ms; the stuck request: ${deadline.stuck}`,
      )
      report('SIGTERM deadline', checkDeadline(deadline, 3000, 3000))
    }

    // Caps that PostgreSQL's durable creates (a few hundred a second here) reach well within 10 s.
    const caps = onPostgres
      ? ([
          ['MAX_NOTES=500', { MAX_NOTES: '500' }, 500],
          ['MAX_STORE_BYTES=65536', { MAX_STORE_BYTES: '65536' }, undefined],
        ] as const)
      : ([
          ['MAX_NOTES=2000', { MAX_NOTES: '2000' }, 2000],
          ['MAX_STORE_BYTES=262144', { MAX_STORE_BYTES: '262144' }, undefined],
        ] as const)
    for (const [name, env, cap] of caps) {
      const capacity = await capacityUnderLoad({
        env: { ...(await store.fresh()), ...env },
        connections,
        durationS: 10,
      })
      console.log(`faults: capacity ${name}, ${connections} connections, 10 s`)
      console.log(
        `  creates: ${counts(capacity.creates)}; reads: ${counts(capacity.reads)}; errors ${capacity.errors}; bad 507 bodies ${capacity.bad507}`,
      )
      console.log(
        `  notes confirmed ${capacity.created}, found unchanged ${capacity.found}, unexpected ${capacity.unexpected}; create after a delete: ${capacity.createAfterDelete}`,
      )
      report(`capacity ${name}`, checkCapacity(capacity, cap))
    }

    if (!onPostgres) {
      const stall = await stallFaults({ stallMs: 3000, clients: 50, lagMs: 5000 })
      console.log(
        'faults: a 3 s event-loop stall with 50 clients sending, then 5 s of sustained lag (MAX_EVENT_LOOP_DELAY_MS=200)',
      )
      console.log(
        `  during the stall: ${counts(stall.duringStall)}, slowest answer ${stall.slowestMs} ms after sending`,
      )
      console.log(
        `  polls under lag: ${counts(stall.underLag)}; bad 503s ${stall.bad503}; 200 again ${stall.recoveredAfterMs} ms after the lag`,
      )
      report('event-loop stall', checkStall(stall, 50, 3000, 3000))
    }
  }

  console.log(failed === 0 ? 'all checks passed' : `${failed} check(s) failed`)
  process.exitCode = failed === 0 ? 0 : 1
}
