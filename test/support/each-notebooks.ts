import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, afterEach, before, describe } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { JournaledNotebooks } from '../../src/store/journal/journaled-notebooks.js'
import {
  MemoryNotebooks,
  type MemoryNotebooksOptions,
} from '../../src/store/memory/memory-notebooks.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import type { Notebooks } from '../../src/store/types.js'
import { inLane, LANES, type Lane } from './helpers.js'
import { postgresAvailable, testDatabase } from './postgres-cluster.js'
import { pooledStore } from './schema-pool.js'

type NotebooksKind = 'memory' | 'journal' | 'postgres'

/** What a suite of notebooks over HTTP gets: how its stores are made and its apps reached. */
export interface NotebooksSuite {
  readonly kind: NotebooksKind
  readonly lane: Lane
  /** Fresh, empty notebooks of the suite's kind (closed after the case). */
  make(options: MemoryNotebooksOptions): Notebooks
  /**
   * Another instance on the same backend as `notebooks` (PostgreSQL: the same schema), for the
   * suites about instances; undefined for memory and the journal, which one process holds.
   */
  another?: (notebooks: Notebooks, options: MemoryNotebooksOptions) => Notebooks
  /** The app in the suite's lane, closed after the case. */
  inLane(app: FastifyInstance): FastifyInstance
}

/**
 * Defines `suite` once per kind of store that holds notebooks (memory, DATA_FILE, PostgreSQL) and
 * per lane: "name (through server, on journal)". Without PostgreSQL's binaries its part is skipped
 * loudly (a failure under CI=true, as every PostgreSQL suite).
 */
export function describeEachNotebooks(
  name: string,
  suite: (context: NotebooksSuite) => void,
): void {
  // Every app a case made is closed after it, before its stores.
  const apps: FastifyInstance[] = []
  const track = (lane: Lane) => (app: FastifyInstance) => {
    apps.push(app)
    return inLane(app, lane)
  }
  const closeApps = async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()))
  }
  for (const lane of LANES) {
    describe(`${name} (through ${lane}, on memory)`, () => {
      afterEach(closeApps)
      suite({
        kind: 'memory',
        lane,
        make: (options) => new MemoryNotebooks(options),
        inLane: track(lane),
      })
    })
  }
  for (const lane of LANES) {
    describe(`${name} (through ${lane}, on journal)`, () => {
      const root = mkdtempSync(join(tmpdir(), 'notes-notebooks-'))
      const opened: JournaledNotebooks[] = []
      let files = 0
      afterEach(async () => {
        await closeApps()
        await Promise.all(opened.splice(0).map((journal) => journal.close()))
      })
      after(() => rmSync(root, { recursive: true, force: true }))
      suite({
        kind: 'journal',
        lane,
        make: (options) => {
          const journal = new JournaledNotebooks({
            ...options,
            path: join(root, `${++files}.journal`),
          })
          opened.push(journal)
          return journal
        },
        inLane: track(lane),
      })
    })
  }
  if (!postgresAvailable(`the notebooks over HTTP on PostgreSQL (${name})`)) {
    describe(`${name} (on postgres)`, { skip: 'PostgreSQL is not installed' }, () => {})
    return
  }
  testDatabase().catch(() => {})
  for (const lane of LANES) {
    describe(`${name} (through ${lane}, on postgres)`, () => {
      let url = ''
      const opened: { close(): Promise<void> }[] = []
      const schemas = new WeakMap<Notebooks, string>()
      before(async () => {
        url = await testDatabase()
      })
      afterEach(async () => {
        await closeApps()
        // Instances first, then the first one of each schema, which gives the schema back.
        for (const notebooks of opened.splice(0).reverse()) await notebooks.close()
      })
      suite({
        kind: 'postgres',
        lane,
        make: (options) => {
          const notebooks = pooledStore(url, undefined, (schema) => {
            const made = new PostgresNotebooks({ ...options, url, poolSize: 2, schema })
            schemas.set(made, schema)
            return made
          })
          opened.push(notebooks)
          return notebooks
        },
        another: (first, options) => {
          const schema = schemas.get(first)
          if (schema === undefined) throw new Error('another instance of notebooks not made here')
          const notebooks = new PostgresNotebooks({ ...options, url, poolSize: 2, schema })
          opened.push(notebooks)
          return notebooks
        },
        inLane: track(lane),
      })
    })
  }
}
