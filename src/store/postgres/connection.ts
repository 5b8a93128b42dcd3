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
  /Connection terminated|timeout exceeded when trying to connect|timeout expired|Query read timeout|Client has encountered a connection error|Connection ended|not queryable|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND/

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

/**
 * Rethrows a connection failure as StoreUnavailableError (a 503) whose cause says what happened
 * and where, for the log ('connection refused at 127.0.0.1:5499'); anything else as it is.
 * The answer's detail stays the same whatever the cause: a 5xx reveals no internals.
 */
export function unavailableOr(err: unknown, endpoint: string): never {
  if (isUnavailable(err)) {
    throw new StoreUnavailableError('The database cannot be reached right now.', 1, {
      cause: describeFailure(err, endpoint),
    })
  }
  throw err
}

/** Node's socket error codes, as a person reads them. */
const SOCKET_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection broken',
  ETIMEDOUT: 'connecting timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EAI_AGAIN: 'host name lookup failed',
}

/**
 * What went wrong on the way to the database, in a few words, with where when that helps; never
 * the password (no error of pg or of a socket holds it):
 * connect ECONNREFUSED 127.0.0.1:5499 -> 'connection refused at 127.0.0.1:5499'
 * getaddrinfo ENOTFOUND db.example -> 'host not found: db.example'
 * pg's 'timeout expired' (the connect timeout) -> 'no answer within the connect timeout at 10.0.0.9:5432'
 * a server error (SQLSTATE 28P01) -> 'password authentication failed for user "x"'
 */
export function describeFailure(err: unknown, endpoint: string): string {
  if (!(err instanceof Error)) return String(err)
  // Node tries each address of a name in turn (localhost: ::1, then 127.0.0.1): an
  // AggregateError with an empty message holds one error per address.
  if (err instanceof AggregateError && err.errors.length > 0) {
    const causes = err.errors.map((one: unknown) => describeFailure(one, endpoint))
    return [...new Set(causes)].join('; ')
  }
  const { code, address, port, hostname } = err as {
    code?: unknown
    address?: unknown
    port?: unknown
    hostname?: unknown
  }
  if (code === 'ENOTFOUND')
    return `host not found: ${typeof hostname === 'string' ? hostname : endpoint}`
  const where =
    typeof address === 'string' && typeof port === 'number' ? `${address}:${port}` : endpoint
  if (typeof code === 'string' && SOCKET_ERRORS[code] !== undefined) {
    return `${SOCKET_ERRORS[code]} at ${where}`
  }
  // pg-pool's 'Connection terminated due to connection timeout' is its own bound, not the server.
  if (
    /timeout expired|timeout exceeded when trying to connect|connection timeout/.test(err.message)
  ) {
    return `no answer within the connect timeout at ${where}`
  }
  if (/Connection terminated|Connection ended/.test(err.message)) {
    return `the database closed the connection at ${where}`
  }
  return err.message === '' ? `${err.name} at ${where}` : err.message
}

/**
 * 'postgres://u:p@db.example/notes' -> 'db.example:5432'; where the store's database is, as the
 * causes of failures name it. A host in the query (?host=/run/postgresql) counts too.
 */
export function endpointOf(url: string): string {
  try {
    const parsed = new URL(url)
    const host = parsed.searchParams.get('host') ?? decodeURIComponent(parsed.hostname)
    return `${host === '' ? 'localhost' : host}:${parsed.port === '' ? '5432' : parsed.port}`
  } catch {
    return '(unparsable URL)'
  }
}

/**
 * Why start-up could not open the store, for its one line on stderr. A database that could not be
 * reached was retried: how long, the setting only when the user set it (`timeoutMs`), and the
 * last cause. Anything else failed at once and says so itself (a wrong password, a missing
 * database).
 * { waitedMs: 2040 }, connection refused -> 'gave up after 2 s: connection refused at 127.0.0.1:9'
 * { waitedMs: 640, timeoutMs: 600 } -> 'gave up after 0.6 s (DATABASE_CONNECT_TIMEOUT_MS=600): ...'
 * a wrong password -> 'password authentication failed for user "x"'
 */
export function openFailure(
  err: unknown,
  { waitedMs, timeoutMs }: { waitedMs: number; timeoutMs: number | undefined },
): string {
  if (!(err instanceof StoreUnavailableError))
    return err instanceof Error ? err.message : String(err)
  const seconds = Number((waitedMs / 1000).toFixed(1))
  const setting = timeoutMs === undefined ? '' : ` (DATABASE_CONNECT_TIMEOUT_MS=${timeoutMs})`
  return `gave up after ${seconds} s${setting}: ${String(err.cause ?? err.message)}`
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

/** The longest a connection may take to be made, at most (a server that accepts, then hangs). */
const CONNECT_TIMEOUT_MS = 2000

/**
 * What every connection of the store is made with. It fails fast: statement_timeout on the server,
 * a client-side query timeout a little above it (for a server that vanished without closing the
 * socket), and a bound on the time to connect.
 */
export function clientConfig({
  url,
  statementTimeoutMs,
  schema,
}: Omit<PoolOptions, 'poolSize'>): pg.ClientConfig {
  return {
    connectionString: url,
    statement_timeout: statementTimeoutMs,
    query_timeout: statementTimeoutMs + 1000,
    connectionTimeoutMillis: Math.min(statementTimeoutMs + 1000, CONNECT_TIMEOUT_MS),
    options: `-c search_path=${schema},public`,
  }
}

/**
 * A pool of such connections. An idle client that loses its server is dropped by the pool (the
 * error is expected).
 */
export function createPool(options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    ...clientConfig(options),
    max: options.poolSize,
    idleTimeoutMillis: 30_000,
  })
  pool.on('error', () => {
    // An idle client lost its connection: the pool drops it and connects anew when needed.
  })
  return pool
}

/**
 * Calls `attempt` until it succeeds, every `retryMs`, and gives up `timeoutMs` after the start,
 * not before and not much after (start-up with the database down: DATABASE_CONNECT_TIMEOUT_MS,
 * DATABASE_CONNECT_RETRY_MS), so that its 'gave up after' says the setting. `attempt` is given
 * the ms left, to bound its connecting by: timeout 3000 against a server that never answers ->
 * an attempt bounded at 2 s, 0.5 s of wait, one bounded at 0.5 s, given up at 3 s (each attempt
 * bounded at 2 s, it was 4.5 s). Timeout 2000 against a closed port -> attempts at 0, 0.5, 1 and
 * 1.5 s, given up at 2 s (stopping when the next attempt would fall past the deadline, it was
 * 1.5 s). A timeout of 0 tries once, its bound the usual one (`attempt(Infinity)`). Errors that
 * are not about reaching the database are thrown at once.
 */
export async function retryUntilConnected<T>(
  attempt: (leftMs: number) => Promise<T>,
  { timeoutMs, retryMs }: { timeoutMs: number; retryMs: number },
  onRetry: (err: Error) => void = () => {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const left = timeoutMs === 0 ? Number.POSITIVE_INFINITY : Math.max(1, deadline - Date.now())
    try {
      return await attempt(left)
    } catch (err) {
      const now = Date.now()
      if (!isUnavailable(err) || now >= deadline) throw err
      if (now + retryMs >= deadline) {
        // No attempt fits before the deadline: wait for it, so the figure is the one set.
        await sleep(deadline - now)
        throw err
      }
      onRetry(err as Error)
      await sleep(retryMs)
    }
  }
}

/**
 * One connection of `config`, its connecting bounded by `leftMs` too: what start-up's attempts
 * connect with, so that an attempt ends by the deadline.
 */
export async function connectWithin(config: pg.ClientConfig, leftMs: number): Promise<pg.Client> {
  const bound = Math.min(config.connectionTimeoutMillis ?? CONNECT_TIMEOUT_MS, leftMs)
  const client = new pg.Client({ ...config, connectionTimeoutMillis: bound })
  try {
    await client.connect()
  } catch (err) {
    await client.end().catch(() => {})
    throw err
  }
  return client
}

/**
 * A few `pipeline: true` connections for the hot single-statement reads (a note by id, the
 * clock's sequence): the statements issued in one tick go out in one write and their answers come
 * back in one read, instead of one pool checkout, write and read each (node-postgres 8.23's
 * opt-in; issue 17 measured 106-111k point reads/s against 38-46k for a Pool). Each statement
 * ends with its own Sync, so one that fails (a statement timeout) fails alone.
 *
 * Only reads go here. A write waits on the clock row's lock and its commit's flush, and every
 * statement behind it on the same connection would wait too; writes stay on the pool.
 *
 * A connection that fails or ends is dropped, and the next read connects anew; the statements
 * that were on it reject (503, as for the pool). While a connection is being made, reads wait for
 * it, bounded like the pool's connect.
 */
export class PipelinedReads {
  readonly #config: pg.ClientConfig
  readonly #slots: (Promise<pg.Client> | undefined)[]
  #next = 0
  #closed = false

  constructor(options: Omit<PoolOptions, 'poolSize'>, count: number) {
    this.#config = { ...clientConfig(options), pipeline: true }
    this.#slots = new Array(count).fill(undefined)
  }

  /**
   * One statement, prepared once per connection under `name`. A failure that says the connection
   * is unusable (isUnavailable) drops it, so the next read connects anew.
   */
  async query<R extends pg.QueryResultRow>(
    name: string,
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    const index = this.#next
    this.#next = (index + 1) % this.#slots.length
    const slot = this.#connection(index)
    const client = await slot
    try {
      return await client.query<R>({ name, text, values })
    } catch (err) {
      if (isUnavailable(err)) this.#drop(index, slot, client)
      throw err
    }
  }

  async close(): Promise<void> {
    this.#closed = true
    const slots = this.#slots.splice(0)
    await Promise.all(
      slots.map(async (slot) => {
        const client = await slot?.catch(() => undefined)
        await client?.end().catch(() => {})
      }),
    )
  }

  #connection(index: number): Promise<pg.Client> {
    if (this.#closed) return Promise.reject(new Error('Client was closed and is not queryable'))
    const slot = this.#slots[index]
    if (slot !== undefined) return slot
    const client = new pg.Client(this.#config)
    const connected = client.connect().then(() => client)
    const drop = (): void => this.#drop(index, connected, client)
    client.on('error', drop)
    client.on('end', drop)
    connected.catch(drop)
    this.#slots[index] = connected
    return connected
  }

  /** Forgets a connection that failed, if its slot still holds it (a newer one may), and ends it. */
  #drop(index: number, slot: Promise<pg.Client>, client: pg.Client): void {
    if (this.#slots[index] !== slot) return
    this.#slots[index] = undefined
    client.end().catch(() => {})
  }
}
