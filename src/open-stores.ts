import { existsSync } from 'node:fs'
import type { Config } from './config/config.js'
import { type ArchiveLimits, daysMs } from './store/archive.js'
import type { FileLimits, FileSpace } from './store/files.js'
import { JournalOpenError } from './store/journal/journal-open-error.js'
import { JournaledNotebooks } from './store/journal/journaled-notebooks.js'
import { UploadFolder } from './store/journal/upload-folder.js'
import { FileSweeper } from './store/kernel/file-sweep.js'
import { memoryFileStores } from './store/memory/memory-file-stores.js'
import { MemoryNotebooks } from './store/memory/memory-notebooks.js'
import { MemoryNoteStore } from './store/memory/memory-store.js'
import { openFailure, redactUrl } from './store/postgres/connection.js'
import { Database } from './store/postgres/database.js'
import { PostgresNotebooks } from './store/postgres/notebooks.js'
import { PostgresNoteStore } from './store/postgres/store.js'
import type { Notebooks, NoteStore } from './store/types.js'
import { SHARED_NOTEBOOK } from './store/types.js'
import { expireUploads, type UploadStaging } from './store/uploads.js'

/**
 * The one place that turns the configuration into the store that holds the notes, for the server
 * (openStores) and for the `export` and `import` commands (openJournal, openDatabase) alike:
 * DATA_FILE opens the journal (locked and replayed), DATABASE_URL the database (waited for and
 * migrated), and neither keeps the notes in memory.
 */

/**
 * A store that could not be opened: its one line for stderr, and the server's exit code (2: a
 * setting; the commands exit 1 on every failure to open, as on any other).
 * `leaseEndsAt`: the journal is held by a process seen only through its lease (another container
 * or host), which is taken over if not renewed by then (ms since 1970).
 */
export class StoreOpenError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
    readonly leaseEndsAt?: number,
  ) {
    super(message)
    this.name = 'StoreOpenError'
  }
}

/** What buildApp serves: one notebook for every request, or a notebook per user. */
type ServedStores = ({ store: NoteStore; files: FileSpace } | { notebooks: Notebooks }) & {
  uploads: UploadStaging
}

/** What start-up says about its store, through the app's logger. */
interface StartupLog {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
}

export interface OpenedStores {
  readonly stores: ServedStores
  /**
   * Waits (bounded by DATABASE_CONNECT_TIMEOUT_MS) for the database and migrates it, so that no
   * instance takes traffic it cannot serve; logs what the journal's replay found. Nothing else
   * to do for memory.
   * @throws StoreOpenError when the database cannot be opened.
   */
  ready(log: StartupLog): Promise<void>
  close(): Promise<void>
}

/**
 * The stores the server serves. `perUser`: user tokens are on, so there is a notebook per user
 * beside the shared one of the service keys, each under its own caps.
 * @throws StoreOpenError when the journal cannot be opened (in use, damaged, unreadable).
 */
export function openStores(config: Config, { perUser }: { perUser: boolean }): OpenedStores {
  const caps = capsOf(config)
  const notebookCaps = perUser ? perNotebookCaps(config) : {}
  if (config.dataFile !== '') {
    const journal = journalOf(config, notebookCaps)
    return {
      stores: {
        ...(perUser
          ? { notebooks: journal }
          : { store: journal.notebook(SHARED_NOTEBOOK), files: journal.files }),
        uploads: new UploadFolder(`${config.dataFile}.uploads`, journal.files.uploadRoom),
      },
      async ready(log) {
        const { dropped } = journal
        if (dropped !== undefined) {
          log.warn(
            { dataFile: config.dataFile, offset: dropped.offset, bytes: dropped.bytes },
            'DATA_FILE ended in a torn record (a crash mid-write); it was dropped',
          )
        }
        log.info({ dataFile: config.dataFile, notes: journal.stats().notes }, 'journal opened')
      },
      close: () => journal.close(),
    }
  }
  if (config.databaseUrl !== '') {
    const database = databaseOf(config)
    const postgres = perUser
      ? new PostgresNotebooks({ ...caps, ...database, ...notebookCaps })
      : new PostgresNoteStore({ ...caps, ...database })
    return {
      stores: {
        ...(postgres instanceof PostgresNotebooks
          ? { notebooks: postgres }
          : { store: postgres, files: postgres.files }),
        uploads: postgres.uploads,
      },
      async ready(log) {
        log.info({ database: redactUrl(config.databaseUrl) }, 'opening the PostgreSQL store')
        await waitForDatabase(config, postgres)
      },
      close: () => postgres.close(),
    }
  }
  // Files and uploads in memory count toward MAX_STORE_BYTES with the notes.
  const memory = perUser
    ? { notebooks: new MemoryNotebooks({ ...caps, ...notebookCaps }) }
    : { store: new MemoryNoteStore(caps) }
  return {
    stores: { ...memoryFileStores(memory, caps.files), ...memory },
    ready: async () => {},
    close: async () => {},
  }
}

/**
 * Every notebook of the journal at DATA_FILE, for the commands: it must exist (opening would
 * create a missing one), and a running server's is refused by its lock.
 * @throws StoreOpenError
 */
export function openJournal(config: Config): JournaledNotebooks {
  if (!existsSync(config.dataFile)) {
    throw new StoreOpenError(`DATA_FILE ${config.dataFile} does not exist.`, 2)
  }
  return journalOf(config, {})
}

/**
 * The database at DATABASE_URL for the commands, open and migrated, waited for as start-up does:
 * one connection for an export's snapshot and its keyset reads or for the import's transaction,
 * and one beside it.
 * @throws StoreOpenError
 */
export async function openDatabase(config: Config): Promise<Database> {
  const db = new Database({
    ...databaseOf(config),
    poolSize: 2,
    schema: 'public',
    epoch: undefined,
  })
  await waitForDatabase(config, db)
  return db
}

function capsOf(config: Config) {
  return {
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    historyLimit: config.changeHistory,
    archive: archiveLimits(config),
    files: fileLimits(config),
  }
}

/**
 * What removes the files no note refers to, once `graceMs` has passed (FILE_GRACE_HOURS), and the
 * uploads past their lifetime: each sweep answers how many of each it removed.
 */
export function fileSweeper(
  stores: ServedStores,
  graceMs: number,
): { sweep(): Promise<{ files: number; uploads: number }> } {
  const files = new FileSweeper({
    space: 'notebooks' in stores ? stores.notebooks.files : stores.files,
    notesOf: 'notebooks' in stores ? (name) => stores.notebooks.notebook(name) : () => stores.store,
    graceMs,
  })
  return {
    sweep: async () => ({
      files: await files.sweep(),
      uploads: await expireUploads(stores.uploads),
    }),
  }
}

/** How large files may be and how much they may hold, as the configuration says. */
export function fileLimits(config: Config): FileLimits {
  return {
    maxFileBytes: config.maxFileBytes,
    maxNotebookBytes: config.maxFilesBytesPerUser,
    maxBytes: config.maxFilesBytes,
  }
}

/** How much history and trash the stores keep, as the configuration says. */
export function archiveLimits(config: Config): ArchiveLimits {
  return {
    noteHistory: config.noteHistory,
    historyMs: daysMs(config.historyDays),
    maxHistoryBytes: config.maxHistoryBytes,
    trashMs: daysMs(config.trashDays),
  }
}

function perNotebookCaps(config: Config) {
  return {
    maxNotesPerNotebook: config.maxNotesPerUser,
    maxBytesPerNotebook: config.maxBytesPerUser,
    maxNotebooksPerUser: config.maxNotebooksPerUser,
    maxMembers: config.maxMembers,
  }
}

function databaseOf(config: Config) {
  return {
    url: config.databaseUrl,
    poolSize: config.databasePoolSize,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
  }
}

function journalOf(
  config: Config,
  notebookCaps: ReturnType<typeof perNotebookCaps> | Record<string, never>,
): JournaledNotebooks {
  try {
    return new JournaledNotebooks({ ...capsOf(config), ...notebookCaps, path: config.dataFile })
  } catch (err) {
    if (err instanceof JournalOpenError) throw new StoreOpenError(err.message, 2, err.leaseEndsAt)
    throw err
  }
}

async function waitForDatabase(
  config: Config,
  db: {
    open(retry: { timeoutMs: number; retryMs: number }): Promise<void>
    close(): Promise<void>
  },
): Promise<void> {
  const started = Date.now()
  try {
    await db.open({
      timeoutMs: config.databaseConnectTimeoutMs,
      retryMs: config.databaseConnectRetryMs,
    })
  } catch (err) {
    await db.close().catch(() => {})
    // A setting is named only when the user set it: a default they never chose tells them nothing.
    const reason = openFailure(err, {
      waitedMs: Date.now() - started,
      timeoutMs: config.given.has('databaseConnectTimeoutMs')
        ? config.databaseConnectTimeoutMs
        : undefined,
    })
    throw new StoreOpenError(
      `cannot open the database ${redactUrl(config.databaseUrl)}: ${reason}`,
      1,
    )
  }
}
