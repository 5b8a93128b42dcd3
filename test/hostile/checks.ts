import { CONDITION_INTERVAL_MS } from '../../src/ops/failure-log.js'
import type { CapacityResult, DeadlineResult, SigtermResult, StallResult } from './faults.js'
import type { SoakResult } from './soak-run.js'

/**
 * What each hostile run must show, as a list of failures (empty when it passed), shared by the
 * short forms in npm test and the long forms of npm run soak.
 */
function only(counts: Record<string, number>, allowed: readonly string[]): string | undefined {
  const other = Object.keys(counts).filter((status) => !allowed.includes(status))
  return other.length === 0
    ? undefined
    : `unexpected statuses ${other.join(', ')} in ${JSON.stringify(counts)}`
}

function failures(...checks: (string | false | undefined)[]): string[] {
  return checks.filter((c): c is string => typeof c === 'string')
}

/**
 * File descriptors a soak may end with above its warm-up's: sockets still closing, and a
 * PostgreSQL pool that grew to its size (DATABASE_POOL_SIZE, 10 by default) after the warm-up.
 */
const FD_SLACK = 16

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1)

export function checkSoak(r: SoakResult): string[] {
  const growth = (r.heapAfterSoak - r.heapAfterWarmup) / r.heapAfterWarmup
  return failures(
    r.requests === 0 && 'no requests were answered',
    only(r.byStatus, ['200']),
    r.errors + r.timeouts > 0 && `${r.errors} errors and ${r.timeouts} timeouts`,
    r.mismatches > 0 && `${r.mismatches} answers differed from the ledger`,
    r.found !== r.expected && `${r.found} of ${r.expected} notes found as confirmed`,
    r.missing > 0 && `${r.missing} confirmed notes are missing`,
    r.changed > 0 && `${r.changed} notes changed`,
    r.unexpected > 0 && `${r.unexpected} notes nobody created`,
    // A leak grows the heap; a smaller heap after the soak than after the warm-up is V8 dropping
    // what the warm-up left (Node 24 flushes unused bytecode: -10.8% seen in a 10 s soak). Past
    // the limit, more load must not grow it by more than 2% again (heapAfterMore).
    growth > 0.1 &&
      (r.heapAfterMore === undefined || r.heapAfterMore > r.heapAfterSoak * 1.02) &&
      `heap after a forced GC grew ${(growth * 100).toFixed(1)}% (limit 10%): ${mib(r.heapAfterWarmup)} MiB once warm, ${mib(r.heapAfterSoak)} MiB after${r.heapAfterMore === undefined ? '' : `, ${mib(r.heapAfterMore)} MiB after more load`}`,
    // Taken when no load runs: the clients' sockets are closed, so what remains is the service's
    // own (listener, log pipes, its database pool). A leak grows with the requests served.
    r.fdsAfterSoak - r.fdsAfterWarmup > FD_SLACK &&
      `open file descriptors grew from ${r.fdsAfterWarmup} to ${r.fdsAfterSoak} (limit +${FD_SLACK})`,
    only(r.pipelined.byStatus, ['404']),
    r.pipelined.errors > 0 && `${r.pipelined.errors} pipelined errors`,
  )
}

export function checkSigterm(r: SigtermResult, inFlight: number, boundMs: number): string[] {
  return failures(
    Object.keys(r.load).some((s) => s.startsWith('5')) &&
      `5xx under load: ${JSON.stringify(r.load)}`,
    only(r.load, ['200']),
    // A new connection after the listener closed is refused; any other error is a request lost
    // on a connection that was open (a reset).
    only(r.loadErrorCodes, ['ECONNREFUSED']) !== undefined &&
      `load errors other than refused connections: ${JSON.stringify(r.loadErrorCodes)}`,
    r.began === 0 && 'the server logged no request',
    r.unanswered > 0 &&
      `${r.unanswered} of the ${r.began} requests the server began were never answered`,
    r.answered5xx > 0 && `${r.answered5xx} requests answered 5xx`,
    JSON.stringify(r.inFlight) !== JSON.stringify({ 200: inFlight }) &&
      `in-flight answers ${JSON.stringify(r.inFlight)}`,
    r.inFlightConnectionClose !== inFlight &&
      `${r.inFlightConnectionClose} of ${inFlight} said Connection: close`,
    r.newConnection !== 'ECONNREFUSED' && `a new connection after SIGTERM: ${r.newConnection}`,
    r.exitCode !== 0 && `exit code ${r.exitCode}`,
    r.tookSignalMs === undefined && 'the service never took SIGTERM',
    r.shutdownMs > boundMs && `shutdown took ${r.shutdownMs} ms (bound ${boundMs})`,
    // Once every request is answered nothing may hold the service: not a connection closing
    // lingering (its idle limit is 2 s, its total limit 5 s), a timer, the store, or its log
    // still being written out (both took seconds on Node 24; it now exits within a few ms).
    r.stoppedAfterAnswersMs === undefined && "the service never logged 'stopped'",
    r.afterAnswersMs > SIGTERM_EXIT_AFTER_ANSWERS_MS &&
      `exited ${r.afterAnswersMs} ms after the last answer (stopped after ${r.stoppedAfterAnswersMs} ms; bound ${SIGTERM_EXIT_AFTER_ANSWERS_MS})`,
  )
}

/** How long the service may take to exit once the SIGTERM fault's last request is answered. */
const SIGTERM_EXIT_AFTER_ANSWERS_MS = 1500

export function checkDeadline(
  r: DeadlineResult,
  shutdownTimeoutMs: number,
  slackMs: number,
): string[] {
  return failures(
    r.exitCode !== 0 && `exit code ${r.exitCode}`,
    r.shutdownMs < shutdownTimeoutMs - 50 && `exited after ${r.shutdownMs} ms, before the deadline`,
    r.shutdownMs > shutdownTimeoutMs + slackMs && `exited after ${r.shutdownMs} ms`,
    r.stuck !== 'closed' && `the stuck request got ${r.stuck}`,
  )
}

export function checkCapacity(r: CapacityResult, expectedCreated?: number): string[] {
  return failures(
    only(r.creates, ['200', '507']),
    (r.creates['507'] ?? 0) === 0 && 'the cap was never reached',
    expectedCreated !== undefined &&
      r.created !== expectedCreated &&
      `${r.created} created, cap ${expectedCreated}`,
    only(r.reads, ['200']),
    r.errors > 0 && `${r.errors} errors`,
    r.bad507 > 0 && `${r.bad507} 507s without the problem body`,
    r.found !== r.created && `${r.found} of ${r.created} confirmed notes found unchanged`,
    r.unexpected > 0 && `${r.unexpected} notes nobody confirmed`,
    r.createAfterDelete !== 200 && `create after a delete: ${r.createAfterDelete}`,
  )
}

export function checkStall(
  r: StallResult,
  clients: number,
  stallMs: number,
  slackMs: number,
): string[] {
  const answered = (r.duringStall['200'] ?? 0) + (r.duringStall['503'] ?? 0)
  return failures(
    answered !== clients && `during the stall: ${JSON.stringify(r.duringStall)}`,
    r.slowestMs > stallMs + slackMs && `a client waited ${r.slowestMs} ms`,
    only(r.underLag, ['200', '503']),
    (r.underLag['503'] ?? 0) === 0 && 'sustained lag never shed load',
    r.bad503 > 0 && `${r.bad503} 503s without Retry-After or problem JSON`,
    (r.recoveredAfterMs < 0 || r.recoveredAfterMs > slackMs) &&
      `recovered after ${r.recoveredAfterMs} ms`,
  )
}

/**
 * An expected condition (a 4xx, a 507) is logged once, then summed up once per
 * interval, not once per request: over `seconds`, no condition may have more lines than its first
 * one, one summary per interval begun, and the summary written at shutdown.
 */
export function checkLogFlood(logs: readonly Record<string, unknown>[], seconds: number): string[] {
  const bound = 2 + Math.floor((seconds * 1000) / CONDITION_INTERVAL_MS)
  const byCondition = new Map<string, number>()
  for (const entry of logs) {
    if (typeof entry.condition === 'string') {
      byCondition.set(entry.condition, (byCondition.get(entry.condition) ?? 0) + 1)
    }
  }
  return failures(
    ...[...byCondition].map(
      ([condition, lines]) =>
        lines > bound && `${lines} log lines for ${condition} in ${seconds} s (bound ${bound})`,
    ),
  )
}
