import { type NoteRecord, StoreUnavailableError } from '../types.js'
import type { Written } from './note-writes.js'
import type { NewNote } from './queries.js'

/** Creates stored by one statement at most. */
const MAX_CREATES_PER_STATEMENT = 64

interface QueuedCreate extends NewNote {
  resolve: (note: NoteRecord) => void
  reject: (err: unknown) => void
}

/**
 * Group commit: one statement at a time stores every create queued so far (up to
 * MAX_CREATES_PER_STATEMENT), in arrival order, in one transaction and one flush to disk. A lone
 * create goes at once; the ones that arrive meanwhile wait for it and then go together.
 */
export class CreateBatcher {
  readonly #store: (notes: readonly NewNote[]) => Promise<(Written<NoteRecord> | Error)[]>
  readonly #written: (sequence: number) => void
  /** Creates waiting for the statement in flight to commit. */
  #queued: QueuedCreate[] = []
  #committing = false

  /**
   * @param store runs one statement for a batch (createNotes), one answer per note in order
   * @param written told the sequence of each note stored, before its record is given
   */
  constructor(
    store: (notes: readonly NewNote[]) => Promise<(Written<NoteRecord> | Error)[]>,
    written: (sequence: number) => void,
  ) {
    this.#store = store
    this.#written = written
  }

  /** Stores a note in the next statement; its record once that statement has committed. */
  create(note: NewNote): Promise<NoteRecord> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ ...note, resolve, reject })
      if (!this.#committing) void this.#commitQueued()
    })
  }

  async #commitQueued(): Promise<void> {
    this.#committing = true
    while (this.#queued.length > 0) {
      const batch = this.#queued.splice(0, MAX_CREATES_PER_STATEMENT)
      try {
        const created = await this.#store(batch)
        for (const [i, create] of batch.entries()) {
          const note = created[i] as Written<NoteRecord> | Error
          if (note instanceof Error) create.reject(note)
          else {
            this.#written(note.sequence)
            create.resolve(note.answer)
          }
        }
      } catch (err) {
        // The database is away: the creates queued behind this statement would each wait out a
        // timeout of their own, in turn; they get their 503 now.
        const failed =
          err instanceof StoreUnavailableError ? batch.concat(this.#queued.splice(0)) : batch
        for (const create of failed) create.reject(err)
      }
    }
    this.#committing = false
  }
}
