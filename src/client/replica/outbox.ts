/**
 * The shapes a replica keeps in its storage (storage.ts's four tables), and their keys: the
 * service's notes with their ETags, the outbox of queued writes, the conflicts, and the meta
 * values (feed position, id links, echoes awaited from the feed, the sequence counter, the files
 * queued for upload); and a new create's outbox entry.
 */
import { newIdempotencyKey } from '../idempotency-key.js'
import type { BatchRequest } from '../types.js'
import type { JsonObject } from './note-json.js'

/** A note of the service as last seen (table `notes`, key: its id). */
export interface BaseNote {
  note: JsonObject
  /** Its ETag when known (an answer told it); null after a change seen only on the feed. */
  etag: string | null
}

/**
 * A queued write (table `outbox`, key `o:<seq>`, sent in key order). Stored against its entry's
 * key; the service's id is looked up when it is sent (a local create's id is known only once the
 * create is acknowledged).
 */
export interface OutboxEntry {
  seq: number
  /** The entry key: `n:<id>` or `local:<uuid>`. */
  entry: string
  op: 'create' | 'update' | 'delete'
  /** A create's note, an update's patch, or (with `replace`) the whole note an update sends. */
  fields?: JsonObject
  mergePatch?: boolean
  /** Sent as PUT: `fields` is the whole note (a merged note, or a conflict's resolution). */
  replace?: true
  /**
   * Set once the update met a newer version of the note and was merged with it (merge-write.ts):
   * `fields` is then the merged note, sent with PUT on `basis`, the version it was merged with.
   */
  merged?: MergedWrite
  /** A create's Idempotency-Key, fixed when it was queued: a resend after a crash applies once. */
  idempotencyKey?: string
  /**
   * An update's or delete's basis: the version of the note it was made on (its ETag, when known,
   * and its content). null: it was queued behind another write to the same note, and its basis
   * is that write's result, filled in when that write is acknowledged.
   */
  basis: { etag: string | null; note: JsonObject } | null
  /** The note as this write leaves it in the local view (null: deleted). */
  after: JsonObject | null
  /**
   * Set on the first entry of a run sent as one POST /api/batch: the batch's Idempotency-Key and
   * its requests, stored before it is sent, so that a resend (after a lost answer or a restart)
   * is the same batch and is applied once. Cleared when the service refuses the batch (then
   * nothing was applied, and the first write is sent alone).
   */
  batch?: SentBatch
  /**
   * Sent alone at least once (stored before that send): never put in a batch afterwards, since
   * the batch's Idempotency-Key would not be the one the service may have applied it under.
   */
  single?: true
}

/** What a merged update keeps to merge again when the service moves on before it lands. */
interface MergedWrite {
  /** The version the local edit was made on: the merge's base. */
  base: JsonObject
  /** The note the local edit made of it: the merge's mine. */
  mine: JsonObject
  /**
   * JSON Pointers both sides changed differently: the merged note holds theirs there; once it is
   * written, they are handed to the application as a conflict.
   */
  paths: string[]
  /** Merges in a row without the write landing (bounded; see merge-write.ts). */
  rounds: number
}

/** A run of queued writes sent as one batch: `seqs[i]` is the entry of `requests[i]`. */
interface SentBatch {
  idempotencyKey: string
  seqs: number[]
  requests: BatchRequest[]
}

/** A write the service refused (table `conflicts`, key `c:<seq>`), with both versions. */
export interface StoredConflict {
  key: string
  entry: string
  /** The local version: the refused write and every write folded into it (null: deleted). */
  mine: JsonObject | null
  /** The service's version when the conflict was found (null: none, deleted there). */
  theirs: JsonObject | null
  /** theirs's ETag: the If-Match of the write a resolution makes. */
  etag: string | null
  /** The status the service answered (412, 404, or another refusal such as 400 or 507). */
  status: number
  /**
   * Where mine and theirs differ and the merge could not decide (JSON Pointers, RFC 6901): for a
   * merged update, the conflicting paths (theirs is the merged note, as written on the service;
   * mine is that note with my values at these paths); [''] (the whole note) for a delete against
   * an edit, an edit of a note deleted there, or a refusal. Absent in conflicts stored before
   * merging existed: read as [''].
   */
  paths?: string[]
}

/** An acknowledged write whose change the feed has not brought back yet (meta `echo:<id>`). */
export interface Echo {
  note: JsonObject | null
  etag: string | null
}

/** A queued file as stored (meta `file:<key>`); its bytes are the storage's bytes of `key`. */
export interface QueuedFile {
  key: string
  entry: string
  name: string
  type: string
  size: number
  /** Its place in the order files are sent (the replica's sequence). */
  seq: number
  /** Set once the service refused it for good (or its note was gone). */
  refused?: { status: number; detail: string }
}

export const META_VERSION = 'version'
export const META_SEQ = 'seq'
export const LINK_PREFIX = 'link:'
export const ECHO_PREFIX = 'echo:'
export const FILE_PREFIX = 'file:'

/** A queued file's storage key, with the time it was made: 'f.mj2x9k3a.<uuid>'. */
export function newFileKey(now = Date.now()): string {
  return `f.${now.toString(36)}.${newIdempotencyKey()}`
}

/**
 * When the file key was made, in ms since the epoch: 'f.mj2x9k3a.<uuid>' -> its time; a key of
 * an older version ('f.<uuid>') or any other -> 0.
 */
export function fileKeyTime(key: string): number {
  const match = /^f\.([0-9a-z]{1,11})\./.exec(key)
  return match === null ? 0 : Number.parseInt(match[1] as string, 36)
}

/** `o:000000000042`: keys sort as the numbers do. */
export function outboxKey(seq: number): string {
  return `o:${String(seq).padStart(12, '0')}`
}

export function conflictKey(seq: number): string {
  return `c:${String(seq).padStart(12, '0')}`
}

/** A create of `note` under the entry `key`, with its own Idempotency-Key (seq: when queued). */
export function queuedCreate(key: string, note: JsonObject): OutboxEntry {
  return {
    seq: 0,
    entry: key,
    op: 'create',
    fields: note,
    idempotencyKey: newIdempotencyKey(),
    basis: null,
    after: note,
  }
}
