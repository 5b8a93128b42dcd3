import type pg from 'pg'
import type { DirectoryRecord, Role } from '../directory.js'
import { StoreUnavailableError } from '../types.js'
import { unavailableOr } from './connection.js'
import type { Database } from './database.js'

/** Notes read per statement of an export: one keyset step over list positions. */
const EXPORT_CHUNK_ROWS = 1000

/** A notebook as an export's snapshot sees it. */
export interface SnapshotNotebook {
  notebook: string
  epoch: string
  sequence: number
  notes: number
}

/**
 * One consistent view of the database for an export: a REPEATABLE READ, READ ONLY
 * transaction on a pooled connection of its own, so every statement in it sees the notes as they
 * were at its first, whatever is written meanwhile, and reads them in keyset chunks by list
 * position (EXPORT_CHUNK_ROWS at a time, so memory does not grow with the notebook). The
 * connection goes back to the pool on `end()` (after the last chunk, or early when the reader
 * went away) and is discarded after an error. At most `db.maxExports` are open at once: one more
 * is refused as unavailable for now (503, Retry-After), so slow readers cannot take every
 * connection.
 */
export class ExportSnapshot {
  readonly #db: Database
  readonly #client: pg.PoolClient
  /** The statement in flight, which `end()` lets finish before it gives the connection back. */
  #busy: Promise<unknown> = Promise.resolve()
  #ended: Promise<void> | undefined

  private constructor(db: Database, client: pg.PoolClient) {
    this.#db = db
    this.#client = client
  }

  /** Opens a snapshot; throws StoreUnavailableError past the cap or without a database. */
  static async begin(db: Database): Promise<ExportSnapshot> {
    if (db.exportsOpen >= db.maxExports) {
      throw new StoreUnavailableError(
        `At most ${db.maxExports} exports run at once; retry in a few seconds.`,
        5,
      )
    }
    db.exportsOpen++
    let client: pg.PoolClient
    try {
      client = await db.connect()
    } catch (err) {
      db.exportsOpen--
      throw err
    }
    const snapshot = new ExportSnapshot(db, client)
    await snapshot.#query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    return snapshot
  }

  /** The notebook's clock row in this snapshot, or undefined when it has none. */
  async notebook(name: string): Promise<SnapshotNotebook | undefined> {
    const rows = await this.#query(
      'SELECT notebook, epoch, sequence, notes FROM notes_notebooks WHERE notebook = $1',
      [name],
    )
    const row = rows[0]
    return row === undefined ? undefined : notebookOf(row)
  }

  /**
   * Every notebook that holds notes in this snapshot, or deleted notes deleted after `trashAfter`
   * (ms: the trash's time), by name (in code point order).
   */
  async notebooks(trashAfter: number): Promise<SnapshotNotebook[]> {
    const rows = await this.#query(
      `SELECT notebook, epoch, sequence, notes FROM notes_notebooks n
      WHERE notes > 0 OR EXISTS (SELECT 1 FROM notes_trash t
        WHERE t.notebook = n.notebook AND t.deleted > $1)
      ORDER BY notebook COLLATE "C"`,
      [trashAfter],
    )
    return rows.map(notebookOf)
  }

  /** The rows of one statement in this snapshot (what export-archive.ts reads). */
  select(sql: string, values: unknown[]): Promise<Record<string, unknown>[]> {
    return this.#query(sql, values)
  }

  /**
   * The directory in this snapshot, as records that rebuild it: every notebook, then every
   * membership in the order it began, then every invitation in the order it was made.
   */
  async directory(): Promise<DirectoryRecord[]> {
    const records: DirectoryRecord[] = []
    for (const row of await this.#query(
      'SELECT id, name, store, default_user FROM notes_directory ORDER BY store COLLATE "C"',
    )) {
      const { id, name, store, default_user: owner } = row as Record<string, string | null>
      records.push({
        t: 'notebook',
        id: id as string,
        name: name as string,
        store: store as string,
        ...(owner === null ? {} : { default: owner as string }),
      })
    }
    for (const row of await this.#query(
      'SELECT notebook, sub, role FROM notes_members ORDER BY joined',
    )) {
      records.push({
        t: 'role',
        id: row.notebook as string,
        user: row.sub as string,
        role: row.role as Role,
      })
    }
    for (const row of await this.#query(
      'SELECT notebook, id, hash, role, expires, uses FROM notes_invites ORDER BY made',
    )) {
      records.push({
        t: 'invite',
        id: row.notebook as string,
        invite: row.id as string,
        hash: row.hash as string,
        role: row.role as Role,
        expires: Number(row.expires),
        uses: Number(row.uses),
      })
    }
    return records
  }

  /** The notebook's notes' JSON in list order, a chunk at a time. */
  async *chunks(notebook: string, rows = EXPORT_CHUNK_ROWS): AsyncGenerator<string[]> {
    let after = '0'
    for (;;) {
      const found = await this.#query(
        'SELECT position, json FROM notes WHERE notebook = $1 AND position > $2 ORDER BY position LIMIT $3',
        [notebook, after, rows],
      )
      if (found.length > 0) yield found.map((row) => row.json as string)
      if (found.length < rows) return
      after = (found.at(-1) as { position: string }).position
    }
  }

  /** Ends the transaction and gives the connection back; later calls wait for the first. */
  end(): Promise<void> {
    this.#ended ??= this.#finish()
    return this.#ended
  }

  async #finish(): Promise<void> {
    await this.#busy.catch(() => {})
    try {
      await this.#client.query('ROLLBACK')
      this.#client.release()
    } catch (err) {
      // The connection is in an unknown state: the pool closes it instead of reusing it.
      this.#client.release(err as Error)
    } finally {
      this.#db.exportsOpen--
    }
  }

  async #query(sql: string, values?: unknown[]): Promise<Record<string, unknown>[]> {
    if (this.#ended !== undefined) throw new Error('the export was closed')
    const result = this.#client.query(sql, values)
    this.#busy = result
    try {
      return (await result).rows
    } catch (err) {
      this.#ended ??= this.#discard(err)
      return unavailableOr(err, this.#db.endpoint)
    }
  }

  async #discard(err: unknown): Promise<void> {
    this.#client.release(err instanceof Error ? err : new Error(String(err)))
    this.#db.exportsOpen--
  }
}

function notebookOf(row: Record<string, unknown>): SnapshotNotebook {
  return {
    notebook: row.notebook as string,
    epoch: row.epoch as string,
    sequence: Number(row.sequence),
    notes: Number(row.notes),
  }
}
