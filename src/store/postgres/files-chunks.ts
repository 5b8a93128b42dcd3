import { Readable } from 'node:stream'
import type { FileLimits } from '../files.js'
import { checkFileRoom, type Intake, takeIn } from '../kernel/file-intake.js'
import type { Database } from './database.js'

/*
 * A file's bytes in notes_file_chunks (migration 7, files-schema.ts): written as an upload
 * arrives, a chunk per statement, read back a few chunks per statement, so that neither holds
 * more than a few chunks in memory whatever the file's size, and deleted a bounded number per
 * statement once their blob is garbage.
 */

/** The bytes of one chunk row: 256 KiB, every chunk of a blob but its last. */
export const CHUNK_BYTES = 256 * 1024

/**
 * Chunks a read fetches per statement: 512 KiB, and twice that as the answer's hex text while it
 * arrives (a 20 MiB read held 1-4 MiB at a time; 4 per statement, up to 6).
 */
const READ_CHUNKS = 2

/** An upload read to its end, its chunks committed under the pending blob `blob`. */
export interface Uploaded extends Intake {
  readonly blob: number
  /** The bytes of each of its chunks but the last. */
  readonly chunk: number
}

/**
 * Reads `body` to its end into a new pending blob, CHUNK_BYTES per row, each insert awaited
 * before more of the body is read; counted as it arrives against the largest file and, as a
 * first look, the room the notebook and the service had when it began (notes_keep_file decides).
 * On any failure the blob's chunks are deleted (discardUpload) and the error thrown.
 */
export async function uploadChunks(
  db: Database,
  notebook: string,
  body: AsyncIterable<Uint8Array>,
  limits: FileLimits,
): Promise<Uploaded> {
  const { rows } = await db.query<{ blob: string; notebook_bytes: string; service_bytes: string }>(
    `WITH pending AS (INSERT INTO notes_file_uploads DEFAULT VALUES RETURNING blob)
    SELECT pending.blob,
      coalesce((SELECT bytes FROM notes_file_notebooks WHERE notebook = $1), 0) AS notebook_bytes,
      (SELECT bytes FROM notes_file_clock) AS service_bytes
    FROM pending`,
    [notebook],
  )
  const started = rows[0] as { blob: string; notebook_bytes: string; service_bytes: string }
  const blob = Number(started.blob)
  const held = { notebook: Number(started.notebook_bytes), service: Number(started.service_bytes) }
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES)
  let filled = 0
  let part = 0
  const write = async (data: Buffer) => {
    // The pending row, touched and locked: once notes_sweep_uploads took it, nothing is written.
    const { rowCount } = await db.query(
      `WITH pending AS (
        UPDATE notes_file_uploads SET touched = clock_timestamp() WHERE blob = $1 RETURNING blob)
      INSERT INTO notes_file_chunks (blob, part, data) SELECT blob, $2::integer, $3::bytea FROM pending`,
      [blob, part, data],
    )
    if (rowCount !== 1) throw new Error(`upload ${blob} was removed as abandoned`)
    part += 1
  }
  try {
    const intake = await takeIn(
      body,
      limits.maxFileBytes,
      async (piece) => {
        for (let at = 0; at < piece.length; ) {
          const copied = piece.copy(buffer, filled, at)
          at += copied
          filled += copied
          if (filled === CHUNK_BYTES) {
            // The insert is awaited before the buffer is filled again: pg has sent it by then.
            await write(buffer)
            filled = 0
          }
        }
      },
      (size) => checkFileRoom(held.notebook, held.service, size, limits),
    )
    if (filled > 0) await write(buffer.subarray(0, filled))
    return { ...intake, blob, chunk: CHUNK_BYTES }
  } catch (err) {
    await discardUpload(db, blob)
    throw err
  }
}

/**
 * The blob of upload `upload` of `notebook` when a file can take it over as it is: the upload is
 * unfinished and every chunk but its last holds CHUNK_BYTES (parts that ended on a chunk's edge,
 * as the client's 8 MiB parts and a single PATCH do), so that a range read finds its bytes by
 * arithmetic. Else undefined: the file is a copy. octet_length of an uncompressed out-of-line
 * value reads its size from the pointer, not the bytes.
 */
export async function blobOfUpload(
  db: Database,
  notebook: string,
  upload: string,
): Promise<{ blob: number; received: number } | undefined> {
  const { rows } = await db.query<{ blob: string; received: string }>(
    `SELECT u.blob, u.received FROM notes_resumable_uploads u
    WHERE u.id = $1 AND u.notebook = $2 AND u.file IS NULL AND u.blob IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM notes_file_chunks c
        WHERE c.blob = u.blob AND c.part < u.parts - 1 AND octet_length(c.data) <> $3)`,
    [upload, notebook, CHUNK_BYTES],
  )
  const row = rows[0]
  return row === undefined ? undefined : { blob: Number(row.blob), received: Number(row.received) }
}

/** Reads `body` to its end for its SHA-256 and length, keeping nothing (a blob taken over). */
export function hashOf(body: AsyncIterable<Uint8Array>, limits: FileLimits): Promise<Intake> {
  return takeIn(
    body,
    limits.maxFileBytes,
    () => {},
    () => {},
  )
}

/**
 * Lets a pending blob go (its upload failed, or its bytes were a file already) and deletes its
 * chunks. A failure here (the database gone) leaves them to the next collection, or the upload to
 * notes_sweep_uploads.
 */
export async function discardUpload(db: Database, blob: number): Promise<void> {
  try {
    await db.query('SELECT notes_discard_upload($1)', [blob])
    await collectGarbage(db, blob)
  } catch {
    // Left for later, as said.
  }
}

/** Chunks deleted per statement of a collection: 16 MiB, some 60 ms on a busy 2-core machine. */
const COLLECT_CHUNKS = 64

/**
 * Deletes the chunks of the blobs listed as garbage (of `blob` alone, when given), COLLECT_CHUNKS
 * per statement, until none is left; answers how many it deleted.
 */
export async function collectGarbage(db: Database, blob: number | null): Promise<number> {
  let deleted = 0
  for (;;) {
    const { rows } = await db.query<{ deleted: number }>(
      'SELECT notes_collect_garbage($1, $2) AS deleted',
      [blob, COLLECT_CHUNKS],
    )
    const count = rows[0]?.deleted ?? 0
    deleted += count
    if (count < COLLECT_CHUNKS) return deleted
  }
}

/** Where a file's bytes are: its blob, and the bytes of each of its chunks but the last. */
export interface StoredBytes {
  readonly blob: number
  readonly chunk: number
}

/**
 * The bytes [start, end) of a stored file as a stream that fetches READ_CHUNKS chunks per
 * statement as its reader asks for more (backpressure), the first and last trimmed by the
 * database (substring of an EXTERNAL value reads only what it covers). A chunk missing on the
 * way (the file was deleted and its chunks collected meanwhile) ends the stream with an error,
 * never a short file.
 */
export function readChunks(db: Database, bytes: StoredBytes, start: number, end: number): Readable {
  return Readable.from(chunksOf(db, bytes, start, end), { objectMode: false })
}

async function* chunksOf(
  db: Database,
  { blob, chunk }: StoredBytes,
  start: number,
  end: number,
): AsyncGenerator<Buffer> {
  if (start >= end) return
  // [first, last): the parts that hold a byte of [start, end).
  const last = Math.ceil(end / chunk)
  let part = Math.floor(start / chunk)
  while (part < last) {
    const upTo = Math.min(part + READ_CHUNKS, last)
    const { rows } = await db.query<{ part: number; data: Buffer }>(
      `SELECT part, substring(data
        FROM (greatest($5 - part::bigint * $4, 0) + 1)::integer
        FOR (least($6 - part::bigint * $4, $4) - greatest($5 - part::bigint * $4, 0))::integer
      ) AS data
      FROM notes_file_chunks WHERE blob = $1 AND part >= $2 AND part < $3 ORDER BY part`,
      [blob, part, upTo, chunk, start, end],
    )
    for (const row of rows) {
      if (row.part !== part) break
      part += 1
      yield row.data
    }
    if (part !== upTo) throw new Error(`blob ${blob} lost part ${part} while it was read`)
  }
}
