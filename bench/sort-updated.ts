/**
 * `npm run bench:sort-updated`: a page of the list in the order of last change
 * (`sort=updated&order=desc&limit=100`) against the same page in list order, asked of the store
 * itself (no answer cache in front of it), on 1,000 and 100,000 notes, on memory and, when
 * PostgreSQL's binaries are found, on PostgreSQL (a throwaway cluster, not durable). 1% of the
 * notes are updated after the fill, so the two orders differ. BENCH_MEMORY_ONLY=1 skips PostgreSQL. Prints pages per second of each and their ratio; the target is a ratio of
 * at least 0.9, flat in the number of notes.
 */
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

/** Pages per second of `query`, over `seconds`, alternating with the other so both see the same machine. */
async function race(store: NoteStore, seconds: number): Promise<[number, number]> {
  const counts = [0, 0]
  const spent = [0, 0]
  const until = Date.now() + seconds * 1000
  while (Date.now() < until) {
    for (const [i, query] of [CREATED, UPDATED].entries()) {
      const start = process.hrtime.bigint()
      for (let n = 0; n < 50; n++) await store.page(query)
      spent[i] = (spent[i] as number) + Number(process.hrtime.bigint() - start) / 1e9
      counts[i] = (counts[i] as number) + 50
    }
  }
  return [
    (counts[0] as number) / (spent[0] as number),
    (counts[1] as number) / (spent[1] as number),
  ]
}

function report(label: string, [created, updated]: [number, number]): void {
  console.log(
    `${label}: created ${created.toFixed(0)}/s, updated ${updated.toFixed(0)}/s, ratio ${(updated / created).toFixed(2)}`,
  )
}

for (const notes of [1_000, 100_000]) {
  const store = new MemoryNoteStore(CAPS)
  await fill(store, notes)
  report(`memory, ${notes} notes`, await race(store, 3))
}
if (process.env.BENCH_MEMORY_ONLY === undefined && postgresAvailable('bench:sort-updated')) {
  const url = await testDatabase()
  for (const [i, notes] of [1_000, 100_000].entries()) {
    const store = new PostgresNoteStore({ url, schema: `bench_sort_${i}`, poolSize: 4, ...CAPS })
    await fill(store, notes)
    report(`postgres, ${notes} notes`, await race(store, 5))
    await store.close()
  }
}
