import type { Readable } from 'node:stream'
import type { MaybePromise } from './note-record.js'

/*
 * Files of a notebook: bytes kept under the lowercase hex SHA-256 of their content, so the same
 * bytes stored twice in one notebook are one file. A file is its notebook's only: another
 * notebook's id is not found here, whatever bytes it holds. Bytes cross this interface as
 * streams, never whole: a store reads an upload as it arrives and hands back a range of a file as
 * a stream.
 */

/** A file as its notebook lists it. */
export interface FileRecord {
  /** The lowercase hex SHA-256 of its bytes: 64 characters. */
  readonly id: string
  /** Its length in bytes. */
  readonly size: number
  /** The media type it was uploaded with ('image/png'; 'application/octet-stream' when none). */
  readonly type: string
  /** When it was first stored, ms since 1970. */
  readonly created: number
  /**
   * Its place in the notebook's list of files: unique in the notebook, larger for a later file;
   * the cursor of the list's pages.
   */
  readonly sequence: number
  /**
   * When its bytes were last put again (the same bytes uploaded once more), ms since 1970; absent
   * until then. A file no note refers to is kept the grace from here too.
   */
  readonly touched?: number
}

/** One page of a notebook's files, oldest first. */
export interface FilePage {
  readonly files: readonly FileRecord[]
  /** The sequence of the page's last file when more follow; else undefined. */
  readonly next: number | undefined
}

/** What one notebook's files hold. */
export interface FileTotals {
  readonly files: number
  readonly bytes: number
}

/** How a put keeps its file, beyond its bytes and type. */
export interface PutOptions {
  /**
   * For an import only: the time a new file is kept with (when the store it was exported from
   * first stored it), in place of the store's clock.
   */
  readonly created?: number | undefined
  /**
   * The id of the upload (UploadStaging) whose bytes these are, when it becomes its file: they
   * count toward the caps as that upload's already, so they are not counted twice, and, in the
   * step that keeps the file, no longer as the upload's.
   */
  readonly upload?: string | undefined
}

/** The files of one notebook. */
export interface NotebookFiles {
  /**
   * Reads `body` to its end, hashing the bytes as they arrive, and keeps them as a file of the
   * notebook with media type `type`, answering it; bytes already stored in the notebook answer
   * the file they are (its first type and time kept, `touched` now). On a durable store the file is on disk or
   * committed before this resolves, and a failure part way leaves nothing behind.
   * @throws FileTooLargeError as soon as more than the largest file's bytes have arrived.
   * @throws StoreFullError when the file would pass the notebook's or the service's cap.
   * @throws AccessLostError from a writer whose member can no longer write (nothing kept).
   */
  put(type: string, body: AsyncIterable<Uint8Array>, options?: PutOptions): Promise<FileRecord>
  /** The file with this id, or undefined. */
  stat(id: string): MaybePromise<FileRecord | undefined>
  /**
   * The bytes [start, end) of the file with this id, as a stream; undefined when there is none.
   * `0 <= start <= end <= size`.
   */
  read(id: string, start: number, end: number): MaybePromise<Readable | undefined>
  /** Up to `limit` files after the one at sequence `after` (from the first without it). */
  list(limit: number, after?: number): MaybePromise<FilePage>
  /**
   * Removes the file with this id; false when there was none.
   * @throws AccessLostError as put does.
   */
  delete(id: string): MaybePromise<boolean>
  totals(): MaybePromise<FileTotals>
}

/** The files of every notebook of one service, and the caps they share. */
export interface FileSpace {
  /** The files of the notebook kept under this name (as Notebooks.notebook names it). */
  files(notebook: string): NotebookFiles
  /**
   * The files of `notebook` as `user` writes them (as Notebooks.writerFor): each put and delete is
   * kept only if, at that moment, `user` is an owner or editor of the notebook kept under that
   * name; else it throws AccessLostError and changes nothing.
   */
  writerFor(notebook: string, user: string): NotebookFiles
  /** The names of the notebooks that hold at least one file. */
  notebooks(): MaybePromise<readonly string[]>
  /** Every notebook's files together. */
  totals(): MaybePromise<FileTotals>
}

/** How large files may be, and how much all of them may hold. */
export interface FileLimits {
  /** Largest file, in bytes (MAX_FILE_BYTES). */
  readonly maxFileBytes: number
  /** Most bytes of files one notebook holds (MAX_FILES_BYTES_PER_USER). */
  readonly maxNotebookBytes: number
  /** Most bytes of files the service holds (MAX_FILES_BYTES). */
  readonly maxBytes: number
}

export const FILE_LIMIT_DEFAULTS: FileLimits = Object.freeze({
  maxFileBytes: 100 * 1024 * 1024,
  maxNotebookBytes: 1024 * 1024 * 1024,
  maxBytes: 16 * 1024 * 1024 * 1024,
})

/** The media type of a file uploaded without one. */
export const UNKNOWN_TYPE = 'application/octet-stream'

/** Whether `id` is a file id: 64 lowercase hex digits. */
export function isFileId(id: string): boolean {
  return /^[0-9a-f]{64}$/.test(id)
}

/** An upload refused because it passed the largest file; nothing was kept. Answered 413. */
export class FileTooLargeError extends Error {
  constructor(readonly maxFileBytes: number) {
    super(`A file may hold at most ${maxFileBytes} bytes.`)
    this.name = 'FileTooLargeError'
  }
}
