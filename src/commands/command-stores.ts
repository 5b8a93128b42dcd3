import { existsSync } from 'node:fs'
import type { Config } from '../config/config.js'
import { JournalOpenError } from '../store/journal/journal-open-error.js'
import { JournaledNotebooks } from '../store/journal/journaled-notebooks.js'
import { redactUrl } from '../store/postgres/connection.js'
import { Database } from '../store/postgres/database.js'
import { CommandError } from './command-io.js'

/**
 * The stores the `export` and `import` commands open, as the server opens them (server.ts), but
 * without the HTTP server: the journal under its lock (so a running server's is refused), or the
 * database with its schema migrated as at start-up.
 */

/** The journal at DATA_FILE, every notebook of it, which must exist (opening creates a missing one). */
export function openJournal(config: Config): JournaledNotebooks {
  if (!existsSync(config.dataFile)) {
    throw new CommandError(`DATA_FILE ${config.dataFile} does not exist.`)
  }
  try {
    return new JournaledNotebooks({
      path: config.dataFile,
      maxNotes: config.maxNotes,
      maxBytes: config.maxStoreBytes,
    })
  } catch (err) {
    if (err instanceof JournalOpenError) throw new CommandError(err.message)
    throw err
  }
}

/** The database at DATABASE_URL, open (migrated), waiting for it as start-up does. */
export async function openDatabase(config: Config): Promise<Database> {
  const db = new Database({
    url: config.databaseUrl,
    // An export's snapshot and its keyset reads, or the import's transaction: one connection each.
    poolSize: 2,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    schema: 'public',
    epoch: undefined,
  })
  try {
    await db.open({
      timeoutMs: config.databaseConnectTimeoutMs,
      retryMs: config.databaseConnectRetryMs,
    })
  } catch (err) {
    await db.close().catch(() => {})
    const cause = (err as { cause?: unknown }).cause
    throw new CommandError(
      `cannot open the database ${redactUrl(config.databaseUrl)}: ${typeof cause === 'string' ? cause : (err as Error).message}`,
    )
  }
  return db
}
