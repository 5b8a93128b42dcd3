import type { Revision } from '../archive.js'
import type {
  ArchiveRules,
  ExportedState,
  ExportedTrashed,
  NotebookArchive,
} from '../kernel/import-archive.js'
import type { ExportSnapshot, SnapshotNotebook } from './export-snapshot.js'

/**
 * What an export writes of one notebook's history and trash (NotebookArchive), read from an export's
 * snapshot, so that it is the history of the notes the snapshot gave: each live note's state (its
 * own row, 'created' when its version is its position) with the past revisions `rules` keep, in
 * list order, then the trash within its time, oldest delete first. Read by keyset steps of
 * NOTES_STEP notes, so that no more than their revisions are held at once.
 */

/** Notes (or deleted notes) read per step, with their revisions. */
const NOTES_STEP = 100

type Row = Record<string, unknown>

export async function notebookArchive(
  snapshot: ExportSnapshot,
  notebook: SnapshotNotebook,
  rules: ArchiveRules,
): Promise<NotebookArchive> {
  const name = notebook.notebook
  const trashAfter = rules.now - rules.limits.trashMs
  const [count] = await snapshot.select(
    `SELECT count(*) AS trash FROM notes_trash
    WHERE notebook = $1 AND deleted > $2 AND $3::boolean`,
    [name, trashAfter, rules.limits.trashMs > 0],
  )
  /** The past revisions kept of the notes at these positions, oldest first, by position. */
  const pastOf = async (positions: readonly string[]): Promise<Map<string, Revision[]>> => {
    const rows = await snapshot.select(
      `SELECT position, sequence, at, change, json FROM (
        SELECT position, sequence, at, change, json,
          row_number() OVER (PARTITION BY position ORDER BY sequence DESC) AS newest
        FROM notes_revisions WHERE notebook = $1 AND position = ANY ($2::bigint[])) r
      WHERE newest <= $3 AND at > $4
      ORDER BY position, sequence`,
      [name, positions, rules.pastKept, rules.now - rules.limits.historyMs],
    )
    const past = new Map<string, Revision[]>()
    for (const row of rows) {
      const position = String(row.position)
      const revision: Revision = {
        version: String(row.sequence),
        at: Number(row.at),
        change: row.change as Revision['change'],
        json: row.json as string,
      }
      const list = past.get(position)
      if (list === undefined) past.set(position, [revision])
      else list.push(revision)
    }
    return past
  }
  const stateOf = (row: Row, past: Map<string, Revision[]>): ExportedState => ({
    at: Number(row.modified),
    change: String(row.written) === String(row.position) ? 'created' : 'updated',
    past: past.get(String(row.position)) ?? [],
  })
  /**
   * The rows of `sql` ($1 the notebook, $2 the cursor, $3 the step, then `more`), NOTES_STEP at a
   * time, each with the past revisions of its step.
   */
  async function* steps(
    sql: string,
    cursor: string,
    more: unknown[],
  ): AsyncGenerator<[Row, Map<string, Revision[]>]> {
    let after = '0'
    for (;;) {
      const rows = await snapshot.select(sql, [name, after, NOTES_STEP, ...more])
      const past = await pastOf(rows.map((row) => String(row.position)))
      for (const row of rows) yield [row, past]
      if (rows.length < NOTES_STEP) return
      after = String((rows.at(-1) as Row)[cursor])
    }
  }
  return {
    name,
    notes: notebook.notes,
    trash: Number(count?.trash ?? 0),
    async *states() {
      const sql = `SELECT position, written, modified FROM notes
        WHERE notebook = $1 AND position > $2 ORDER BY position LIMIT $3`
      for await (const [row, past] of steps(sql, 'position', [])) yield stateOf(row, past)
    },
    async *trashed(): AsyncGenerator<ExportedTrashed> {
      if (rules.limits.trashMs <= 0) return
      const sql = `SELECT sequence, position, json, written, modified, deleted FROM notes_trash
        WHERE notebook = $1 AND sequence > $2 AND deleted > $4
        ORDER BY sequence LIMIT $3`
      for await (const [row, past] of steps(sql, 'sequence', [trashAfter])) {
        yield { ...stateOf(row, past), deleted: Number(row.deleted), json: row.json as string }
      }
    },
  }
}
