import type { Readable } from 'node:stream'

/*
 * Uploads that resume (tus): the bytes of a file that arrives in parts, kept where the store keeps
 * its data until the last part has arrived, when they become a file of their notebook. What an
 * upload has acknowledged (each part's answer) survives a crash on a durable store, so a client
 * asks for the offset after a restart and sends the rest.
 */

/** What an upload is, from its creation. */
export interface UploadInfo {
  /** Opaque, URL-safe, 128 random bits: the last segment of the upload's URL. */
  readonly id: string
  /** The name of its notebook's store (as Notebooks.notebook names it). */
  readonly notebook: string
  /** The file's length in bytes, declared at creation (Upload-Length). */
  readonly length: number
  /** The media type of the file it will be. */
  readonly type: string
  /** The Upload-Metadata header it was created with, as sent ('' for none). */
  readonly metadata: string
  /** When it was created, ms since 1970. */
  readonly created: number
}

/** An upload and how far it has come. */
export interface UploadState extends UploadInfo {
  /** Bytes received and kept so far. */
  readonly offset: number
  /** When its last bytes arrived (its creation before any), ms since 1970. */
  readonly touched: number
  /** The id of the file it became, once all its bytes arrived and were stored as one. */
  readonly file: string | undefined
}

/** Where uploads keep their bytes until they are files. */
export interface UploadStaging {
  /**
   * Records a new upload, with no bytes yet; on a durable store, on disk before it resolves.
   * Throws StoreFullError when a store that counts uploads in its own byte cap (memory) has no
   * room for its length now.
   */
  create(info: UploadInfo): Promise<void>
  /** The upload with this id, or undefined. */
  state(id: string): Promise<UploadState | undefined>
  /**
   * Appends `body` at offset `at`, reading it to its end or until `room` throws (it is asked,
   * after each chunk, whether the upload's bytes so far still fit), and answers the new offset.
   * Every byte counted in it is kept (on disk, on a durable store) before it resolves. A body that
   * fails part way keeps what arrived before the failure, and the failure is thrown. `touched` is
   * the time of this append.
   * @throws UploadBusyError when the upload does not hold `at` bytes, or stops holding where this
   *   append got to (another request, on any instance, is sending it bytes or has sent some), or
   *   goes meanwhile: what this append kept before stays, and nothing after.
   */
  append(
    id: string,
    at: number,
    body: AsyncIterable<Uint8Array>,
    room: (offset: number) => void,
    touched: number,
  ): Promise<number>
  /** The upload's bytes so far, as a stream. */
  read(id: string): Readable
  /** Marks the upload as become file `file`, and lets its bytes go. */
  finish(id: string, file: string): Promise<void>
  /** Removes the upload and its bytes (termination, expiry). */
  remove(id: string): Promise<void>
  /** Removes every upload of the notebook kept under this name, and their bytes (it was removed). */
  drop(notebook: string): Promise<void>
  /** Every upload kept, for the expiry sweep. */
  list(): Promise<readonly UploadState[]>
  /**
   * The bytes that unfinished uploads hold, but `except`'s: those of `notebook`'s and every
   * notebook's (they count toward the caps as files do).
   */
  held(notebook: string, except: string | undefined): Promise<UploadsHeld>
}

/**
 * Where an upload's bytes count against the caps of files as they arrive, for a staging whose
 * store keeps its files in the same process (the store's FileSpace): checked and counted in one
 * step, so that uploads growing at once never pass a cap together. (On PostgreSQL the database
 * does it, in the statement that writes each chunk.)
 */
export interface UploadRoom {
  /**
   * Counts upload `id` of `notebook` as holding `bytes` (in place of what it held). When that is
   * more, and `checked`, it first checks that the bytes added fit the notebook's and the
   * service's caps beside every file and every other upload; `checked` false counts what an
   * upload held before a restart.
   * @throws StoreFullError (nothing counted)
   */
  hold(id: string, notebook: string, bytes: number, checked?: boolean): void
  /** Counts upload `id`'s bytes no more (it became a file, went, or failed). */
  release(id: string): void
}

/** Bytes held by unfinished uploads: one notebook's, and the service's. */
export interface UploadsHeld {
  readonly notebook: number
  readonly service: number
}

/** held() of uploads kept in memory (UploadStaging.held). */
export function bytesHeld(
  states: Iterable<UploadState>,
  notebook: string,
  except: string | undefined,
): UploadsHeld {
  let inNotebook = 0
  let service = 0
  for (const state of states) {
    if (state.file !== undefined || state.id === except) continue
    service += state.offset
    if (state.notebook === notebook) inNotebook += state.offset
  }
  return { notebook: inNotebook, service }
}

/**
 * An append that met another request's: the upload is being sent bytes by another request (on
 * this instance or another), or has moved past the offset the append began at, or is gone.
 */
export class UploadBusyError extends Error {
  constructor(id: string) {
    super(`Upload ${id} is being sent bytes by another request, or has moved on.`)
    this.name = 'UploadBusyError'
  }
}

/** How long an upload is kept after its last byte (or its creation), and a finished one's record. */
export const UPLOAD_LIFETIME_MS = 24 * 3_600_000

export function expired(state: UploadState, now: number): boolean {
  return now - state.touched >= UPLOAD_LIFETIME_MS
}

/** Removes the uploads past their lifetime (a finished one's record too); answers how many. */
export async function expireUploads(staging: UploadStaging, now = Date.now()): Promise<number> {
  let removed = 0
  for (const state of await staging.list()) {
    if (expired(state, now)) {
      await staging.remove(state.id)
      removed += 1
    }
  }
  return removed
}
