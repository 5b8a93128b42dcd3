import pg from 'pg'
import { mergePatchInto } from '../merge-patch.js'
import { matchesText } from '../search.js'
import {
  type Change,
  type ChangeType,
  IdempotencyKeyReusedError,
  type IdempotentCreate,
  type ListRecord,
  type NoteFields,
  type NoteRecord,
  type NoteStore,
  type PageQuery,
  type PageRecord,
  type PatchKind,
  PreconditionFailed,
  type Preconditions,
  StoreFullError,
  type StoreStats,
  StoreUnavailableError,
} from '../types.js'
import {
  createPool,
  isUnavailable,
  PipelinedReads,
  retryUntilConnected,
  unavailableOr,
} from './connection.js'
import { migrate } from './schema.js'
import { likePattern, searchText } from './search-text.js'

export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database */
  url: string
  /** Most notes held at once, across every instance on the database. */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON held at once, across every instance. */
  maxBytes: number
  /** Connections this instance opens at most (DATABASE_POOL_SIZE); default 10. */
  poolSize?: number
  /** Longest a statement may run, in ms (DATABASE_STATEMENT_TIMEOUT_MS); default 5,000. */
  statementTimeoutMs?: number
  /** The PostgreSQL schema of the tables; default public. Tests give each store its own. */
  schema?: string
  /** Clock for ids and Last-Modified, in ms since the epoch; tests pass a fake one. */
  now?: () => number
  /**
   * The first part of every version token when this store creates its schema; default random.
   * Used only then: an existing schema keeps the epoch it was created with. Tests pass a fixed one.
   */
  epoch?: string
  /** Changes kept for the change feed (CHANGE_HISTORY); default 10,000. */
  historyLimit?: number
  /** Idempotency keys remembered (DECISION 30); default 100,000. */
  maxIdempotencyKeys?: number
  /** How long an idempotency key is remembered, in ms; default 24 h. */
  idempotencyTtlMs?: number
  /** How often subscribers look for changes when no notification came, in ms; default 1,000. */
  pollMs?: number
}

interface QueuedCreate {
  now: number
  prefix: string
  suffix: string
  search: string
  resolve: (note: NoteRecord) => void
  reject: (err: unknown) => void
}

interface NoteRow {
  position: string
  json: string
  written: string
  modified: string
}

/** The notes matching one `q` at one version, in list order. */
interface Search {
  readonly positions: number[]
  readonly notes: string[]
}

const MAX_CACHED_SEARCHES = 16
/** Creates stored by one statement at most (group commit). */
const MAX_CREATES_PER_STATEMENT = 64
/** A conditional write that keeps losing to other writers gives up after this many reads. */
const MAX_WRITE_ATTEMPTS = 100

/** Connections that carry the pipelined point reads, besides the pool (PipelinedReads). */
const PIPELINED_READ_CONNECTIONS = 2

/** Before a write's next attempt: 1-2 ms, growing to at most 20-40 ms, so that contenders spread. */
function backOff(attempt: number): Promise<void> {
  const ms = Math.min(20, attempt) * (1 + Math.random())
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function ignore(): void {}

/** A conditional write that found the note changed since it was read: read it again. */
const LOST = Symbol('lost')

/** A write that other instances kept beating: 503, so the client retries later (never a 500). */
function lostToOtherWriters(id: number): StoreUnavailableError {
  return new StoreUnavailableError(
    `Note ${id} is being written by too many clients at once; try again shortly.`,
  )
}
const FIND_SQL =
  'SELECT position, json, written, modified FROM notes WHERE id = $1 ORDER BY position LIMIT 1'

/**
 * The notes in PostgreSQL, shared by every instance that opens the same database (DECISION 27).
 * Each write is one call of a function in the database (schema.ts) that locks the one-row clock,
 * so writes are atomic, numbered in commit order, and see every write committed before them; each
 * read is one statement, so it sees every write acknowledged before it started, on any instance.
 * Notes cross as JSON text, stored exactly as serialized.
 */
export class PostgresNoteStore implements NoteStore {
  readonly #pool: pg.Pool
  /** The point reads (a note by id, the clock's sequence), pipelined. */
  readonly #reads: PipelinedReads
  readonly #options: PostgresStoreOptions
  readonly #now: () => number
  readonly #historyLimit: number
  readonly #maxKeys: number
  readonly #keyTtlMs: number
  readonly #pollMs: number
  readonly #statementTimeoutMs: number
  #opening: Promise<void> | undefined
  #epoch = ''
  /** The highest change sequence this instance has seen. */
  #known = 0
  #list: ListRecord | undefined
  #listSequence = -1
  #searches = { sequence: -1, byQuery: new Map<string, Search>() }
  readonly #listeners = new Set<(change: Change) => void>()
  #cursor: number | undefined
  #listener: pg.Client | undefined
  #poll: NodeJS.Timeout | undefined
  /** Creates waiting for the statement in flight to commit (group commit). */
  #queued: QueuedCreate[] = []
  /** The last PATCH or DELETE under way per note id: the next one on that id waits for it. */
  readonly #noteWrites = new Map<number, Promise<unknown>>()
  #committing = false
  #pumping = false
  #pumpAgain = false
  #closed = false

  constructor(options: PostgresStoreOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#historyLimit = options.historyLimit ?? 10_000
    this.#maxKeys = options.maxIdempotencyKeys ?? 100_000
    this.#keyTtlMs = options.idempotencyTtlMs ?? 24 * 60 * 60 * 1000
    this.#pollMs = options.pollMs ?? 1000
    this.#statementTimeoutMs = options.statementTimeoutMs ?? 5000
    const connection = {
      url: options.url,
      statementTimeoutMs: this.#statementTimeoutMs,
      schema: options.schema ?? 'public',
    }
    this.#pool = createPool({ ...connection, poolSize: options.poolSize ?? 10 })
    this.#reads = new PipelinedReads(connection, PIPELINED_READ_CONNECTIONS)
  }

  /**
   * Connects and applies the migrations. Start-up calls it with a retry bound; every other method
   * calls it too, so a store whose database was down at start opens as soon as it is back.
   */
  open(retry: { timeoutMs: number; retryMs: number } = { timeoutMs: 0, retryMs: 0 }) {
    this.#opening ??= retryUntilConnected(async () => {
      const client = await this.#pool.connect()
      try {
        await migrate(client, this.#options.schema ?? 'public', this.#options.epoch)
        const { rows } = await client.query<{ epoch: string; sequence: string }>(
          'SELECT epoch, sequence FROM notes_clock',
        )
        const row = rows[0] as { epoch: string; sequence: string }
        this.#epoch = row.epoch
        this.#see(Number(row.sequence))
      } finally {
        client.release()
      }
    }, retry).catch((err: unknown) => {
      this.#opening = undefined
      return unavailableOr(err)
    })
    return this.#opening
  }

  /** Whether the database answers now (readiness, DECISION 27). */
  async available(): Promise<boolean> {
    try {
      await this.open()
      await this.#pool.query('SELECT 1')
      return true
    } catch {
      return false
    }
  }

  /** Closes every connection; the store cannot be used afterwards. */
  async close(): Promise<void> {
    this.#closed = true
    this.#stopListening()
    await Promise.all([this.#pool.end(), this.#reads.close()])
  }

  create(fields: NoteFields): Promise<NoteRecord> {
    const [prefix, suffix, search] = splitAroundId(fields)
    return new Promise((resolve, reject) => {
      this.#queued.push({ now: Math.trunc(this.#now()), prefix, suffix, search, resolve, reject })
      if (!this.#committing) void this.#commitQueued()
    })
  }

  async createOnce(
    key: string,
    fingerprint: string,
    fields: NoteFields,
  ): Promise<IdempotentCreate> {
    const created = await this.#create(fields, key, fingerprint)
    if (created.replayed && created.fingerprint !== fingerprint) {
      throw new IdempotencyKeyReusedError(
        'This Idempotency-Key was already used with a different request body.',
      )
    }
    return { note: created.note, replayed: created.replayed }
  }

  async list(): Promise<ListRecord> {
    const sequence = await this.#sequence()
    if (this.#list !== undefined && sequence === this.#listSequence) return this.#list
    const { rows } = await this.#query<{ sequence: string; count: string; list: string | null }>(
      `SELECT c.sequence,
        (SELECT count(*) FROM notes) AS count,
        (SELECT string_agg(json, ',' ORDER BY position) FROM notes) AS list
      FROM notes_clock c`,
    )
    const row = rows[0] as { sequence: string; count: string; list: string | null }
    const at = Number(row.sequence)
    this.#see(at)
    const list: ListRecord = {
      json: `[${row.list ?? ''}]`,
      version: this.#token(at),
      count: Number(row.count),
    }
    this.#list = list
    this.#listSequence = at
    return list
  }

  async page({ limit, order, after, q }: PageQuery): Promise<PageRecord> {
    if (q !== undefined) return this.#searchPage(limit, order, after, q)
    const asc = order === 'asc'
    const { rows } = await this.#query<{
      sequence: string
      notes: string
      position: string | null
      json: string | null
    }>(
      `SELECT c.sequence, c.notes, p.position, p.json FROM notes_clock c
      LEFT JOIN LATERAL (
        SELECT position, json FROM notes
        WHERE position ${asc ? '>' : '<'} $1 ORDER BY position ${asc ? 'ASC' : 'DESC'} LIMIT $2
      ) p ON true
      ORDER BY p.position ${asc ? 'ASC' : 'DESC'}`,
      [after ?? (asc ? 0 : '9223372036854775807'), limit + 1],
    )
    const first = rows[0] as { sequence: string; notes: string }
    const at = Number(first.sequence)
    this.#see(at)
    const notes = rows.filter((row) => row.json !== null)
    const sent = notes.slice(0, limit)
    return {
      json: `[${sent.map((row) => row.json).join(',')}]`,
      version: this.#token(at),
      total: Number(first.notes),
      next:
        notes.length > limit ? Number((sent.at(-1) as { position: string }).position) : undefined,
    }
  }

  async get(id: number): Promise<NoteRecord | undefined> {
    const row = await this.#find(id)
    return row === undefined ? undefined : this.#record(row)
  }

  async update(
    id: number,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    conditions?: Preconditions,
  ): Promise<NoteRecord | undefined | PreconditionFailed> {
    return this.#oneAtATime(id, () => this.#update(id, fields, kind, conditions))
  }

  #update(
    id: number,
    fields: NoteFields,
    kind: PatchKind,
    conditions: Preconditions | undefined,
  ): Promise<NoteRecord | undefined | PreconditionFailed> {
    return this.#writeFound(id, conditions, undefined, async (row) => {
      const note = JSON.parse(row.json) as NoteFields
      if (kind === 'merge-patch') mergePatchInto(note, fields)
      else for (const key of Object.keys(fields)) setField(note, key, fields[key])
      const json = JSON.stringify(note)
      const modified = this.#now()
      const { rows } = await this.#write<{ seq: string | null }>(
        'SELECT notes_update($1, $2, $3, $4, $5, $6, $7, $8) AS seq',
        [
          row.position,
          row.written,
          json,
          isIndexable(note.id) ? note.id : null,
          searchText(note),
          modified,
          this.#options.maxBytes,
          this.#historyLimit,
        ],
      )
      const seq = (rows[0] as { seq: string | null }).seq
      return seq === null ? LOST : this.#written(json, Number(seq), modified)
    })
  }

  delete(id: number, conditions?: Preconditions): Promise<boolean | PreconditionFailed> {
    return this.#oneAtATime(id, () =>
      this.#writeFound(id, conditions, false, async (row) => {
        const { rows } = await this.#write<{ seq: string | null }>(
          'SELECT notes_delete($1, $2, $3, $4) AS seq',
          [row.position, row.written, `{"id":${JSON.stringify(id)}}`, this.#historyLimit],
        )
        const seq = (rows[0] as { seq: string | null }).seq
        if (seq === null) return LOST
        this.#see(Number(seq))
        this.#pump()
        return true
      }),
    )
  }

  /**
   * A PATCH or DELETE: finds note `id` (`absent` when there is none), checks the conditions
   * against it, and `write`s it, which writes only if the note is still as found and answers LOST
   * otherwise; then it finds the note again, after a back-off, up to MAX_WRITE_ATTEMPTS times.
   */
  async #writeFound<T>(
    id: number,
    conditions: Preconditions | undefined,
    absent: T,
    write: (row: NoteRow) => Promise<T | typeof LOST>,
  ): Promise<T | PreconditionFailed> {
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      if (attempt > 0) await backOff(attempt)
      const row = await this.#find(id)
      if (row === undefined) return absent
      if (conditions !== undefined) {
        const current = this.#record(row)
        if (!meets(current, conditions)) return new PreconditionFailed(current)
      }
      const written = await write(row)
      if (written !== LOST) return written
    }
    throw lostToOtherWriters(id)
  }

  /**
   * Runs the PATCHes and DELETEs of one note id one after another in this instance. A write reads
   * the note, then writes it only if it is still as read (notes_update / notes_delete), and reads
   * again when another write came first; 50 clients patching one note at once would otherwise
   * make 49 of them lose each round, each loss a transaction on the clock row, and throughput fell
   * to a few writes a second (bench W5 on PostgreSQL). Waiting here, only writers on other
   * instances (or a PATCH that moved another note to this id) can come first. The wait is bounded
   * by the statement timeout: behind a write that hangs (a database that stopped answering), the
   * others get their 503 in time rather than one statement timeout each, in turn.
   */
  #oneAtATime<T>(id: number, write: () => Promise<T>): Promise<T> {
    const previous = this.#noteWrites.get(id)
    const result = previous === undefined ? write() : this.#waitFor(id, previous).then(write)
    const settled = result.then(ignore, ignore)
    this.#noteWrites.set(id, settled)
    void settled.then(() => {
      if (this.#noteWrites.get(id) === settled) this.#noteWrites.delete(id)
    })
    return result
  }

  /** Resolves when `previous` settles; rejects with a 503 after the statement timeout. */
  #waitFor(id: number, previous: Promise<unknown>): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new StoreUnavailableError(
              `Note ${id} is waiting for an earlier write that the database has not answered.`,
            ),
          ),
        this.#statementTimeoutMs,
      )
      void previous.then(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  async version(): Promise<string> {
    return this.#token(await this.#sequence())
  }

  async changesSince(since: string, limit: number): Promise<readonly Change[] | undefined> {
    await this.#opened()
    const dot = since.lastIndexOf('.')
    if (dot === -1 || since.slice(0, dot) !== this.#epoch) return undefined
    const digits = since.slice(dot + 1)
    const sequence = Number.parseInt(digits, 36)
    if (!/^[0-9a-z]{1,11}$/.test(digits)) return undefined
    const { rows } = await this.#query<{
      current: string
      sequence: string | null
      type: ChangeType | null
      data: string | null
    }>(
      `SELECT c.sequence AS current, ch.sequence, ch.type, ch.data FROM notes_clock c
      LEFT JOIN LATERAL (
        SELECT sequence, type, data FROM notes_changes WHERE sequence > $1 ORDER BY sequence LIMIT $2
      ) ch ON true
      ORDER BY ch.sequence`,
      [sequence, Math.max(limit, 1)],
    )
    const current = Number((rows[0] as { current: string }).current)
    this.#see(current)
    if (sequence > current || sequence < current - this.#historyLimit) return undefined
    const changes = rows.filter((row) => row.sequence !== null).map((row) => this.#change(row))
    if (sequence < current && changes[0]?.sequence !== sequence + 1) return undefined
    return changes.slice(0, limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    // A wrapper, so that one function subscribed twice is called twice and removed once.
    const subscription = (change: Change) => listener(change)
    this.#listeners.add(subscription)
    if (this.#listeners.size === 1) this.#startListening()
    return () => {
      this.#listeners.delete(subscription)
      if (this.#listeners.size === 0) this.#stopListening()
    }
  }

  async stats(): Promise<StoreStats> {
    const { rows } = await this.#query<{ notes: string; bytes: string }>(
      'SELECT notes, bytes FROM notes_clock',
    )
    const row = rows[0] as { notes: string; bytes: string }
    return {
      notes: Number(row.notes),
      bytes: Number(row.bytes),
      maxNotes: this.#options.maxNotes,
      maxBytes: this.#options.maxBytes,
    }
  }

  async #create(
    fields: NoteFields,
    key: string | null,
    fingerprint: string | null,
  ): Promise<{ note: NoteRecord; replayed: boolean; fingerprint: string | null }> {
    const [prefix, suffix, search] = splitAroundId(fields)
    const now = Math.trunc(this.#now())
    const { rows } = await this.#write<{
      r_json: string
      r_written: string
      r_modified: string
      r_replayed: boolean
      r_fingerprint: string | null
    }>('SELECT * FROM notes_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)', [
      now,
      prefix,
      suffix,
      search,
      this.#options.maxNotes,
      this.#options.maxBytes,
      this.#historyLimit,
      key,
      fingerprint,
      now + this.#keyTtlMs,
      this.#maxKeys,
    ])
    const row = rows[0] as {
      r_json: string
      r_written: string
      r_modified: string
      r_replayed: boolean
      r_fingerprint: string | null
    }
    const note = row.r_replayed
      ? this.#recordOf(row.r_json, Number(row.r_written), Number(row.r_modified))
      : this.#written(row.r_json, Number(row.r_written), Number(row.r_modified))
    return { note, replayed: row.r_replayed, fingerprint: row.r_fingerprint }
  }

  /**
   * Group commit: one statement at a time stores every create queued so far (up to
   * MAX_CREATES_PER_STATEMENT), in arrival order, in one transaction and one flush to disk. A lone
   * create goes at once; the ones that arrive meanwhile wait for it and then go together.
   */
  async #commitQueued(): Promise<void> {
    this.#committing = true
    while (this.#queued.length > 0) {
      const batch = this.#queued.splice(0, MAX_CREATES_PER_STATEMENT)
      try {
        const { rows } = await this.#query<{
          r_json: string | null
          r_written: string | null
          r_modified: string | null
          r_full: string | null
        }>('SELECT * FROM notes_create_many($1, $2, $3, $4, $5, $6, $7)', [
          batch.map((create) => create.now),
          batch.map((create) => create.prefix),
          batch.map((create) => create.suffix),
          batch.map((create) => create.search),
          this.#options.maxNotes,
          this.#options.maxBytes,
          this.#historyLimit,
        ])
        for (const [i, create] of batch.entries()) {
          const row = rows[i]
          if (row === undefined) create.reject(new Error('notes_create_many answered too few rows'))
          else if (row.r_full !== null) create.reject(new StoreFullError(row.r_full))
          else {
            create.resolve(
              this.#written(row.r_json as string, Number(row.r_written), Number(row.r_modified)),
            )
          }
        }
      } catch (err) {
        // The database is away: the creates queued behind this statement would each wait out a
        // timeout of their own, in turn; they get their 503 now.
        const failed =
          err instanceof StoreUnavailableError ? batch.concat(this.#queued.splice(0)) : batch
        for (const create of failed) create.reject(err)
      }
    }
    this.#committing = false
  }

  async #searchPage(
    limit: number,
    order: 'asc' | 'desc',
    after: number | undefined,
    q: string,
  ): Promise<PageRecord> {
    const sequence = await this.#sequence()
    let search = this.#searches.sequence === sequence ? this.#searches.byQuery.get(q) : undefined
    let at = sequence
    if (search === undefined) {
      const { rows } = await this.#query<{
        sequence: string
        position: string | null
        json: string | null
      }>(
        `SELECT c.sequence, p.position, p.json FROM notes_clock c
        LEFT JOIN LATERAL (
          SELECT position, json FROM notes WHERE search LIKE $1 ORDER BY position
        ) p ON true
        ORDER BY p.position`,
        [likePattern(q)],
      )
      at = Number((rows[0] as { sequence: string }).sequence)
      this.#see(at)
      const matches = matchesText(q)
      search = { positions: [], notes: [] }
      for (const row of rows) {
        if (row.json !== null && matches(row.json)) {
          search.positions.push(Number(row.position))
          search.notes.push(row.json)
        }
      }
      if (this.#searches.sequence !== at) this.#searches = { sequence: at, byQuery: new Map() }
      if (this.#searches.byQuery.size >= MAX_CACHED_SEARCHES) this.#searches.byQuery.clear()
      this.#searches.byQuery.set(q, search)
    }
    const { positions, notes } = search
    const sent: string[] = []
    let next: number | undefined
    if (order === 'asc') {
      let i = after === undefined ? 0 : positions.findIndex((p) => p > after)
      if (i === -1) i = positions.length
      for (; i < positions.length; i++) {
        if (sent.length === limit) {
          next = positions[i - 1]
          break
        }
        sent.push(notes[i] as string)
      }
    } else {
      let i = positions.length - 1
      if (after !== undefined) while (i >= 0 && (positions[i] as number) >= after) i--
      for (; i >= 0; i--) {
        if (sent.length === limit) {
          next = positions[i + 1]
          break
        }
        sent.push(notes[i] as string)
      }
    }
    return { json: `[${sent.join(',')}]`, version: this.#token(at), total: positions.length, next }
  }

  async #find(id: number): Promise<NoteRow | undefined> {
    const { rows } = await this.#read<NoteRow>('notes_find', FIND_SQL, [id])
    return rows[0]
  }

  async #sequence(): Promise<number> {
    const { rows } = await this.#read<{ sequence: string }>(
      'notes_sequence',
      'SELECT sequence FROM notes_clock',
      [],
    )
    const sequence = Number((rows[0] as { sequence: string }).sequence)
    this.#see(sequence)
    return sequence
  }

  async #opened(): Promise<void> {
    if (this.#epoch === '') await this.open()
  }

  /**
   * A point read on a pipelined connection, as a prepared statement: parsed and planned once per
   * connection instead of on every call (a GET of one note cost PostgreSQL ~150 us of CPU
   * unnamed, ~70 us named; bench W1).
   */
  async #read<R extends pg.QueryResultRow>(
    name: string,
    sql: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    await this.#opened()
    try {
      return await this.#reads.query<R>(name, sql, values)
    } catch (err) {
      return unavailableOr(err)
    }
  }

  /** One statement on a pooled connection. */
  async #query<R extends pg.QueryResultRow>(
    sql: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    await this.#opened()
    try {
      return await this.#pool.query<R>(sql, values)
    } catch (err) {
      return unavailableOr(err)
    }
  }

  /** A write: a StoreFullError raised in the database becomes one here. */
  async #write<R extends pg.QueryResultRow>(
    sql: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.#query<R>(sql, values)
    } catch (err) {
      if (err instanceof Error && (err as { code?: string }).code === 'NS507') {
        throw new StoreFullError(err.message)
      }
      throw err
    }
  }

  #written(json: string, sequence: number, modified: number): NoteRecord {
    this.#see(sequence)
    this.#pump()
    return this.#recordOf(json, sequence, modified)
  }

  #record(row: NoteRow): NoteRecord {
    return this.#recordOf(row.json, Number(row.written), Number(row.modified))
  }

  #recordOf(json: string, written: number, modified: number): NoteRecord {
    return { json, etag: JSON.stringify(this.#token(written)), modified }
  }

  #change(row: { sequence: string | null; type: ChangeType | null; data: string | null }): Change {
    const sequence = Number(row.sequence)
    return {
      type: row.type as ChangeType,
      version: this.#token(sequence),
      sequence,
      data: row.data as string,
    }
  }

  /** 'k2x9q1' and 5 -> 'k2x9q1.5' */
  #token(sequence: number): string {
    return `${this.#epoch}.${sequence.toString(36)}`
  }

  #see(sequence: number): void {
    if (sequence > this.#known) this.#known = sequence
  }

  /**
   * Subscribers: a dedicated connection LISTENs, and a notification (or this instance's own
   * write, or the poll) makes the pump read notes_changes after the last sequence delivered. The
   * history, not the notification, is what is delivered, so a listener that reconnects misses
   * nothing and repeats nothing.
   */
  #startListening(): void {
    this.#cursor = undefined
    if (this.#epoch === '') {
      // "From now on" is from the version the store opens at: writes wait for the same opening.
      void this.open().then(
        () => {
          this.#cursor ??= this.#known
          this.#pump()
        },
        () => {},
      )
    } else {
      this.#cursor = this.#known
    }
    this.#poll = setInterval(() => this.#pump(), this.#pollMs)
    this.#poll.unref()
    void this.#connectListener()
  }

  async #connectListener(): Promise<void> {
    if (this.#closed || this.#listeners.size === 0 || this.#listener !== undefined) return
    const client = new pg.Client({ connectionString: this.#options.url })
    this.#listener = client
    const lost = () => {
      if (this.#listener !== client) return
      this.#listener = undefined
      void client.end().catch(() => {})
      setTimeout(() => void this.#connectListener(), 500).unref()
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', () => this.#pump())
    try {
      await client.connect()
      await client.query('LISTEN notes_changes')
      this.#pump()
    } catch {
      lost()
    }
  }

  #stopListening(): void {
    if (this.#poll !== undefined) clearInterval(this.#poll)
    this.#poll = undefined
    const client = this.#listener
    this.#listener = undefined
    if (client !== undefined) void client.end().catch(() => {})
  }

  #pump(): void {
    if (this.#listeners.size === 0 || this.#closed) return
    if (this.#pumping) {
      this.#pumpAgain = true
      return
    }
    this.#pumping = true
    void this.#drain().finally(() => {
      this.#pumping = false
      if (this.#pumpAgain) {
        this.#pumpAgain = false
        this.#pump()
      }
    })
  }

  async #drain(): Promise<void> {
    try {
      if (this.#cursor === undefined) {
        if (this.#epoch === '') return
        this.#cursor = this.#known
      }
      for (;;) {
        const { rows } = await this.#query<{ sequence: string; type: ChangeType; data: string }>(
          'SELECT sequence, type, data FROM notes_changes WHERE sequence > $1 ORDER BY sequence LIMIT 1000',
          [this.#cursor],
        )
        for (const row of rows) {
          if (this.#listeners.size === 0) return
          const change = this.#change(row)
          this.#cursor = change.sequence
          for (const listener of this.#listeners) listener(change)
        }
        if (rows.length < 1000) return
      }
    } catch (err) {
      // The database is away: the next notification or poll tries again from the same cursor.
      if (!isUnavailable(err) && !(err instanceof Error && err.name === 'StoreUnavailableError')) {
        throw err
      }
    }
  }
}

/** DECISION 22: If-Match (strong comparison, or '*') and If-Unmodified-Since. */
function meets(note: NoteRecord, { ifMatch, ifUnmodifiedSince }: Preconditions): boolean {
  if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.includes(note.etag)) return false
  if (ifUnmodifiedSince !== undefined && note.modified >= ifUnmodifiedSince + 1000) return false
  return true
}

/** Only finite numbers can equal a path id; Infinity (from `1e400`) is serialized as null. */
function isIndexable(id: unknown): id is number {
  return typeof id === 'number' && Number.isFinite(id)
}

/**
 * The note's JSON before and after its id, which the database fills in, and its search text:
 * { a: 1 } -> ['{"a":1,"id":', '}']; { id: 'x', a: 1 } -> ['{"id":', ',"a":1}'], as memory.ts's
 * serializeWithId places the id.
 */
function splitAroundId(fields: NoteFields): [string, string, string] {
  if (!Object.hasOwn(fields, 'id')) {
    const json = JSON.stringify(fields)
    const prefix = json === '{}' ? '{"id":' : `${json.slice(0, -1)},"id":`
    return [prefix, '}', searchText(fields)]
  }
  const before: NoteFields = {}
  const after: NoteFields = {}
  let seen = false
  for (const key of Object.keys(fields)) {
    if (key === 'id') seen = true
    else setField(seen ? after : before, key, fields[key])
  }
  const head = JSON.stringify(before)
  const tail = JSON.stringify(after)
  return [
    head === '{}' ? '{"id":' : `${head.slice(0, -1)},"id":`,
    tail === '{}' ? '}' : `,${tail.slice(1)}`,
    [searchText(before), searchText(after)].filter((text) => text !== '').join('\n'),
  ]
}

/** `note[key] = value`, except that '__proto__' becomes a plain field instead of a prototype. */
function setField(note: NoteFields, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(note, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    })
  } else {
    note[key] = value
  }
}
