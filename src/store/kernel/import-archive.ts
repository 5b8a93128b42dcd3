import type { ArchiveLimits, Revision } from '../archive.js'

/**
 * What a store keeps of a history and trash handed to it whole (an import) or read out of it (an
 * export), as its limits say, and where each state of a note goes in a notebook's sequences when
 * it is imported. Every store applies the same rules: the newest NOTE_HISTORY - 1 past revisions
 * of a note, none older than HISTORY_DAYS, the deleted notes within TRASH_DAYS, and, past
 * MAX_HISTORY_BYTES over all of them, the oldest revisions go first (HistoryBytesCut).
 */

/** The history and trash limits of one store, at one moment. */
export class ArchiveRules {
  readonly limits: ArchiveLimits
  readonly now: number

  constructor(limits: ArchiveLimits, now: number) {
    this.limits = limits
    this.now = now
  }

  /** How many of a note's past revisions it keeps, the newest: NOTE_HISTORY less its current state. */
  get pastKept(): number {
    return Math.max(this.limits.noteHistory - 1, 0)
  }

  /** Whether a past revision made at `at` (ms) is within HISTORY_DAYS. */
  recent(at: number): boolean {
    return at > this.now - this.limits.historyMs
  }

  /** Whether a note deleted at `deleted` (ms) is still in the trash (TRASH_DAYS; 0: none is). */
  inTrash(deleted: number): boolean {
    return this.limits.trashMs > 0 && deleted > this.now - this.limits.trashMs
  }
}

/** What an import did not keep, and which limit let it go. */
export interface ArchiveDropped {
  /** Past revisions beyond NOTE_HISTORY. */
  count: number
  /** Past revisions older than HISTORY_DAYS. */
  age: number
  /** Past revisions beyond MAX_HISTORY_BYTES (the oldest). */
  bytes: number
  /** Deleted notes past TRASH_DAYS (with their revisions). */
  trash: number
}

export function noneDropped(): ArchiveDropped {
  return { count: 0, age: 0, bytes: 0, trash: 0 }
}

/**
 * The revisions MAX_HISTORY_BYTES lets go when given more: told of every past revision that the
 * other rules keep, in order (`add`), it finds the oldest to drop, by time and then by order
 * given (`finish`); then, told of the same revisions again in the same order, `keeps` says which
 * stay. Holds 16 bytes a revision, not the revisions.
 */
export class HistoryBytesCut {
  #at = new Float64Array(1024)
  #bytes = new Float64Array(1024)
  #count = 0
  #total = 0
  /** Revisions made before this time go; of those made at it, the first `#ties` seen. */
  #before = Number.NEGATIVE_INFINITY
  #ties = 0
  #seen = 0
  #dropped = 0

  /** A past revision kept so far, made at `at`, of `bytes` UTF-8 bytes. */
  add(at: number, bytes: number): void {
    if (this.#count === this.#at.length) {
      const grow = (from: Float64Array) => {
        const to = new Float64Array(from.length * 2)
        to.set(from)
        return to
      }
      this.#at = grow(this.#at)
      this.#bytes = grow(this.#bytes)
    }
    this.#at[this.#count] = at
    this.#bytes[this.#count] = bytes
    this.#count++
    this.#total += bytes
  }

  /** Once every revision is added: finds the cut for `maxBytes`; answers the bytes kept. */
  finish(maxBytes: number): number {
    if (this.#total <= maxBytes) return this.#total
    const at = this.#at
    const order = new Uint32Array(this.#count)
    for (let i = 0; i < order.length; i++) order[i] = i
    order.sort((a, b) => (at[a] as number) - (at[b] as number) || a - b)
    let held = this.#total
    for (const i of order) {
      if (held <= maxBytes) break
      held -= this.#bytes[i] as number
      this.#dropped++
      if (at[i] !== this.#before) this.#ties = 0
      this.#before = at[i] as number
      this.#ties++
    }
    // What was made before the cut's time goes whole; at that time, the first #ties.
    this.#at = new Float64Array(0)
    this.#bytes = new Float64Array(0)
    return held
  }

  /** How many revisions the cut lets go. */
  get dropped(): number {
    return this.#dropped
  }

  /** Whether the next revision of those added again, in order, made at `at`, stays. */
  keeps(at: number): boolean {
    if (at > this.#before) return true
    if (at < this.#before) return false
    return ++this.#seen > this.#ties
  }
}

/** Where one note goes in its notebook's sequences (each counted from the notebook's first). */
export interface NoteSlots {
  /** Its list position: the sequence of its create. */
  readonly position: number
  /** The sequences of its past revisions, oldest first. */
  readonly past: readonly number[]
  /** The sequence of the write that made its current state (its version). */
  readonly written: number
  /** For a deleted note, the sequence of its delete. */
  readonly deleted: number | undefined
}

/**
 * The sequences of a note after sequence `last` of its notebook: for a note whose state is an
 * update, its create first (its position); then its past revisions, oldest first; then its
 * current state (a create's is its position, so a store that tells a create by position = version,
 * as PostgreSQL does, says 'created' again); then, for a note of the trash, its delete. Every
 * revision of the file takes its sequence, kept or not, so the same file gives the same versions
 * whatever a store keeps of it; a file without history gives each note its position as before.
 */
export function noteSlots(
  last: number,
  change: 'created' | 'updated',
  pastCount: number,
  trashed: boolean,
): NoteSlots {
  let next = last
  const position = change === 'updated' ? ++next : undefined
  const past: number[] = []
  for (let i = 0; i < pastCount; i++) past.push(++next)
  const written = ++next
  return {
    position: position ?? written,
    past,
    written,
    deleted: trashed ? ++next : undefined,
  }
}

/** How many sequences noteSlots gives such a note. */
export function slotCount(
  change: 'created' | 'updated',
  pastCount: number,
  trashed: boolean,
): number {
  return (change === 'updated' ? 1 : 0) + pastCount + 1 + (trashed ? 1 : 0)
}

/** A note's current state as an export writes it: its time and kind, and its past states. */
export interface ExportedState {
  readonly at: number
  readonly change: 'created' | 'updated'
  /** Oldest first. */
  readonly past: readonly Revision[]
}

/** A deleted note as an export writes it: its state when deleted, and when that was. */
export interface ExportedTrashed extends ExportedState {
  readonly deleted: number
  readonly json: string
}

/** What an export writes of one notebook's history and trash. */
export interface NotebookArchive {
  readonly name: string
  /** Its live notes (the count of its notebook line): as many states as `states()` gives. */
  readonly notes: number
  readonly trash: number
  /** Each live note's state, in list order. */
  states(): AsyncIterable<ExportedState>
  /** The trash, oldest delete first. */
  trashed(): AsyncIterable<ExportedTrashed>
}

/** The past states `rules` keep of `past` (oldest first): the newest, within HISTORY_DAYS. */
export function keptPast(past: readonly Revision[], rules: ArchiveRules): Revision[] {
  return past
    .slice(Math.max(past.length - rules.pastKept, 0))
    .filter((state) => rules.recent(state.at))
}
