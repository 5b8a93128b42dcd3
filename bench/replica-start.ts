import { loadavg } from 'node:os'
import type { Page } from 'playwright-core'
import { launchChromium } from '../test/chromium.js'
import { startServer } from '../test/hostile/server-process.js'

/**
 * The offline replica's start and catch-up in Chromium (bench/README.md, "Replica start and
 * catch-up"): the real service (memory store) holds 10,000 notes of ~200 bytes; a page of its
 * origin imports the client from /ui/client/ and times, over IndexedDB, the first sync (a full
 * load), a start (`Replica.open` + `notes()`, also after a page reload) and a catch-up of 1,000
 * changes made from Node while the replica was closed (`Replica.open` + `sync()`, checked equal to
 * the service's list). `npm run compile && node dist/bench/replica-start.js [rounds]`.
 */
const rounds = Number(process.argv[2] ?? 5)
const NOTES = 10_000
const CHANGES = 1_000
const DB = 'bench-replica-start'

type Json = Record<string, unknown>

/** A note of about 200 bytes as JSON (with the id the service gives it). */
function noteOf(i: number, edit = 0): Json {
  return {
    title: `Note number ${i}${edit > 0 ? `, edit ${edit}` : ''}`,
    body: `Some text of note ${i}, long enough to bring it to about two hundred bytes in all, or so.`,
    tags: ['work', i % 2 === 0 ? 'even' : 'odd'],
    done: false,
  }
}

function stats(values: number[]): { median: number; min: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b)
  const r = (v: number) => Math.round(v * 10) / 10
  return {
    median: r(sorted[Math.floor(sorted.length / 2)] as number),
    min: r(sorted[0] as number),
    max: r(sorted[sorted.length - 1] as number),
  }
}

async function batch(origin: string, requests: Json[]): Promise<void> {
  const answer = await fetch(`${origin}/api/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ requests }),
  })
  if (answer.status !== 200) throw new Error(`batch: ${answer.status} ${await answer.text()}`)
  await answer.arrayBuffer()
}

async function list(origin: string): Promise<Json[]> {
  const answer = await fetch(`${origin}/api/note`)
  return ((await answer.json()) as { data: Json[] }).data
}

/**
 * 1,000 changes from Node, each its own request (as other clients would make them while the
 * replica was away), 8 at a time: 40% updates, 30% creates, 30% deletes, on distinct notes.
 */
async function change(origin: string, round: number): Promise<void> {
  const ids = (await list(origin)).map((note) => note.id as number)
  // Spread over the notebook: every k-th note, so that updates and deletes hit old and new notes.
  const step = Math.floor(ids.length / (CHANGES * 0.7))
  const targets = ids.filter((_, i) => i % step === round % step).slice(0, CHANGES * 0.7)
  const jobs: (() => Promise<Response>)[] = []
  targets.forEach((id, i) => {
    if (i % 7 < 4) {
      jobs.push(() =>
        fetch(`${origin}/api/note/${id}`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ title: `Note ${id}, edited in round ${round}`, done: true }),
        }),
      )
    } else {
      jobs.push(() => fetch(`${origin}/api/note/${id}`, { method: 'DELETE' }))
    }
  })
  for (let i = 0; i < CHANGES * 0.3; i++) {
    jobs.push(() =>
      fetch(`${origin}/api/note`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(noteOf(100_000 * (round + 1) + i)),
      }),
    )
  }
  // Interleave the kinds: creates among the updates and deletes.
  const order = jobs.map((job, i) => ({ job, at: (i * 7919) % jobs.length }))
  order.sort((a, b) => a.at - b.at)
  if (order.length !== CHANGES) throw new Error(`${order.length} changes`)
  let next = 0
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < order.length) {
        const { job } = order[next++] as { job: () => Promise<Response> }
        const answer = await job()
        if (answer.status >= 300) throw new Error(`change: ${answer.status}`)
        await answer.arrayBuffer()
      }
    }),
  )
}

/** The little of the DOM used here (the bench compiles without the DOM's types). */
interface Browserish {
  location: { origin: string }
  indexedDB: {
    deleteDatabase(name: string): { onsuccess: (() => void) | null; onerror: (() => void) | null }
  }
}

/** What the page keeps between evaluations. */
declare global {
  // biome-ignore lint/suspicious/noExplicitAny: the client module, imported in the page
  var bench: { mod: any; importMs: number } | undefined
}

/** Imports the client in the page (once per page load); the time the import took. */
async function load(page: Page): Promise<number> {
  return page.evaluate(async () => {
    const start = performance.now()
    const path = '/ui/client/index.js'
    const mod = await import(path)
    globalThis.bench = { mod, importMs: performance.now() - start }
    return globalThis.bench.importMs
  })
}

/** The first sync into an empty database: a full load of the list. */
async function firstSync(page: Page) {
  return page.evaluate(async (db) => {
    const { NotesClient, Replica, IndexedDbReplicaStorage } = globalThis.bench?.mod
    await new Promise<void>((resolve, reject) => {
      const r = (globalThis as unknown as Browserish).indexedDB.deleteDatabase(db)
      r.onsuccess = () => resolve()
      r.onerror = () => reject(new Error('deleteDatabase failed'))
    })
    const start = performance.now()
    const client = new NotesClient({
      baseUrl: (globalThis as unknown as Browserish).location.origin,
    })
    const storage = await IndexedDbReplicaStorage.open(db)
    const replica = await Replica.open({ client, storage })
    await replica.sync()
    const count = replica.notes().length
    const ms = performance.now() - start
    await replica.close()
    return { ms, count }
  }, DB)
}

/** One start: open the storage and the replica over it, and build the view; with splits. */
async function start(page: Page) {
  return page.evaluate(async (db) => {
    const { NotesClient, Replica, IndexedDbReplicaStorage } = globalThis.bench?.mod
    const client = new NotesClient({
      baseUrl: (globalThis as unknown as Browserish).location.origin,
    })
    const t0 = performance.now()
    const storage = await IndexedDbReplicaStorage.open(db)
    const t1 = performance.now()
    const replica = await Replica.open({ client, storage })
    const t2 = performance.now()
    const count = replica.notes().length
    const t3 = performance.now()
    await replica.close()
    return {
      ms: t3 - t0,
      storageOpen: t1 - t0,
      replicaOpen: t2 - t1,
      view: t3 - t2,
      count,
    }
  }, DB)
}

/** One catch-up: open + sync() + notes(), then the view compared with the service's list. */
async function catchUp(page: Page, expected: Json[]) {
  return page.evaluate(
    async ([db, expected]) => {
      const { NotesClient, Replica, IndexedDbReplicaStorage } = globalThis.bench?.mod
      const client = new NotesClient({
        baseUrl: (globalThis as unknown as Browserish).location.origin,
      })
      const t0 = performance.now()
      const storage = await IndexedDbReplicaStorage.open(db)
      const replica = await Replica.open({ client, storage })
      const t1 = performance.now()
      const events: Record<string, number> = {}
      replica.subscribe((event: { type: string }) => {
        events[event.type] = (events[event.type] ?? 0) + 1
      })
      await replica.sync()
      const t2 = performance.now()
      const notes = replica.notes() as { note: Record<string, unknown>; pending: boolean }[]
      const t3 = performance.now()
      await replica.close()
      const canonical = (value: unknown): unknown => {
        if (Array.isArray(value)) return value.map(canonical)
        if (value !== null && typeof value === 'object') {
          return Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
          )
        }
        return value
      }
      const byId = (a: Record<string, unknown>, b: Record<string, unknown>) =>
        (a.id as number) - (b.id as number)
      const mine = JSON.stringify(notes.map((e) => canonical(e.note)))
      const theirs = JSON.stringify(
        ([...expected] as Record<string, unknown>[]).sort(byId).map(canonical),
      )
      return {
        ms: t3 - t0,
        open: t1 - t0,
        sync: t2 - t1,
        view: t3 - t2,
        count: notes.length,
        pending: notes.filter((e) => e.pending).length,
        equal: mine === theirs,
        events,
      }
    },
    [DB, expected] as const,
  )
}

const loadBefore = loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')
const server = await startServer({})
const origin = `http://127.0.0.1:${server.port}`
const browser = await launchChromium()
try {
  for (let b = 0; b < NOTES / 1000; b++) {
    const requests = Array.from({ length: 1000 }, (_, i) => ({
      method: 'POST',
      url: '/api/note',
      body: noteOf(b * 1000 + i),
    }))
    await batch(origin, requests)
  }
  const bytes = JSON.stringify(await list(origin)).length
  const page = await browser.newPage()
  // A page of the service's origin that runs nothing of its own (the notes page at / would
  // open and sync its own replica meanwhile): the list's first note, as JSON.
  await page.goto(`${origin}/api/note?limit=1`)
  const importMs = [await load(page)]
  const first = await firstSync(page)
  if (first.count !== NOTES) throw new Error(`first sync: ${first.count} notes`)

  const starts: Awaited<ReturnType<typeof start>>[] = []
  for (let r = 0; r < rounds; r++) starts.push(await start(page))
  const reloaded: Awaited<ReturnType<typeof start>>[] = []
  for (let r = 0; r < rounds; r++) {
    await page.reload()
    importMs.push(await load(page))
    reloaded.push(await start(page))
  }
  for (const s of [...starts, ...reloaded]) {
    if (s.count !== NOTES) throw new Error(`start: ${s.count} notes`)
  }

  const catchUps: Awaited<ReturnType<typeof catchUp>>[] = []
  const changeMs: number[] = []
  for (let r = 0; r < rounds; r++) {
    const before = performance.now()
    await change(origin, r)
    changeMs.push(performance.now() - before)
    const expected = await list(origin)
    const result = await catchUp(page, expected)
    if (!result.equal) throw new Error(`catch-up ${r}: the view differs from the service's list`)
    catchUps.push(result)
  }
  const field = <T extends Json>(list: T[], key: keyof T) =>
    stats(list.map((x) => x[key] as number))
  console.log(
    JSON.stringify(
      {
        notes: NOTES,
        listBytes: bytes,
        rounds,
        loadavgBefore: loadBefore,
        loadavgAfter: loadavg()
          .map((l) => l.toFixed(2))
          .join(' '),
        browser: browser.version(),
        importMs: stats(importMs),
        firstSyncMs: Math.round(first.ms),
        start: {
          total: field(starts, 'ms'),
          storageOpen: field(starts, 'storageOpen'),
          replicaOpen: field(starts, 'replicaOpen'),
          view: field(starts, 'view'),
        },
        startAfterReload: {
          total: field(reloaded, 'ms'),
          storageOpen: field(reloaded, 'storageOpen'),
          replicaOpen: field(reloaded, 'replicaOpen'),
          view: field(reloaded, 'view'),
        },
        catchUp: {
          changes: CHANGES,
          makingThemMs: stats(changeMs),
          total: field(catchUps, 'ms'),
          open: field(catchUps, 'open'),
          sync: field(catchUps, 'sync'),
          view: field(catchUps, 'view'),
          counts: catchUps.map((c) => c.count),
          events: catchUps.map((c) => c.events),
          allEqual: catchUps.every((c) => c.equal),
        },
      },
      null,
      2,
    ),
  )
} finally {
  await browser.close()
  await server.stop()
}
