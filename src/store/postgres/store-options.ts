import type pg from 'pg'
import type { ArchiveLimits } from '../archive.js'
import type { FileLimits } from '../files.js'
import type { StoreStats } from '../types.js'
import type { ChangeListener } from './change-delivery.js'
import { Database } from './database.js'
import type { PostgresFiles } from './files.js'
import type { PostgresUploads } from './uploads.js'

/** What a PostgresNoteStore is made with, and the connections it opens from it. */

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  url: string
  /** Most notes held at once, across every instance on the database. */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON held at once, across every instance. */
  maxBytes: number
  /** Connections this instance opens at most (DATABASE_POOL_SIZE); default 10. */
  poolSize?: number
  /** Longest a statement may run, in ms (DATABASE_STATEMENT_TIMEOUT_MS); default 5,000. */
  statementTimeoutMs?: number
  /** The PostgreSQL schema of the tables; default public. Tests give each store its own. */
  schema?: string
  /** Clock for ids and Last-Modified, in ms since the epoch; tests pass a fake one. */
  now?: () => number
  /**
   * The first part of every version token when this store creates its schema; default random.
   * Used only then: an existing schema keeps the epoch it was created with. Tests pass a fixed one.
   */
  epoch?: string
  /** Changes kept for the change feed (CHANGE_HISTORY); default 10,000. */
  historyLimit?: number
  /** Idempotency keys remembered; default 100,000. */
  maxIdempotencyKeys?: number
  /** How long an idempotency key is remembered, in ms; default 24 h. */
  idempotencyTtlMs?: number
  /** How often subscribers look for changes when no notification came, in ms; default 1,000. */
  pollMs?: number
  /**
   * What the notes' history and the trash keep (NOTE_HISTORY, HISTORY_DAYS, MAX_HISTORY_BYTES,
   * TRASH_DAYS); ARCHIVE_DEFAULTS for what is not given.
   */
  archive?: Partial<ArchiveLimits> | undefined
  /**
   * How large files may be and how much they hold (MAX_FILE_BYTES, MAX_FILES_BYTES_PER_USER,
   * MAX_FILES_BYTES); FILE_LIMIT_DEFAULTS for what is not given.
   */
  files?: Partial<FileLimits> | undefined
}

/** A notebook of PostgresNotebooks: the service's connections, and what is the notebook's own. */
export interface NotebookParts {
  db: Database
  listener: ChangeListener
  /** The notebook's name, its epoch when it is new, and its caps. */
  name: string
  epoch: string | undefined
  maxNotes: number
  maxBytes: number
  /** The service's files, which the notebook's store hands out as its own `files`. */
  files: PostgresFiles
  /** The service's uploads that resume, handed out as the store's own `uploads`. */
  uploads: PostgresUploads
}

/**
 * What a guarded write runs first in its transaction (PostgresNoteStore.guardedBy): it throws to
 * refuse the write, which then changes nothing.
 */
export type WriteGuard = (client: pg.ClientBase) => Promise<void>

/** The counts of a notebook (readStats) or of the service (readServiceStats), with its caps. */
export function statsOf(
  counts: { notes: string; bytes: string },
  maxNotes: number,
  maxBytes: number,
): StoreStats {
  return { notes: Number(counts.notes), bytes: Number(counts.bytes), maxNotes, maxBytes }
}

/** The connections of a service (or of a store of its own) to its database. */
export function openDatabase(options: PostgresStoreOptions): Database {
  return new Database({
    url: options.url,
    poolSize: options.poolSize ?? 10,
    statementTimeoutMs: options.statementTimeoutMs ?? 5000,
    schema: options.schema ?? 'public',
    epoch: options.epoch,
  })
}
