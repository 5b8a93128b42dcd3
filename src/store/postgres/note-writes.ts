import { isIndexable, jsonAroundId } from '../kernel/id-placement.js'
import { patchNote } from '../kernel/patch-note.js'
import { meets } from '../kernel/preconditions.js'
import {
  type NoteFields,
  type NoteRecord,
  type PatchKind,
  PreconditionFailed,
  type Preconditions,
  StoreUnavailableError,
} from '../types.js'
import type { NotebookDb } from './notebook-db.js'
import {
  callCreateMany,
  callDelete,
  callUpdate,
  findNote,
  type NewNote,
  type NoteRow,
  storeFull,
  type WriteLimits,
} from './queries.js'
import { searchText } from './search-text.js'

/**
 * The writes of a note, built and run here for both paths: a single request (PostgresNoteStore,
 * through CreateBatcher and NoteWrites) and a batch (BatchWriter, on its transaction's
 * connection). What differs between them is only around a write: a single request retries a
 * write that lost and is seen at once; a batch cannot lose (it holds the notebook) and is seen
 * when it commits.
 */

/** A conditional write that keeps losing to other writers gives up after this many reads. */
const MAX_WRITE_ATTEMPTS = 100

/** A write that found the note changed since it was read: read it again. */
export const LOST = Symbol('lost')

/** A write's answer, with the change sequence it wrote. */
export interface Written<T> {
  answer: T
  sequence: number
}

/** The answer of a write that wrote nothing: no such note, or its conditions not met. */
export interface Unwritten<A> {
  answer: A
  sequence?: undefined
}

/** A PATCH or DELETE of one note, to run on a found row of it (writeOnce). */
export interface FoundWrite<T, A> {
  /** The answer when there is no such note. */
  absent: A
  /** Writes `row` if it is still as found; LOST when another write came first. */
  run(db: NotebookDb, row: NoteRow): Promise<Written<T> | typeof LOST>
}

/**
 * A note to create, at `now` (ms): where its id goes in its JSON, and its search text, without
 * the body's own `id`, which the created note does not hold.
 */
export function newNote(fields: NoteFields, now: number): NewNote {
  const [prefix, suffix] = jsonAroundId(fields)
  return { now: Math.trunc(now), prefix, suffix, search: searchText(fields, 'id') }
}

/**
 * Creates in one statement (callCreateMany), in order: each one's record and sequence, or why it
 * was not stored (a cap).
 */
export async function createNotes(
  db: NotebookDb,
  notes: readonly NewNote[],
  limits: WriteLimits,
): Promise<(Written<NoteRecord> | Error)[]> {
  const rows = await callCreateMany(db, notes, limits)
  return notes.map((_, i) => {
    const row = rows[i]
    if (row === undefined) return new Error('notes_create answered too few rows')
    if (row.r_full !== null) return storeFull(row.r_full)
    const sequence = Number(row.r_written)
    return { answer: db.record(row.r_json as string, sequence, Number(row.r_modified)), sequence }
  })
}

/** A PATCH of `fields` (merged or replaced, as `kind`), stamped with `now()` when it is written. */
export function updateNote(
  fields: NoteFields,
  kind: PatchKind,
  limits: WriteLimits,
  now: () => number,
): FoundWrite<NoteRecord, undefined> {
  return {
    absent: undefined,
    async run(db, row) {
      const note = patchNote(row.json, fields, kind)
      const json = JSON.stringify(note)
      const modified = now()
      const id = isIndexable(note.id) ? note.id : null
      const search = searchText(note)
      const seq = await callUpdate(db, row, { json, id, search, modified }, limits)
      if (seq === null) return LOST
      const sequence = Number(seq)
      return { answer: db.record(json, sequence, modified), sequence }
    },
  }
}

/**
 * A DELETE of note `id` at `now()` (into the trash when it is on); its change-feed record holds
 * the id alone: 5 -> '{"id":5}'.
 */
export function deleteNote(
  id: number,
  limits: WriteLimits,
  now: () => number,
): FoundWrite<true, false> {
  return {
    absent: false,
    async run(db, row) {
      const seq = await callDelete(db, row, `{"id":${JSON.stringify(id)}}`, now(), limits)
      return seq === null ? LOST : { answer: true, sequence: Number(seq) }
    },
  }
}

/** A stored note as a store answers it. */
export function recordOf(db: NotebookDb, row: NoteRow): NoteRecord {
  return db.record(row.json, Number(row.written), Number(row.modified))
}

/**
 * One attempt of `write` on note `id`: found (`absent` when there is none), checked against the
 * conditions, and written if it is still as found (LOST otherwise).
 */
export async function writeOnce<T, A>(
  db: NotebookDb,
  id: number,
  conditions: Preconditions | undefined,
  write: FoundWrite<T, A>,
): Promise<Written<T> | Unwritten<A | PreconditionFailed> | typeof LOST> {
  const row = await findNote(db, id)
  if (row === undefined) return { answer: write.absent }
  if (conditions !== undefined) {
    const current = recordOf(db, row)
    if (!meets(current, conditions)) return { answer: new PreconditionFailed(current) }
  }
  return write.run(db, row)
}

/** Before a write's next attempt: 1-2 ms, growing to at most 20-40 ms, so that contenders spread. */
function backOff(attempt: number): Promise<void> {
  const ms = Math.min(20, attempt) * (1 + Math.random())
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function ignore(): void {}

/**
 * The PATCHes and DELETEs of single requests: each attempt as writeOnce, found again when another
 * write came first. Within this instance they go one at a time per note id.
 */
export class NoteWrites {
  readonly #db: NotebookDb
  readonly #written: (sequence: number) => void
  readonly #statementTimeoutMs: number
  /** The last PATCH or DELETE under way per note id: the next one on that id waits for it. */
  readonly #writes = new Map<number, Promise<unknown>>()

  /** @param written told the sequence of each write made, before its answer is given */
  constructor(db: NotebookDb, written: (sequence: number) => void, statementTimeoutMs: number) {
    this.#db = db
    this.#written = written
    this.#statementTimeoutMs = statementTimeoutMs
  }

  /**
   * Runs `write` on note `id` (writeOnce); when it lost, finds the note again, after a back-off,
   * up to MAX_WRITE_ATTEMPTS times. Runs after the writes of this id already under way
   * (oneAtATime).
   */
  write<T, A>(
    id: number,
    conditions: Preconditions | undefined,
    write: FoundWrite<T, A>,
  ): Promise<T | A | PreconditionFailed> {
    return this.#oneAtATime(id, () => this.#writeFound(id, conditions, write))
  }

  async #writeFound<T, A>(
    id: number,
    conditions: Preconditions | undefined,
    write: FoundWrite<T, A>,
  ): Promise<T | A | PreconditionFailed> {
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      if (attempt > 0) await backOff(attempt)
      const written = await writeOnce(this.#db, id, conditions, write)
      if (written === LOST) continue
      if (written.sequence !== undefined) this.#written(written.sequence)
      return written.answer
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
