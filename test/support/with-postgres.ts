import { spawn } from 'node:child_process'
import { constants } from 'node:os'
import { findPostgresBin, PostgresCluster, SHARED_CLUSTER_ENV } from './postgres-cluster.js'

/**
 * `node dist/test/support/with-postgres.js COMMAND ARGS...`: runs the command (`npm test`'s `node --test`)
 * with one throwaway PostgreSQL cluster that every test file in it shares, named by
 * SHARED_CLUSTER_ENV, instead of one cluster per file (initdb and a server start each, a few
 * seconds on a busy 2-core machine). The cluster is removed when the command ends, whether it
 * passed, failed or was stopped by a signal; the exit code is the command's.
 * Without PostgreSQL's binaries the command runs alone, and its PostgreSQL suites say they are
 * skipped (or fail, under CI=true) as they do without the wrapper.
 */
const [command, ...args] = process.argv.slice(2)
if (command === undefined) {
  process.stderr.write('usage: node dist/test/support/with-postgres.js COMMAND [ARGS...]\n')
  process.exit(2)
}

const STOPPING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
type StoppingSignal = (typeof STOPPING_SIGNALS)[number]

let cluster: PostgresCluster | undefined
let stoppedBy: StoppingSignal | undefined
let child: ReturnType<typeof spawn> | undefined

// Ctrl-C reaches the whole process group, the command included: wait for it to end, then remove
// the cluster. A signal sent to this process alone is passed on to the command.
for (const signal of STOPPING_SIGNALS) {
  process.on(signal, () => {
    stoppedBy ??= signal
    child?.kill(signal)
  })
}
// The last resort, should this process fail between starting the cluster and removing it.
process.once('exit', () => cluster?.destroySync())

/** Ends this process as the command ended: with its exit code, or by the same signal. */
function exitLike(code: number | null, signal: NodeJS.Signals | null): never {
  const by = signal ?? stoppedBy
  if (by === undefined || code !== null) process.exit(code ?? 1)
  process.exit(128 + constants.signals[by])
}

if (findPostgresBin() !== undefined) {
  try {
    cluster = await PostgresCluster.start({ durable: false })
  } catch (error) {
    process.stderr.write(`with-postgres: could not start a PostgreSQL cluster: ${String(error)}\n`)
    process.exit(1)
  }
}
if (stoppedBy !== undefined) {
  await cluster?.destroy()
  cluster = undefined
  exitLike(null, stoppedBy)
}

child = spawn(command, args, {
  stdio: 'inherit',
  env:
    cluster === undefined ? process.env : { ...process.env, [SHARED_CLUSTER_ENV]: cluster.url() },
})
const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
  child?.once('error', (error) => {
    process.stderr.write(`with-postgres: could not run ${command}: ${error.message}\n`)
    resolve([127, null])
  })
  child?.once('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal]))
})
await cluster?.destroy()
cluster = undefined
exitLike(code, signal)
