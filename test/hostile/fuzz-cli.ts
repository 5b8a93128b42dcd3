/**
 * npm run fuzz [-- --seed N] [-- --requests N] [-- --store memory|file|journal|postgres] [-- --instances N]
 *   [-- --users N]
 * Starts the real service (dist/src/server.js) on 127.0.0.1 and a free port with the fuzzing
 * limits, on the memory store, on a fresh DATA_FILE journal (--store file, or journal) or
 * (--store postgres) on a fresh database of a throwaway PostgreSQL cluster, removed at the end; sends generated requests over raw sockets, checks each
 * answer against the model, then stops the service with SIGTERM and checks that it exits 0 with
 * no error logged and no condition logged once per request. On PostgreSQL,
 * --instances N starts N instances on the one database and spreads the requests over them.
 * --users N runs the isolation run instead (isolation-run.ts): user tokens on, N users and a
 * service key in their own notebooks and in shared ones (members, roles, invitations), every
 * answer and stream checked against a model of each notebook, and none ever shown to a non-member.
 * --replicas N runs the replica's sync run instead (replica-run.ts): N offline replicas (2-4) and
 * a direct writer against the service, with drops, offline periods and restarts; --requests is
 * then the number of random steps per run (default 400), --runs how many seeds follow --seed.
 */

import { checkLogFlood } from './checks.js'
import { counts, integerFlag, parseFlags } from './cli-args.js'
import { FUZZ_LIMITS } from './fuzz-limits.js'
import { FuzzFailure, type FuzzStats, runFuzz } from './fuzz-run.js'
import {
  ISOLATION_SECRET,
  ISOLATION_SERVICE_KEY,
  IsolationFailure,
  runIsolation,
} from './isolation-run.js'
import { randomSeed } from './prng.js'
import { runReplicaFuzz } from './replica-run.js'
import { errorLogs, logLinesByLevel, type ServerProcess, startServer } from './server-process.js'
import { openStore, storeKind } from './store-option.js'

const flags = parseFlags(process.argv.slice(2), [
  'seed',
  'requests',
  'store',
  'instances',
  'users',
  'replicas',
  'runs',
])
const seed = integerFlag(flags, 'seed', randomSeed())
const replicas = integerFlag(flags, 'replicas', 0)
const runs = integerFlag(flags, 'runs', 1)
const requests = integerFlag(flags, 'requests', replicas > 0 ? 400 : 100_000)
if (replicas !== 0 && (replicas < 2 || replicas > 4)) throw new Error('--replicas must be 2 to 4')
const kind = storeKind(flags.store)
const instances = integerFlag(flags, 'instances', 1)
const users = integerFlag(flags, 'users', 0)
if (instances < 1 || (instances > 1 && kind !== 'postgres')) {
  throw new Error(
    '--instances must be 1, or more with --store postgres (memory stores share nothing)',
  )
}

const servers: ServerProcess[] = []
const store = await openStore(kind)
try {
  for (let i = 0; i < instances; i++) {
    servers.push(
      await startServer({
        env: {
          ...store.env,
          // The isolation run keeps the shipped limits: its model knows no caps.
          ...(replicas > 0
            ? { CHANGE_HISTORY: '64' }
            : users === 0
              ? {
                  BODY_LIMIT: String(FUZZ_LIMITS.bodyLimit),
                  MAX_DEPTH: String(FUZZ_LIMITS.maxDepth),
                  MAX_NOTES: String(FUZZ_LIMITS.maxNotes),
                  MAX_STORE_BYTES: String(FUZZ_LIMITS.maxStoreBytes),
                }
              : { AUTH_JWT_SECRET: ISOLATION_SECRET, API_KEYS: ISOLATION_SERVICE_KEY }),
        },
      }),
    )
  }
  if (replicas > 0) await replicaRuns(servers[0] as ServerProcess)
  else if (users === 0) await fuzz(servers)
  else await isolation(servers)
} finally {
  await Promise.all(servers.map((server) => server.stop('SIGTERM')))
  await store.destroy()
}

async function fuzz([first, ...others]: ServerProcess[]): Promise<void> {
  const server = first as ServerProcess
  const ports = [server, ...others].map((s) => `127.0.0.1:${s.port}`).join(', ')
  console.log(
    `fuzzing the service (store: ${store.description}) on ${ports} with seed ${seed}, ${requests} requests`,
  )
  const started = Date.now()
  let lastReport = started
  let stats: FuzzStats | undefined
  let failed = false
  try {
    stats = await runFuzz({
      host: server.host,
      port: server.port,
      otherPorts: others.map((s) => s.port),
      seed,
      requests,
      limits: FUZZ_LIMITS,
      filesShareStoreBytes: kind === 'memory',
      onProgress: (s) => {
        if (Date.now() - lastReport < 10_000) return
        lastReport = Date.now()
        console.log(
          `  ${s.requests} requests, ${Math.round((s.requests * 1000) / (lastReport - started))}/s`,
        )
      },
    })
  } catch (err) {
    failed = true
    console.error(err instanceof Error ? err.message : err)
    if (err instanceof FuzzFailure) {
      const store = kind === 'memory' ? '' : ` --store ${kind}`
      const spread = instances === 1 ? '' : ` --instances ${instances}`
      console.error(
        `\nFUZZ FAILED with seed ${err.seed}. Replay: npm run fuzz -- --seed ${err.seed} --requests ${err.index}${store}${spread}`,
      )
    }
  }
  const stopAt = Date.now()
  if (stats !== undefined) {
    const seconds = (stopAt - started) / 1000
    console.log(
      `seed ${seed}: ${stats.requests} requests in ${seconds.toFixed(1)} s (${Math.round(stats.requests / seconds)}/s), plus ${stats.listChecks} list checks`,
    )
    console.log(`  by status: ${counts(stats.byStatus)}`)
    console.log(`  by kind: ${counts(stats.byKind)}`)
    console.log(
      `  batches applied: ${stats.batchesKept}, holding ${stats.batchedWrites} writes (every other batch refused whole)`,
    )
    console.log(
      `  pipelined: ${stats.pipelined}; notes created: ${stats.notesCreated}; notes stored at the end: ${stats.notesAtEnd} (the list matched the model after every request)`,
    )
  }
  let bad = false
  for (const instance of [server, ...others]) {
    const exit = await instance.stop('SIGTERM')
    const errors = errorLogs(instance.logs)
    const floods = checkLogFlood(instance.logs, (exit.at - started) / 1000)
    const name = instances === 1 ? '' : ` (instance on port ${instance.port})`
    console.log(
      `  SIGTERM${name} -> exit code ${exit.code ?? exit.signal} in ${exit.at - stopAt} ms; log lines by level: ${counts(logLinesByLevel(instance.logs))}; error log lines: ${errors.length}`,
    )
    for (const entry of errors.slice(0, 5)) console.error(`  ${JSON.stringify(entry)}`)
    for (const flood of floods) console.error(`  ${flood}`)
    if (exit.code !== 0 || errors.length > 0 || floods.length > 0) bad = true
  }
  if (failed || bad) {
    if (!failed) console.error(`FUZZ FAILED with seed ${seed}`)
    process.exitCode = 1
  }
}

async function isolation(all: ServerProcess[]): Promise<void> {
  const ports = all.map((s) => s.port)
  console.log(
    `isolation run (store: ${store.description}) on ${ports.join(', ')} with seed ${seed}, ${requests} requests, ${users} users and a service key`,
  )
  const started = Date.now()
  let failed = false
  try {
    const stats = await runIsolation({ host: '127.0.0.1', ports, seed, requests, users })
    const seconds = (Date.now() - started) / 1000
    console.log(
      `seed ${seed}: ${stats.requests} requests in ${seconds.toFixed(1)} s, ${stats.crossings} of them naming another caller's note, cursor, ETag, version, key or event id; nothing crossed`,
    )
    console.log(`  by status: ${counts(stats.byStatus)}`)
    console.log(`  by kind: ${counts(stats.byKind)}`)
    console.log(`  notes stored at the end: ${stats.notesAtEnd} (every list matched its model)`)
    console.log(
      `  notebooks made: ${stats.notebooksMade} (${stats.notebooksAtEnd} left at the end); members added: ${stats.joins}, removed: ${stats.removals}`,
    )
    console.log(
      `  member streams revoked: ${stats.revoked} (the slowest ended ${stats.slowestRevokeMs} ms after its removal); stream messages checked: ${stats.streamEvents}; changes an all-notebooks stream did not send while its user was a member: ${stats.allStreamMissed}`,
    )
  } catch (err) {
    failed = true
    console.error(err instanceof Error ? err.message : err)
    if (err instanceof IsolationFailure) {
      console.error(
        `\nISOLATION FAILED with seed ${seed}. Replay: npm run fuzz -- --users ${users} --seed ${seed} --requests ${requests}${kind === 'memory' ? '' : ` --store ${kind}`}${instances === 1 ? '' : ` --instances ${instances}`}`,
      )
    }
  }
  for (const instance of all) {
    const exit = await instance.stop('SIGTERM')
    const errors = errorLogs(instance.logs)
    console.log(
      `  SIGTERM -> exit code ${exit.code ?? exit.signal}; error log lines: ${errors.length}`,
    )
    for (const entry of errors.slice(0, 5)) console.error(`  ${JSON.stringify(entry)}`)
    if (exit.code !== 0 || errors.length > 0) failed = true
  }
  if (failed) process.exitCode = 1
}

async function replicaRuns(server: ServerProcess): Promise<void> {
  const store = kind === 'memory' ? '' : ` --store ${kind}`
  console.log(
    `replica sync runs (store: ${kind}) on 127.0.0.1:${server.port}: ${runs} run(s) from seed ${seed}, ${replicas} replicas, ${requests} steps each`,
  )
  let failed = false
  for (let run = 0; run < runs && !failed; run++) {
    const runSeed = (seed + run) >>> 0
    const started = Date.now()
    try {
      const stats = await runReplicaFuzz({
        port: server.port,
        seed: runSeed,
        replicas,
        steps: requests,
      })
      console.log(
        `seed ${runSeed}: ${stats.steps} steps in ${((Date.now() - started) / 1000).toFixed(1)} s; conflicts ${stats.conflicts}; reloads ${stats.resets}; changes ${stats.changesLogged}; notes at the end ${stats.notesAtEnd}; by kind: ${counts(stats.byKind)}`,
      )
    } catch (err) {
      failed = true
      console.error(err instanceof Error ? err.message : err)
      console.error(
        `\nREPLICA RUN FAILED with seed ${runSeed}. Replay: npm run fuzz -- --replicas ${replicas} --seed ${runSeed} --requests ${requests}${store}`,
      )
    }
  }
  const exit = await server.stop('SIGTERM')
  const errors = errorLogs(server.logs)
  console.log(
    `  SIGTERM -> exit code ${exit.code ?? exit.signal}; error log lines: ${errors.length}`,
  )
  for (const entry of errors.slice(0, 5)) console.error(`  ${JSON.stringify(entry)}`)
  if (failed || exit.code !== 0 || errors.length > 0) process.exitCode = 1
}
