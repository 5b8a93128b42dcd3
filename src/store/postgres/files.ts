import type pg from 'pg'
import {
  FILE_LIMIT_DEFAULTS,
  type FileLimits,
  type FilePage,
  type FileRecord,
  type FileSpace,
  type FileTotals,
  isFileId,
  type NotebookFiles,
  type PutOptions,
} from '../files.js'
import { checkFileRoom } from '../kernel/file-intake.js'
import { AccessLostError, isNotebookName } from '../types.js'
import type { Database } from './database.js'
import {
  blobOfUpload,
  CHUNK_BYTES,
  collectGarbage,
  discardUpload,
  hashOf,
  readChunks,
  uploadChunks,
} from './files-chunks.js'
import { writerRole } from './member-rows.js'

export interface PostgresFilesOptions extends Partial<FileLimits> {
  /** The clock of a file's `created`, ms since 1970; Date.now by default. */
  now?: () => number
}

/** A pending upload untouched this long was left by an instance that stopped mid-upload. */
const ABANDONED_SECONDS = 3600

/** How often an instance looks for abandoned uploads, at most: on a put, once in 10 minutes. */
const SWEEP_EVERY_MS = 10 * 60_000

/** What a guarded act runs first in its transaction; it throws to refuse (as WriteGuard). */
type Guard = (client: pg.ClientBase) => Promise<void>

interface FileRow {
  id: string
  size: string
  type: string
  created: string
  sequence: string
  touched: string | null
}

/**
 * Every notebook's files in PostgreSQL (migration 7, files-schema.ts), shared by every instance
 * on the database: each file's bytes in chunks of a blob, streamed in as an upload arrives and
 * out as a reader reads (files-chunks.ts), so memory holds a few chunks whatever the file's size.
 * A put writes its chunks under a pending blob, then keeps it as a file in one transaction
 * (notes_keep_file): the writer's role (writerFor, as notes' writers are checked), the caps under
 * the notebook's and the service's counts rows, locked in that order, and the same bytes already
 * in the notebook (the first file kept, the new blob discarded). A failed upload removes its
 * chunks; those of an instance that stopped mid-upload are let go once untouched for an hour, by
 * sweep (start-up calls it, and a put once in 10 minutes). A delete, and a notebook's removal
 * (notes_drop_notebook, which removes its files in the same transaction), list the blobs they let
 * go as garbage, whose chunks collect deletes after the answer, a bounded number per statement.
 *
 * Made on the service's Database: PostgresNotebooks.files, and PostgresNoteStore.files for a
 * store of its own (its notebook's files are `files.files(SHARED_NOTEBOOK)`).
 */
export class PostgresFiles implements FileSpace {
  readonly #db: Database
  readonly #limits: FileLimits
  readonly #now: () => number
  #sweptAt = Number.NEGATIVE_INFINITY
  /** The collection of garbage chunks under way, and the one to run after it, if any. */
  #collecting: Promise<number> | undefined
  #queued: Promise<number> | undefined

  constructor(db: Database, options: PostgresFilesOptions = {}) {
    const { now = Date.now, ...limits } = options
    this.#db = db
    this.#limits = { ...FILE_LIMIT_DEFAULTS, ...limits }
    this.#now = now
  }

  /** The caps of files, which uploads count toward too (PostgresUploads). */
  get limits(): FileLimits {
    return this.#limits
  }

  files(notebook: string): NotebookFiles {
    return this.#filesOf(notebook, undefined)
  }

  writerFor(notebook: string, user: string): NotebookFiles {
    return this.#filesOf(notebook, async (client) => {
      const role = await writerRole(client, notebook, user)
      if (role !== 'owner' && role !== 'editor') throw new AccessLostError(role)
    })
  }

  async notebooks(): Promise<readonly string[]> {
    const { rows } = await this.#db.query<{ notebook: string }>(
      'SELECT notebook FROM notes_file_notebooks WHERE files > 0 ORDER BY notebook',
    )
    return rows.map((row) => row.notebook)
  }

  async totals(): Promise<FileTotals> {
    const { rows } = await this.#db.query<{ files: string; bytes: string }>(
      'SELECT files, bytes FROM notes_file_clock',
    )
    return totalsOf(rows[0])
  }

  /**
   * Lets go of the pending uploads untouched for an hour (an instance stopped mid-upload) and
   * collects every garbage chunk; answers how many uploads it let go. A failure is left for the
   * next sweep: 0.
   */
  async sweep(): Promise<number> {
    this.#sweptAt = Date.now()
    try {
      const { rows } = await this.#db.query<{ swept: string }>(
        'SELECT notes_sweep_uploads($1) AS swept',
        [ABANDONED_SECONDS],
      )
      await this.collect()
      return Number(rows[0]?.swept ?? 0)
    } catch {
      return 0
    }
  }

  /**
   * Deletes the chunks of the blobs no file or upload holds any more (files deleted, notebooks
   * removed, on any instance), a bounded number per statement; answers how many. Called after
   * every delete and removal, without waiting for it; a failure (0) leaves them to the next.
   * One runs at a time; asked for meanwhile, one more runs after it (for what the one under way
   * may have missed), which every caller until it starts shares.
   */
  collect(): Promise<number> {
    if (this.#queued !== undefined) return this.#queued
    const running = this.#collecting
    if (running === undefined) return this.#collectNow()
    this.#queued = running.then(() => {
      this.#queued = undefined
      return this.#collectNow()
    })
    return this.#queued
  }

  #collectNow(): Promise<number> {
    const collecting = collectGarbage(this.#db, null)
      .catch(() => 0)
      .finally(() => {
        if (this.#collecting === collecting) this.#collecting = undefined
      })
    this.#collecting = collecting
    return collecting
  }

  #filesOf(notebook: string, guard: Guard | undefined): NotebookFiles {
    // As PostgresNotebooks.notebook: a lone surrogate would be U+FFFD in the database, two names one.
    if (!isNotebookName(notebook)) {
      throw new TypeError('A notebook name must be well-formed text without NUL.')
    }
    const db = this.#db
    return {
      put: (type, body, options) => this.#put(notebook, guard, type, body, options ?? {}),
      stat: async (id) => {
        const row = await findFile(db, notebook, id)
        return row === undefined ? undefined : recordOf(row)
      },
      read: async (id, start, end) => {
        const row = await findFile(db, notebook, id)
        if (row === undefined) return undefined
        return readChunks(db, { blob: Number(row.blob), chunk: row.chunk }, start, end)
      },
      list: (limit, after) => listFiles(db, notebook, limit, after),
      delete: async (id) => {
        const deleted = await guarded(db, guard, async (client) => {
          const { rows } = await client.query<{ deleted: boolean }>(
            'SELECT notes_delete_file($1, $2) AS deleted',
            [notebook, id],
          )
          return { commit: true, value: rows[0]?.deleted === true }
        })
        if (deleted) void this.collect()
        return deleted
      },
      totals: async () => {
        const { rows } = await db.query<{ files: string; bytes: string }>(
          'SELECT files, bytes FROM notes_file_notebooks WHERE notebook = $1',
          [notebook],
        )
        return totalsOf(rows[0])
      },
    }
  }

  async #put(
    notebook: string,
    guard: Guard | undefined,
    type: string,
    body: AsyncIterable<Uint8Array>,
    { created, upload }: PutOptions,
  ): Promise<FileRecord> {
    if (Date.now() - this.#sweptAt >= SWEEP_EVERY_MS) void this.sweep()
    const limits = this.#limits
    // An upload's bytes of whole chunks: the file takes its blob over, read once for the hash.
    const taken = upload === undefined ? undefined : await blobOfUpload(this.#db, notebook, upload)
    const { id, size, blob, chunk } =
      taken === undefined
        ? await uploadChunks(this.#db, notebook, body, limits)
        : { ...(await hashOf(body, limits)), blob: taken.blob, chunk: CHUNK_BYTES }
    if (taken !== undefined && size !== taken.received) {
      throw new Error(`upload ${upload} holds ${taken.received} bytes and read back ${size}`)
    }
    // A copy's pending blob goes on a failure, or when the notebook held the bytes already; a
    // blob taken over stays the upload's until the upload is finished or removed.
    const discard = () => (taken === undefined ? discardUpload(this.#db, blob) : Promise.resolve())
    const keptAt = Math.trunc(created ?? this.#now())
    let kept: { record: FileRecord; kept: boolean }
    try {
      kept = await guarded(this.#db, guard, async (client) => {
        const { rows } = await client.query<{
          r_kept: boolean
          r_type: string | null
          r_created: string | null
          r_sequence: string | null
          r_touched: string | null
          r_notebook_bytes: string
          r_service_bytes: string | null
        }>('SELECT * FROM notes_keep_file($1, $2, $3, $4, $5, $6, $7, $8::bigint[], $9, $10)', [
          notebook,
          id,
          size,
          type,
          keptAt,
          blob,
          chunk,
          [limits.maxNotebookBytes, limits.maxBytes].map(capOf),
          upload ?? null,
          Math.trunc(this.#now()),
        ])
        const row = rows[0]
        if (row === undefined || row.r_sequence === null) {
          const held = (bytes: string | null | undefined) => Number(bytes ?? 0)
          checkFileRoom(held(row?.r_notebook_bytes), held(row?.r_service_bytes), size, limits)
          throw new Error(`notes_keep_file kept nothing of ${id} and said no cap`)
        }
        const record = recordOf({
          id,
          size: String(size),
          type: row.r_type as string,
          created: row.r_created as string,
          sequence: row.r_sequence,
          touched: row.r_touched,
        })
        // Kept, or the file it already was touched: committed either way.
        return { commit: true, value: { record, kept: row.r_kept } }
      })
    } catch (err) {
      await discard()
      throw err
    }
    // The notebook held these bytes already: its file stays, and the new blob goes.
    if (!kept.kept) await discard()
    return kept.record
  }
}

/** `work` in one transaction, after `guard` when there is one (a writer's role check). */
function guarded<T>(
  db: Database,
  guard: Guard | undefined,
  work: (client: pg.ClientBase) => Promise<{ commit: boolean; value: T }>,
): Promise<T> {
  return db.transaction(async (client) => {
    await guard?.(client)
    return work(client)
  })
}

/** A cap as a bigint parameter: Infinity (no cap) as the largest safe integer. */
export function capOf(bytes: number): number {
  return Math.min(bytes, Number.MAX_SAFE_INTEGER)
}

async function findFile(
  db: Database,
  notebook: string,
  id: string,
): Promise<(FileRow & { blob: string; chunk: number }) | undefined> {
  // What is no SHA-256 in hex is no file: no statement for it.
  if (!isFileId(id)) return undefined
  const { rows } = await db.read<FileRow & { blob: string; chunk: number }>(
    'notes_file_find',
    `SELECT id, size, type, created, sequence, touched, blob, chunk FROM notes_files
    WHERE notebook = $1 AND id = $2`,
    [notebook, id],
  )
  return rows[0]
}

async function listFiles(
  db: Database,
  notebook: string,
  limit: number,
  after: number | undefined,
): Promise<FilePage> {
  const { rows } = await db.query<FileRow>(
    `SELECT id, size, type, created, sequence, touched FROM notes_files
    WHERE notebook = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`,
    [notebook, after ?? 0, limit + 1],
  )
  const files = rows.slice(0, limit).map(recordOf)
  return { files, next: rows.length > limit ? files.at(-1)?.sequence : undefined }
}

function recordOf(row: FileRow): FileRecord {
  return {
    id: row.id,
    size: Number(row.size),
    type: row.type,
    created: Number(row.created),
    sequence: Number(row.sequence),
    ...(row.touched === null ? {} : { touched: Number(row.touched) }),
  }
}

function totalsOf(row: { files: string; bytes: string } | undefined): FileTotals {
  return { files: Number(row?.files ?? 0), bytes: Number(row?.bytes ?? 0) }
}
