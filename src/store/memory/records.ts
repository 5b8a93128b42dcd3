import type { Revision } from '../archive.js'
import type { Change, NoteRecord } from '../types.js'

/**
 * A write as its result, so that replaying it needs no clock and gives the same store: a create's
 * id and time, an update's new JSON, a delete, each at its sequence and list position (a create's
 * position is its sequence). A memory store tells its `onWrite` of each (a journal writes it down)
 * and applies one again with `replay`.
 */
export type RecordedWrite =
  | { type: 'created'; sequence: number; id: number; json: string; modified: number }
  | { type: 'updated'; sequence: number; position: number; json: string; modified: number }
  | {
      type: 'deleted'
      sequence: number
      position: number
      id: number
      /** When the note went to the trash (ms); absent when it was removed for good. */
      trashed?: number
    }
  /** A note put back from the trash (the one deleted at `trashed`, a sequence) at the list's end. */
  | { type: 'untrashed'; sequence: number; trashed: number; modified: number }
  /** Notes removed from the trash for good, by the sequences of their deletes. */
  | { type: 'purged'; trashed: readonly number[] }

/** An idempotency key as the store remembers it. */
export interface RememberedKey {
  readonly fingerprint: string
  readonly note: NoteRecord
  readonly expires: number
}

/** Everything a store holds, to write down whole (a journal's compaction) and load back. */
export interface StoreImage {
  readonly sequence: number
  /** The sequence before the oldest change in `history`. */
  readonly historyStart: number
  /** The id the last create gave (IdSpace), or -Infinity before any. */
  readonly lastId: number
  /** Live notes in list order. */
  readonly notes: readonly ImageNote[]
  readonly history: readonly Change[]
  /** Oldest first. */
  readonly keys: readonly (readonly [string, RememberedKey])[]
  /** The trash, oldest delete first; absent in an image made before the trash. */
  readonly trash?: readonly ImageTrashed[]
}

export interface ImageNote extends NoteRecord {
  readonly position: number
  /** What made the current state; 'created' when absent. */
  change?: 'updated'
  /** Past states, oldest first; absent when none. */
  past?: readonly Revision[]
}

/** A deleted note in an image's trash: the note as it was, when and by which change it went. */
export interface ImageTrashed {
  readonly note: ImageNote
  readonly deleted: number
  readonly sequence: number
}

/** The entry's current values, apart from the entry that later writes change in place. */
export function snapshot(entry: NoteRecord): NoteRecord {
  return { json: entry.json, etag: entry.etag, modified: entry.modified }
}
