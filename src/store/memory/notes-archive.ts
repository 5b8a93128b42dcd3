import {
  ARCHIVE_DEFAULTS,
  type ArchiveLimits,
  ID_TAKEN,
  type Revision,
  type RevisionPage,
  type TrashPage,
} from '../archive.js'
import type { Capacity } from '../kernel/capacity.js'
import { tokenSequence } from '../kernel/version-token.js'
import type { Entry } from './entries.js'
import { imageNote } from './image-notes.js'
import type { ImageTrashed } from './records.js'
import {
  dropPast,
  findRevision,
  HistoryBudget,
  type HistoryRules,
  keepPast,
  keepState,
  loadPast,
  revisionPage,
} from './revisions.js'
import { MemoryTrash, type TrashedEntry } from './trash.js'

/** What a batch under way holds back: what its writes keep of past states once it is kept. */
export interface PendingArchive {
  readonly archive: (() => void)[]
}

/**
 * A memory store's history and trash (NoteArchive): the rules its revisions are kept by, and the
 * notes it deleted, whose room its Capacity still counts. The store calls it from its writes; it
 * never changes the list itself.
 */
export class MemoryArchive {
  readonly #rules: HistoryRules
  /** How long a deleted note stays in the trash, in ms; 0: none does. */
  readonly #trashMs: number
  readonly #trash = new MemoryTrash()
  readonly #capacity: Capacity
  readonly #epoch: string

  constructor(
    limits: Partial<ArchiveLimits> | undefined,
    capacity: Capacity,
    epoch: string,
    budget?: HistoryBudget,
  ) {
    const all = { ...ARCHIVE_DEFAULTS, ...limits }
    this.#rules = {
      noteHistory: all.noteHistory,
      historyMs: all.historyMs,
      budget: budget ?? new HistoryBudget(all.maxHistoryBytes),
    }
    this.#trashMs = all.trashMs
    this.#capacity = capacity
    this.#epoch = epoch
  }

  /** Whether a delete at this moment keeps the note in the trash. */
  get trashing(): boolean {
    return this.#trashMs > 0
  }

  /**
   * Keeps the entry's current state as a past one before a write at `now` replaces it; in a batch,
   * once the batch is kept.
   */
  keep(entry: Entry, now: number, batch: PendingArchive | undefined): void {
    if (batch === undefined) {
      keepPast(entry, this.#rules, now)
      return
    }
    const { etag, modified, change, json, bytes } = entry
    batch.archive.push(() =>
      keepState(entry, etag, modified, change, json, bytes, this.#rules, now),
    )
  }

  /**
   * The entry left the list by the change `sequence`: into the trash when `trashed` (its time) is
   * given, else gone with its past states (once the batch is kept, in one). Answers what undoes
   * the trash's part, for a batch undone.
   */
  removed(
    entry: Entry,
    trashed: number | undefined,
    sequence: number,
    batch: PendingArchive | undefined,
  ): (() => void) | undefined {
    if (trashed === undefined) {
      const drop = () => dropPast(entry, this.#rules.budget)
      if (batch === undefined) drop()
      else batch.archive.push(drop)
      return undefined
    }
    this.#add({ entry, deleted: trashed, sequence })
    return () => {
      this.#trash.undoAdd()
      this.#capacity.trash(-1, -entry.bytes)
    }
  }

  /** Lets the trash's notes past their time go, with their room and revisions. */
  sweep(now: number): void {
    if (this.#trash.size === 0) return
    for (const item of this.#trash.expire(now - this.#trashMs)) this.#forget(item)
  }

  /** A note into the trash, its room counted there. */
  #add(item: TrashedEntry): void {
    this.#trash.add(item)
    this.#capacity.trash(1, item.entry.bytes)
  }

  /** The note at `at` out of the trash, its room no longer counted there. */
  #takeAt(at: number): TrashedEntry {
    const item = this.#trash.take(at)
    this.#capacity.trash(-1, -item.entry.bytes)
    return item
  }

  /** A note taken out of the trash, gone for good: its room given back, its revisions dropped. */
  #forget(item: TrashedEntry): void {
    this.#capacity.trash(-1, -item.entry.bytes)
    dropPast(item.entry, this.#rules.budget)
  }

  revisions(entry: Entry, limit: number, after: string | undefined, now: number): RevisionPage {
    const from = after === undefined ? undefined : (tokenSequence(after, this.#epoch) ?? 0)
    const sequenceOf = (etag: string): number => tokenSequence(etag.slice(1, -1), this.#epoch) ?? 0
    return revisionPage(entry, limit, from, sequenceOf, now - this.#rules.historyMs)
  }

  revision(entry: Entry, version: string, now: number): Revision | undefined {
    return findRevision(entry, version, now - this.#rules.historyMs)
  }

  trash(limit: number, after: number | undefined, now: number): TrashPage {
    this.sweep(now)
    return this.#trash.page(limit, after)
  }

  /**
   * Takes the most recently deleted note with this id out of the trash, its room back from the
   * trash's count; undefined when there is none, ID_TAKEN (nothing taken) when `live` holds it.
   */
  take(id: number, now: number, live: boolean): TrashedEntry | undefined | typeof ID_TAKEN {
    this.sweep(now)
    const at = this.#trash.findId(id)
    if (at === -1) return undefined
    return live ? ID_TAKEN : this.#takeAt(at)
  }

  /** take() of the note deleted by change `sequence` (a replay). */
  takeDeletedBy(sequence: number): TrashedEntry | undefined {
    const at = this.#trash.findSequence(sequence)
    return at === -1 ? undefined : this.#takeAt(at)
  }

  /** `entry`, put back from the trash at `modified`, keeps `old`'s state at the delete as past. */
  putBack(entry: Entry, old: Entry, modified: number): void {
    const { etag, modified: at, change, json, bytes } = old
    keepState(entry, etag, at, change, json, bytes, this.#rules, modified)
  }

  /** Removes the note for good; answers the sequence of its delete, or undefined. */
  purge(id: number, now: number): number | undefined {
    this.sweep(now)
    const at = this.#trash.findId(id)
    if (at === -1) return undefined
    const item = this.#trash.take(at)
    this.#forget(item)
    return item.sequence
  }

  /** Removes every note for good; answers the sequences of their deletes. */
  empty(): number[] {
    const items = this.#trash.takeAll()
    for (const item of items) this.#forget(item)
    return items.map((item) => item.sequence)
  }

  /** Removes for good the notes deleted by these changes, those still in the trash (a replay). */
  purgeDeletedBy(sequences: readonly number[]): void {
    for (const sequence of sequences) {
      const at = this.#trash.findSequence(sequence)
      if (at !== -1) this.#forget(this.#trash.take(at))
    }
  }

  /** Lets go of the past states of these live entries and of the whole trash (a notebook removed). */
  release(entries: readonly Entry[]): void {
    for (const entry of entries) if (entry.alive) dropPast(entry, this.#rules.budget)
    this.empty()
  }

  /** The trash as an image holds it. */
  image(): ImageTrashed[] {
    return this.#trash.items.map(({ entry, deleted, sequence }) => ({
      note: imageNote(entry),
      deleted,
      sequence,
    }))
  }

  /** Loads an image's past states into an entry it made, counted in the budget. */
  loadPast(entry: Entry, past: readonly Revision[] | undefined): void {
    loadPast(entry, past ?? [], this.#rules.budget)
  }

  /** Loads an image's trashed note. */
  loadTrashed(
    entry: Entry,
    deleted: number,
    sequence: number,
    past: readonly Revision[] | undefined,
  ): void {
    entry.alive = false
    this.loadPast(entry, past)
    this.#add({ entry, deleted, sequence })
  }
}
