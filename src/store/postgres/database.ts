import type pg from 'pg'
import {
  clientConfig,
  connectWithin,
  createPool,
  endpointOf,
  isUnavailable,
  PipelinedReads,
  retryUntilConnected,
  unavailableOr,
} from './connection.js'
import { migrate } from './schema.js'

export interface DatabaseOptions {
  url: string
  poolSize: number
  statementTimeoutMs: number
  schema: string
  /** The epoch the shared notebook of a schema created now gets; an existing one keeps its own. */
  epoch: string | undefined
}

/** Connections that carry the pipelined point reads, besides the pool (PipelinedReads). */
const PIPELINED_READ_CONNECTIONS = 2

/**
 * The connections of one service (every notebook's) to its database. Every statement goes
 * through here, so that each waits for the schema to be migrated and a database that cannot be
 * reached is a StoreUnavailableError (503) that names the cause, wherever it happens. What a
 * notebook knows of its own clock (its epoch, the highest sequence seen) is NotebookDb's.
 */
export class Database {
  readonly #pool: pg.Pool
  /** The point reads (a note by id, the clock's sequence), pipelined. */
  readonly #reads: PipelinedReads
  readonly #options: DatabaseOptions
  /** What the connection that migrates is made with, as the pool's are. */
  readonly #config: pg.ClientConfig
  /** '127.0.0.1:5432': where the database is, for the causes of 503s. */
  readonly endpoint: string
  /**
   * Exports (snapshots on a pooled connection of their own) open now, and the most at once: half
   * the pool, so that slow export readers never hold every connection the requests need.
   */
  exportsOpen = 0
  readonly maxExports: number
  #opening: Promise<void> | undefined
  #open = false
  /** The connection string, for the change listener's own connection. */
  readonly url: string

  constructor(options: DatabaseOptions) {
    this.#options = options
    this.url = options.url
    this.endpoint = endpointOf(options.url)
    this.maxExports = Math.max(1, Math.floor(options.poolSize / 2))
    const connection = {
      url: options.url,
      statementTimeoutMs: options.statementTimeoutMs,
      schema: options.schema,
    }
    this.#config = clientConfig(connection)
    this.#pool = createPool({ ...connection, poolSize: options.poolSize })
    this.#reads = new PipelinedReads(connection, PIPELINED_READ_CONNECTIONS)
  }

  /**
   * Connects and applies the migrations. Start-up calls it with a retry bound; every statement
   * calls it too, so a store whose database was down at start opens as soon as it is back.
   */
  open(retry: { timeoutMs: number; retryMs: number } = { timeoutMs: 0, retryMs: 0 }) {
    // A connection of its own rather than the pool's, so that its connecting ends by the deadline.
    this.#opening ??= retryUntilConnected(async (leftMs) => {
      const client = await connectWithin(this.#config, leftMs)
      try {
        await migrate(client, this.#options.schema, this.#options.epoch)
        this.#open = true
      } finally {
        await client.end().catch(() => {})
      }
    }, retry).catch((err: unknown) => {
      this.#opening = undefined
      return unavailableOr(err, this.endpoint)
    })
    return this.#opening
  }

  async opened(): Promise<void> {
    if (!this.#open) await this.open()
  }

  /** Whether the database answers now (readiness: /readyz). */
  async available(): Promise<boolean> {
    try {
      await this.open()
      await this.#pool.query('SELECT 1')
      return true
    } catch {
      return false
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.#pool.end(), this.#reads.close()])
  }

  /**
   * A point read on a pipelined connection, as a prepared statement: parsed and planned once per
   * connection instead of on every call (a GET of one note cost PostgreSQL ~150 us of CPU
   * unnamed, ~70 us named; bench W1).
   */
  async read<R extends pg.QueryResultRow>(
    name: string,
    sql: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    await this.opened()
    try {
      return await this.#reads.query<R>(name, sql, values)
    } catch (err) {
      return unavailableOr(err, this.endpoint)
    }
  }

  /**
   * A pooled connection of its own, for a transaction of several statements (an export's
   * snapshot, an import); give it back with `release()`, or `release(err)` after a failure.
   */
  async connect(): Promise<pg.PoolClient> {
    await this.opened()
    try {
      return await this.#pool.connect()
    } catch (err) {
      return unavailableOr(err, this.endpoint)
    }
  }

  /** One statement on a pooled connection. */
  async query<R extends pg.QueryResultRow>(
    sql: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    await this.opened()
    try {
      return await this.#pool.query<R>(sql, values)
    } catch (err) {
      return unavailableOr(err, this.endpoint)
    }
  }

  /**
   * Runs `work` in one transaction on a pooled connection of its own: committed when it answers
   * `commit: true`, rolled back when it answers false or throws. A connection failure (also
   * during COMMIT, when whether it was applied is unknown) is a StoreUnavailableError, as for
   * every statement; the connection is then dropped rather than returned to the pool.
   */
  async transaction<T>(
    work: (client: pg.PoolClient) => Promise<{ commit: boolean; value: T }>,
  ): Promise<T> {
    await this.opened()
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (err) {
      return unavailableOr(err, this.endpoint)
    }
    let failure: unknown
    try {
      await client.query('BEGIN')
      const { commit, value } = await work(client)
      await client.query(commit ? 'COMMIT' : 'ROLLBACK')
      return value
    } catch (err) {
      failure = err
      if (!isUnavailable(err)) await client.query('ROLLBACK').catch(() => {})
      return unavailableOr(err, this.endpoint)
    } finally {
      client.release(isUnavailable(failure) ? (failure as Error) : undefined)
    }
  }
}
