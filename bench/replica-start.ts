import { mkdirSync, writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import type { Page } from 'playwright-core'
import { startServer } from '../test/hostile/server-process.js'
import { launchChromium } from '../test/support/chromium.js'

/**
 * The offline replica's start and catch-up in Chromium (bench/README.md, "Replica start and
 * catch-up"): the real service (memory store) holds 10,000 notes of ~200 bytes; a page of its
 * origin imports the client from /ui/client/ and times, over IndexedDB, the first sync (a full
 * load), a start (`Replica.open` + `notes()`, also after a page reload) and a catch-up of 1,000
 * changes made from Node while the replica was closed (`Replica.open` + `sync()`, checked equal to
 * the service's list). `npm run compile && node dist/bench/replica-start.js [rounds]`.
 */
const args = process.argv.slice(2)
const rounds = Number(args.find((a) => /^\d+$/.test(a)) ?? 5)
/** --profile: one more catch-up under Chromium's CPU profiler (CDP), summarized. */
const profile = args.includes('--profile')
const NOTES = 10_000
const CHANGES = 1_000
const DB = 'bench-replica-start'

type Json = Record<string, unknown>

/** A note of about 200 bytes as JSON (once the service has given it an id). */
function noteOf(i: number): Json {
  return {
    title: `Note number ${i}`,
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

/** Time spent in the storage's calls, by the wrapper `timed` installs in the page. */
interface Timings {
  load: number
  writes: number
  writeMs: number
  writeMax: number
  entries: number
}

/** The client module and its storage as the page has them (imported there, untyped here). */
// biome-ignore lint/suspicious/noExplicitAny: the module is loaded by URL in the page
type Loose = any

/** What the page keeps between evaluations. */
declare global {
  var bench: {
    mod: Loose
    importMs: number
    timed: (storage: Loose) => Loose
    coalesced: (storage: Loose) => Loose
    log: Timings
  }
}

/** Imports the client in the page (once per page load); the time the import took. */
async function load(page: Page): Promise<number> {
  return page.evaluate(async () => {
    const start = performance.now()
    const path = '/ui/client/index.js'
    const mod = await import(path)
    const log = { load: 0, writes: 0, writeMs: 0, writeMax: 0, entries: 0 }
    // The storage as the replica sees it, each call timed into `log` (reset per measurement).
    const timed = (storage: Loose) => ({
      async load() {
        const t = performance.now()
        const contents = await storage.load()
        log.load += performance.now() - t
        return contents
      },
      async write(changes: unknown[]) {
        const t = performance.now()
        await storage.write(changes)
        const ms = performance.now() - t
        log.writes++
        log.entries += changes.length
        log.writeMs += ms
        log.writeMax = Math.max(log.writeMax, ms)
      },
      close: () => storage.close(),
    })
    // What-if (not the replica as shipped): each write resolves at once and is queued; the queue
    // goes to the storage as one write whenever the previous one is done, so the writes made
    // while one is in flight become one transaction. `settled()` waits for the queue to be
    // stored; close() too.
    const coalesced = (storage: Loose) => {
      let queue: unknown[] = []
      let flushing: Promise<void> = Promise.resolve()
      const flush = () => {
        flushing = flushing.then(async () => {
          if (queue.length === 0) return
          const changes = queue
          queue = []
          const t = performance.now()
          await storage.write(changes)
          const ms = performance.now() - t
          log.writes++
          log.entries += changes.length
          log.writeMs += ms
          log.writeMax = Math.max(log.writeMax, ms)
        })
        return flushing
      }
      return {
        async load() {
          const t = performance.now()
          const contents = await storage.load()
          log.load += performance.now() - t
          return contents
        },
        write(changes: unknown[]) {
          queue.push(...changes)
          void flush()
          return Promise.resolve()
        },
        settled: () => flush(),
        async close() {
          await flush()
          await storage.close()
        },
      }
    }
    globalThis.bench = { mod, importMs: performance.now() - start, timed, coalesced, log }
    return globalThis.bench.importMs
  })
}

/** The first sync into an empty database: a full load of the list. */
async function firstSync(page: Page) {
  return page.evaluate(async (db) => {
    const { NotesClient, Replica, IndexedDbReplicaStorage } = globalThis.bench.mod
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
    const { NotesClient, Replica, IndexedDbReplicaStorage } = globalThis.bench.mod
    const client = new NotesClient({
      baseUrl: (globalThis as unknown as Browserish).location.origin,
    })
    const t0 = performance.now()
    const storage = await IndexedDbReplicaStorage.open(db)
    const t1 = performance.now()
    const log = globalThis.bench.log
    log.load = 0
    const replica = await Replica.open({ client, storage: globalThis.bench.timed(storage) })
    const t2 = performance.now()
    const count = replica.notes().length
    const t3 = performance.now()
    await replica.close()
    return {
      ms: t3 - t0,
      storageOpen: t1 - t0,
      replicaOpen: t2 - t1,
      storageLoad: log.load,
      view: t3 - t2,
      count,
    }
  }, DB)
}

/** The feed alone: the 1,000 changes since `since`, read and parsed, nothing stored. */
async function feedOnly(page: Page, since: string) {
  return page.evaluate(
    async ([since, count]) => {
      const { NotesClient } = globalThis.bench.mod
      const client = new NotesClient({
        baseUrl: (globalThis as unknown as Browserish).location.origin,
      })
      const stop = new AbortController()
      const t0 = performance.now()
      let seen = 0
      try {
        for await (const _ of client.events({ since, signal: stop.signal })) {
          if (++seen === count) stop.abort()
        }
      } catch (err) {
        if (!stop.signal.aborted) throw err
      }
      return { ms: performance.now() - t0, seen }
    },
    [since, CHANGES] as const,
  )
}

/**
 * The storage alone, on a scratch database of 10,000 notes: 1,000 one-note changes (a note and
 * the version, as the replica writes a feed event) written as 1,000 writes, as 10 writes of 100,
 * and as one write.
 */
async function writeShapes(page: Page) {
  return page.evaluate(async (count) => {
    const { IndexedDbReplicaStorage } = globalThis.bench.mod
    const name = 'bench-replica-start-writes'
    const storage = await IndexedDbReplicaStorage.open(name)
    const note = (i: number, round: number) => ({
      table: 'notes',
      key: String(1_700_000_000_000 + i),
      value: {
        note: { id: 1_700_000_000_000 + i, title: `Note ${i}, ${round}`, body: 'x'.repeat(120) },
        etag: null,
      },
    })
    const all = Array.from({ length: 10_000 }, (_, i) => note(i, 0))
    await storage.write([{ table: 'notes', clear: true }, ...all])
    const changes = (round: number) =>
      Array.from({ length: count }, (_, i) => [
        note(i * 10, round),
        { table: 'meta', key: 'version', value: `v${round}.${i}` },
      ])
    const result: Record<string, number> = {}
    for (const [shape, per] of [
      ['1000 writes of 1', 1],
      ['10 writes of 100', 100],
      ['1 write of 1000', count],
    ] as const) {
      const list = changes(per)
      const t0 = performance.now()
      for (let i = 0; i < count; i += per) await storage.write(list.slice(i, i + per).flat())
      result[shape] = performance.now() - t0
    }
    await storage.close()
    return result
  }, CHANGES)
}

/** One catch-up: open + sync() + notes(), then the view compared with the service's list. */
async function catchUp(page: Page, expected: Json[], coalesce = false) {
  return page.evaluate(
    async ([db, expected, coalesce]) => {
      const { NotesClient, Replica, IndexedDbReplicaStorage } = globalThis.bench.mod
      const client = new NotesClient({
        baseUrl: (globalThis as unknown as Browserish).location.origin,
      })
      const t0 = performance.now()
      const storage = await IndexedDbReplicaStorage.open(db)
      const log = globalThis.bench.log
      Object.assign(log, { load: 0, writes: 0, writeMs: 0, writeMax: 0, entries: 0 })
      const wrapped = coalesce
        ? globalThis.bench.coalesced(storage)
        : globalThis.bench.timed(storage)
      const replica = await Replica.open({ client, storage: wrapped })
      const t1 = performance.now()
      const events: Record<string, number> = {}
      replica.subscribe((event: { type: string }) => {
        events[event.type] = (events[event.type] ?? 0) + 1
      })
      await replica.sync()
      // Coalesced: the catch-up counts until what it applied is stored.
      if (coalesce) await wrapped.settled()
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
        storageLoad: log.load,
        writes: log.writes,
        writeMs: log.writeMs,
        writeMax: log.writeMax,
        entriesWritten: log.entries,
        events,
      }
    },
    [DB, expected, coalesce] as const,
  )
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]
  samples: number[]
  timeDeltas: number[]
}

/** Where the page's main thread spent a profile: idle, and the functions with most self time. */
function summarize(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<string, number>()
  let total = 0
  profile.samples.forEach((id, i) => {
    const ms = (profile.timeDeltas[i] ?? 0) / 1000
    total += ms
    const frame = byId.get(id)?.callFrame
    const name =
      frame === undefined
        ? '?'
        : `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*\/ui\/client\//, '')}:${frame.lineNumber + 1}`
    self.set(name, (self.get(name) ?? 0) + ms)
  })
  const top = [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([name, ms]) => `${Math.round(ms)} ms ${name}`)
  return { totalMs: Math.round(total), top }
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
  const feedMs: number[] = []
  for (let r = 0; r < rounds; r++) {
    const version = (await fetch(`${origin}/api/note?limit=1`)).headers.get('notes-version')
    const before = performance.now()
    await change(origin, r)
    changeMs.push(performance.now() - before)
    const expected = await list(origin)
    const result = await catchUp(page, expected)
    if (!result.equal) throw new Error(`catch-up ${r}: the view differs from the service's list`)
    catchUps.push(result)
    const feed = await feedOnly(page, version as string)
    if (feed.seen !== CHANGES) throw new Error(`the feed gave ${feed.seen} changes`)
    feedMs.push(feed.ms)
  }
  // The what-if: the same catch-up with the storage's writes coalesced (see `coalesced`).
  const coalescedRuns: Awaited<ReturnType<typeof catchUp>>[] = []
  for (let r = 0; r < rounds; r++) {
    await change(origin, 100 + r)
    const expected = await list(origin)
    const result = await catchUp(page, expected, true)
    if (!result.equal) throw new Error(`coalesced catch-up ${r}: the view differs`)
    coalescedRuns.push(result)
  }
  let profiled: (ReturnType<typeof summarize> & { catchUpMs: number }) | undefined
  if (profile) {
    await change(origin, rounds)
    const expected = await list(origin)
    const cdp = await page.context().newCDPSession(page)
    await cdp.send('Profiler.enable')
    await cdp.send('Profiler.setSamplingInterval', { interval: 200 })
    await cdp.send('Profiler.start')
    const result = await catchUp(page, expected)
    const { profile: taken } = await cdp.send('Profiler.stop')
    if (!result.equal) throw new Error('the profiled catch-up differs from the service')
    mkdirSync('.bench-results', { recursive: true })
    writeFileSync('.bench-results/replica-catch-up.cpuprofile', JSON.stringify(taken))
    profiled = { ...summarize(taken as CpuProfile), catchUpMs: Math.round(result.ms) }
  }
  const shapes = await writeShapes(page)
  // The same start again, now that the database has taken the catch-ups' writes.
  const later: Awaited<ReturnType<typeof start>>[] = []
  for (let r = 0; r < rounds; r++) {
    await page.reload()
    await load(page)
    later.push(await start(page))
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
          storageLoad: field(starts, 'storageLoad'),
          view: field(starts, 'view'),
        },
        startAfterReload: {
          total: field(reloaded, 'ms'),
          storageOpen: field(reloaded, 'storageOpen'),
          replicaOpen: field(reloaded, 'replicaOpen'),
          storageLoad: field(reloaded, 'storageLoad'),
          view: field(reloaded, 'view'),
        },
        startAfterCatchUps: {
          total: field(later, 'ms'),
          storageLoad: field(later, 'storageLoad'),
          view: field(later, 'view'),
        },
        profiledCatchUp: profiled,
        catchUpCoalescedWhatIf: {
          total: field(coalescedRuns, 'ms'),
          open: field(coalescedRuns, 'open'),
          syncAndStored: field(coalescedRuns, 'sync'),
          storageWrites: coalescedRuns.map((c) => c.writes),
          writeMsSum: field(coalescedRuns, 'writeMs'),
          allEqual: coalescedRuns.every((c) => c.equal),
        },
        catchUp: {
          changes: CHANGES,
          makingThemMs: stats(changeMs),
          total: field(catchUps, 'ms'),
          open: field(catchUps, 'open'),
          sync: field(catchUps, 'sync'),
          storageLoad: field(catchUps, 'storageLoad'),
          view: field(catchUps, 'view'),
          storageWrites: catchUps.map((c) => c.writes),
          entriesWritten: catchUps.map((c) => c.entriesWritten),
          writeMsSum: field(catchUps, 'writeMs'),
          writeMsMax: field(catchUps, 'writeMax'),
          feedAloneMs: stats(feedMs),
          storageAloneMs: shapes,
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
