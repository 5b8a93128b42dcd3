import type pg from 'pg'
import { isIndexable } from '../kernel/id-placement.js'
import {
  checkImportCaps,
  type ImportCaps,
  type ImportedNote,
  ImportRefusedError,
  type ImportSource,
  putFiles,
} from '../kernel/import-source.js'
import { randomEpoch } from '../kernel/version-token.js'
import type { Database } from './database.js'
import { PostgresFiles } from './files.js'
import { searchText } from './search-text.js'

export interface PostgresImportOptions extends ImportCaps {
  /** Replace every notebook's notes; without it, a database that holds notes is refused. */
  replace: boolean
  /** The time the imported notes were last written (Last-Modified) when the file does not say, in ms. */
  now: number
  /** Told of every chunk of notes written. */
  onProgress?: (notes: number) => void
}

/**
 * Imports `source` (an export) into the database: its notes in one transaction, all of them or
 * none, then its files.
 * It locks the files' and the notebooks' tables (so no write of a running instance interleaves;
 * they wait) and the service's clock row, refuses a database that holds notes or files unless
 * `replace` (which then empties every notebook, its change history, idempotency keys, revisions,
 * trash and files), and writes each notebook's
 * notes, their past revisions and its trash at the sequences after its last one, each state at the
 * sequence the file gives it (noteSlots: a file without history puts each note at its own
 * position). Every notebook gets a new epoch, so no version token or ETag given before matches the
 * new contents; the sequences only grow, so an instance still running with the old epoch gives
 * none that was given before either (it should be restarted to take the new one). The service's
 * last id becomes at least the highest imported id, so later creates give ids above them.
 * Once that is committed, the replaced files have their chunks deleted, and each file of the
 * export is put as an upload is (PostgresFiles), streamed from the export, with its id, type and
 * time: a failure there (the database gone, the file changed) leaves the notes imported and the
 * files put so far, and an import with `replace` again puts it right.
 * @throws ImportRefusedError (nothing changed): notes or files already there without `replace`,
 * or caps
 */
export async function importIntoPostgres(
  db: Database,
  source: ImportSource,
  options: PostgresImportOptions,
): Promise<void> {
  checkImportCaps(source, options)
  const client = await db.connect()
  let failed: Error | undefined
  try {
    await client.query('BEGIN')
    // The files' table first, as a notebook's removal takes its files before its notes.
    await client.query('LOCK TABLE notes_file_notebooks IN EXCLUSIVE MODE')
    await client.query('LOCK TABLE notes_notebooks IN EXCLUSIVE MODE')
    const clock = (
      await client.query<{ notes: string; trash_notes: string }>(
        'SELECT notes, trash_notes FROM notes_clock FOR UPDATE',
      )
    ).rows[0] as { notes: string; trash_notes: string }
    const held = Number(clock.notes)
    if (held > 0 && !options.replace) {
      throw new ImportRefusedError(
        `The database holds ${held} notes; import into an empty store, or add --replace to replace them.`,
      )
    }
    const trashed = Number(clock.trash_notes)
    if (trashed > 0 && !options.replace) {
      throw new ImportRefusedError(
        `The database holds ${trashed === 1 ? 'a deleted note' : `${trashed} deleted notes`} in its trash; import into an empty store, or add --replace to replace them.`,
      )
    }
    const directory = Number(
      (await client.query<{ count: string }>('SELECT count(*) AS count FROM notes_directory'))
        .rows[0]?.count,
    )
    if (directory > 0 && !options.replace) {
      throw new ImportRefusedError(
        `The database holds ${directory} notebooks with their members; import into an empty store, or add --replace to replace them.`,
      )
    }
    const files = Number(
      (await client.query<{ files: string }>('SELECT files FROM notes_file_clock')).rows[0]?.files,
    )
    if (files > 0 && !options.replace) {
      throw new ImportRefusedError(
        `The database holds ${files === 1 ? 'a file' : `${files} files`}; import into an empty store, or add --replace to replace them.`,
      )
    }
    if (options.replace) {
      // Every notebook's files, their chunks listed as garbage (deleted after the commit).
      await client.query('SELECT notes_drop_files(notebook) FROM notes_file_notebooks')
      // Members and invitations go with their notebooks (ON DELETE CASCADE).
      await client.query('DELETE FROM notes_directory')
      await client.query('DELETE FROM notes')
      await client.query('DELETE FROM notes_changes')
      await client.query('DELETE FROM notes_idempotency')
      // The notes' history and the trash go with the notes; the file's come instead.
      await client.query('DELETE FROM notes_revisions')
      await client.query('DELETE FROM notes_trash')
      await client.query('UPDATE notes_notebooks SET trash_notes = 0, trash_bytes = 0')
      await client.query(
        'UPDATE notes_clock SET trash_notes = 0, trash_bytes = 0, history_bytes = 0',
      )
    }
    await insertDirectory(client, source.directory)
    // Running instances check the memberships they keep against this head: moved on with no
    // change logged for it, none kept before the import is used again.
    await client.query('UPDATE notes_access_clock SET sequence = sequence + 1')
    const sequences = await renewEpochs(client, source)
    let pending: ImportedNote[] = []
    for await (const chunk of source.read()) {
      for (const note of chunk) {
        if (pending.length > 0 && (pending[0] as ImportedNote).notebook !== note.notebook) {
          await insertNotes(client, pending, sequences, options.now)
          pending = []
        }
        pending.push(note)
      }
      await insertNotes(client, pending, sequences, options.now)
      pending = []
      options.onProgress?.(chunk.length)
    }
    for (const notebook of source.notebooks) {
      await client.query(
        `UPDATE notes_notebooks SET sequence = $2, notes = $3, bytes = $4, trash_notes = $5,
          trash_bytes = $6 WHERE notebook = $1`,
        [
          notebook.name,
          (sequences.get(notebook.name) as number) + notebook.sequence,
          notebook.notes,
          notebook.bytes,
          notebook.trash,
          notebook.trashBytes,
        ],
      )
      await client.query("SELECT pg_notify('notes_changes', $1)", [notebook.name])
    }
    const lastId = Number.isFinite(source.lastId) ? source.lastId : 0
    await client.query(
      `UPDATE notes_clock SET notes = $1, bytes = $2, last_id = greatest(last_id, $3),
        trash_notes = $4, trash_bytes = $5, history_bytes = $6`,
      [source.notes, source.bytes, lastId, source.trash, source.trashBytes, source.historyBytes],
    )
    await client.query('COMMIT')
  } catch (err) {
    await client.query('ROLLBACK').catch((rollback: unknown) => {
      failed = rollback as Error
    })
    throw err
  } finally {
    client.release(failed)
  }
  // Statistics of what was just written, at once rather than when autovacuum comes to it: without
  // them a page of a notebook imported into a database that held others is planned as a sort of
  // the whole notebook rather than a walk of its index.
  await db.query('ANALYZE notes, notes_revisions, notes_trash')
  const space = new PostgresFiles(db, options.fileLimits ?? {})
  // The replaced files' chunks go before the new files come (and a put starts no sweep meanwhile).
  await space.sweep()
  await putFiles(space, source)
}

/**
 * Gives every notebook (those there, and the file's, made now) a new epoch and, with no notes
 * (replaced or never there), a note and byte count of 0; answers each one's sequence, which the
 * notes written take up from.
 */
async function renewEpochs(
  client: pg.PoolClient,
  source: ImportSource,
): Promise<Map<string, number>> {
  const { rows } = await client.query<{ notebook: string; sequence: string }>(
    'SELECT notebook, sequence FROM notes_notebooks',
  )
  const sequences = new Map<string, number>()
  for (const row of rows) sequences.set(row.notebook, Number(row.sequence))
  for (const { name } of source.notebooks) {
    if (!sequences.has(name)) {
      await client.query(
        'INSERT INTO notes_notebooks (notebook, epoch, sequence, notes, bytes) VALUES ($1, $2, 0, 0, 0)',
        [name, randomEpoch()],
      )
      sequences.set(name, 0)
    }
  }
  for (const notebook of sequences.keys()) {
    await client.query(
      'UPDATE notes_notebooks SET epoch = $2, notes = 0, bytes = 0 WHERE notebook = $1',
      [notebook, randomEpoch()],
    )
  }
  return sequences
}

/** The file's directory, in its order (memberships keep the order in which they began). */
async function insertDirectory(
  client: pg.PoolClient,
  records: ImportSource['directory'],
): Promise<void> {
  for (const record of records) {
    if (record.t === 'notebook') {
      await client.query(
        'INSERT INTO notes_directory (id, name, store, default_user) VALUES ($1, $2, $3, $4)',
        [record.id, record.name, record.store, record.default ?? null],
      )
    } else if (record.t === 'role') {
      await client.query('INSERT INTO notes_members (notebook, sub, role) VALUES ($1, $2, $3)', [
        record.id,
        record.user,
        record.role,
      ])
    } else if (record.t === 'invite') {
      await client.query(
        'INSERT INTO notes_invites (notebook, id, hash, role, expires, uses) VALUES ($1, $2, $3, $4, $5, $6)',
        [record.id, record.invite, record.hash, record.role, record.expires, record.uses],
      )
    }
  }
}

/**
 * Writes notes of one notebook (live ones and those of its trash), each state at its sequence
 * after the notebook's start (`sequences`, its sequence before the import), and their past
 * revisions.
 */
async function insertNotes(
  client: pg.PoolClient,
  notes: readonly ImportedNote[],
  sequences: ReadonlyMap<string, number>,
  now: number,
): Promise<void> {
  const first = notes[0]
  if (first === undefined) return
  const { notebook } = first
  const start = sequences.get(notebook) as number
  const live = notes.filter((note) => note.trashed === undefined)
  const trash = notes.filter((note) => note.trashed !== undefined)
  const columns = (of: readonly ImportedNote[]) => [
    of.map((note) => start + note.position),
    of.map((note) => (isIndexable(note.id) ? note.id : null)),
    of.map((note) => note.json),
    of.map((note) => start + note.written),
    of.map((note) => note.modified ?? now),
    of.map((note) => searchText(JSON.parse(note.json) as Record<string, unknown>)),
    of.map((note) => note.past.length),
  ]
  if (live.length > 0) {
    await client.query(
      `INSERT INTO notes (notebook, position, id, json, written, modified, search, revisions)
      SELECT $1, t.p, t.i, t.j, t.w, t.m, t.s, t.r
      FROM unnest($2::bigint[], $3::double precision[], $4::text[], $5::bigint[], $6::bigint[],
        $7::text[], $8::integer[]) AS t(p, i, j, w, m, s, r)`,
      [notebook, ...columns(live)],
    )
  }
  if (trash.length > 0) {
    await client.query(
      `INSERT INTO notes_trash
        (notebook, position, id, json, written, modified, search, revisions, sequence, deleted)
      SELECT $1, t.p, t.i, t.j, t.w, t.m, t.s, t.r, t.q, t.d
      FROM unnest($2::bigint[], $3::double precision[], $4::text[], $5::bigint[], $6::bigint[],
        $7::text[], $8::integer[], $9::bigint[], $10::bigint[]) AS t(p, i, j, w, m, s, r, q, d)`,
      [
        notebook,
        ...columns(trash),
        trash.map((note) => start + (note.trashed?.sequence as number)),
        trash.map((note) => note.trashed?.deleted as number),
      ],
    )
  }
  const revisions = notes.flatMap((note) =>
    note.past.map((past) => ({ position: start + note.position, ...past })),
  )
  // At most a thousand revisions a statement: a note's past states may be many, and large.
  for (let i = 0; i < revisions.length; i += 1000) {
    const part = revisions.slice(i, i + 1000)
    await client.query(
      `INSERT INTO notes_revisions (notebook, position, sequence, at, change, json)
      SELECT $1, t.p, t.q, t.a, t.c, t.j
      FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[])
        AS t(p, q, a, c, j)`,
      [
        notebook,
        part.map((past) => past.position),
        part.map((past) => start + past.sequence),
        part.map((past) => past.at),
        part.map((past) => past.change),
        part.map((past) => past.json),
      ],
    )
  }
}
