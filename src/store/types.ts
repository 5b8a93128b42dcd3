/** The fields of a note as parsed from a JSON object: any names, any JSON values. */
export type NoteFields = Record<string, unknown>

/**
 * How an update applies its fields: 'merge' is the spec's shallow merge (each field replaces the
 * stored one); 'merge-patch' is RFC 7396 JSON Merge Patch (DECISION 25).
 */
export type PatchKind = 'merge' | 'merge-patch'

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
   * Applies `fields` to the note with this id, atomically, and returns the new JSON, or
   * undefined. `kind` says how (DECISION 25):
   * - 'merge' (the spec's PATCH): shallow, each field replaces the stored one, a null included;
   * - 'merge-patch' (RFC 7396, for application/merge-patch+json): a null removes the field, an
   *   object merges recursively (over {} when the stored value is absent or not an object),
   *   anything else (arrays too) replaces; mergePatchInto in merge-patch.ts is the reference.
   * Either way `__proto__` is a plain field at any depth, an `id` field moves the note to that
   * id, and a merge patch that removes `id` leaves a note that no id finds but the list still
   * holds (DECISION 4: a note is found by its `id` field only). The note keeps its place in the
   * list. A PostgreSQL store can run 'merge-patch' in one UPDATE (a recursive jsonb function).
   * @throws StoreFullError when the changed note would pass the capacity; nothing changes.
   */
  update(id: number, fields: NoteFields, kind?: PatchKind): MaybePromise<string | undefined>
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
