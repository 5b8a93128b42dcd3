import {
  type IdbFactoryLike,
  IndexedDbReplicaStorage,
} from '../src/client/replica/indexeddb-storage.js'
import type { ReplicaWrite } from '../src/client/replica/storage.js'

/**
 * The browser half of bench/replica-storage.ts: loaded into a Chromium page, it times the
 * IndexedDB storage as shipped (a store per table, JSON text values) against two layouts it did
 * not choose, written here on raw IndexedDB: one store keyed by [table, key], and a store per table
 * holding structured-clone objects instead of JSON text.
 */

/**
 * one-store: [table, key] keys, JSON text; objects: a store per table, structured-clone values;
 * key-inside: a store per table, values [key, JSON text] so that getAll alone is enough;
 * buckets: a store per table, each record the JSON text of 1/64 of the table's entries.
 */
type Layout = 'shipped' | 'one-store' | 'objects' | 'key-inside' | 'buckets'
type Raw = Exclude<Layout, 'shipped'>
const BUCKETS = 64

const TABLES = ['notes', 'outbox', 'meta', 'conflicts']

/** A note of about 200 bytes as JSON. */
export function noteOf(i: number): Record<string, unknown> {
  return {
    id: 1_700_000_000_000 + i,
    title: `Note number ${i}`,
    body: `Some text of note ${i}, long enough to bring it to about two hundred bytes in all.`,
    tags: ['work', i % 2 === 0 ? 'even' : 'odd'],
    etag: `"${(i * 2654435761) % 4294967296}"`,
  }
}

const factory = (): IdbFactoryLike =>
  (globalThis as unknown as { indexedDB: IdbFactoryLike }).indexedDB

function request<T>(r: {
  result: T
  onsuccess: (() => void) | null
  onerror: ((e: { preventDefault(): void }) => void) | null
  error: { name: string } | null
}): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result)
    r.onerror = () => reject(new Error(r.error?.name ?? 'error'))
  })
}

type Db = Awaited<ReturnType<typeof openRaw>>

async function openRaw(name: string, layout: Raw) {
  const r = factory().open(name, 1)
  r.onupgradeneeded = () => {
    if (layout === 'one-store') r.result.createObjectStore('all')
    else for (const table of TABLES) r.result.createObjectStore(table)
  }
  return request(r)
}

function done(tx: { oncomplete: (() => void) | null; onabort: (() => void) | null }) {
  return new Promise<void>((resolve, reject) => {
    tx.oncomplete = () => resolve()
    tx.onabort = () => reject(new Error('aborted'))
  })
}

async function fillRaw(db: Db, layout: Raw, count: number) {
  const stores = layout === 'one-store' ? ['all'] : TABLES
  const tx = db.transaction(stores, 'readwrite', { durability: 'strict' })
  for (let i = 0; i < count; i++) {
    const key = `n:${1_700_000_000_000 + i}`
    if (layout === 'one-store') {
      // An array key: the raw API takes any valid key, the narrow type here only strings.
      tx.objectStore('all').put(JSON.stringify(noteOf(i)), ['notes', key] as unknown as string)
    } else if (layout === 'objects') tx.objectStore('notes').put(noteOf(i), key)
    else if (layout === 'key-inside') {
      tx.objectStore('notes').put([key, JSON.stringify(noteOf(i))], key)
    }
  }
  if (layout === 'buckets') {
    const buckets = Array.from({ length: BUCKETS }, () => [] as string[])
    for (let i = 0; i < count; i++) {
      const key = `n:${1_700_000_000_000 + i}`
      buckets[i % BUCKETS]?.push(`${JSON.stringify(key)}:${JSON.stringify(noteOf(i))}`)
    }
    buckets.forEach((b, i) => {
      tx.objectStore('notes').put(`{${b.join(',')}}`, String(i))
    })
  }
  await done(tx)
}

async function loadRaw(db: Db, layout: Raw) {
  const stores = layout === 'one-store' ? ['all'] : TABLES
  const tx = db.transaction(stores, 'readonly')
  const getAllOnly = layout === 'key-inside' || layout === 'buckets'
  const reads = stores.map((s) => ({
    keys: getAllOnly ? undefined : tx.objectStore(s).getAllKeys(),
    values: tx.objectStore(s).getAll(),
  }))
  await done(tx)
  const tables = new Map<string, Map<string, unknown>>(TABLES.map((t) => [t, new Map()]))
  reads.forEach(({ keys, values }, s) => {
    const table = tables.get(stores[s] as string) as Map<string, unknown>
    if (layout === 'key-inside') {
      for (const [key, text] of values.result as [string, string][])
        table.set(key, JSON.parse(text))
    } else if (layout === 'buckets') {
      const entries: [string, unknown][] = []
      for (const text of values.result as string[])
        entries.push(...Object.entries(JSON.parse(text)))
      entries.sort(([a], [b]) => (a < b ? -1 : 1))
      for (const [key, value] of entries) table.set(key, value)
    } else {
      keys?.result.forEach((key, i) => {
        if (layout === 'one-store') {
          const [t, k] = key as [string, string]
          tables.get(t)?.set(k, JSON.parse(values.result[i] as string))
        } else table.set(key as string, values.result[i])
      })
    }
  })
  return tables
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round((sorted[Math.floor(sorted.length / 2)] as number) * 10) / 10
}

/** Open + load of `count` notes, `rounds` times, for each layout; then one outbox write. */
export async function measure(count: number, rounds: number) {
  const load: Record<Layout, number> = {
    shipped: 0,
    'one-store': 0,
    objects: 0,
    'key-inside': 0,
    buckets: 0,
  }
  const run = `${Date.now()}`
  const raws = ['one-store', 'objects', 'key-inside', 'buckets'] as const
  {
    const storage = await IndexedDbReplicaStorage.open(`bench-shipped-${run}`)
    const writes: ReplicaWrite[] = []
    for (let i = 0; i < count; i++) {
      writes.push({ table: 'notes', key: `n:${1_700_000_000_000 + i}`, value: noteOf(i) })
    }
    await storage.write(writes)
    await storage.close()
  }
  for (const layout of raws) {
    const db = await openRaw(`bench-${layout}-${run}`, layout)
    await fillRaw(db, layout, count)
    db.close()
  }
  // Round robin, so that a spell of load elsewhere falls on every layout alike.
  const times = new Map<Layout, number[]>([
    ['shipped', []],
    ...raws.map((l) => [l, []] as [Layout, number[]]),
  ])
  for (let r = 0; r < rounds; r++) {
    const start = performance.now()
    const again = await IndexedDbReplicaStorage.open(`bench-shipped-${run}`)
    const contents = await again.load()
    times.get('shipped')?.push(performance.now() - start)
    if (contents.notes.size !== count) throw new Error(`loaded ${contents.notes.size}`)
    await again.close()
    for (const layout of raws) {
      const start = performance.now()
      const db = await openRaw(`bench-${layout}-${run}`, layout)
      const tables = await loadRaw(db, layout)
      times.get(layout)?.push(performance.now() - start)
      if (tables.get('notes')?.size !== count)
        throw new Error(`loaded ${tables.get('notes')?.size}`)
      db.close()
    }
  }
  for (const [layout, list] of times) load[layout] = median(list)
  // One outbox entry, as the replica writes it (an entry and the next sequence number).
  const storage = await IndexedDbReplicaStorage.open(`bench-shipped-${run}`)
  const strict: number[] = []
  for (let i = 0; i < 30; i++) {
    const start = performance.now()
    await storage.write([
      {
        table: 'outbox',
        key: String(i).padStart(12, '0'),
        value: { op: 'update', note: noteOf(i) },
      },
      { table: 'meta', key: 'outbox-next', value: i + 1 },
    ])
    strict.push(performance.now() - start)
  }
  await storage.close()
  const raw = await openRaw(`bench-objects-${run}`, 'objects')
  const relaxed: number[] = []
  for (let i = 0; i < 30; i++) {
    const start = performance.now()
    const tx = raw.transaction(TABLES, 'readwrite', { durability: 'relaxed' })
    tx.objectStore('outbox').put(JSON.stringify({ op: 'update', note: noteOf(i) }), String(i))
    tx.objectStore('meta').put(String(i + 1), 'outbox-next')
    await done(tx)
    relaxed.push(performance.now() - start)
  }
  raw.close()
  return { load, write: { strict: median(strict), relaxed: median(relaxed) } }
}
