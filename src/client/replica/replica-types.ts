/**
 * The replica's public types: its options, the entries of its local view, its conflicts and its
 * events (exported with Replica from notes-service/client).
 */
import type { NotesClient } from '../notes-client.js'
import type { ReplicaStorage } from './storage.js'

export interface ReplicaOptions {
  /** The transport: auth, retries, idempotency, feed. */
  client: NotesClient
  storage: ReplicaStorage
  /** The longest wait between attempts while the service cannot be reached (default 30 s). */
  maxDelayMs?: number | undefined
  /**
   * The most queued writes sent as one POST /api/batch (default 100; 1 sends each write alone,
   * for a service without batches).
   */
  batchLimit?: number | undefined
}

export interface ReplicaEntry {
  /**
   * Stable for the entry's life in this replica: `n:<id>` for a note from the service,
   * `local:<uuid>` for a local create (it keeps that key after the service gives it an id).
   */
  key: string
  /** The service's id; undefined while a local create waits to be sent. */
  id: number | undefined
  /** The note as the page shows it (its `id` field too, once known). */
  note: Record<string, unknown>
  /** Has queued writes (or an open conflict). */
  pending: boolean
}

export interface ReplicaConflict {
  /** The conflict's key, for resolve(). */
  key: string
  /** The entry key. */
  entry: string
  /**
   * The local version (null: a local delete). After a merge, the merged note with my values at
   * `paths`: it differs from `theirs` only there (and by later local writes to the note).
   */
  mine: Record<string, unknown> | null
  /**
   * The service's current version (null: deleted there). After a merge, the merged note as the
   * service now holds it: both sides' edits, and theirs at `paths`.
   */
  theirs: Record<string, unknown> | null
  /** What the service answered: 412 (changed there), 404 (deleted there), or another refusal. */
  status: number
  /**
   * The JSON Pointers (RFC 6901) in dispute: for a 412 of an update, the paths both sides
   * changed differently (every other change was merged and written without asking);
   * `['']` (the whole note) for a delete against an edit, an edit of a note deleted there, or
   * a refusal.
   */
  paths: string[]
}

/** A file attached to a note, kept on the device until it is uploaded (Replica.attachFile). */
export interface ReplicaFile {
  /** The file's key in the replica, for removeFile(). */
  key: string
  /** The entry key of the note it is attached to. */
  entry: string
  name: string
  type: string
  /** Its length in bytes. */
  size: number
  /** 'waiting' to be sent, 'sending' now, or 'refused' for good (then in unsentFiles()). */
  state: 'waiting' | 'sending' | 'refused'
  /** While sending: the bytes the service holds (its progress, out of `size`); else 0. */
  sent: number
  /**
   * A refused file's status: the service's (413 too large, 507 no room, 403 a viewer, ...), 404
   * when its note was deleted, 400 when the note's `files` field is not a list, 0 when the
   * device lost its bytes. Undefined otherwise.
   */
  status: number | undefined
  /** Why, in words (the service's problem detail), for a refused file. */
  detail: string | undefined
}

/** A file the replica could not send, with its bytes, for the application to keep or drop. */
export interface UnsentFile extends ReplicaFile {
  /** Its bytes; undefined when the device no longer holds them (status 0). */
  bytes: Blob | undefined
}

/**
 * `files`: a queued file was added, began or went on sending (its progress), was sent, refused
 * or removed (see files()).
 *
 * `lost`: the service said the notebook is no longer the user's (a replica of one notebook; a
 * NotebooksReplica tells `left` instead): syncing has stopped, and the queued writes are in
 * `unsent()`.
 */
export type ReplicaEvent = {
  type: 'change' | 'waiting' | 'conflict' | 'online' | 'reset' | 'lost' | 'files'
}
