/** The fields of a note as parsed from a JSON object: any names, any JSON values. */
export type NoteFields = Record<string, unknown>

export type MaybePromise<T> = T | Promise<T>

/** What a store holds and how much room it has left. */
export interface StoreStats {
  /** Notes stored. */
  notes: number
  /** UTF-8 bytes of the stored notes' JSON. */
  bytes: number
  /** Most notes the store accepts. */
  maxNotes: number
  /** Most bytes of JSON the store accepts. */
  maxBytes: number
}

/**
 * Where notes live. The HTTP layer talks only to this interface, so another backend can be
 * added without touching the routes. Methods may answer synchronously or with a promise;
 * a networked backend will return promises.
 *
 * Notes cross this interface as JSON text: each note is serialized once, when it is written,
 * and reads hand back that text. Ids compare by strict equality (`7` never finds `"7"`).
 * When several notes share an id (a PATCH can cause that), the first in list order is the one
 * that get, update and delete act on.
 */
export interface NoteStore {
  /**
   * Stores `fields` plus a fresh time-based `id` that no stored note holds, at the end of the
   * list, and returns the note's JSON. The caller's object is not modified.
   * @throws StoreFullError when the note would pass the store's capacity; nothing changes.
   */
  create(fields: NoteFields): MaybePromise<string>
  /** The JSON array of every note in list order. The same string is returned until a write. */
  list(): MaybePromise<string>
  /** The JSON of the note with this id, or undefined. */
  get(id: number): MaybePromise<string | undefined>
  /**
   * Merges `fields` over the note with this id (shallow: each field replaces the stored one;
   * an `id` field moves the note to that id) and returns the merged JSON, or undefined.
   * The note keeps its place in the list.
   * @throws StoreFullError when the grown note would pass the capacity; nothing changes.
   */
  update(id: number, fields: NoteFields): MaybePromise<string | undefined>
  /** Removes the note with this id; false when there was none. */
  delete(id: number): MaybePromise<boolean>
  stats(): MaybePromise<StoreStats>
}

/** A write refused because the store is at capacity. Nothing was changed. */
export class StoreFullError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'StoreFullError'
  }
}
