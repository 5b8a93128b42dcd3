import { after, afterEach, before, describe } from 'node:test'
import type { MemoryNotebooksOptions } from '../../src/store/memory/memory-notebooks.js'
import type { MemoryStoreOptions } from '../../src/store/memory/options.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import { PostgresNoteStore } from '../../src/store/postgres/store.js'
import {
  LANES,
  type Lane,
  memoryNotebooks,
  memoryStore,
  type StoreKind,
  type SuiteContext,
  suiteContext,
} from './helpers.js'
import { postgresAvailable, testDatabase } from './postgres-cluster.js'
import { pooledStore } from './schema-pool.js'

// Apart from helpers.ts, which stays on the memory store: a test file that imports helpers.ts and
// not this module starts no PostgreSQL cluster, and can be in the unit tier.

/**
 * The PostgreSQL side of one suite: every store made in it starts on an empty schema of its own in
 * this process's test database (testDatabase), from the schema pool (schema-pool.ts), and is
 * closed after each case, which gives its schema back to the pool. Not durable: these suites prove
 * behaviour, not what survives a crash (postgres-faults does).
 */
function postgresSuite(
  lane: Lane,
  inNotebook = false,
): {
  context: SuiteContext
  open: () => Promise<void>
  closeStores: () => Promise<void>
} {
  let url = ''
  const opened: { close: () => Promise<void> }[] = []
  const where = () => {
    if (url === '') throw new Error('a PostgreSQL test app outside a case of its suite')
    return { url, poolSize: 2 }
  }
  // Each store starts on an empty schema of its own (the suites of a file share one database and
  // know nothing of each other): a migrated one from the pool, reset when the store is closed.
  const makeStore = (options: MemoryStoreOptions) => {
    const store = pooledStore(
      where().url,
      options.epoch,
      (schema) => new PostgresNoteStore({ ...options, ...where(), schema }),
    )
    opened.push(store)
    return store
  }
  const makeNotebooks = (options: MemoryNotebooksOptions) => {
    const notebooks = pooledStore(
      where().url,
      undefined,
      (schema) => new PostgresNotebooks({ ...options, ...where(), schema }),
    )
    opened.push(notebooks)
    return notebooks
  }
  const context = suiteContext('postgres', lane, makeStore, inNotebook ? makeNotebooks : undefined)
  return {
    context,
    open: async () => {
      url = await testDatabase()
    },
    // Each store holds connections (and a LISTEN one while subscribed).
    closeStores: async () => {
      await Promise.all(opened.splice(0).map((store) => store.close()))
    },
  }
}

/**
 * Defines `suite` once per store and lane: "name (through fastify, on memory)", ... "name
 * (through server, on postgres)"; with `lanes: false` (a suite on real sockets, where the lane is
 * the server's) once per store: "name (on memory)", "name (on postgres)". Each gets the context of
 * its store and lane, and makes its apps and stores through it. Without PostgreSQL's binaries the
 * PostgreSQL half is skipped, loudly (postgresAvailable); under CI=true that is a failure.
 * Unless `notebook: false`, once more in a user's notebook on memory; with `notebookOnPostgres`,
 * in one on PostgreSQL too. The HTTP side of a notebook is the same on both stores (the
 * notebooks' own contract runs on each in the notebooks-* tests of test/store/), so only the suites
 * whose store side differs per notebook on PostgreSQL (the change feed, idempotency keys, the basic
 * operations) take that last one.
 */
export function describeEachStore(
  name: string,
  suite: (context: SuiteContext) => void,
  {
    lanes = true,
    notebook = true,
    notebookOnPostgres = false,
  }: { lanes?: boolean; notebook?: boolean; notebookOnPostgres?: boolean } = {},
): void {
  const variants = (store: StoreKind): [string, Lane][] =>
    lanes
      ? LANES.map((lane) => [`${name} (through ${lane}, on ${store})`, lane])
      : [[`${name} (on ${store})`, 'fastify']]
  for (const [title, lane] of variants('memory')) {
    describe(title, () => suite(suiteContext('memory', lane, memoryStore)))
  }
  // The same suite inside one user's notebook, through the listener (both lanes: a token's first
  // request is checked in Fastify, the next ones may take the fast lane).
  if (notebook) {
    describe(`${name} (in a user's notebook, on memory)`, () =>
      suite(suiteContext('memory', 'server', memoryStore, memoryNotebooks)))
  }
  if (!postgresAvailable(`the HTTP suites on PostgreSQL (${name})`)) {
    describe(`${name} (on postgres)`, { skip: 'PostgreSQL is not installed' }, () => {})
    return
  }
  // The database (and, in a file run alone, the cluster: a few seconds) is made while the memory
  // half's cases run; a failure is reported by the first suite that waits for it.
  testDatabase().catch(() => {})
  const postgresVariants: [string, Lane, boolean][] = variants('postgres').map(([title, lane]) => [
    title,
    lane,
    false,
  ])
  if (notebook && notebookOnPostgres)
    postgresVariants.push([`${name} (in a user's notebook, on postgres)`, 'server', true])
  for (const [title, lane, inNotebook] of postgresVariants) {
    const { context, open, closeStores } = postgresSuite(lane, inNotebook)
    describe(title, () => {
      before(open)
      // After the case's own after hooks (an app closed there is closed before its store).
      afterEach(closeStores)
      after(closeStores)
      suite(context)
    })
  }
}
