import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import pg from 'pg'
import { changePageSql } from '../../../src/store/postgres/change-pages.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'

interface PlanNode {
  'Node Type': string
  'Index Name'?: string
  'Scan Direction'?: string
  'Index Cond'?: string
  Plans?: PlanNode[]
}

/** Every node of a plan, depth first. */
function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)]
}

if (postgresAvailable('PostgreSQL order of last change')) {
  const url = await testDatabase()
  const client = new pg.Client({ connectionString: url, options: '-c search_path=by_change' })
  after(() => client.end())

  describe('PostgreSQL: the order of last change (sort=updated)', () => {
    it('pages a notebook of 50,000 notes by a range scan of notes_by_change, both ways, never sorting it', async () => {
      const store = new PostgresNoteStore({
        url,
        schema: 'by_change',
        poolSize: 1,
        maxNotes: 1_000_000,
        maxBytes: 1 << 28,
      })
      await store.create({ a: 1 })
      await store.close()
      await client.connect()
      // 50,000 notes in the shared notebook and as many in another, 3 to a ms, some without a
      // numeric id.
      for (const notebook of ['shared', 'other']) {
        await client.query(
          `INSERT INTO notes (notebook, position, id, json, written, modified, search)
          SELECT $1, g + 10, CASE WHEN g % 7 = 0 THEN NULL ELSE g END, '{}', 1, g / 3, ''
          FROM generate_series(1, 50000) g`,
          [notebook],
        )
      }
      await client.query('ANALYZE notes')
      const plans: string[] = []
      for (const asc of [true, false]) {
        for (const past of [false, true]) {
          const values = past ? ['shared', 101, 9000, 27001, 27011] : ['shared', 101]
          const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
            `EXPLAIN (FORMAT JSON) ${changePageSql(asc, past)}`,
            values,
          )
          const nodes = nodesOf(
            (rows[0] as { 'QUERY PLAN': [{ Plan: PlanNode }] })['QUERY PLAN'][0].Plan,
          )
          const limit = nodes.find((node) => node['Node Type'] === 'Limit') as PlanNode
          const scan = (limit.Plans ?? [])[0] as PlanNode
          plans.push(
            `${asc ? 'asc' : 'desc'}${past ? ' after' : ''}: ${scan['Node Type']} ${scan['Index Name']} ${scan['Scan Direction']}, range ${/ROW\(modified/.test(scan['Index Cond'] ?? '')}, sorts ${nodes.some((node) => node['Node Type'] === 'Sort')}`,
          )
        }
      }
      assert.deepEqual(plans, [
        'asc: Index Scan notes_by_change Forward, range false, sorts false',
        'asc after: Index Scan notes_by_change Forward, range true, sorts false',
        'desc: Index Scan notes_by_change Backward, range false, sorts false',
        'desc after: Index Scan notes_by_change Backward, range true, sorts false',
      ])
    })
  })
}
