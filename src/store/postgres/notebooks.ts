import { isNotebookName, type Notebooks, type StoreStats } from '../types.js'
import { ChangeListener } from './change-delivery.js'
import type { Database } from './database.js'
import { readServiceStats } from './queries.js'
import { openDatabase, PostgresNoteStore, type PostgresStoreOptions, statsOf } from './store.js'

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
 * A notebook, once asked for, stays (a small object) for the life of the process, as in memory.
 */
export class PostgresNotebooks implements Notebooks {
  readonly #options: PostgresStoreOptions
  readonly #db: Database
  readonly #listener: ChangeListener
  readonly #notebooks = new Map<string, PostgresNoteStore>()
  readonly #maxNotesPerNotebook: number
  readonly #maxBytesPerNotebook: number
  readonly #epochOf: ((notebook: string) => string | undefined) | undefined

  constructor(options: PostgresNotebooksOptions) {
    const { maxNotesPerNotebook, maxBytesPerNotebook, epochOf, ...store } = options
    this.#options = store
    this.#maxNotesPerNotebook = maxNotesPerNotebook ?? store.maxNotes
    this.#maxBytesPerNotebook = maxBytesPerNotebook ?? store.maxBytes
    this.#epochOf = epochOf
    this.#db = openDatabase(store)
    this.#listener = new ChangeListener(this.#db, store.pollMs ?? 1000)
  }

  /** Connects and applies the migrations, as PostgresNoteStore.open. */
  open(retry?: { timeoutMs: number; retryMs: number }): Promise<void> {
    return this.#db.open(retry)
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
      })
      this.#notebooks.set(name, notebook)
    }
    return notebook
  }

  async stats(): Promise<StoreStats> {
    const { maxNotes, maxBytes } = this.#options
    return statsOf(await readServiceStats(this.#db), maxNotes, maxBytes)
  }

  available(): Promise<boolean> {
    return this.#db.available()
  }

  /** Stops every delivery and closes every connection; nothing can be used afterwards. */
  async close(): Promise<void> {
    this.#listener.close()
    await this.#db.close()
  }
}
