import {
  ARCHIVE_DEFAULTS,
  type ID_TAKEN,
  type NoteArchive,
  type Revision,
  type RevisionPage,
  type TrashPage,
} from '../archive.js'
import { keyReused, STORE_DEFAULTS } from '../kernel/defaults.js'
import { tokenSequence } from '../kernel/version-token.js'
import type {
  BatchKey,
  BatchResult,
  Change,
  IdempotentCreate,
  ListRecord,
  NoteExport,
  NoteFields,
  NoteRecord,
  NoteStore,
  NoteWriter,
  PageQuery,
  PageRecord,
  PatchKind,
  PreconditionFailed,
  Preconditions,
  StoreStats,
} from '../types.js'
import { SHARED_NOTEBOOK } from '../types.js'
import { BatchWriter } from './batch-writer.js'
import { ChangeDelivery, ChangeListener, changeOf } from './change-delivery.js'
import { byPosition, ChangePages } from './change-pages.js'
import { CreateBatcher } from './create-batcher.js'
import type { Database } from './database.js'
import { ExportSnapshot } from './export-snapshot.js'
import { PostgresFiles } from './files.js'
import { purgeTrash, readRevision, readRevisions, readTrash, untrashNote } from './note-archive.js'
import {
  createNotes,
  deleteNote,
  type FoundWrite,
  LOST,
  NoteWrites,
  newNote,
  recordOf,
  type Unwritten,
  updateNote,
  type Written,
  writeOnce,
} from './note-writes.js'
import { NotebookDb } from './notebook-db.js'
import {
  callCreate,
  findKey,
  findNote,
  keepKey,
  lockNotebook,
  type NewNote,
  readCandidates,
  readChangesSince,
  readList,
  readPage,
  readSequence,
  readStats,
  type WriteLimits,
} from './queries.js'
import { pageOfSearch, SearchCache, searchAmong } from './search-cache.js'
import { likePattern } from './search-text.js'
import {
  type NotebookParts,
  openDatabase,
  type PostgresStoreOptions,
  statsOf,
  type WriteGuard,
} from './store-options.js'
import { PostgresUploads } from './uploads.js'

/**
 * The notes of one notebook in PostgreSQL, shared by every instance that opens the same database
 * (one service). Each write is one call of a function in the database (schema.ts) that locks the
 * notebook's clock row, so writes are atomic, numbered in commit order, and see every write
 * committed before them; each read is one statement, so it sees every write acknowledged before
 * it started, on any instance. Notes cross as JSON text, stored exactly as serialized. Made with
 * options alone, it is a store of its own (the 'shared' notebook, which holds every note when user
 * tokens are off), owning its connections; PostgresNotebooks makes one per notebook on the
 * service's connections (`parts`). This class says what each operation means; the jobs behind it
 * have a file each: queries.ts (the SQL), database.ts (connections, opening, the epoch),
 * create-batcher.ts (group commit), note-writes.ts (each write of a note, for single requests and
 * batch-writer.ts alike, and a single request's retries when another write came first),
 * search-cache.ts (`q`), change-delivery.ts (subscribers, across instances).
 */
export class PostgresNoteStore implements NoteStore, NoteArchive {
  readonly #db: NotebookDb
  /** The connections and listener, when this store made them (and closes them). */
  readonly #owned: { db: Database; listener: ChangeListener } | undefined
  readonly #limits: WriteLimits
  readonly #now: () => number
  readonly #maxKeys: number
  readonly #keyTtlMs: number
  readonly #creates: CreateBatcher
  readonly #noteWrites: NoteWrites
  readonly #searches = new SearchCache()
  readonly #byChange = new ChangePages()
  readonly #delivery: ChangeDelivery
  #list: ListRecord | undefined
  #listSequence = -1
  /** Files on this store's database (its notebook's: `files.files(SHARED_NOTEBOOK)`); uploads. */
  readonly files: PostgresFiles
  readonly uploads: PostgresUploads

  constructor(options: PostgresStoreOptions, parts?: NotebookParts) {
    this.#now = options.now ?? Date.now
    this.#maxKeys = options.maxIdempotencyKeys ?? STORE_DEFAULTS.maxIdempotencyKeys
    this.#keyTtlMs = options.idempotencyTtlMs ?? STORE_DEFAULTS.idempotencyTtlMs
    let owned: { db: Database; listener: ChangeListener } | undefined
    if (parts === undefined) {
      const database = openDatabase(options)
      owned = { db: database, listener: new ChangeListener(database, options.pollMs ?? 1000) }
    }
    this.#owned = owned
    const { db: database, listener } =
      parts ?? (owned as { db: Database; listener: ChangeListener })
    this.#limits = {
      maxNotes: options.maxNotes,
      maxBytes: options.maxBytes,
      notebookMaxNotes: parts?.maxNotes ?? options.maxNotes,
      notebookMaxBytes: parts?.maxBytes ?? options.maxBytes,
      historyLimit: options.historyLimit ?? STORE_DEFAULTS.historyLimit,
      ...ARCHIVE_DEFAULTS,
      ...options.archive,
      holder: parts === undefined ? 'The store' : 'This notebook',
    }
    const db = new NotebookDb(
      database,
      parts?.name ?? SHARED_NOTEBOOK,
      parts?.epoch ?? options.epoch,
    )
    this.#db = db
    const written = (sequence: number) => this.#written(sequence)
    this.#creates = new CreateBatcher(
      (notes: readonly NewNote[]) => createNotes(db, notes, this.#limits),
      written,
    )
    this.#noteWrites = new NoteWrites(db, written, options.statementTimeoutMs ?? 5000)
    this.#delivery = new ChangeDelivery(db, listener)
    this.files = parts?.files ?? new PostgresFiles(database, { ...options.files, now: this.#now })
    this.uploads = parts?.uploads ?? new PostgresUploads(database, this.files)
  }

  /**
   * Connects, applies the migrations and starts PostgresFiles.sweep. Start-up calls it with a
   * retry bound; every method opens the store too, so one whose database was down opens once back.
   */
  async open(retry?: { timeoutMs: number; retryMs: number }): Promise<void> {
    await this.#db.open(retry)
    void this.files.sweep()
  }

  /** Whether the database answers now (readiness: /readyz). */
  available(): Promise<boolean> {
    return this.#db.db.available()
  }

  /**
   * Stops delivering changes and, for a store of its own, closes every connection; the store
   * cannot be used afterwards (PostgresNotebooks.close closes the service's).
   */
  async close(): Promise<void> {
    this.#delivery.close()
    if (this.#owned !== undefined) {
      this.#owned.listener.close()
      await this.#owned.db.close()
    }
  }

  create(fields: NoteFields): Promise<NoteRecord> {
    return this.#creates.create(newNote(fields, this.#now()))
  }

  async createOnce(
    key: string,
    fingerprint: string,
    fields: NoteFields,
  ): Promise<IdempotentCreate> {
    const { answer, sequence } = await this.#createOnce(this.#db, key, fingerprint, fields)
    if (sequence !== undefined) this.#written(sequence)
    return answer
  }

  /**
   * This notebook as one writer writes it (PostgresNotebooks.writerFor): every write and batch
   * runs in one transaction whose first statement is `guard`, before the notebook's clock row is
   * locked, so the guard's check and the write commit together or not at all. A write is the
   * store's own (the same functions, the same answers) on that transaction's connection, with
   * the notebook locked, so it never loses to another write and is not retried. Reads are the
   * store's.
   */
  guardedBy(guard: WriteGuard): NoteStore & NoteArchive {
    const limits = this.#limits
    const found = <T, A>(id: number, conditions: Preconditions | undefined, w: FoundWrite<T, A>) =>
      this.#guarded<T | A | PreconditionFailed>(guard, async (db) => {
        const written = await writeOnce(db, id, conditions, w)
        if (written === LOST)
          throw new Error('a note changed under a write that holds its notebook')
        return written
      })
    return {
      create: (fields) =>
        this.#guarded(guard, async (db) => {
          const [created] = await createNotes(db, [newNote(fields, this.#now())], limits)
          if (created instanceof Error) throw created
          return created as Written<NoteRecord>
        }),
      createOnce: (key, fingerprint, fields) =>
        this.#guarded(guard, (db) => this.#createOnce(db, key, fingerprint, fields)),
      update: (id, fields, kind = 'merge', conditions) =>
        found(id, conditions, updateNote(fields, kind, limits, this.#now)),
      delete: (id, conditions) => found(id, conditions, deleteNote(id, limits, this.#now)),
      batch: (work, once) => this.#batch(work, once, guard),
      untrash: (id) =>
        this.#guarded<NoteRecord | undefined | typeof ID_TAKEN>(guard, (db) =>
          untrashNote(db, id, this.#now(), limits),
        ),
      purge: (id) =>
        this.#guarded(guard, async (db) => ({
          answer: (await purgeTrash(db, id, this.#now(), limits)) > 0,
        })),
      emptyTrash: () =>
        this.#guarded(guard, async (db) => ({
          answer: await purgeTrash(db, null, this.#now(), limits),
        })),
      revisions: (id, limit, after) => this.revisions(id, limit, after),
      revision: (id, version) => this.revision(id, version),
      trash: (limit, after) => this.trash(limit, after),
      list: () => this.list(),
      page: (query) => this.page(query),
      get: (id) => this.get(id),
      version: () => this.version(),
      changesSince: (since, limit) => this.changesSince(since, limit),
      subscribe: (listener) => this.subscribe(listener),
      stats: () => this.stats(),
      exportNotes: () => this.exportNotes(),
    }
  }

  async list(): Promise<ListRecord> {
    const sequence = await readSequence(this.#db)
    if (this.#list !== undefined && sequence === this.#listSequence) return this.#list
    const row = await readList(this.#db)
    const at = Number(row.sequence)
    this.#db.see(at)
    const list: ListRecord = {
      json: `[${row.list ?? ''}]`,
      version: this.#db.token(at),
      count: Number(row.count),
    }
    this.#list = list
    this.#listSequence = at
    return list
  }

  async page(query: PageQuery): Promise<PageRecord> {
    if (query.sort === 'updated') return this.#byChange.page(this.#db, query)
    const { limit, order, after, q } = byPosition(query)
    if (q !== undefined) return this.#searchPage(limit, order, after, q)
    const rows = await readPage(this.#db, order === 'asc', after, limit + 1)
    const first = rows[0] as { sequence: string; notes: string }
    const at = Number(first.sequence)
    this.#db.see(at)
    const notes = rows.filter((row) => row.json !== null)
    const sent = notes.slice(0, limit)
    return {
      json: `[${sent.map((row) => row.json).join(',')}]`,
      version: this.#db.token(at),
      total: Number(first.notes),
      next:
        notes.length > limit ? Number((sent.at(-1) as { position: string }).position) : undefined,
    }
  }

  /**
   * The notebook as one snapshot (an export), read in keyset chunks within a REPEATABLE READ
   * transaction on a connection of its own (ExportSnapshot), given back at the end, on an error,
   * or on close.
   */
  async exportNotes(): Promise<NoteExport> {
    await this.#db.opened()
    const snapshot = await ExportSnapshot.begin(this.#db.db)
    let found: Awaited<ReturnType<ExportSnapshot['notebook']>>
    try {
      found = await snapshot.notebook(this.#db.name)
    } catch (err) {
      await snapshot.end()
      throw err
    }
    const sequence = found?.sequence ?? 0
    this.#db.see(sequence)
    const name = this.#db.name
    async function* chunks(): AsyncGenerator<readonly string[]> {
      try {
        if (found !== undefined && found.notes > 0) yield* snapshot.chunks(name)
      } finally {
        await snapshot.end()
      }
    }
    return {
      version: this.#db.token(sequence),
      count: found?.notes ?? 0,
      chunks,
      close: () => snapshot.end(),
    }
  }

  async get(id: number): Promise<NoteRecord | undefined> {
    const row = await findNote(this.#db, id)
    return row === undefined ? undefined : recordOf(this.#db, row)
  }

  update(
    id: number,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    conditions?: Preconditions,
  ): Promise<NoteRecord | undefined | PreconditionFailed> {
    return this.#noteWrites.write(id, conditions, updateNote(fields, kind, this.#limits, this.#now))
  }

  delete(id: number, conditions?: Preconditions): Promise<boolean | PreconditionFailed> {
    return this.#noteWrites.write(id, conditions, deleteNote(id, this.#limits, this.#now))
  }

  revisions(
    id: number,
    limit: number,
    after: string | undefined,
  ): Promise<RevisionPage | undefined> {
    return readRevisions(this.#db, id, limit, after, this.#now(), this.#limits)
  }

  revision(id: number, version: string): Promise<Revision | undefined> {
    return readRevision(this.#db, id, version, this.#now(), this.#limits)
  }

  trash(limit: number, after: number | undefined): Promise<TrashPage> {
    return readTrash(this.#db, limit, after, this.#now(), this.#limits)
  }

  /** NoteArchive.untrash: one call of notes_untrash, heard by subscribers as a create is. */
  async untrash(id: number): Promise<NoteRecord | undefined | typeof ID_TAKEN> {
    const { answer, sequence } = await untrashNote(this.#db, id, this.#now(), this.#limits)
    if (sequence !== undefined) this.#written(sequence)
    return answer
  }

  async purge(id: number): Promise<boolean> {
    return (await purgeTrash(this.#db, id, this.#now(), this.#limits)) > 0
  }

  emptyTrash(): Promise<number> {
    return purgeTrash(this.#db, null, this.#now(), this.#limits)
  }

  /**
   * NoteStore.batch: one transaction that locks the notebook's clock row first (so that no other
   * write of the notebook, on any instance, comes between its writes), the writes of `work` on a
   * BatchWriter, and a COMMIT when `work` answers (a ROLLBACK otherwise). Readers on every instance
   * see all of it or none; subscribers hear of its changes once it is committed.
   */
  batch(
    work: (writer: NoteWriter) => string | undefined | Promise<string | undefined>,
    once?: BatchKey,
  ): Promise<BatchResult | undefined> {
    return this.#batch(work, once)
  }

  async #batch(
    work: (writer: NoteWriter) => string | undefined | Promise<string | undefined>,
    once: BatchKey | undefined,
    guard?: WriteGuard,
  ): Promise<BatchResult | undefined> {
    await this.#db.opened()
    const now = Math.trunc(this.#now())
    let written = 0
    const result = await this.#db.db.transaction(async (client) => {
      if (guard !== undefined) await guard(client)
      const db = this.#db.on(client)
      const from = await lockNotebook(db)
      if (once !== undefined) {
        const known = await findKey(db, once.key, now)
        if (known !== undefined) {
          if (known.fingerprint !== once.fingerprint) throw keyReused()
          return { commit: false, value: { body: known.json, replayed: true } }
        }
      }
      const writer = new BatchWriter(db, this.#limits, this.#now)
      const body = await work(writer)
      if (body === undefined) return { commit: false, value: undefined }
      written = writer.sequence
      if (once !== undefined) {
        const key = { ...once, now, expires: now + this.#keyTtlMs, maxKeys: this.#maxKeys }
        await keepKey(db, key, body, { from, to: written })
      }
      return { commit: true, value: { body, replayed: false } }
    })
    if (written > 0) this.#written(written)
    return result
  }

  async version(): Promise<string> {
    return this.#db.token(await readSequence(this.#db))
  }

  async changesSince(since: string, limit: number): Promise<readonly Change[] | undefined> {
    await this.#db.opened()
    const sequence = tokenSequence(since, this.#db.epoch)
    if (sequence === undefined) return undefined
    const rows = await readChangesSince(this.#db, sequence, Math.max(limit, 1))
    const current = Number((rows[0] as { current: string }).current)
    this.#db.see(current)
    if (sequence > current || sequence < current - this.#limits.historyLimit) return undefined
    const changes = rows
      .filter((row) => row.sequence !== null)
      .map((row) => changeOf(this.#db, row))
    if (sequence < current && changes[0]?.sequence !== sequence + 1) return undefined
    return changes.slice(0, limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    return this.#delivery.subscribe(listener)
  }

  async stats(): Promise<StoreStats> {
    const { notebookMaxNotes, notebookMaxBytes } = this.#limits
    return statsOf(await readStats(this.#db), notebookMaxNotes, notebookMaxBytes)
  }

  async #searchPage(
    limit: number,
    order: 'asc' | 'desc',
    after: number | undefined,
    q: string,
  ): Promise<PageRecord> {
    const sequence = await readSequence(this.#db)
    let search = this.#searches.get(sequence, q)
    let at = sequence
    if (search === undefined) {
      const rows = await readCandidates(this.#db, likePattern(q))
      at = Number((rows[0] as { sequence: string }).sequence)
      this.#db.see(at)
      search = searchAmong(rows, q)
      this.#searches.set(at, q, search)
    }
    const { json, next } = pageOfSearch(search, limit, order, after)
    return { json, version: this.#db.token(at), total: search.positions.length, next }
  }

  async #createOnce(
    db: NotebookDb,
    key: string,
    fingerprint: string,
    fields: NoteFields,
  ): Promise<Written<IdempotentCreate> | Unwritten<IdempotentCreate>> {
    const note = newNote(fields, this.#now())
    const row = await callCreate(db, note, this.#limits, {
      key,
      fingerprint,
      expires: note.now + this.#keyTtlMs,
      maxKeys: this.#maxKeys,
    })
    if (row.r_replayed && row.r_fingerprint !== fingerprint) throw keyReused()
    const written = Number(row.r_written)
    const answer = {
      note: db.record(row.r_json, written, Number(row.r_modified)),
      replayed: row.r_replayed,
    }
    return row.r_replayed ? { answer } : { answer, sequence: written }
  }

  /** One guarded write (guardedBy): `guard`, the notebook locked, `work`, one transaction. */
  async #guarded<T>(
    guard: WriteGuard,
    work: (db: NotebookDb) => Promise<Written<T> | Unwritten<T>>,
  ): Promise<T> {
    await this.#db.opened()
    const { answer, sequence } = await this.#db.db.transaction(async (client) => {
      await guard(client)
      const db = this.#db.on(client)
      await lockNotebook(db)
      return { commit: true, value: await work(db) }
    })
    if (sequence !== undefined) this.#written(sequence)
    return answer
  }

  /** A write this instance has just made, before its answer: seen, delivered to subscribers. */
  #written(sequence: number): void {
    this.#db.see(sequence)
    this.#delivery.pump()
  }
}
