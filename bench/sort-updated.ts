/**
 * `npm run bench:sort-updated`: a page of the list in the order of last change
 * (`sort=updated&order=desc&limit=100`) against the same page in list order, asked of the store
 * itself (no answer cache in front of it), on 1,000 and 100,000 notes, on memory and, when
 * PostgreSQL's binaries are found, on PostgreSQL (a throwaway cluster, not durable). 1% of the
 * notes are updated after the fill, so the two orders differ. BENCH_MEMORY_ONLY=1 skips PostgreSQL.
 * Prints pages per second of each and their ratio; the target is a ratio of at least 0.9, flat in
 * the number of notes.
 *
 * The table is analyzed after the fill, as autovacuum would have done within a minute of it:
 * without statistics the planner takes a freshly filled notebook of 1,000 notes for a few rows and
 * sorts all of them for every page, in both orders (a top-N sort on three keys costs more than on
 * one, so the ratio measured the missing statistics, not the walk); BENCH_NO_ANALYZE=1 leaves the
 * table as the fill left it, to see that. A second of both legs warms
 * up first; then rounds of 50 pages of each, the leg that goes first alternating, and each figure
 * is the median over the rounds (the ratio is the median of the rounds' ratios), so that a moment
 * of a loaded machine lands on both legs or on neither.
 */
import pg from 'pg'
import { MemoryNoteStore } from '../src/store/memory/memory-store.js'
import { PostgresNoteStore } from '../src/store/postgres/store.js'
import type { NoteStore, PageQuery } from '../src/store/types.js'
import { postgresAvailable, testDatabase } from '../test/support/postgres-cluster.js'

const CREATED: PageQuery = { limit: 100, order: 'desc', after: undefined, q: undefined }
const UPDATED: PageQuery = { ...CREATED, sort: 'updated' }
const CAPS = { maxNotes: 10_000_000, maxBytes: 2 ** 40 }

async function fill(store: NoteStore, notes: number): Promise<void> {
  for (let made = 0; made < notes; made += 1000) {
    await store.batch((writer) => {
      const writes: unknown[] = []
      for (let i = made; i < Math.min(notes, made + 1000); i++) {
        writes.push(writer.create({ title: `note ${i}`, body: 'x'.repeat(40) }))
      }
      return writes.some((write) => write instanceof Promise)
        ? Promise.all(writes).then(() => 'ok')
        : 'ok'
    })
  }
  const ids = (JSON.parse((await store.list()).json) as { id: number }[]).map((note) => note.id)
  for (let i = 0; i < notes / 100; i++) {
    await store.update(ids[(i * 7919) % ids.length] as number, { touched: i })
  }
}

/** Pages per second of 50 pages of `query`. */
async function pagesPerSecond(store: NoteStore, query: PageQuery): Promise<number> {
  const start = process.hrtime.bigint()
  for (let n = 0; n < 50; n++) await store.page(query)
  return 50 / (Number(process.hrtime.bigint() - start) / 1e9)
}

/**
 * The median pages per second of each leg and of their ratio over rounds of `seconds`, after a
 * second of warm-up; in each round both legs run, the one that goes first alternating.
 */
async function race(store: NoteStore, seconds: number): Promise<Rates> {
  const rounds: [number, number][] = []
  for (const until = Date.now() + 1000; Date.now() < until; ) {
    await pagesPerSecond(store, CREATED)
    await pagesPerSecond(store, UPDATED)
  }
  for (const until = Date.now() + seconds * 1000; Date.now() < until; ) {
    if (rounds.length % 2 === 0) {
      const created = await pagesPerSecond(store, CREATED)
      rounds.push([created, await pagesPerSecond(store, UPDATED)])
    } else {
      const updated = await pagesPerSecond(store, UPDATED)
      rounds.push([await pagesPerSecond(store, CREATED), updated])
    }
  }
  return {
    created: median(rounds.map(([created]) => created)),
    updated: median(rounds.map(([, updated]) => updated)),
    ratio: median(rounds.map(([created, updated]) => updated / created)),
  }
}

interface Rates {
  created: number
  updated: number
  ratio: number
}

/** [3, 1, 2] -> 2; [4, 1, 3, 2] -> 2.5 */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
}

function report(label: string, { created, updated, ratio }: Rates): void {
  console.log(
    `${label}: created ${created.toFixed(0)}/s, updated ${updated.toFixed(0)}/s, ratio ${ratio.toFixed(2)}`,
  )
}

/** ANALYZE of the notes table of `schema`, as autovacuum does after a fill. */
async function analyze(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` })
  await client.connect()
  try {
    await client.query('ANALYZE notes')
  } finally {
    await client.end()
  }
}

for (const notes of [1_000, 100_000]) {
  const store = new MemoryNoteStore(CAPS)
  await fill(store, notes)
  report(`memory, ${notes} notes`, await race(store, 3))
}
if (process.env.BENCH_MEMORY_ONLY === undefined && postgresAvailable('bench:sort-updated')) {
  const url = await testDatabase()
  for (const [i, notes] of [1_000, 100_000].entries()) {
    const schema = `bench_sort_${i}`
    const store = new PostgresNoteStore({ url, schema, poolSize: 4, ...CAPS })
    await fill(store, notes)
    if (process.env.BENCH_NO_ANALYZE === undefined) await analyze(url, schema)
    report(`postgres, ${notes} notes`, await race(store, 5))
    await store.close()
  }
}
