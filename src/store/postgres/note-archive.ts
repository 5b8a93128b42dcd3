import {
  ID_TAKEN,
  type Revision,
  type RevisionPage,
  type TrashedNote,
  type TrashPage,
} from '../archive.js'
import { tokenSequence } from '../kernel/version-token.js'
import type { NoteRecord } from '../types.js'
import type { Unwritten, Written } from './note-writes.js'
import type { NotebookDb } from './notebook-db.js'
import { bigintOf, limitValues, type WriteLimits } from './queries.js'

/**
 * A notebook's history and trash (NoteArchive) in PostgreSQL (migration 6, archive-schema.ts):
 * each read is one statement, each act one call of a function that locks the notebook's clock
 * row, as every write does. A note's current state is its own row, the first of its revisions;
 * the past ones are in notes_revisions. What has passed its time is left out here, whether or
 * not a write has removed it yet.
 */

/** Larger than every sequence: "before" no revision yet. */
const LAST = '9223372036854775807'

/** A note (the first in list order with the id) and its past revisions before a sequence. */
interface RevisionRow {
  position: string
  json: string
  written: string
  modified: string
  sequence: string | null
  at: string | null
  change: 'created' | 'updated' | null
  past: string | null
}

/**
 * The note's own row as its current revision: 'created' when its content is its create's (or
 * its restore's from the trash), whose change numbered its place in the list.
 */
function currentOf(db: NotebookDb, row: RevisionRow): Revision {
  return {
    version: db.token(Number(row.written)),
    at: Number(row.modified),
    change: row.written === row.position ? 'created' : 'updated',
    json: row.json,
  }
}

function pastOf(db: NotebookDb, row: RevisionRow): Revision {
  return {
    version: db.token(Number(row.sequence)),
    at: Number(row.at),
    change: row.change as 'created' | 'updated',
    json: row.past as string,
  }
}

/** The note `id` finds, as a statement's FROM item `n`. */
const NOTE = `(SELECT position, json, written, modified FROM notes
  WHERE id = $2 AND notebook = $1 ORDER BY position LIMIT 1) n`

/**
 * NoteArchive.revisions: the current state (when its version is before `after`), then the past
 * revisions before `after` within their age, newest first; a cursor of another epoch, or not a
 * version, is before every revision.
 */
export async function readRevisions(
  db: NotebookDb,
  id: number,
  limit: number,
  after: string | undefined,
  now: number,
  limits: WriteLimits,
): Promise<RevisionPage | undefined> {
  await db.opened()
  const before = after === undefined ? LAST : (tokenSequence(after, db.epoch) ?? 0)
  const { rows } = await db.query<RevisionRow>(
    `SELECT n.position, n.json, n.written, n.modified, r.sequence, r.at, r.change, r.json AS past
    FROM ${NOTE}
    LEFT JOIN LATERAL (
      SELECT sequence, at, change, json FROM ${kept('n.position', '$6')}
      WHERE sequence < $3 AND at > $4
      ORDER BY sequence DESC LIMIT $5
    ) r ON true
    ORDER BY r.sequence DESC`,
    [db.name, id, before, cutoff(now, limits.historyMs), limit + 1, pastKept(limits)],
  )
  const first = rows[0]
  if (first === undefined) return undefined
  const revisions = rows.filter((row) => row.sequence !== null).map((row) => pastOf(db, row))
  if (BigInt(first.written) < BigInt(before)) revisions.unshift(currentOf(db, first))
  const page = revisions.slice(0, limit)
  return { revisions: page, next: revisions.length > limit ? page.at(-1)?.version : undefined }
}

/** NoteArchive.revision: the current state or a past one within its age, by its version. */
export async function readRevision(
  db: NotebookDb,
  id: number,
  version: string,
  now: number,
  limits: WriteLimits,
): Promise<Revision | undefined> {
  await db.opened()
  const sequence = tokenSequence(version, db.epoch)
  // 'e.05' names sequence 5 too, but it is not the version 'e.5' that was given.
  if (sequence === undefined || db.token(sequence) !== version) return undefined
  const { rows } = await db.query<RevisionRow>(
    `SELECT n.position, n.json, n.written, n.modified, r.sequence, r.at, r.change, r.json AS past
    FROM ${NOTE}
    LEFT JOIN LATERAL (
      SELECT sequence, at, change, json FROM ${kept('n.position', '$5')}
      WHERE sequence = $3 AND at > $4
    ) r ON true`,
    [db.name, id, sequence, cutoff(now, limits.historyMs), pastKept(limits)],
  )
  const row = rows[0]
  if (row === undefined) return undefined
  if (Number(row.written) === sequence) return currentOf(db, row)
  return row.sequence === null ? undefined : pastOf(db, row)
}

/** NoteArchive.trash: the notes within the trash's time, by their delete, newest first. */
export async function readTrash(
  db: NotebookDb,
  limit: number,
  after: number | undefined,
  now: number,
  limits: WriteLimits,
): Promise<TrashPage> {
  const { rows } = await db.query<{
    total: string
    sequence: string | null
    deleted: string | null
    json: string | null
  }>(
    `SELECT (SELECT count(*) FROM notes_trash WHERE notebook = $1 AND deleted > $2) AS total,
      t.sequence, t.deleted, t.json
    FROM (SELECT 1) one
    LEFT JOIN LATERAL (
      SELECT sequence, deleted, json FROM notes_trash
      WHERE notebook = $1 AND deleted > $2 AND sequence < $3
      ORDER BY sequence DESC LIMIT $4
    ) t ON true
    ORDER BY t.sequence DESC`,
    [db.name, cutoff(now, limits.trashMs), after ?? LAST, limit + 1],
  )
  const trashed: TrashedNote[] = rows
    .filter((row) => row.sequence !== null)
    .map((row) => ({
      deleted: Number(row.deleted),
      sequence: Number(row.sequence),
      json: row.json as string,
    }))
  const notes = trashed.slice(0, limit)
  return {
    notes,
    total: Number((rows[0] as { total: string }).total),
    next: trashed.length > limit ? notes.at(-1)?.sequence : undefined,
  }
}

/** NoteArchive.untrash, as one call of notes_untrash: the note put back, and its sequence. */
export async function untrashNote(
  db: NotebookDb,
  id: number,
  now: number,
  limits: WriteLimits,
): Promise<Written<NoteRecord> | Unwritten<undefined | typeof ID_TAKEN>> {
  const { rows } = await db.query<{
    r_json: string | null
    r_written: string | null
    r_modified: string | null
    r_refusal: 'absent' | 'taken' | null
  }>('SELECT * FROM notes_untrash($1, $2, $3, $4)', [
    db.name,
    id,
    Math.trunc(now),
    limitValues(limits)[0],
  ])
  const row = rows[0]
  if (row === undefined || row.r_refusal === 'absent') return { answer: undefined }
  if (row.r_refusal === 'taken') return { answer: ID_TAKEN }
  const sequence = Number(row.r_written)
  return { answer: db.record(row.r_json as string, sequence, Number(row.r_modified)), sequence }
}

/**
 * Removes for good the most recently deleted note with this id (null: every note) from the trash,
 * as one call of notes_purge; answers how many went (of those within the trash's time).
 */
export async function purgeTrash(
  db: NotebookDb,
  id: number | null,
  now: number,
  limits: WriteLimits,
): Promise<number> {
  const { rows } = await db.query<{ purged: string }>(
    'SELECT notes_purge($1, $2, $3, $4) AS purged',
    [db.name, id, Math.trunc(now), bigintOf(limits.trashMs)],
  )
  return Number((rows[0] as { purged: string }).purged)
}

/**
 * The newest `count` past revisions of the note at `position` (SQL), as a FROM item: those a note
 * keeps; older ones that a write has not yet removed (NOTE_HISTORY lowered) are left out.
 */
function kept(position: string, count: string): string {
  return `(SELECT sequence, at, change, json FROM notes_revisions
    WHERE notebook = $1 AND position = ${position} ORDER BY sequence DESC LIMIT ${count}) kept`
}

/** Past revisions a note keeps: NOTE_HISTORY less its current state. */
function pastKept(limits: WriteLimits): number {
  return Math.max(bigintOf(limits.noteHistory) - 1, 0)
}

/** What is older than this (ms) has passed an age of `ms` at `now`. */
function cutoff(now: number, ms: number): number {
  return Math.trunc(now) - bigintOf(ms)
}
