/** A value now, or once a promise settles: what a store's methods answer. */
export type MaybePromise<T> = T | Promise<T>

/**
 * A note as the store holds it. `etag` and `modified` are set when the note is written, next to its
 * JSON, so a conditional read costs nothing more than a plain one.
 */
export interface NoteRecord {
  /** The note serialized, exactly as GET answers it inside `data`. */
  readonly json: string
  /**
   * The strong validator of this content, quoted: '"k2x9q1.5t"'. It is the version token of the
   * write that produced this content, so the same ETag means the same bytes on every
   * instance of the store, and a restarted memory store (a new epoch) never repeats one.
   */
  readonly etag: string
  /** When the note was last written, in ms since the epoch (Last-Modified). */
  readonly modified: number
}
