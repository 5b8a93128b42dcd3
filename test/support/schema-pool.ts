import { randomBytes, randomInt } from 'node:crypto'
import pg from 'pg'
import { migrate, quoteIdent } from '../../src/store/postgres/schema.js'

/**
 * Migrated schemas for the tests' fresh, empty stores, reused instead of migrated anew: opening a
 * store on a new schema runs every migration (90-160 ms of PostgreSQL's CPU), and the PostgreSQL
 * suites open one per case. A schema comes back once its store is closed (`give`), is reset to
 * exactly what a fresh migration leaves, and is handed to the next store that asks (`take`).
 *
 * What "fresh" is comes from the migrations themselves: the pool migrates a template schema once
 * (with a marker epoch) and snapshots every table's rows and every sequence's position. A reset,
 * one transaction, empties every table, puts the snapshot's rows back with the marker replaced by
 * the epoch the schema is reset for, and sets every sequence back to its snapshot. A schema
 * whose tables, columns, indexes or functions differ from the template's, or whose reset fails
 * for any reason (a session still holds a lock on it: lock_timeout), is dropped, never reused.
 *
 * The epoch: a store that names none gets a NEW random one on every reuse, as migration 1 draws,
 * so no version token or ETag of one case matches another's. A store that names one (the suites'
 * TEST_EPOCH) gets a schema reset with that one, exactly as migrating a new schema with it would
 * give: such schemas are kept apart per epoch, so the reset is done before `take` hands them out.
 *
 * Only for a store that starts on an empty schema and is the only one on it: tests of an upgrade
 * (`upTo`), of several stores or instances on one schema, or of what the epoch option does on an
 * existing schema keep schemas of their own.
 */
export class SchemaPool {
  readonly #url: string
  readonly #admin: pg.Pool
  /** Schemas reset and not handed out, by the epoch they were reset for ('' for random ones). */
  readonly #ready = new Map<string, string[]>()
  /** The schemas this pool made and handed out: only those come back. */
  readonly #out = new Set<string>()
  #template: Promise<Snapshot> | undefined
  /** Resets done and refused, for the suite that checks the pool works. */
  readonly stats = { reused: 0, made: 0, reset: 0, dropped: 0 }

  constructor(url: string) {
    this.#url = url
    // allowExitOnIdle: an idle connection of the pool does not keep a test file's process alive.
    this.#admin = new pg.Pool({
      connectionString: url,
      max: 2,
      idleTimeoutMillis: 1000,
      allowExitOnIdle: true,
      options: '-c lock_timeout=2000 -c client_min_messages=warning',
    })
  }

  /**
   * The schema for a new store: a reset one for `epoch` (undefined: a random epoch) if there is
   * one, else a new name (the store migrates it). Synchronous, as stores are made.
   */
  take(epoch?: string): string {
    const schema = this.#ready.get(epoch ?? '')?.pop()
    if (schema !== undefined) this.stats.reused++
    else this.stats.made++
    const name = schema ?? `pool_${randomBytes(6).toString('hex')}`
    this.#out.add(name)
    return name
  }

  /**
   * Gives back a schema that `take` handed out, once the store on it is closed (never before:
   * it would be reset under the store): reset for `epoch`, then ready for the next `take(epoch)`.
   * A schema that cannot be reset is dropped from the pool, without an error; a schema that is not
   * out of this pool is an error.
   */
  async give(schema: string, epoch?: string): Promise<void> {
    if (!this.#out.delete(schema)) throw new Error(`schema ${schema} is not out of this pool`)
    try {
      await this.reset(schema, epoch ?? migrationEpoch())
    } catch {
      this.stats.dropped++
      return
    }
    this.stats.reset++
    const key = epoch ?? ''
    const ready = this.#ready.get(key) ?? []
    ready.push(schema)
    this.#ready.set(key, ready)
  }

  /** Resets `schema` to what a fresh migration with `epoch` leaves; throws when it cannot. */
  async reset(schema: string, epoch: string): Promise<void> {
    const template = await this.#snapshot()
    const client = await this.#admin.connect()
    let failure: unknown
    try {
      await client.query('BEGIN')
      const shape = await shapeOf(client, schema)
      if (shape !== template.shape) throw new Error(`schema ${schema} is not shaped as migrated`)
      const q = quoteIdent(schema)
      // DELETE, not TRUNCATE: on tables this small it costs PostgreSQL 8 ms of CPU per reset
      // instead of 21 ms (TRUNCATE makes new files for every table and index). The sequences
      // (identity ones included) are set back below, as RESTART IDENTITY would. Should a later
      // migration add a foreign key that these deletes break, the reset fails and the schema is
      // dropped: slower, never wrong.
      for (const table of template.rows.keys()) {
        await client.query(`DELETE FROM ${q}.${quoteIdent(table)}`)
      }
      for (const [table, rows] of template.rows) {
        if (rows === '[]') continue
        const name = `${q}.${quoteIdent(table)}`
        // Wherever migration put the epoch (a string value equal to the marker), the new one.
        const json = rows.replaceAll(JSON.stringify(template.marker), JSON.stringify(epoch))
        await client.query(
          `INSERT INTO ${name} SELECT * FROM jsonb_populate_recordset(NULL::${name}, $1::jsonb)`,
          [json],
        )
      }
      for (const [sequence, { last_value, is_called }] of template.sequences) {
        await client.query('SELECT setval($1::regclass, $2, $3)', [
          `${q}.${quoteIdent(sequence)}`,
          last_value,
          is_called,
        ])
      }
      await client.query('COMMIT')
    } catch (err) {
      failure = err
      await client.query('ROLLBACK').catch(() => {})
      throw err
    } finally {
      client.release(failure instanceof Error ? failure : undefined)
    }
  }

  /** Closes the pool's own connections (the pool is left without its ready schemas). */
  async close(): Promise<void> {
    this.#ready.clear()
    await this.#admin.end()
  }

  /** The template: a schema migrated here once, with a marker epoch, and its rows. */
  #snapshot(): Promise<Snapshot> {
    this.#template ??= snapshotOfMigration(this.#url).catch((err: unknown) => {
      this.#template = undefined
      throw err
    })
    return this.#template
  }
}

/** What a fresh migration leaves: its tables' rows, its sequences, the shape of its tables. */
interface Snapshot {
  /** The epoch the template was migrated with, found in its rows wherever migration put it. */
  marker: string
  /** Each table's rows as a JSON array (text, so that no number loses a digit), sorted. */
  rows: Map<string, string>
  sequences: Map<string, { last_value: string; is_called: boolean }>
  shape: string
}

async function snapshotOfMigration(url: string): Promise<Snapshot> {
  const schema = `pool_template_${randomBytes(6).toString('hex')}`
  const marker = `template${randomBytes(6).toString('hex')}`
  const client = new pg.Client({
    connectionString: url,
    options: `-c search_path=${schema},public -c client_min_messages=warning`,
  })
  await client.connect()
  try {
    await migrate(client, schema, marker)
    return { marker, ...(await contentsOf(client, schema)) }
  } finally {
    await client.end()
  }
}

/** Every table's rows and every sequence's position in `schema`, and the shape of its tables. */
export async function contentsOf(
  client: pg.ClientBase,
  schema: string,
): Promise<Omit<Snapshot, 'marker'>> {
  const q = quoteIdent(schema)
  const rows = new Map<string, string>()
  for (const table of await namesOf(client, schema, "relkind IN ('r', 'p')")) {
    const { rows: found } = await client.query<{ rows: string }>(
      `SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text), '[]')::text AS rows
       FROM ${q}.${quoteIdent(table)} t`,
    )
    rows.set(table, found[0]?.rows ?? '[]')
  }
  const sequences = new Map<string, { last_value: string; is_called: boolean }>()
  for (const sequence of await namesOf(client, schema, "relkind = 'S'")) {
    const { rows: found } = await client.query<{ last_value: string; is_called: boolean }>(
      `SELECT last_value, is_called FROM ${q}.${quoteIdent(sequence)}`,
    )
    sequences.set(sequence, found[0] as { last_value: string; is_called: boolean })
  }
  return { rows, sequences, shape: await shapeOf(client, schema) }
}

/** The names of the relations of `schema` that `kind` (a condition on pg_class) selects, sorted. */
async function namesOf(client: pg.ClientBase, schema: string, kind: string): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND ${kind} ORDER BY c.relname COLLATE "C"`,
    [schema],
  )
  return rows.map((row) => row.name)
}

/**
 * 'notes(position bigint, ...); notes_clock(...)': every table's columns and types, and every
 * index, function and sequence by name, so a schema that a test altered is never reset as fresh.
 */
async function shapeOf(client: pg.ClientBase, schema: string): Promise<string> {
  const { rows } = await client.query<{ shape: string | null }>(
    `SELECT (SELECT string_agg(c.relname || '(' || (
              SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', '
                ORDER BY a.attnum)
              FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            ) || ')', '; ' ORDER BY c.relname COLLATE "C")
            FROM pg_class c WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'i', 'S'))
         || ' | ' ||
         coalesce((SELECT string_agg(p.oid::regprocedure::text, '; ' ORDER BY p.oid::regprocedure::text)
            FROM pg_proc p WHERE p.pronamespace = n.oid), '') AS shape
     FROM pg_namespace n WHERE n.nspname = $1`,
    [schema],
  )
  // Function signatures name their schema's types unqualified only on the search_path: drop it.
  return (rows[0]?.shape ?? '')
    .replaceAll(`${schema}.`, '')
    .replaceAll(`${quoteIdent(schema)}.`, '')
}

/** A new epoch of the form migration 1 draws: hex of a random 31-bit number and a 16-bit one. */
function migrationEpoch(): string {
  return randomInt(2147483647).toString(16) + randomInt(65535).toString(16)
}

/** One pool per database of this process (a cache of a resource, not test state). */
const pools = new Map<string, SchemaPool>()

/** The schema pool of the database at `url`. */
function schemaPool(url: string): SchemaPool {
  let pool = pools.get(url)
  if (pool === undefined) {
    pool = new SchemaPool(url)
    pools.set(url, pool)
  }
  return pool
}

/**
 * A store on a pooled schema of the database at `url`: `make` gets the schema. Closing the store
 * (once; a second close answers the first) gives the schema back, after the store's own close
 * has ended; a store never closed, or whose close failed, keeps its schema out of the pool.
 * @param epoch the epoch the store is told (a schema is reset for it), undefined for a random one
 */
export function pooledStore<S extends { close(): Promise<void> }>(
  url: string,
  epoch: string | undefined,
  make: (schema: string) => S,
): S {
  const pool = schemaPool(url)
  const schema = pool.take(epoch)
  const store = make(schema)
  const close = store.close.bind(store)
  let closed: Promise<void> | undefined
  store.close = () => {
    closed ??= close().then(() => pool.give(schema, epoch))
    return closed
  }
  return store
}

/**
 * One statement on `schema` through `admin`, behind the stores' backs: what a test reads of a
 * store's tables, or writes where no act of the store would.
 */
export function onSchemaOf(admin: pg.Pool) {
  return async <R extends pg.QueryResultRow>(
    schema: string,
    sql: string,
    values: unknown[] = [],
  ): Promise<R[]> => {
    const client = await admin.connect()
    try {
      await client.query(`SET search_path TO ${quoteIdent(schema)}`)
      return (await client.query<R>(sql, values)).rows
    } finally {
      await client.query('RESET search_path').catch(() => {})
      client.release()
    }
  }
}
