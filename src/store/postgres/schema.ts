import type pg from 'pg'
import { MIGRATIONS } from './migrations.js'

/** Any fixed number: the advisory lock that start-up migrations hold ("notes" in ASCII). */
const MIGRATION_LOCK = 0x6e6f746573

/**
 * Applies the migrations (migrations.ts) this database (schema) lacks, under the advisory lock.
 * The pg_trgm index is made when the extension can be created; without it `q` still works, by a
 * scan.
 * @param epoch the version epoch of a schema created now (migration 1), instead of a random one;
 *   tests pass a fixed one. A schema that exists keeps its epoch.
 * @param upTo the last migration to apply; tests make the schema of an older release with it.
 * @returns whether the search index exists.
 */
export async function migrate(
  client: pg.ClientBase,
  schema: string,
  epoch?: string,
  upTo = Number.POSITIVE_INFINITY,
): Promise<boolean> {
  try {
    return await migrateLocked(client, schema, epoch, upTo)
  } catch (err) {
    if ((err as { code?: unknown }).code !== INSUFFICIENT_PRIVILEGE) throw err
    throw new Error(await privilegeAdvice(client, schema, (err as Error).message), { cause: err })
  }
}

/** SQLSTATE 42501: 'permission denied for database notes2', '... for schema public'. */
const INSUFFICIENT_PRIVILEGE = '42501'

/**
 * PostgreSQL's refusal, with what to do about it (docs/postgres.md): the role must own the
 * database, or hold CREATE on it and on the schema. PostgreSQL 15 and later no longer let every
 * role create in public, so `createuser notes; createdb notes` leads here. 'permission denied for
 * database notes2' -> '...: the role notes may not create ... ALTER DATABASE "notes2" OWNER TO
 * "notes"; or ... GRANT CREATE ON DATABASE "notes2" TO "notes"; GRANT CREATE ON SCHEMA "public" TO
 * "notes";' (names quoted, so that the statements can be pasted whatever the names are)
 */
async function privilegeAdvice(
  client: pg.ClientBase,
  schema: string,
  refusal: string,
): Promise<string> {
  const { rows } = await client.query<{ role: string; database: string }>(
    'SELECT current_user AS role, current_database() AS database',
  )
  const { role, database } = rows[0] as { role: string; database: string }
  const [r, d, s] = [quoteIdent(role), quoteIdent(database), quoteIdent(schema)]
  return `${refusal}: the role ${role} may not create the service's tables in the database ${database}. As a superuser, either make the role its owner: ALTER DATABASE ${d} OWNER TO ${r}; or, connected to ${database}, grant what start-up needs: GRANT CREATE ON DATABASE ${d} TO ${r}; GRANT CREATE ON SCHEMA ${s} TO ${r};`
}

async function migrateLocked(
  client: pg.ClientBase,
  schema: string,
  epoch: string | undefined,
  upTo: number,
): Promise<boolean> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`)
    await client.query(
      'CREATE TABLE IF NOT EXISTS notes_migrations (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())',
    )
    const { rows } = await client.query<{ version: number }>('SELECT version FROM notes_migrations')
    const applied = new Set(rows.map((row) => row.version))
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version) || migration.version > upTo) continue
      await client.query('BEGIN')
      try {
        await client.query(migration.sql)
        if (migration.version === 1 && epoch !== undefined) {
          await client.query('UPDATE notes_clock SET epoch = $1', [epoch])
        }
        await client.query('INSERT INTO notes_migrations (version) VALUES ($1)', [
          migration.version,
        ])
        await client.query('COMMIT')
      } catch (err) {
        await client.query('ROLLBACK')
        throw err
      }
    }
    return await ensureSearchIndex(client)
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
  }
}

async function ensureSearchIndex(client: pg.ClientBase): Promise<boolean> {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public')
    await client.query(
      'CREATE INDEX IF NOT EXISTS notes_search ON notes USING gin (search public.gin_trgm_ops)',
    )
    return true
  } catch {
    // contrib is not installed, or the role may not create extensions: `q` scans instead.
    return false
  }
}

/** 'notes' -> '"notes"'; 'a"b' -> '"a""b"' */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}
