import { Readable } from 'node:stream'
import { checkFileRoom } from '../kernel/file-intake.js'
import { StoreFullError } from '../types.js'
import {
  UploadBusyError,
  type UploadInfo,
  type UploadStaging,
  type UploadState,
  type UploadsHeld,
} from '../uploads.js'
import type { Database } from './database.js'
import { capOf, type PostgresFiles } from './files.js'
import { CHUNK_BYTES } from './files-chunks.js'

/** Chunks a read fetches per statement: 1 MiB, twice that as hex text while it arrives. */
const READ_PARTS = 4

interface UploadRow {
  id: string
  notebook: string
  length: string
  type: string
  metadata: string
  created: string
  touched: string
  received: string
  file: string | null
}

/** The SQLSTATE of notes_append_upload past a cap of files (uploads-schema.ts). */
const NO_ROOM = 'NSF07'

const COLUMNS = 'id, notebook, length, type, metadata, created, touched, received, file'

/**
 * Uploads that resume, in PostgreSQL (migration 8, uploads-schema.ts), shared by every instance on
 * the database: an upload created on one is continued, read and finished on any other. Its bytes
 * are chunks of a blob of its own in the files' chunk table, each written as soon as a chunk's
 * worth (256 KiB) has arrived, or the body has ended or failed, by one statement that moves the
 * upload's offset past it (notes_append_upload): so the process holds one chunk of a request's
 * body whatever the file's size, and every byte the offset counts is committed. That statement
 * locks the upload's row and writes only at the offset the append began at (and has got to):
 * a request that another (on any instance) overtook stops with an UploadBusyError. A finished or
 * removed upload's chunks go as a deleted file's do, as garbage that PostgresFiles.collect deletes
 * after the answer.
 *
 * Made on the service's Database beside its PostgresFiles: PostgresNotebooks.uploads, and
 * PostgresNoteStore.uploads for a store of its own.
 */
export class PostgresUploads implements UploadStaging {
  readonly #db: Database
  readonly #files: Pick<PostgresFiles, 'collect' | 'limits'>

  constructor(db: Database, files: Pick<PostgresFiles, 'collect' | 'limits'>) {
    this.#db = db
    this.#files = files
  }

  async create(info: UploadInfo): Promise<void> {
    await this.#db.query(
      `INSERT INTO notes_resumable_uploads (id, notebook, length, type, metadata, created, touched)
      VALUES ($1, $2, $3, $4, $5, $6, $6)`,
      [info.id, info.notebook, info.length, info.type, info.metadata, Math.trunc(info.created)],
    )
  }

  async state(id: string): Promise<UploadState | undefined> {
    const { rows } = await this.#db.read<UploadRow>(
      'notes_upload_state',
      `SELECT ${COLUMNS} FROM notes_resumable_uploads WHERE id = $1`,
      [id],
    )
    return rows[0] === undefined ? undefined : stateOf(rows[0])
  }

  async append(
    id: string,
    at: number,
    body: AsyncIterable<Uint8Array>,
    room: (offset: number) => void,
    touched: number,
  ): Promise<number> {
    const db = this.#db
    const limits = this.#files.limits
    const caps = [limits.maxNotebookBytes, limits.maxBytes].map(capOf)
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES)
    let filled = 0
    let offset = at
    let wrote = false
    /** The bytes buffered, as the upload's next chunk, at `offset`. */
    const write = async () => {
      const { rows } = await db
        .query<{ offset: string | null }>(
          'SELECT notes_append_upload($1, $2, $3, $4, $5::bigint[]) AS offset',
          [id, offset, buffer.subarray(0, filled), Math.trunc(touched), caps],
        )
        .catch((err: unknown) => {
          // Past a cap: the bytes files and uploads hold, for StoreFullError's message.
          const { code, detail } = err as { code?: unknown; detail?: unknown }
          if (code !== NO_ROOM || typeof detail !== 'string') throw err
          const [notebook = 0, service = 0] = detail.split(' ').map(Number)
          checkFileRoom(notebook, service, filled, limits)
          throw err
        })
      const next = rows[0]?.offset ?? null
      if (next === null) throw new UploadBusyError(id)
      offset = Number(next)
      filled = 0
      wrote = true
    }
    try {
      for await (const piece of body) {
        room(offset + filled + piece.byteLength)
        for (let done = 0; done < piece.byteLength; ) {
          const taken = Math.min(CHUNK_BYTES - filled, piece.byteLength - done)
          buffer.set(piece.subarray(done, done + taken), filled)
          filled += taken
          done += taken
          // Awaited before more of the body is read: pg has sent the buffer by then.
          if (filled === CHUNK_BYTES) await write()
        }
      }
      if (filled > 0) await write()
    } catch (err) {
      // What arrived before the failure is kept (unless the upload moved on without it, or the
      // failure was its room).
      if (filled > 0 && !(err instanceof UploadBusyError || err instanceof StoreFullError)) {
        await write().catch(() => {})
      }
      if (!wrote) await this.#touch(id, touched).catch(() => {})
      throw err
    }
    if (!wrote) await this.#touch(id, touched)
    return offset
  }

  read(id: string): Readable {
    return Readable.from(this.#chunks(id), { objectMode: false })
  }

  async finish(id: string, file: string): Promise<void> {
    await this.#db.query('SELECT notes_finish_upload($1, $2)', [id, file])
    void this.#files.collect()
  }

  async remove(id: string): Promise<void> {
    await this.#db.query('SELECT notes_remove_upload($1)', [id])
    void this.#files.collect()
  }

  async drop(notebook: string): Promise<void> {
    await this.#db.query('SELECT notes_drop_uploads($1)', [notebook])
    void this.#files.collect()
  }

  async list(): Promise<readonly UploadState[]> {
    const { rows } = await this.#db.query<UploadRow>(
      `SELECT ${COLUMNS} FROM notes_resumable_uploads ORDER BY created, id`,
    )
    return rows.map(stateOf)
  }

  async held(notebook: string, except: string | undefined): Promise<UploadsHeld> {
    const { rows } = await this.#db.read<{ notebook: string; service: string }>(
      'notes_uploads_held',
      `SELECT coalesce(sum(received) FILTER (WHERE notebook = $1), 0) AS notebook,
        coalesce(sum(received), 0) AS service
      FROM notes_resumable_uploads WHERE file IS NULL AND id <> $2`,
      [notebook, except ?? ''],
    )
    const row = rows[0] as { notebook: string; service: string }
    return { notebook: Number(row.notebook), service: Number(row.service) }
  }

  /** An append that wrote no chunk is still the upload's latest `touched`. */
  async #touch(id: string, touched: number): Promise<void> {
    await this.#db.query(
      'UPDATE notes_resumable_uploads SET touched = $2 WHERE id = $1 AND file IS NULL',
      [id, Math.trunc(touched)],
    )
  }

  /**
   * The upload's chunks in order, READ_PARTS per statement as the reader asks for more; a chunk
   * missing on the way (the upload finished or removed meanwhile, and its chunks collected) ends
   * the stream with an error, never short.
   */
  async *#chunks(id: string): AsyncGenerator<Buffer> {
    const { rows } = await this.#db.query<{ blob: string | null; parts: number }>(
      'SELECT blob, parts FROM notes_resumable_uploads WHERE id = $1',
      [id],
    )
    const held = rows[0]
    if (held === undefined || held.blob === null) return
    for (let part = 0; part < held.parts; ) {
      const upTo = Math.min(part + READ_PARTS, held.parts)
      const chunks = await this.#db.query<{ part: number; data: Buffer }>(
        `SELECT part, data FROM notes_file_chunks
        WHERE blob = $1 AND part >= $2 AND part < $3 ORDER BY part`,
        [held.blob, part, upTo],
      )
      for (const row of chunks.rows) {
        if (row.part !== part) break
        part += 1
        yield row.data
      }
      if (part !== upTo) throw new Error(`upload ${id} lost part ${part} while it was read`)
    }
  }
}

function stateOf(row: UploadRow): UploadState {
  return {
    id: row.id,
    notebook: row.notebook,
    length: Number(row.length),
    type: row.type,
    metadata: row.metadata,
    created: Number(row.created),
    touched: Number(row.touched),
    offset: Number(row.received),
    file: row.file ?? undefined,
  }
}
