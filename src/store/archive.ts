import type { MaybePromise, NoteRecord } from './note-record.js'

/**
 * What a store keeps of notes beyond their current state: every state each note has had (its
 * revisions), and the notes deleted within the trash's time (the trash). Both are a notebook's
 * own, as its notes are: nothing here names or finds another notebook's note.
 */

/** One state a note has had. */
export interface Revision {
  /**
   * The version token of the write that made this state: the ETag the note had then, without
   * its quotes ('k2x9q1.5' for ETag "k2x9q1.5").
   */
  readonly version: string
  /** When that write was made, in ms since the epoch. */
  readonly at: number
  /** 'created' for the state a create (or a restore from the trash) made, else 'updated'. */
  readonly change: 'created' | 'updated'
  /** The note's JSON in that state, exactly as GET answered it then. */
  readonly json: string
}

/** One page of a note's revisions, newest first. */
export interface RevisionPage {
  readonly revisions: readonly Revision[]
  /** The version of the page's last revision when older ones follow; else undefined. */
  readonly next: string | undefined
}

/** A deleted note in the trash. */
export interface TrashedNote {
  /** When it was deleted, in ms since the epoch. */
  readonly deleted: number
  /**
   * The store's change sequence of its delete: unique in the notebook, and larger for a later
   * delete, so the trash's order and its pages' cursor.
   */
  readonly sequence: number
  /** The note's JSON as it was when deleted. */
  readonly json: string
}

/** One page of the trash, most recently deleted first. */
export interface TrashPage {
  readonly notes: readonly TrashedNote[]
  /** Deleted notes in the trash. */
  readonly total: number
  /** The sequence of the page's last note when more follow; else undefined. */
  readonly next: number | undefined
}

/** A restore from the trash refused: a live note holds that id again. Nothing was changed. */
export const ID_TAKEN = 'id-taken'

/** How long and how much a store keeps of history and trash. */
export interface ArchiveLimits {
  /** Revisions one note keeps at most, its current state included (NOTE_HISTORY); 0 keeps none. */
  readonly noteHistory: number
  /** Revisions older than this many ms go (HISTORY_DAYS). */
  readonly historyMs: number
  /** UTF-8 bytes of past revisions kept over the whole service, the oldest go first. */
  readonly maxHistoryBytes: number
  /** How long a deleted note stays in the trash, in ms (TRASH_DAYS); 0 turns the trash off. */
  readonly trashMs: number
}

const DAY_MS = 24 * 60 * 60 * 1000

export const ARCHIVE_DEFAULTS: ArchiveLimits = Object.freeze({
  noteHistory: 100,
  historyMs: 90 * DAY_MS,
  maxHistoryBytes: 1024 * 1024 * 1024,
  trashMs: 30 * DAY_MS,
})

/** The time `days` stands for, in ms (fractions allowed). */
export function daysMs(days: number): number {
  return Math.round(days * DAY_MS)
}

/**
 * The history and trash of one notebook's notes (NoteStore's archive methods). Revisions are made
 * by the store's own writes: a create, update or restore keeps the state it makes; only their
 * reading is here. A note in the trash keeps its revisions and answers none until it is
 * restored; a note purged from the trash (or past its time) is gone with its revisions.
 */
export interface NoteArchive {
  /**
   * The revisions of the live note with this id, newest first (the current state is the first),
   * at most `limit`, starting after the revision `after` (a version; a version no longer kept
   * continues with the older ones); undefined when no live note has this id.
   */
  revisions(
    id: number,
    limit: number,
    after: string | undefined,
  ): MaybePromise<RevisionPage | undefined>
  /** One revision of the live note with this id, or undefined (no such note or revision). */
  revision(id: number, version: string): MaybePromise<Revision | undefined>
  /** The trash, most recently deleted first, `limit` at most, after the delete `after`. */
  trash(limit: number, after: number | undefined): MaybePromise<TrashPage>
  /**
   * Puts the most recently deleted note with this id back at the end of the list, with its
   * content and revisions, as a new write (a `created` change and a new revision); undefined when
   * the trash holds no note with this id, ID_TAKEN when a live note holds it.
   */
  untrash(id: number): MaybePromise<NoteRecord | undefined | typeof ID_TAKEN>
  /** Removes the most recently deleted note with this id from the trash for good. */
  purge(id: number): MaybePromise<boolean>
  /** Removes every note from the trash for good; answers how many went. */
  emptyTrash(): MaybePromise<number>
}
