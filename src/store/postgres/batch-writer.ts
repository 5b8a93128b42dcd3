import type {
  NoteFields,
  NoteRecord,
  NoteWriter,
  PatchKind,
  PreconditionFailed,
  Preconditions,
} from '../types.js'
import {
  createNotes,
  deleteNote,
  type FoundWrite,
  LOST,
  newNote,
  type Unwritten,
  updateNote,
  type Written,
  writeOnce,
} from './note-writes.js'
import type { NotebookDb } from './notebook-db.js'
import type { NewNote, WriteLimits } from './queries.js'

/**
 * The writes of one batch (NoteStore.batch), inside its transaction on `db` (NotebookDb.on), with
 * the notebook's clock row locked: no other write of the notebook comes between them, so a note
 * found is still as found when it is written. They run in the order they are called, each after
 * the one before has settled, whether or not the caller waits; creates called one after another
 * go to the database together, in one statement (as the store's group commit does). Each write is
 * built and run by note-writes.ts, as a single request's is.
 */
export class BatchWriter implements NoteWriter {
  readonly #db: NotebookDb
  readonly #limits: WriteLimits
  readonly #now: () => number
  /** The last write queued: the next one runs after it settles. */
  #last: Promise<unknown> = Promise.resolve()
  /** Creates queued one after another and not yet sent. */
  #creates: { note: NewNote; settle: (result: NoteRecord | Error) => void }[] | undefined
  /** The highest change sequence the batch wrote. */
  sequence = 0

  constructor(db: NotebookDb, limits: WriteLimits, now: () => number) {
    this.#db = db
    this.#limits = limits
    this.#now = now
  }

  create(fields: NoteFields): Promise<NoteRecord> {
    const note = newNote(fields, this.#now())
    return new Promise((resolve, reject) => {
      const settle = (result: NoteRecord | Error) =>
        result instanceof Error ? reject(result) : resolve(result)
      if (this.#creates !== undefined) {
        this.#creates.push({ note, settle })
        return
      }
      const group = [{ note, settle }]
      this.#queue(() => this.#sendCreates(group))
      this.#creates = group
    })
  }

  update(
    id: number,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    conditions?: Preconditions,
  ): Promise<NoteRecord | undefined | PreconditionFailed> {
    return this.#queue(() =>
      this.#write(id, conditions, updateNote(fields, kind, this.#limits, this.#now)),
    )
  }

  delete(id: number, conditions?: Preconditions): Promise<boolean | PreconditionFailed> {
    return this.#queue(() => this.#write(id, conditions, deleteNote(id, this.#limits, this.#now)))
  }

  /**
   * Runs `write` after every write queued before it, whatever they answered. A create queued
   * after it starts a group of its own.
   */
  #queue<T>(write: () => Promise<T>): Promise<T> {
    this.#creates = undefined
    const result = this.#last.then(write, write)
    this.#last = result.catch(() => {})
    return result
  }

  async #sendCreates(group: { note: NewNote; settle: (result: NoteRecord | Error) => void }[]) {
    // The group takes no more creates once it is being sent; the next create starts another.
    if (this.#creates === group) this.#creates = undefined
    try {
      const created = await createNotes(
        this.#db,
        group.map((queued) => queued.note),
        this.#limits,
      )
      group.forEach(({ settle }, i) => {
        const note = created[i] as Written<NoteRecord> | Error
        settle(note instanceof Error ? note : this.#wrote(note))
      })
    } catch (err) {
      for (const { settle } of group) settle(err as Error)
    }
  }

  /** One attempt of `write`, which cannot lose: the batch holds the notebook. */
  async #write<T, A>(
    id: number,
    conditions: Preconditions | undefined,
    write: FoundWrite<T, A>,
  ): Promise<T | A | PreconditionFailed> {
    const written = await writeOnce(this.#db, id, conditions, write)
    if (written === LOST) throw new Error('a note changed under a batch that holds its notebook')
    return this.#wrote<T | A | PreconditionFailed>(written)
  }

  /** The answer of a write; the batch's sequence is now at least the write's. */
  #wrote<T>(written: Written<T> | Unwritten<T>): T {
    if (written.sequence !== undefined && written.sequence > this.sequence) {
      this.sequence = written.sequence
    }
    return written.answer
  }
}
