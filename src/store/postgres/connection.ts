import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { StoreUnavailableError } from '../types.js'

/** SQLSTATE classes and codes that mean "the database is not there now", not "this query is wrong". */
const UNAVAILABLE_STATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting, recovering)
  '57014', // query_canceled: the statement timeout
  '53300', // too_many_connections
  '53100', // disk_full
  '58030', // io_error
])

const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection ended|not queryable|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND/

/**
 * Whether `err` says the database cannot be reached (or is too slow), as opposed to a bug: those
 * become StoreUnavailableError, answered 503 + Retry-After.
 */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string') {
    if (code.startsWith('08') || UNAVAILABLE_STATES.has(code)) return true
    if (/^E[A-Z]+$/.test(code)) return true
  }
  return UNAVAILABLE_MESSAGES.test(err.message)
}

/** Rethrows a connection failure as StoreUnavailableError, anything else as it is. */
export function unavailableOr(err: unknown): never {
  if (isUnavailable(err)) {
    throw new StoreUnavailableError('The database cannot be reached right now.')
  }
  throw err
}

/** 'postgres://u:secret@h/db' -> 'postgres://u:***@h/db': the URL as logs may show it. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return 'postgres://(unparsable URL)'
  }
}

export interface PoolOptions {
  url: string
  poolSize: number
  statementTimeoutMs: number
  /** The schema the tables live in (search_path); default public. */
  schema: string
}

/**
 * A pool whose clients fail fast: statement_timeout on the server, a client-side query timeout a
 * little above it (for a server that vanished without closing the socket), and a bound on the time
 * to connect. An idle client that loses its server is dropped by the pool (the error is expected).
 */
export function createPool({ url, poolSize, statementTimeoutMs, schema }: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    statement_timeout: statementTimeoutMs,
    query_timeout: statementTimeoutMs + 1000,
    connectionTimeoutMillis: Math.min(statementTimeoutMs + 1000, 2000),
    idleTimeoutMillis: 30_000,
    options: `-c search_path=${schema},public`,
  })
  pool.on('error', () => {
    // An idle client lost its connection: the pool drops it and connects anew when needed.
  })
  return pool
}

/**
 * Calls `attempt` until it succeeds, every `retryMs`, for at most `timeoutMs` (start-up with the
 * database down: DATABASE_CONNECT_TIMEOUT_MS, DATABASE_CONNECT_RETRY_MS). Errors that are not
 * about reaching the database are thrown at once.
 */
export async function retryUntilConnected<T>(
  attempt: () => Promise<T>,
  { timeoutMs, retryMs }: { timeoutMs: number; retryMs: number },
  onRetry: (err: Error) => void = () => {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return await attempt()
    } catch (err) {
      if (!isUnavailable(err) || Date.now() + retryMs >= deadline) throw err
      onRetry(err as Error)
      await sleep(retryMs)
    }
  }
}
