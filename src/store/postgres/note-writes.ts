import { meets } from '../kernel/preconditions.js'
import {
  type NoteRecord,
  PreconditionFailed,
  type Preconditions,
  StoreUnavailableError,
} from '../types.js'
import type { NoteRow } from './queries.js'

/** A conditional write that keeps losing to other writers gives up after this many reads. */
const MAX_WRITE_ATTEMPTS = 100

/** A write that found the note changed since it was read: read it again. */
export const LOST = Symbol('lost')

/** Before a write's next attempt: 1-2 ms, growing to at most 20-40 ms, so that contenders spread. */
function backOff(attempt: number): Promise<void> {
  const ms = Math.min(20, attempt) * (1 + Math.random())
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function ignore(): void {}

/**
 * The PATCHes and DELETEs of one note: found, checked against their conditions, written only if
 * the note is still as found, and found again when another write came first. Within this
 * instance they go one at a time per note id.
 */
export class NoteWrites {
  readonly #find: (id: number) => Promise<NoteRow | undefined>
  readonly #record: (row: NoteRow) => NoteRecord
  readonly #statementTimeoutMs: number
  /** The last PATCH or DELETE under way per note id: the next one on that id waits for it. */
  readonly #writes = new Map<number, Promise<unknown>>()

  constructor(
    find: (id: number) => Promise<NoteRow | undefined>,
    record: (row: NoteRow) => NoteRecord,
    statementTimeoutMs: number,
  ) {
    this.#find = find
    this.#record = record
    this.#statementTimeoutMs = statementTimeoutMs
  }

  /**
   * Finds note `id` (`absent` when there is none), checks the conditions against it, and
   * `write`s it, which writes only if the note is still as found and answers LOST otherwise; then
   * it finds the note again, after a back-off, up to MAX_WRITE_ATTEMPTS times. Runs after the
   * writes of this id already under way (oneAtATime).
   */
  write<T>(
    id: number,
    conditions: Preconditions | undefined,
    absent: T,
    write: (row: NoteRow) => Promise<T | typeof LOST>,
  ): Promise<T | PreconditionFailed> {
    return this.#oneAtATime(id, () => this.#writeFound(id, conditions, absent, write))
  }

  async #writeFound<T>(
    id: number,
    conditions: Preconditions | undefined,
    absent: T,
    write: (row: NoteRow) => Promise<T | typeof LOST>,
  ): Promise<T | PreconditionFailed> {
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      if (attempt > 0) await backOff(attempt)
      const row = await this.#find(id)
      if (row === undefined) return absent
      if (conditions !== undefined) {
        const current = this.#record(row)
        if (!meets(current, conditions)) return new PreconditionFailed(current)
      }
      const written = await write(row)
      if (written !== LOST) return written
    }
    // Other instances kept beating it: 503, so the client retries later (never a 500).
    throw new StoreUnavailableError(
      `Note ${id} is being written by too many clients at once; try again shortly.`,
    )
  }

  /**
   * Runs the writes of one note id one after another. A write reads the note, then writes it
   * only if it is still as read (notes_update / notes_delete), and reads again when another
   * write came first; 50 clients patching one note at once would otherwise make 49 of them lose
   * each round, each loss a transaction on the clock row, and throughput fell to a few writes a
   * second (bench W5 on PostgreSQL). Waiting here, only writers on other instances (or a PATCH
   * that moved another note to this id) can come first. The wait is bounded by the statement
   * timeout: behind a write that hangs (a database that stopped answering), the others get their
   * 503 in time rather than one statement timeout each, in turn.
   */
  #oneAtATime<T>(id: number, write: () => Promise<T>): Promise<T> {
    const previous = this.#writes.get(id)
    const result = previous === undefined ? write() : this.#waitFor(id, previous).then(write)
    const settled = result.then(ignore, ignore)
    this.#writes.set(id, settled)
    void settled.then(() => {
      if (this.#writes.get(id) === settled) this.#writes.delete(id)
    })
    return result
  }

  /** Resolves when `previous` settles; rejects with a 503 after the statement timeout. */
  #waitFor(id: number, previous: Promise<unknown>): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new StoreUnavailableError(
              `Note ${id} is waiting for an earlier write that the database has not answered.`,
            ),
          ),
        this.#statementTimeoutMs,
      )
      void previous.then(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
}
