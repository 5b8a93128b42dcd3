import type pg from 'pg'
import { isIndexable } from '../kernel/id-placement.js'
import {
  checkImportCaps,
  type ImportCaps,
  type ImportedNote,
  ImportRefusedError,
  type ImportSource,
} from '../kernel/import-source.js'
import { randomEpoch } from '../kernel/version-token.js'
import type { Database } from './database.js'
import { searchText } from './search-text.js'

export interface PostgresImportOptions extends ImportCaps {
  /** Replace every notebook's notes; without it, a database that holds notes is refused. */
  replace: boolean
  /** The time the imported notes were last written (Last-Modified), in ms. */
  now: number
  /** Told of every chunk of notes written. */
  onProgress?: (notes: number) => void
}

/**
 * Imports `source` (an export) into the database in one transaction: all of it or nothing.
 * It locks the notebooks' table (so no write of a running instance interleaves; they wait) and
 * the service's clock row, refuses a database that holds notes unless `replace` (which then
 * empties every notebook, its change history, idempotency keys, revisions and trash), and writes each notebook's
 * notes in file order at the positions after its last sequence, each note written at its own
 * position. Every notebook gets a new epoch, so no version token or ETag given before matches the
 * new contents; the sequences only grow, so an instance still running with the old epoch gives
 * none that was given before either (it should be restarted to take the new one). The service's
 * last id becomes at least the highest imported id, so later creates give ids above them.
 * @throws ImportRefusedError (nothing changed): notes already there without `replace`, or caps
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
    await client.query('LOCK TABLE notes_notebooks IN EXCLUSIVE MODE')
    const clock = (
      await client.query<{ notes: string }>('SELECT notes FROM notes_clock FOR UPDATE')
    ).rows[0] as { notes: string }
    const held = Number(clock.notes)
    if (held > 0 && !options.replace) {
      throw new ImportRefusedError(
        `The database holds ${held} notes; import into an empty store, or add --replace to replace them.`,
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
    if (options.replace) {
      // Members and invitations go with their notebooks (ON DELETE CASCADE).
      await client.query('DELETE FROM notes_directory')
      await client.query('DELETE FROM notes')
      await client.query('DELETE FROM notes_changes')
      await client.query('DELETE FROM notes_idempotency')
      // An export holds no history or trash: the notes they were of are replaced.
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
        'UPDATE notes_notebooks SET sequence = $2, notes = $3, bytes = $4 WHERE notebook = $1',
        [notebook.name, sequences.get(notebook.name), notebook.notes, notebook.bytes],
      )
      await client.query("SELECT pg_notify('notes_changes', $1)", [notebook.name])
    }
    const lastId = Number.isFinite(source.lastId) ? source.lastId : 0
    await client.query(
      'UPDATE notes_clock SET notes = $1, bytes = $2, last_id = greatest(last_id, $3)',
      [source.notes, source.bytes, lastId],
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

/** Writes notes of one notebook at the positions after its sequence, which it advances. */
async function insertNotes(
  client: pg.PoolClient,
  notes: readonly ImportedNote[],
  sequences: Map<string, number>,
  now: number,
): Promise<void> {
  const first = notes[0]
  if (first === undefined) return
  const start = sequences.get(first.notebook) as number
  const positions = notes.map((_, i) => start + i + 1)
  await client.query(
    `INSERT INTO notes (notebook, position, id, json, written, modified, search)
    SELECT $1, t.p, t.i, t.j, t.p, $2, t.s
    FROM unnest($3::bigint[], $4::double precision[], $5::text[], $6::text[]) AS t(p, i, j, s)`,
    [
      first.notebook,
      now,
      positions,
      notes.map((note) => (isIndexable(note.id) ? note.id : null)),
      notes.map((note) => note.json),
      notes.map((note) => searchText(JSON.parse(note.json) as Record<string, unknown>)),
    ],
  )
  sequences.set(first.notebook, start + notes.length)
}
