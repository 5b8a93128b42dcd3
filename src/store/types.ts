import type { NoteArchive } from './archive.js'
import type { Directory, Role } from './directory.js'
import type { FileSpace } from './files.js'
import type { MaybePromise, NoteRecord } from './note-record.js'

export type { MaybePromise, NoteRecord } from './note-record.js'

/** The fields of a note as parsed from a JSON object: any names, any JSON values. */
export type NoteFields = Record<string, unknown>

/**
 * How an update applies its fields: 'merge' is the spec's shallow merge (each field replaces the
 * stored one); 'merge-patch' is RFC 7396 JSON Merge Patch; 'replace' (PUT) makes the fields the
 * whole note, with the note's own id.
 */
export type PatchKind = 'merge' | 'merge-patch' | 'replace'

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

/** The whole list at one version. The same object is returned until a write. */
export interface ListRecord {
  /** The JSON array of every note in list order. */
  readonly json: string
  /** The version token this list is at. */
  readonly version: string
  /** Notes in the list. */
  readonly count: number
}

/**
 * A place in the order of last change (sort=updated): notes by the time of their last write,
 * then by id (a note whose id is not a number, as a PATCH can leave it, counts as Infinity: after
 * every numeric id of the same ms), then by list position, which no two notes share.
 * (5, 9, 2) < (5, 9, 3) < (5, Infinity, 1) < (6, 1, 4)
 */
export interface ChangeKey {
  /** The note's time of last write (NoteRecord.modified). */
  readonly modified: number
  /** Its `id` field when that is a finite number, else Infinity. */
  readonly id: number
  readonly position: number
}

/** One page of the list: a keyset walk over list positions, or over the order of last change. */
export interface PageQuery {
  /** Most notes in the page, 1-1000. */
  readonly limit: number
  /** 'asc' walks from the oldest note (list order), 'desc' from the newest. */
  readonly order: 'asc' | 'desc'
  /**
   * 'created' (or undefined): list order, by list position; 'updated': the order of last change
   * (ChangeKey).
   */
  readonly sort?: 'created' | 'updated' | undefined
  /**
   * Start after this place (exclusive): a list position for 'created', a ChangeKey for
   * 'updated'; undefined starts at the first (or last) note.
   */
  readonly after: number | ChangeKey | undefined
  /** Keep only notes with a string value, at any depth, that contains this text (any case). */
  readonly q: string | undefined
}

export interface PageRecord {
  /** The JSON array of the page's notes, in walk order. */
  readonly json: string
  readonly version: string
  /** Notes stored, or notes matching `q` when it is given. */
  readonly total: number
  /**
   * The place of the page's last note when more notes follow it (its list position, or its
   * ChangeKey for sort=updated); else undefined.
   */
  readonly next: number | ChangeKey | undefined
}

/** Conditions a write applies atomically with itself. */
export interface Preconditions {
  /** The note's etag must be one of these ('"..."', as NoteRecord.etag), or '*' for any note. */
  readonly ifMatch?: readonly string[] | '*' | undefined
  /** The note must not have been written after this second (ms, a multiple of 1000). */
  readonly ifUnmodifiedSince?: number | undefined
}

/** A conditional write refused: the note exists but does not meet the preconditions. */
export class PreconditionFailed {
  constructor(
    /** The note as it is now, so that a client can be shown the newer version. */
    readonly current: NoteRecord,
  ) {}
}

/** A create under an Idempotency-Key. */
export interface IdempotentCreate {
  /** The note as the first request created it (not as it may have changed since). */
  readonly note: NoteRecord
  /** True when this is a repeat: nothing was created now. */
  readonly replayed: boolean
}

export type ChangeType = 'created' | 'updated' | 'deleted'

/** One write, as the change feed sends it. */
export interface Change {
  readonly type: ChangeType
  /** The version token after this change: the SSE event id. */
  readonly version: string
  /** The store's order of changes: strictly increasing, without gaps, within one store. */
  readonly sequence: number
  /** The note's JSON after the change; for 'deleted', '{"id":<id>}'. */
  readonly data: string
}

/**
 * Where notes live. The HTTP layer talks only to this interface, so another backend can be
 * added without touching the routes. Methods may answer synchronously or with a promise;
 * a networked backend will return promises.
 *
 * A record that a synchronous store returns may be the store's own, changed in place by its next
 * write: read it before writing again.
 *
 * Notes cross this interface as JSON text: each note is serialized once, when it is written,
 * and reads hand back that text. Ids compare by strict equality (`7` never finds `"7"`).
 * When several notes share an id (a PATCH can cause that), the first in list order is the one
 * that get, update and delete act on.
 *
 * Every write advances the store's version: one change sequence per store, shared by
 * every instance of it, kept as a bounded history that the change feed replays (`changesSince`).
 * Every note's past states and the deleted notes of the trash are kept too (NoteArchive).
 */
export interface NoteStore extends NoteArchive {
  /**
   * Stores `fields` plus a fresh time-based `id` that no stored note holds, at the end of the
   * list, and returns the note. The caller's object is not modified.
   * @throws StoreFullError when the note would pass the store's capacity; nothing changes.
   */
  create(fields: NoteFields): MaybePromise<NoteRecord>
  /**
   * create() applied at most once per `key`: a repeat with the same `fingerprint`
   * (of the request body) within the retention answers the first note with `replayed: true`.
   * Keys are remembered only for creates that succeeded.
   * @throws IdempotencyKeyReusedError when the key was used with another fingerprint.
   * @throws StoreFullError as create does.
   */
  createOnce(key: string, fingerprint: string, fields: NoteFields): MaybePromise<IdempotentCreate>
  /** Every note in list order. The same record is returned until a write. */
  list(): MaybePromise<ListRecord>
  /** A page of the list. Costs O(limit), not O(notes), without `q`. */
  page(query: PageQuery): MaybePromise<PageRecord>
  /** The note with this id, or undefined. */
  get(id: number): MaybePromise<NoteRecord | undefined>
  /**
   * Applies `fields` to the note with this id, atomically, and returns the new note, or
   * undefined. `kind` says how:
   * - 'merge' (the spec's PATCH): shallow, each field replaces the stored one, a null included;
   * - 'merge-patch' (RFC 7396, for application/merge-patch+json): a null removes the field, an
   *   object merges recursively (over {} when the stored value is absent or not an object),
   *   anything else (arrays too) replaces; mergePatchInto in merge-patch.ts is the reference;
   * - 'replace' (PUT): the fields become the whole note, and its `id` stays the note's (a field
   *   `id` is overridden, in its place, as on create): every other stored field is gone.
   * Either way `__proto__` is a plain field at any depth, an `id` field of a merge moves the note
   * to that id, and a merge patch that removes `id` leaves a note that no id finds but the list still
   * holds (a note is found by its `id` field only). The note keeps its place in the
   * list. With `conditions`, a note that does not meet them is left as it is and answered as
   * PreconditionFailed, checked and written as one step.
   * @throws StoreFullError when the changed note would pass the capacity; nothing changes.
   */
  update(
    id: number,
    fields: NoteFields,
    kind?: PatchKind,
    conditions?: Preconditions,
  ): MaybePromise<NoteRecord | undefined | PreconditionFailed>
  /** Removes the note with this id; false when there was none. Conditions as for update. */
  delete(id: number, conditions?: Preconditions): MaybePromise<boolean | PreconditionFailed>
  /** The current version token. */
  version(): MaybePromise<string>
  /**
   * The changes after the one whose version token is `since`, oldest first, at most `limit` of
   * them; undefined when `since` is not a version of this store or is older than the history
   * kept (the client must reload: an SSE 'reset').
   */
  changesSince(since: string, limit: number): MaybePromise<readonly Change[] | undefined>
  /**
   * Calls `listener` with every change from now on, in sequence order, and returns the function
   * that stops it. A store shared by several processes also reports the other processes' changes.
   */
  subscribe(listener: (change: Change) => void): () => void
  stats(): MaybePromise<StoreStats>
  /**
   * Every note of the store as one consistent snapshot (an export): the version it is at, and
   * the notes' JSON in list order, read a chunk at a time, so that an export of any size holds
   * one chunk in memory at once. Later writes do not change what it yields. Close it when it is
   * not read to the end (a client went away): a store that holds something for it lets go.
   */
  exportNotes(): MaybePromise<NoteExport>
  /**
   * Applies the writes that `work` makes through `writer` as one atomic step (a batch): when
   * `work` answers a string, every one of them is kept, and the string is the batch's answer;
   * when it answers undefined (one write was refused) or throws, none is, and the store is as it
   * was. No read and no subscriber sees part of a batch: subscribers hear of its changes, in
   * order, once it is kept. `writer`'s writes mean exactly what the store's own do, in order, each
   * seeing the ones before it; they may be called without waiting for the one before.
   * A synchronous store needs a synchronous `work`.
   *
   * With `once`, the batch is applied at most once per key, as createOnce: a repeat with the same
   * fingerprint within the retention answers the first answer with `replayed: true`, without
   * calling `work`.
   * @throws IdempotencyKeyReusedError when the key was used with another fingerprint.
   */
  batch(
    work: (writer: NoteWriter) => MaybePromise<string | undefined>,
    once?: BatchKey,
  ): MaybePromise<BatchResult | undefined>
  /**
   * Whether the store's backend answers now; /readyz is 503 while it does not.
   * A store without a backend to lose (memory) leaves it out.
   */
  available?(): MaybePromise<boolean>
}

/** The writes a batch makes (NoteStore.batch), meaning what the store's own mean. */
export type NoteWriter = Pick<NoteStore, 'create' | 'update' | 'delete'>

/** A batch's Idempotency-Key and the fingerprint of its body. */
export interface BatchKey {
  readonly key: string
  readonly fingerprint: string
}

/** A batch kept: its answer, and whether it is the answer of an earlier batch under its key. */
export interface BatchResult {
  readonly body: string
  readonly replayed: boolean
}

/**
 * One export of a store: its version, and its notes' JSON (exactly as the list holds
 * each) in list order, in chunks of at most a few thousand notes.
 *   { version: 'k2x9q1.5', notes: 2 } then ['{"id":1,"a":1}', '{"id":2}'], then done
 */
export interface NoteExport {
  /** The version token the snapshot is at: the list's Notes-Version at that moment. */
  readonly version: string
  /** How many notes the snapshot holds. */
  readonly count: number
  /** The notes' JSON, a chunk at a time; read once. Ends (and lets go, as close) after the last. */
  chunks(): AsyncIterableIterator<readonly string[]>
  /** Lets go of the snapshot before its end; safe to call more than once, or after the end. */
  close(): Promise<void>
}

/**
 * Every notebook of one service: each is a NoteStore of its own, exactly as if each
 * user had a store to themselves (its list, pages, search, version and ETags, change history,
 * subscribers and idempotency keys), while the ids that creates give are unique over all of them
 * and the caps hold per notebook and overall. Nothing of one
 * notebook shows in another: another notebook's id is not found there (undefined, false: never
 * PreconditionFailed), its version tokens are unknown there (changesSince answers undefined).
 *
 * A notebook's own `stats` count its notes against its own caps. A write that would pass its
 * notebook's cap or the service's throws StoreFullError, whose message says which, and names no
 * other notebook; nothing changes.
 */
/** What the health checks and metrics read of a store, or of every notebook at once. */
export type StoreGauges = Pick<NoteStore, 'stats' | 'available'>

export interface Notebooks {
  /**
   * The store of the notebook with this name, empty on first use, holding the same notes every
   * time it is asked for. Names are opaque: any string, '' and '__proto__' included.
   */
  notebook(name: string): NoteStore
  /**
   * Who may see which notebook (its notes are `notebook(access.store)`), kept in the same backend
   * as the notes, so that a notebook's removal removes its notes in the same step.
   */
  readonly directory: Directory
  /**
   * The files of every notebook, by the same names as `notebook` takes, kept in the same backend
   * as the notes: a notebook's removal removes its files too.
   */
  readonly files: FileSpace
  /**
   * The notebook `name` as `user` writes to it: each write (and each batch) is applied only if, at
   * that moment and in the same atomic step, `user` is an owner or editor of the directory's
   * notebook kept under `name`; otherwise it throws AccessLostError and changes nothing. Reads
   * are the notebook's own.
   */
  writerFor(name: string, user: string): NoteStore
  /** Notes and bytes over every notebook, against the service-wide caps. */
  stats(): MaybePromise<StoreStats>
  /** As NoteStore.available: whether the backend answers now. Memory leaves it out. */
  available?(): MaybePromise<boolean>
}

/**
 * The notebook of requests that carry a service key, and of every request when user tokens are
 * off; in the journal, the one whose records carry no name, and in an export file, the one named
 * so. A user's notebook is `user:` and the token's `sub`, so no `sub` can name this one.
 */
export const SHARED_NOTEBOOK = 'shared'

/**
 * Whether every Notebooks implementation can keep `name` apart from every other name: text that
 * is well-formed (no lone surrogate, which UTF-8 storage turns into U+FFFD, making two names one)
 * and holds no NUL (which PostgreSQL's text cannot hold). The callers refuse any other `sub`.
 */
export function isNotebookName(name: string): boolean {
  return !/[\0\p{Cs}]/u.test(name)
}

/**
 * A write refused because its writer is no longer an owner or editor of the notebook (removed or
 * demoted while the request was on its way). Nothing was changed.
 */
export class AccessLostError extends Error {
  constructor(
    /** The writer's role now: undefined when they are no longer a member. */
    readonly role: Role | undefined,
  ) {
    super(
      role === undefined ? 'No longer a member of the notebook.' : `Now a ${role} of the notebook.`,
    )
    this.name = 'AccessLostError'
  }
}

/** A write refused because the store is at capacity. Nothing was changed. */
export class StoreFullError extends Error {
  constructor(
    message: string,
    /** What the caller can do about it, said after the message. */
    readonly advice = 'Delete notes to make room.',
  ) {
    super(message)
    this.name = 'StoreFullError'
  }
}

/** An Idempotency-Key sent again with a different body. Nothing was created. */
export class IdempotencyKeyReusedError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'IdempotencyKeyReusedError'
  }
}

/**
 * The store's backend cannot be reached (a database down, restarting, or too slow): nothing is
 * known to have changed. Answered with 503 and Retry-After.
 */
export class StoreUnavailableError extends Error {
  constructor(
    message: string,
    /** Seconds after which a retry may succeed. */
    readonly retryAfterSeconds = 1,
    /**
     * `cause`: what happened, for the log only ('connection refused at 127.0.0.1:5499'); the
     * answer says `message`, which reveals no internals.
     */
    options?: { cause: string },
  ) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}
