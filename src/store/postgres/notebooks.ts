import {
  AccessLostError,
  isNotebookName,
  type Notebooks,
  type NoteStore,
  type StoreStats,
} from '../types.js'
import { ChangeListener } from './change-delivery.js'
import type { Database } from './database.js'
import { PostgresDirectory } from './directory.js'
import { PostgresFiles } from './files.js'
import { writerRole } from './member-rows.js'
import { readServiceStats } from './queries.js'
import { PostgresNoteStore } from './store.js'
import { openDatabase, type PostgresStoreOptions, statsOf } from './store-options.js'
import { PostgresUploads } from './uploads.js'

export interface PostgresNotebooksOptions extends Omit<PostgresStoreOptions, 'epoch'> {
  /** Most notes one notebook holds (MAX_NOTES_PER_USER); default maxNotes. */
  maxNotesPerNotebook?: number
  /** Most UTF-8 bytes of note JSON one notebook holds (MAX_BYTES_PER_USER); default maxBytes. */
  maxBytesPerNotebook?: number
  /**
   * The epoch a notebook gets when it is new, for tests that know their tokens ('e.1'); a random
   * one by default (undefined draws one too). An epoch another notebook holds is never given.
   */
  epochOf?: (notebook: string) => string | undefined
  /** Notebooks one user owns at most (MAX_NOTEBOOKS_PER_USER); default 100. */
  maxNotebooksPerUser?: number
  /** Members one notebook has at most (MAX_MEMBERS); default 100. */
  maxMembers?: number
}

/**
 * The notebooks of one service in PostgreSQL, shared by every instance on the
 * database: each is a PostgresNoteStore of its own (its rows, clock row, epoch, history and
 * idempotency keys, every statement naming it), on the service's one pool and one change
 * listener. Ids are unique over every notebook and the service-wide caps hold over all of them,
 * through the service's clock row that every write locks after its notebook's.
 *
 * A notebook's name is stored as text: it must be well-formed (no lone surrogate, which
 * PostgreSQL's UTF-8 would turn into U+FFFD, making two names one) and hold no NUL; the callers
 * refuse such names before they get here (a user's `sub`), and notebook() throws on one.
 * A notebook, once asked for, stays (a small object) for the life of the process, as in memory,
 * until it is dropped (or removed from the directory) here.
 *
 * Who may see which notebook is the directory's (PostgresDirectory), in the same database; a
 * writer's writes (writerFor) check the writer's role in the transaction of each write.
 */
export class PostgresNotebooks implements Notebooks {
  readonly #options: PostgresStoreOptions
  readonly #db: Database
  readonly #listener: ChangeListener
  readonly #notebooks = new Map<string, PostgresNoteStore>()
  readonly #maxNotesPerNotebook: number
  readonly #maxBytesPerNotebook: number
  readonly #epochOf: ((notebook: string) => string | undefined) | undefined
  /** Who may see which notebook. */
  readonly directory: PostgresDirectory
  /**
   * Every notebook's files, in the same database: a notebook's removal (drop, the directory's
   * remove) removes its files in the same transaction.
   */
  readonly files: PostgresFiles
  /** Every notebook's uploads that resume, in the same database, their bytes beside the files'. */
  readonly uploads: PostgresUploads

  constructor(options: PostgresNotebooksOptions) {
    const {
      maxNotesPerNotebook,
      maxBytesPerNotebook,
      epochOf,
      maxNotebooksPerUser = 100,
      maxMembers = 100,
      files,
      ...store
    } = options
    this.#options = store
    this.#maxNotesPerNotebook = maxNotesPerNotebook ?? store.maxNotes
    this.#maxBytesPerNotebook = maxBytesPerNotebook ?? store.maxBytes
    this.#epochOf = epochOf
    this.#db = openDatabase(store)
    this.#listener = new ChangeListener(this.#db, store.pollMs ?? 1000)
    this.files = new PostgresFiles(this.#db, {
      ...files,
      ...(store.now === undefined ? {} : { now: store.now }),
    })
    this.uploads = new PostgresUploads(this.#db, this.files)
    this.directory = new PostgresDirectory(
      this.#db,
      this.#listener,
      { maxNotebooksPerUser, maxMembers },
      (name) => this.#forget(name),
      (name) => this.#epochOf?.(name),
    )
  }

  /**
   * Connects and applies the migrations, as PostgresNoteStore.open, and starts removing what
   * an instance left of its uploads (PostgresFiles.sweep), without waiting for it.
   */
  async open(retry?: { timeoutMs: number; retryMs: number }): Promise<void> {
    await this.#db.open(retry)
    void this.files.sweep()
  }

  notebook(name: string): PostgresNoteStore {
    let notebook = this.#notebooks.get(name)
    if (notebook === undefined) {
      if (!isNotebookName(name)) {
        throw new TypeError('A notebook name must be well-formed text without NUL.')
      }
      notebook = new PostgresNoteStore(this.#options, {
        db: this.#db,
        listener: this.#listener,
        name,
        epoch: this.#epochOf?.(name),
        maxNotes: this.#maxNotesPerNotebook,
        maxBytes: this.#maxBytesPerNotebook,
        files: this.files,
        uploads: this.uploads,
      })
      this.#notebooks.set(name, notebook)
    }
    return notebook
  }

  writerFor(name: string, user: string): NoteStore {
    return this.notebook(name).guardedBy(async (client) => {
      const role = await writerRole(client, name, user)
      if (role !== 'owner' && role !== 'editor') throw new AccessLostError(role)
    })
  }

  /**
   * Removes the notebook's notes (its rows, clock row, history and idempotency keys) and files,
   * in one transaction, and gives back their room; asked for again, it is a new, empty notebook with a new epoch. Another
   * instance that had it open keeps its old epoch until it restarts: a removed notebook's name is
   * never asked for again (its id was random), so only a request already on its way can meet it.
   */
  async drop(name: string): Promise<void> {
    await this.#db.query('SELECT notes_drop_notebook($1)', [name])
    this.#forget(name)
  }

  async stats(): Promise<StoreStats> {
    const { maxNotes, maxBytes } = this.#options
    return statsOf(await readServiceStats(this.#db), maxNotes, maxBytes)
  }

  /**
   * Forgets this instance's store of a notebook whose rows are gone (drop, a removal), and
   * deletes the chunks of its files (PostgresFiles.collect), without waiting.
   */
  #forget(name: string): void {
    void this.files.collect()
    const notebook = this.#notebooks.get(name)
    if (notebook === undefined) return
    this.#notebooks.delete(name)
    void notebook.close()
  }

  available(): Promise<boolean> {
    return this.#db.available()
  }

  /** Stops every delivery and closes every connection; nothing can be used afterwards. */
  async close(): Promise<void> {
    this.directory.close()
    this.#listener.close()
    await this.#db.close()
  }
}
