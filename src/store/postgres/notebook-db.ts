import type pg from 'pg'
import { etagOf, randomEpoch, versionToken } from '../kernel/version-token.js'
import type { NoteRecord } from '../types.js'
import type { Database } from './database.js'

/**
 * One notebook's view of the service's database: its name (a parameter of every statement about
 * it), the epoch of its version tokens and the highest change sequence of it this instance has
 * seen. Its statements wait for the notebook's clock row to exist (made on its first use by any
 * instance, with `epoch` when that is free), so that even an empty notebook has a version that
 * stays valid.
 */
export class NotebookDb {
  readonly db: Database
  /** The notebook: 'shared', 'user:alice', ... */
  readonly name: string
  readonly #epoch: string | undefined
  #opening: Promise<void> | undefined
  /** The first part of every version token; '' until the notebook is open. */
  epoch = ''
  /** The highest change sequence of this notebook this instance has seen. */
  known = 0
  /** The transaction's connection that every statement goes to (`on`), if any. */
  #client: pg.ClientBase | undefined

  /** @param epoch the epoch the notebook gets if it is new and no other holds it; random by default */
  constructor(db: Database, name: string, epoch?: string) {
    this.db = db
    this.name = name
    this.#epoch = epoch
  }

  /** Opens the database (migrations, with `retry` as Database.open), then this notebook. */
  open(retry?: { timeoutMs: number; retryMs: number }): Promise<void> {
    this.#opening ??= (async () => {
      await this.db.open(retry)
      const { rows } = await this.db.query<{ r_epoch: string; r_sequence: string }>(
        'SELECT r_epoch, r_sequence FROM notes_open_notebook($1, $2)',
        [this.name, this.#epoch ?? randomEpoch()],
      )
      const row = rows[0] as { r_epoch: string; r_sequence: string }
      this.epoch = row.r_epoch
      this.see(Number(row.r_sequence))
    })().catch((err: unknown) => {
      this.#opening = undefined
      throw err
    })
    return this.#opening
  }

  /**
   * This notebook, open, with every statement on `client` (a transaction's, Database.transaction)
   * rather than on the pool.
   */
  on(client: pg.ClientBase): NotebookDb {
    const bound = new NotebookDb(this.db, this.name, this.#epoch)
    bound.epoch = this.epoch
    bound.known = this.known
    bound.#client = client
    return bound
  }

  async opened(): Promise<void> {
    if (this.epoch === '') await this.open()
  }

  /** A point read, prepared and pipelined (Database.read), once the notebook is open. */
  async read<R extends pg.QueryResultRow>(
    name: string,
    sql: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    if (this.#client !== undefined) return this.#client.query<R>({ name, text: sql, values })
    if (this.epoch === '') await this.open()
    return this.db.read<R>(name, sql, values)
  }

  /** One statement on a pooled connection, once the notebook is open. */
  async query<R extends pg.QueryResultRow>(
    sql: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    if (this.#client !== undefined) return this.#client.query<R>(sql, values)
    if (this.epoch === '') await this.open()
    return this.db.query<R>(sql, values)
  }

  see(sequence: number): void {
    if (sequence > this.known) this.known = sequence
  }

  /** 5 -> 'k2x9q1.5' in this notebook's epoch. */
  token(sequence: number): string {
    return versionToken(this.epoch, sequence)
  }

  /** A note as a store answers it, from its JSON and the sequence of the write that made it. */
  record(json: string, written: number, modified: number): NoteRecord {
    return { json, etag: etagOf(this.token(written)), modified }
  }
}
