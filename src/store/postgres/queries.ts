import type pg from 'pg'
import type { ArchiveLimits } from '../archive.js'
import { SHARED_ROOM_ADVICE, TRASH_ROOM_ADVICE } from '../kernel/capacity.js'
import { type ChangeType, StoreFullError } from '../types.js'
import type { Database } from './database.js'
import type { NotebookDb } from './notebook-db.js'

/**
 * The SQL of every operation, one function each, answering rows as PostgreSQL gives them
 * (bigints as strings). Every statement is about one notebook (`db.name`, always a parameter:
 * nothing here reads or writes another's rows). The writes call the functions that schema.ts
 * defines, each one transaction that locks the notebook's clock row first. What the rows mean to
 * a client is store.ts's.
 */

/** A stored note, as the writes that change it need it. */
export interface NoteRow {
  position: string
  json: string
  written: string
  modified: string
}

/** The answer of notes_create and notes_create_many: the note made, or why not. */
export interface CreatedRow {
  r_json: string
  r_written: string
  r_modified: string
}

export interface ChangeRow {
  sequence: string
  type: ChangeType
  data: string
}

/** Where a note's JSON and search text go when it is created (jsonAroundId, searchText). */
export interface NewNote {
  now: number
  prefix: string
  suffix: string
  search: string
}

/** A note as an update leaves it. */
export interface UpdatedNote {
  json: string
  /** Its id when a path id can find it (isIndexable), else null. */
  id: number | null
  search: string
  modified: number
}

/** What every write is bounded by: the caps, the change history, the revisions and the trash. */
export interface WriteLimits extends ArchiveLimits {
  /** The service's caps, over every notebook. */
  maxNotes: number
  maxBytes: number
  /** The notebook's own caps. */
  notebookMaxNotes: number
  notebookMaxBytes: number
  historyLimit: number
  /** Who a refusal for the notebook's caps names: 'The store', or 'This notebook'. */
  holder: string
}

/**
 * The limits as the write functions take them (p_limits, p_holder; archive-schema.ts says the
 * order), each a whole number that a bigint holds (Infinity: the largest safe integer).
 */
export function limitValues(limits: WriteLimits): [number[], string] {
  const { maxNotes, maxBytes, notebookMaxNotes, notebookMaxBytes, historyLimit } = limits
  const { noteHistory, historyMs, maxHistoryBytes, trashMs } = limits
  const values = [maxNotes, maxBytes, notebookMaxNotes, notebookMaxBytes, historyLimit]
  values.push(noteHistory, historyMs, maxHistoryBytes, trashMs)
  return [values.map(bigintOf), limits.holder]
}

/** 1.5 -> 1, Infinity -> 2^53 - 1, -3 -> 0 */
export function bigintOf(value: number): number {
  return Math.max(0, Math.min(Math.trunc(value), Number.MAX_SAFE_INTEGER))
}

/** The refusal of a write past a cap; the service's caps come with the advice that fits them. */
export function storeFull(message: string): StoreFullError {
  if (message.startsWith('The service ')) return new StoreFullError(message, SHARED_ROOM_ADVICE)
  // The notebook's own caps, while its trash holds notes (notes_no_room): the trash holds room.
  if (message.endsWith(TRASH_MARK)) {
    return new StoreFullError(message.slice(0, -TRASH_MARK.length), TRASH_ROOM_ADVICE)
  }
  return new StoreFullError(message)
}

const TRASH_MARK = ' [trash]'

export async function findNote(db: NotebookDb, id: number): Promise<NoteRow | undefined> {
  const { rows } = await db.read<NoteRow>(
    'notes_find',
    'SELECT position, json, written, modified FROM notes WHERE id = $2 AND notebook = $1 ORDER BY position LIMIT 1',
    [db.name, id],
  )
  return rows[0]
}

/** The clock's sequence: the version now. */
export async function readSequence(db: NotebookDb): Promise<number> {
  const { rows } = await db.read<{ sequence: string }>(
    'notes_sequence',
    'SELECT sequence FROM notes_notebooks WHERE notebook = $1',
    [db.name],
  )
  const sequence = Number((rows[0] as { sequence: string }).sequence)
  db.see(sequence)
  return sequence
}

/** Every note's JSON joined by commas in list order (null for none), with its version and count. */
export async function readList(
  db: NotebookDb,
): Promise<{ sequence: string; count: string; list: string | null }> {
  const { rows } = await db.query<{ sequence: string; count: string; list: string | null }>(
    `SELECT n.sequence, n.notes AS count,
      (SELECT string_agg(json, ',' ORDER BY position) FROM notes WHERE notebook = $1) AS list
    FROM notes_notebooks n WHERE n.notebook = $1`,
    [db.name],
  )
  return rows[0] as { sequence: string; count: string; list: string | null }
}

/**
 * Up to `limit` notes after list position `after`, in walk order, each row with the version and
 * the number of notes; one row with null notes when the page is empty.
 */
export async function readPage(
  db: NotebookDb,
  asc: boolean,
  after: number | undefined,
  limit: number,
): Promise<{ sequence: string; notes: string; position: string | null; json: string | null }[]> {
  const { rows } = await db.query<{
    sequence: string
    notes: string
    position: string | null
    json: string | null
  }>(
    `SELECT n.sequence, n.notes, p.position, p.json FROM notes_notebooks n
    LEFT JOIN LATERAL (
      SELECT position, json FROM notes
      WHERE notebook = $3 AND position ${asc ? '>' : '<'} $1
      ORDER BY position ${asc ? 'ASC' : 'DESC'} LIMIT $2
    ) p ON true
    WHERE n.notebook = $3
    ORDER BY p.position ${asc ? 'ASC' : 'DESC'}`,
    [after ?? (asc ? 0 : '9223372036854775807'), limit, db.name],
  )
  return rows
}

/**
 * The notes whose search text is LIKE `pattern` (candidates for a `q`), in list order, each row
 * with the version; one row with null notes when there are none.
 */
export async function readCandidates(
  db: NotebookDb,
  pattern: string,
): Promise<{ sequence: string; position: string | null; json: string | null }[]> {
  const { rows } = await db.query<{
    sequence: string
    position: string | null
    json: string | null
  }>(
    `SELECT n.sequence, p.position, p.json FROM notes_notebooks n
    LEFT JOIN LATERAL (
      SELECT position, json FROM notes WHERE notebook = $2 AND search LIKE $1 ORDER BY position
    ) p ON true
    WHERE n.notebook = $2
    ORDER BY p.position`,
    [pattern, db.name],
  )
  return rows
}

export async function readStats(db: NotebookDb): Promise<{ notes: string; bytes: string }> {
  const { rows } = await db.query<{ notes: string; bytes: string }>(
    'SELECT notes, bytes FROM notes_notebooks WHERE notebook = $1',
    [db.name],
  )
  return rows[0] as { notes: string; bytes: string }
}

/** Notes and bytes over every notebook: what the service-wide caps count. */
export async function readServiceStats(db: Database): Promise<{ notes: string; bytes: string }> {
  const { rows } = await db.query<{ notes: string; bytes: string }>(
    'SELECT notes, bytes FROM notes_clock',
  )
  return rows[0] as { notes: string; bytes: string }
}

/** The sequence of each of `notebooks` (those that exist), for the change delivery's poll. */
export async function readSequences(
  db: Database,
  notebooks: readonly string[],
): Promise<{ notebook: string; sequence: string }[]> {
  const { rows } = await db.query<{ notebook: string; sequence: string }>(
    'SELECT notebook, sequence FROM notes_notebooks WHERE notebook = ANY($1)',
    [notebooks],
  )
  return rows
}

/**
 * Up to `limit` changes after `sequence`, oldest first, each row with the current sequence; one
 * row with null changes when there are none.
 */
export async function readChangesSince(
  db: NotebookDb,
  sequence: number,
  limit: number,
): Promise<
  { current: string; sequence: string | null; type: ChangeType | null; data: string | null }[]
> {
  const { rows } = await db.query<{
    current: string
    sequence: string | null
    type: ChangeType | null
    data: string | null
  }>(
    `SELECT n.sequence AS current, ch.sequence, ch.type, ch.data FROM notes_notebooks n
    LEFT JOIN LATERAL (
      SELECT sequence, type, data FROM notes_changes
      WHERE notebook = $3 AND sequence > $1 ORDER BY sequence LIMIT $2
    ) ch ON true
    WHERE n.notebook = $3
    ORDER BY ch.sequence`,
    [sequence, limit, db.name],
  )
  return rows
}

/** The next changes (at most `limit`) after `cursor`, for delivery to subscribers. */
export async function readChangesAfter(
  db: NotebookDb,
  cursor: number,
  limit: number,
): Promise<ChangeRow[]> {
  const { rows } = await db.query<ChangeRow>(
    'SELECT sequence, type, data FROM notes_changes WHERE notebook = $3 AND sequence > $1 ORDER BY sequence LIMIT $2',
    [cursor, limit, db.name],
  )
  return rows
}

/** An idempotency key as notes_create keeps it. */
export interface KeyToKeep {
  key: string
  fingerprint: string
  /** When it is forgotten, in ms since the epoch. */
  expires: number
  /** Keys kept at most. */
  maxKeys: number
}

/**
 * One create under an idempotency key, as notes_create answers it: the note it made, or the one
 * an earlier create under that key made (r_replayed, with that create's fingerprint).
 */
export async function callCreate(
  db: NotebookDb,
  note: NewNote,
  limits: WriteLimits,
  key: KeyToKeep,
): Promise<CreatedRow & { r_replayed: boolean; r_fingerprint: string | null }> {
  const { rows } = await write<CreatedRow & { r_replayed: boolean; r_fingerprint: string | null }>(
    db,
    'SELECT * FROM notes_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)',
    [
      db.name,
      [note.now],
      [note.prefix],
      [note.suffix],
      [note.search],
      ...limitValues(limits),
      key.key,
      key.fingerprint,
      key.expires,
      key.maxKeys,
    ],
  )
  return rows[0] as CreatedRow & { r_replayed: boolean; r_fingerprint: string | null }
}

/**
 * Several creates in one statement (group commit), in order: one row each, with `r_full` set
 * (and nothing stored for it) when that note would pass a cap.
 */
export async function callCreateMany(
  db: NotebookDb,
  notes: readonly NewNote[],
  limits: WriteLimits,
): Promise<(Partial<CreatedRow> & { r_full: string | null })[]> {
  const { rows } = await db.query<Partial<CreatedRow> & { r_full: string | null }>(
    'SELECT r_json, r_written, r_modified, r_full FROM notes_create($1, $2, $3, $4, $5, $6, $7, NULL, NULL, NULL, NULL)',
    [
      db.name,
      notes.map((note) => note.now),
      notes.map((note) => note.prefix),
      notes.map((note) => note.suffix),
      notes.map((note) => note.search),
      ...limitValues(limits),
    ],
  )
  return rows
}

/**
 * Writes a note found as `row` if it is still as found: the sequence of the write, or null when
 * another write came first.
 */
export function callUpdate(
  db: NotebookDb,
  row: NoteRow,
  note: UpdatedNote,
  limits: WriteLimits,
): Promise<string | null> {
  return writeIfUnchanged(db, 'SELECT notes_update($1, $2, $3, $4, $5, $6, $7, $8, $9) AS seq', [
    ...[db.name, row.position, row.written, note.json, note.id, note.search, note.modified],
    ...limitValues(limits),
  ])
}

/**
 * Deletes a note found as `row` if it is still as found, at `now` (into the trash when it is on);
 * as callUpdate answers.
 */
export function callDelete(
  db: NotebookDb,
  row: NoteRow,
  data: string,
  now: number,
  limits: WriteLimits,
): Promise<string | null> {
  return writeIfUnchanged(db, 'SELECT notes_delete($1, $2, $3, $4, $5, $6) AS seq', [
    db.name,
    row.position,
    row.written,
    data,
    Math.trunc(now),
    limitValues(limits)[0],
  ])
}

/** A write of a found note (notes_update, notes_delete): its sequence, or null when it lost. */
async function writeIfUnchanged(
  db: NotebookDb,
  sql: string,
  values: unknown[],
): Promise<string | null> {
  const { rows } = await write<{ seq: string | null }>(db, sql, values)
  return (rows[0] as { seq: string | null }).seq
}

/** A write: a StoreFullError raised in the database (SQLSTATE NS507) becomes one here. */
async function write<R extends pg.QueryResultRow>(
  db: NotebookDb,
  sql: string,
  values: unknown[],
): Promise<pg.QueryResult<R>> {
  try {
    return await db.query<R>(sql, values)
  } catch (err) {
    if (err instanceof Error && (err as { code?: string }).code === 'NS507') {
      throw storeFull(err.message)
    }
    throw err
  }
}

/**
 * Locks the notebook's clock row until the transaction ends, as every write does first: no other
 * write of the notebook, on any instance, comes between the statements of a batch. Answers the
 * notebook's sequence.
 */
export async function lockNotebook(db: NotebookDb): Promise<number> {
  const { rows } = await db.query<{ sequence: string }>(
    'SELECT sequence FROM notes_notebooks WHERE notebook = $1 FOR UPDATE',
    [db.name],
  )
  return Number((rows[0] as { sequence: string }).sequence)
}

/** The remembered answer under an idempotency key, unless it expired (a batch's, or a create's). */
export async function findKey(
  db: NotebookDb,
  key: string,
  now: number,
): Promise<{ fingerprint: string; json: string } | undefined> {
  const { rows } = await db.query<{ fingerprint: string; json: string }>(
    'SELECT fingerprint, json FROM notes_idempotency WHERE notebook = $1 AND key = $2 AND expires > $3',
    [db.name, key, now],
  )
  return rows[0]
}

/**
 * Remembers a batch's answer under its key, as notes_create remembers a create's, and, when the
 * batch passed a multiple of 256 changes, forgets the expired keys and those beyond `maxKeys`.
 */
export async function keepKey(
  db: NotebookDb,
  key: KeyToKeep & { now: number },
  body: string,
  sequences: { from: number; to: number },
): Promise<void> {
  await db.query(
    `INSERT INTO notes_idempotency (notebook, key, fingerprint, json, written, modified, expires)
      VALUES ($1, $2, $3, $4, $5, $6, $7)
      ON CONFLICT (notebook, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
        json = EXCLUDED.json, written = EXCLUDED.written, modified = EXCLUDED.modified,
        expires = EXCLUDED.expires`,
    [db.name, key.key, key.fingerprint, body, sequences.to, key.now, key.expires],
  )
  if (Math.floor(sequences.to / 256) > Math.floor(sequences.from / 256)) {
    await db.query('DELETE FROM notes_idempotency WHERE notebook = $1 AND expires <= $2', [
      db.name,
      key.now,
    ])
    await db.query(
      `DELETE FROM notes_idempotency WHERE notebook = $1 AND key IN (
        SELECT key FROM notes_idempotency WHERE notebook = $1 ORDER BY expires DESC OFFSET $2)`,
      [db.name, key.maxKeys],
    )
  }
}
