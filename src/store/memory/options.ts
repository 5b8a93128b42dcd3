import type { ArchiveLimits } from '../archive.js'
import type { Capacity } from '../kernel/capacity.js'
import type { IdSpace } from '../kernel/id-space.js'
import type { RecordedWrite } from './records.js'
import type { HistoryBudget } from './revisions.js'

/**
 * How a memory store is made: its caps, clock, history and key bounds, its epoch, and, for a
 * notebook, what it shares with the service's other notebooks.
 */
export interface MemoryStoreOptions {
  /** Most notes held at once. */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON held at once. */
  maxBytes: number
  /** Clock for ids and Last-Modified, in ms since the epoch; tests pass a fake one. */
  now?: () => number
  /** Changes kept for the change feed to replay (CHANGE_HISTORY); default 10,000. */
  historyLimit?: number
  /** Idempotency keys remembered; default 100,000. */
  maxIdempotencyKeys?: number
  /** How long an idempotency key is remembered, in ms; default 24 h. */
  idempotencyTtlMs?: number
  /**
   * The first part of every version token; default random. Two stores (or one restarted) must
   * not share it, or their tokens and ETags could repeat for different contents.
   */
  epoch?: string
  /**
   * What this store shares with the other notebooks of one service (MemoryNotebooks): the ids
   * creates give, and the service's capacity, whose caps hold beside this store's own. Without
   * it the store has its own id space and caps alone.
   */
  shared?: SharedParts
  /** How much history and trash it keeps; ARCHIVE_DEFAULTS where not given. */
  archive?: Partial<ArchiveLimits> | undefined
  /** Who holds the notes, in a refusal's words; 'The store', or 'This notebook' with `shared`. */
  holder?: string
  /**
   * Told of every write, synchronously, as the result it had (a journal writes it down);
   * `replay` applies such a result again.
   */
  onWrite?: (write: RecordedWrite) => void
}

/** The parts the notebooks of one service share. */
export interface SharedParts {
  readonly ids: IdSpace
  /** The whole service's notes, bytes and caps. */
  readonly capacity: Capacity
  /** The bytes of past revisions over every notebook (MAX_HISTORY_BYTES). */
  readonly history?: HistoryBudget
}
