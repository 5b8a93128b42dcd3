/** The shapes the client's methods take and answer. */

import type { RetryOptions } from './retry-policy.js'
import type { TokenSource } from './transport.js'

/** What `new NotesClient(options)` takes. */
export interface NotesClientOptions {
  /** Where the service is: 'http://127.0.0.1:3000' (a path prefix is kept). */
  baseUrl: string | URL
  /**
   * A service key or a user token (JWT), sent as `Authorization: Bearer`; or a function that
   * gives one, called before every request (so that a token can be renewed).
   */
  token?: TokenSource | undefined
  /** The fetch to call (default: the global one). */
  fetch?: typeof fetch | undefined
  /** Retries of network failures, 503 and 429 (default: 3, waiting at most 10 s each). */
  retries?: RetryOptions | undefined
  /** Aborts every request of this client, and ends its feeds. */
  signal?: AbortSignal | undefined
  /** How many notes' ETags the client remembers for If-Match (default 10,000; 0: none). */
  rememberEtags?: number | undefined
  /**
   * The notebook the note methods act on, by id ('me': the caller's default); left out, the
   * caller's default notebook at `/api/note`. `client.notebook(id)` makes such a client.
   */
  notebook?: string | undefined
}

/**
 * A note as the service answers it: the fields it was given, and its `id` (a number the service
 * set, unless a PATCH changed it).
 */
export interface Note {
  id: number
  [field: string]: unknown
}

/** The fields of a create or an update: any JSON object (an `id` in a create is replaced). */
export type NoteFields = Record<string, unknown>

/** A note and what the service said of it. */
export interface NoteResult {
  note: Note
  /** Its ETag: what If-Match sends to change exactly this version of it. */
  etag: string | undefined
  /** A create answered again for a repeated Idempotency-Key (`Idempotent-Replayed: true`). */
  replayed: boolean
}

/** The whole list, or one page of it. */
export interface NoteList {
  notes: Note[]
  /** `Notes-Version`: the version the list was read at; `events({ since })` follows on from it. */
  version: string | undefined
  /** `X-Total-Count`: the notes stored (or matching `q`). */
  total: number | undefined
  etag: string | undefined
}

/** One page, as `pages()` yields it. */
export interface NotePage extends NoteList {
  /** The URL of the next page (`Link: rel="next"`), or undefined on the last page. */
  next: string | undefined
}

export interface ListOptions {
  /** Keeps the notes with a string value (at any depth) containing this text, case-insensitively. */
  q?: string | undefined
  /** 'desc' walks from the newest. */
  order?: 'asc' | 'desc' | undefined
  signal?: AbortSignal | undefined
}

export interface PagesOptions extends ListOptions {
  /** Notes per page, 1-1000 (default 100). */
  limit?: number | undefined
}

export interface CreateOptions {
  /** Sent as Idempotency-Key; a random UUID by default, so that a retry is applied once. */
  idempotencyKey?: string | undefined
  signal?: AbortSignal | undefined
}

/**
 * The If-Match of a write: an ETag (or several, comma-separated), '*' (any existing note), or
 * false to send none. Left out, the ETag the client last saw of the note is sent, if any.
 */
export type IfMatch = string | false

export interface UpdateOptions {
  ifMatch?: IfMatch | undefined
  /** Sends `application/merge-patch+json` (RFC 7396: null removes a field, objects merge). */
  mergePatch?: boolean | undefined
  signal?: AbortSignal | undefined
}

export interface ReplaceOptions {
  ifMatch?: IfMatch | undefined
  signal?: AbortSignal | undefined
}

export interface DeleteOptions {
  ifMatch?: IfMatch | undefined
  signal?: AbortSignal | undefined
}

/** One request of a batch, as POST /api/batch takes it. */
export interface BatchRequest {
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** '/api/note' for a POST, '/api/note/<id>' for a PUT, PATCH or DELETE. */
  url: string
  headers?: Record<string, string>
  body?: NoteFields
}

/** One request's answer in a batch, as it would have been answered alone. */
export interface BatchAnswer {
  status: number
  /** Header names in lower case. */
  headers: Record<string, string>
  /** `{ data: <note> }` for a create or update, `{ data: '<id>' }` for a delete. */
  body: unknown
}

export interface BatchOptions {
  /** Sent as Idempotency-Key; a random UUID by default. */
  idempotencyKey?: string | undefined
  /**
   * false: PATCH and DELETE requests without an If-Match header go without one. By default each
   * gets the ETag the client last saw of its note, if any.
   */
  ifMatch?: false | undefined
  signal?: AbortSignal | undefined
}

export interface BatchResult {
  answers: BatchAnswer[]
  /** The batch was answered again for a repeated Idempotency-Key. */
  replayed: boolean
}

/**
 * One change of the feed; a reset (the history no longer reaches back: reload the list); or, on
 * a notebook's feed, `revoked`: the caller is no longer a member (removed, or the notebook was
 * deleted), and the feed ends after it (its `version` is the last one the feed had reached).
 */
export type ChangeEvent =
  | { type: 'created' | 'updated'; version: string; note: Note }
  | { type: 'deleted'; version: string; id: number }
  | { type: 'reset'; version: string }
  | { type: 'revoked'; version: string; notebook: string }

/**
 * A member's part in a notebook: an owner does everything (members, invitations, rename,
 * delete), an editor reads and writes notes, a viewer reads them.
 */
export type Role = 'owner' | 'editor' | 'viewer'

/** A notebook as the caller sees it. */
export interface Notebook {
  /** Opaque and URL-safe: 'n4Qv0b6mJx8y2kTqR1sZ3w'. */
  id: string
  name: string
  /** The caller's role in it. */
  role: Role
  /** How many members it has, the caller included. */
  members: number
}

export interface Member {
  /** The member's `sub` (the user id their tokens carry). */
  user: string
  role: Role
}

/** An invitation as its notebook's owners list it (never its token). */
export interface Invite {
  id: string
  role: Role
  /** When it stops working, an RFC 3339 time: '2027-01-22T08:00:00.000Z'. */
  expires: string
  /** How many more times it can be redeemed. */
  uses: number
}

/** An invitation just made: its token is shown this once (the service keeps only a hash). */
export interface NewInvite extends Invite {
  /** What `redeemInvite(token)` takes: give it to the person invited. */
  token: string
}

export interface InviteOptions {
  /** The role the invitation gives. */
  role: Role
  /** Seconds it works for, 1 to 2,592,000 (30 days); 7 days by default. */
  expiresIn?: number | undefined
  /** How many times it can be redeemed, 1 to 10,000; 1 by default. */
  uses?: number | undefined
  signal?: AbortSignal | undefined
}

/** The options of a call that only takes a signal. */
export interface CallOptions {
  signal?: AbortSignal | undefined
}

/** One state a note has had, as `revisions` and `revision` answer it. */
export interface Revision {
  /** The ETag the note had in this state, without its quotes: what `restore` takes. */
  version: string
  /** When the write that made it was made, an RFC 3339 time: '2027-01-15T08:00:00.000Z'. */
  at: string
  /** 'created' for a create (or a restore from the trash), else 'updated'. */
  change: 'created' | 'updated'
  /** The note as it was then. */
  note: Note
}

/** One page of a note's revisions, newest first (the note as it is now is the first). */
export interface RevisionPage {
  revisions: Revision[]
  /** What `after` takes for the next page (older revisions), or undefined on the last page. */
  next: string | undefined
}

export interface RevisionsOptions {
  /** Revisions per page, 1-1000 (default 100). */
  limit?: number | undefined
  /** The `next` of the page before: the revisions older than it. */
  after?: string | undefined
  signal?: AbortSignal | undefined
}

export interface RestoreOptions {
  /** As an update's: left out, the ETag the client last saw of the note, if any. */
  ifMatch?: IfMatch | undefined
  signal?: AbortSignal | undefined
}

/** A deleted note in the trash. */
export interface TrashedNote {
  /** When it was deleted, an RFC 3339 time. */
  deleted_at: string
  /** The note as it was when deleted. */
  note: Note
}

/** One page of the trash, most recently deleted first. */
export interface TrashPage {
  notes: TrashedNote[]
  /** `X-Total-Count`: the notes in the trash. */
  total: number | undefined
  /** What `after` takes for the next page, or undefined on the last page. */
  next: string | undefined
}

export interface TrashOptions {
  /** Notes per page, 1-1000 (default 100). */
  limit?: number | undefined
  /** The `next` of the page before. */
  after?: string | undefined
  signal?: AbortSignal | undefined
}
