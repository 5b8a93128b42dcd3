import { isIndexable, jsonAroundId } from '../kernel/id-placement.js'
import { patchNote } from '../kernel/patch-note.js'
import { meets } from '../kernel/preconditions.js'
import {
  type NoteFields,
  type NoteRecord,
  type NoteWriter,
  type PatchKind,
  PreconditionFailed,
  type Preconditions,
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
 * The writes of one batch (NoteStore.batch), inside its transaction on `db` (NotebookDb.on), with
 * the notebook's clock row locked: no other write of the notebook comes between them, so a note
 * found is still as found when it is written. They run in the order they are called, each after
 * the one before has settled, whether or not the caller waits; creates called one after another
 * go to the database together, in one statement (as the store's group commit does). What each
 * write means is the store's: the same patch, the same functions in the database.
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
    const [prefix, suffix] = jsonAroundId(fields)
    const note = { now: Math.trunc(this.#now()), prefix, suffix, search: searchText(fields, 'id') }
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
      this.#found(id, conditions, async (row) => {
        const note = patchNote(row.json, fields, kind)
        const json = JSON.stringify(note)
        const modified = this.#now()
        const updated = {
          json,
          id: isIndexable(note.id) ? note.id : null,
          search: searchText(note),
          modified,
        }
        const sequence = this.#wrote(await callUpdate(this.#db, row, updated, this.#limits))
        return this.#db.record(json, sequence, modified)
      }),
    )
  }

  delete(id: number, conditions?: Preconditions): Promise<boolean | PreconditionFailed> {
    return this.#queue(async () => {
      const deleted = await this.#found(id, conditions, async (row) => {
        const data = `{"id":${JSON.stringify(id)}}`
        this.#wrote(await callDelete(this.#db, row, data, this.#limits))
        return true as const
      })
      return deleted ?? false
    })
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
      const rows = await callCreateMany(
        this.#db,
        group.map((queued) => queued.note),
        this.#limits,
      )
      group.forEach(({ settle }, i) => {
        const row = rows[i]
        if (row === undefined || row.r_full !== null) {
          settle(storeFull(row?.r_full ?? 'The create was not applied.'))
          return
        }
        const sequence = this.#wrote(row.r_written as string)
        settle(this.#db.record(row.r_json as string, sequence, Number(row.r_modified)))
      })
    } catch (err) {
      for (const { settle } of group) settle(err as Error)
    }
  }

  /** The note, checked against the conditions and handed to `write`; undefined when there is none. */
  async #found<T>(
    id: number,
    conditions: Preconditions | undefined,
    write: (row: NoteRow) => Promise<T>,
  ): Promise<T | undefined | PreconditionFailed> {
    const row = await findNote(this.#db, id)
    if (row === undefined) return undefined
    if (conditions !== undefined) {
      const current = this.#db.record(row.json, Number(row.written), Number(row.modified))
      if (!meets(current, conditions)) return new PreconditionFailed(current)
    }
    return write(row)
  }

  /** The sequence of a write, which the locked notebook guarantees was applied. */
  #wrote(sequence: string | null): number {
    if (sequence === null) throw new Error('a note changed under a batch that holds its notebook')
    const written = Number(sequence)
    if (written > this.sequence) this.sequence = written
    return written
  }
}
