import type pg from 'pg'
import { etagOf, versionToken } from '../kernel/version-token.js'
import type { NoteRecord } from '../types.js'
import {
  createPool,
  endpointOf,
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
  /** The epoch a schema created now gets; an existing schema keeps its own. */
  epoch: string | undefined
}

/** Connections that carry the pipelined point reads, besides the pool (PipelinedReads). */
const PIPELINED_READ_CONNECTIONS = 2

/**
 * One store's connections to its database and what it knows of it: the epoch of its version
 * tokens and the highest change sequence seen. Every statement goes through here, so that each
 * waits for the schema to be open and a database that cannot be reached is a
 * StoreUnavailableError (503) that names the cause, wherever it happens.
 */
export class Database {
  readonly #pool: pg.Pool
  /** The point reads (a note by id, the clock's sequence), pipelined. */
  readonly #reads: PipelinedReads
  readonly #options: DatabaseOptions
  /** '127.0.0.1:5432': where the database is, for the causes of 503s. */
  readonly endpoint: string
  #opening: Promise<void> | undefined
  /** The first part of every version token; '' until the store is open. */
  epoch = ''
  /** The highest change sequence this instance has seen. */
  known = 0

  constructor(options: DatabaseOptions) {
    this.#options = options
    this.endpoint = endpointOf(options.url)
    const connection = {
      url: options.url,
      statementTimeoutMs: options.statementTimeoutMs,
      schema: options.schema,
    }
    this.#pool = createPool({ ...connection, poolSize: options.poolSize })
    this.#reads = new PipelinedReads(connection, PIPELINED_READ_CONNECTIONS)
  }

  /**
   * Connects and applies the migrations. Start-up calls it with a retry bound; every statement
   * calls it too, so a store whose database was down at start opens as soon as it is back.
   */
  open(retry: { timeoutMs: number; retryMs: number } = { timeoutMs: 0, retryMs: 0 }) {
    this.#opening ??= retryUntilConnected(async () => {
      const client = await this.#pool.connect()
      try {
        await migrate(client, this.#options.schema, this.#options.epoch)
        const { rows } = await client.query<{ epoch: string; sequence: string }>(
          'SELECT epoch, sequence FROM notes_clock',
        )
        const row = rows[0] as { epoch: string; sequence: string }
        this.epoch = row.epoch
        this.see(Number(row.sequence))
      } finally {
        client.release()
      }
    }, retry).catch((err: unknown) => {
      this.#opening = undefined
      return unavailableOr(err, this.endpoint)
    })
    return this.#opening
  }

  async opened(): Promise<void> {
    if (this.epoch === '') await this.open()
  }

  /** Whether the database answers now (readiness, DECISION 27). */
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

  see(sequence: number): void {
    if (sequence > this.known) this.known = sequence
  }

  /** 5 -> 'k2x9q1.5' in this database's epoch. */
  token(sequence: number): string {
    return versionToken(this.epoch, sequence)
  }

  /** A note as a store answers it, from its JSON and the sequence of the write that made it. */
  record(json: string, written: number, modified: number): NoteRecord {
    return { json, etag: etagOf(this.token(written)), modified }
  }
}
