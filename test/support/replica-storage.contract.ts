import {
  emptyContents,
  REPLICA_TABLES,
  type ReplicaContents,
  type ReplicaStorage,
  type ReplicaStorages,
  type ReplicaTable,
  type ReplicaWrite,
} from '../../src/client/replica/storage.js'

/**
 * One suite every ReplicaStorage must pass (memory, file, IndexedDB), after PouchDB's one suite
 * for every adapter. It imports nothing from Node, so the same cases run in Chromium against
 * IndexedDB (test/client/replica/replica-storage.test.ts loads this module into a page) and report
 * there as node:test cases. Assertions are its own for the same reason; they compare exactly: Maps
 * entry by entry in order, objects key by key in order, numbers with Object.is.
 */

export interface StorageUnderTest {
  /** Opens the storage called `name`: a fresh name per case; the same name opens it again. */
  open(name: string): Promise<ReplicaStorage>
  /** Whether a storage opened again after close() keeps what it held (not memory). */
  persistent: boolean
  /** The storages by key called `name` (one per notebook): the same name finds them again. */
  keyed(name: string): ReplicaStorages
}

export interface ContractCase {
  name: string
  persistentOnly?: boolean
  run(subject: StorageUnderTest, name: string): Promise<void>
}

type TableEntries = Partial<Record<ReplicaTable, Record<string, unknown>>>

/** { notes: { b: 1, a: 2 } } -> ReplicaContents with notes a, b (keys sorted), others empty. */
export function contentsOf(tables: TableEntries): ReplicaContents {
  const contents = emptyContents()
  for (const table of REPLICA_TABLES) {
    const entries = Object.entries(tables[table] ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))
    for (const [key, value] of entries) contents[table].set(key, value)
  }
  return contents
}

function puts(tables: TableEntries): ReplicaWrite[] {
  return REPLICA_TABLES.flatMap((table) =>
    Object.entries(tables[table] ?? {}).map(([key, value]) => ({ table, key, value })),
  )
}

/** Where two values first differ ('' when they do not): 'notes > "a" > tags > 1'. */
function difference(actual: unknown, expected: unknown, at: string): string {
  if (Object.is(actual, expected)) return ''
  const here = at === '' ? 'the top' : at
  if (actual instanceof Map && expected instanceof Map) {
    const a = [...actual.keys()]
    const e = [...expected.keys()]
    if (JSON.stringify(a) !== JSON.stringify(e)) {
      return `${here}: keys ${show(a)}, expected ${show(e)}`
    }
    for (const key of e) {
      const found = difference(actual.get(key), expected.get(key), `${at} > ${JSON.stringify(key)}`)
      if (found !== '') return found
    }
    return ''
  }
  if (isObject(actual) && isObject(expected) && Array.isArray(actual) === Array.isArray(expected)) {
    const a = Object.keys(actual)
    const e = Object.keys(expected)
    if (JSON.stringify(a) !== JSON.stringify(e)) {
      return `${here}: keys ${show(a)}, expected ${show(e)}`
    }
    for (const key of e) {
      const found = difference(actual[key], expected[key], `${at} > ${key}`)
      if (found !== '') return found
    }
    return ''
  }
  return `${here}: ${show(actual)}, expected ${show(expected)}`
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !(value instanceof Map)
}

function show(value: unknown): string {
  const text = JSON.stringify(value, (_key, inner: unknown) =>
    inner instanceof Map ? Object.fromEntries(inner) : inner,
  )
  if (text === undefined) return String(value)
  return text.length > 200 ? `${text.slice(0, 200)}... (${text.length} characters)` : text
}

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  const found = difference(actual, expected, '')
  if (found !== '') throw new Error(`${what}: ${found}`)
}

/** The storage's state, table by table. */
async function expectContents(storage: ReplicaStorage, tables: TableEntries, what: string) {
  const loaded = await storage.load()
  for (const table of REPLICA_TABLES) {
    expectEqual(loaded[table], contentsOf(tables)[table], `${what}, table ${table}`)
  }
  expectEqual(Object.keys(loaded).sort(), [...REPLICA_TABLES].sort(), `${what}, the tables`)
}

/** Resolves to the error a promise rejected with; throws if it resolved. */
async function rejection(promise: Promise<unknown>, what: string): Promise<unknown> {
  try {
    await promise
  } catch (err) {
    return err
  }
  throw new Error(`${what}: resolved, expected a rejection`)
}

async function expectRefused(promise: Promise<unknown>, code: string, what: string) {
  const err = (await rejection(promise, what)) as { name?: unknown; code?: unknown }
  expectEqual({ name: err.name, code: err.code }, { name: 'ReplicaStorageError', code }, what)
}

/** Opens a storage, runs `body`, closes it whatever happened. */
async function using(
  subject: StorageUnderTest,
  name: string,
  body: (storage: ReplicaStorage) => Promise<void>,
): Promise<void> {
  const storage = await subject.open(name)
  try {
    await body(storage)
  } finally {
    await storage.close()
  }
}

const EVERY_TABLE: TableEntries = {
  notes: { 'n:1': { id: 1, title: 'one', etag: '"1"' }, 'n:2': { id: 2, tags: ['a', 'b'] } },
  outbox: { '000001': { op: 'create', fields: { title: 'x' }, key: 'k-1' } },
  meta: { feed: '41', reset: false },
  conflicts: { 'c:1': { entry: 'n:2', mine: null, theirs: { id: 2 } } },
}

/** Keys in the order each storage must give them back: code unit order, as Array#sort. */
const SCRAMBLED_KEYS = ['b', 'a', 'B', '10', '9', '', 'é', 'e\u0301', '😀', '\uffff', 'a b', 'A']

const VALUES: Record<string, unknown> = {
  nested: { a: { b: { c: [1, [2, [3, { d: null }]]] } }, e: [] },
  unicode: { text: 'héllo wörld ✓ 😀 مرحبا e\u0301 \u0000 \u2028 "quoted" \\', lone: '\ud800' },
  keyOrder: { z: 1, a: 2, m: { y: 1, b: 2 } },
  numbers: [0, -1.5, 1e-7, 2 ** 53 - 1, -(2 ** 53 - 1), 1.7976931348623157e308, 5e-324],
  atoms: [true, false, null, '', {}, []],
  string: 'a plain string',
  number: 42,
  nullValue: null,
  large: { body: 'x'.repeat(1 << 20), more: '€'.repeat(100_000) },
}

const NOT_JSON: Record<string, () => unknown> = {
  'a function': () => ({ f: () => 1 }),
  'a symbol': () => ({ s: Symbol('s') }),
  'a bigint': () => ({ b: 1n }),
  NaN: () => ({ n: Number.NaN }),
  Infinity: () => [Number.POSITIVE_INFINITY],
  'undefined at the top': () => undefined,
  'undefined in an array': () => [1, undefined],
  'a cycle': () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    return cycle
  },
}

/** `size` bytes of a pattern that repeats only every 251 bytes (so a shifted copy differs). */
function patterned(size: number, seed: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size)
  for (let i = 0; i < size; i++) bytes[i] = (i * 7 + seed) % 251
  return bytes
}

/** The bytes kept under `key` are `expected` exactly, with no type. */
async function expectBytes(
  storage: ReplicaStorage,
  key: string,
  expected: Uint8Array | undefined,
  what: string,
): Promise<void> {
  const blob = await storage.getBytes(key)
  if (expected === undefined) {
    expectEqual(blob, undefined, what)
    return
  }
  if (blob === undefined) throw new Error(`${what}: no bytes, expected ${expected.length}`)
  expectEqual(blob.type, '', `${what}, the type`)
  const actual = new Uint8Array(await blob.arrayBuffer())
  expectEqual(actual.length, expected.length, `${what}, the length`)
  for (let i = 0; i < expected.length; i++) {
    if (actual[i] !== expected[i]) throw new Error(`${what}: byte ${i} is ${actual[i]}`)
  }
}

const LARGE_BYTES = patterned(3 << 20, 1)
const SMALL_BYTES = patterned(1000, 2)

/** What each storage does with files' bytes (a file waiting to be uploaded). */
const EACH_STORAGE_BYTES: readonly ContractCase[] = [
  {
    name: 'keeps files’ bytes by key apart from the tables: put, replace, get, delete, keys',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write(puts(EVERY_TABLE))
        expectEqual(await storage.bytesKeys(), [], 'the keys of a new storage')
        await expectBytes(storage, 'f.none', undefined, 'a key never put')
        await storage.putBytes('f.b', new Blob([LARGE_BYTES], { type: 'image/png' }))
        await storage.putBytes('f.a', new Blob([]))
        await storage.putBytes('f.c', new Blob([SMALL_BYTES.subarray(0, 10), SMALL_BYTES]))
        expectEqual(await storage.bytesKeys(), ['f.a', 'f.b', 'f.c'], 'the keys, sorted')
        await expectBytes(storage, 'f.b', LARGE_BYTES, 'a 3 MiB file')
        await expectBytes(storage, 'f.a', new Uint8Array(0), 'an empty file')
        const joined = new Uint8Array([...SMALL_BYTES.subarray(0, 10), ...SMALL_BYTES])
        await expectBytes(storage, 'f.c', joined, 'a Blob of two parts')
        await storage.putBytes('f.c', new Blob([SMALL_BYTES]))
        await expectBytes(storage, 'f.c', SMALL_BYTES, 'replaced')
        await storage.deleteBytes('f.b')
        await storage.deleteBytes('f.never')
        await expectBytes(storage, 'f.b', undefined, 'deleted')
        expectEqual(await storage.bytesKeys(), ['f.a', 'f.c'], 'the keys after a delete')
        await expectContents(storage, EVERY_TABLE, 'the tables, untouched by the bytes')
        for (const key of ['', '../x', 'a/b', '..']) {
          const bytes = new Blob([SMALL_BYTES])
          await expectRefused(storage.putBytes(key, bytes), 'invalid', `putting ${key}`)
          await expectRefused(storage.getBytes(key), 'invalid', `getting ${key}`)
          await expectRefused(storage.deleteBytes(key), 'invalid', `deleting ${key}`)
        }
      }),
  },
  {
    name: 'refuses files’ bytes once closed',
    run: async (subject, name) => {
      const storage = await subject.open(name)
      await storage.putBytes('f.a', new Blob([SMALL_BYTES]))
      await storage.close()
      await expectRefused(storage.putBytes('f.b', new Blob([])), 'closed', 'put after close')
      await expectRefused(storage.getBytes('f.a'), 'closed', 'get after close')
      await expectRefused(storage.deleteBytes('f.a'), 'closed', 'delete after close')
      await expectRefused(storage.bytesKeys(), 'closed', 'keys after close')
    },
  },
  {
    name: 'keeps files’ bytes across close and open',
    persistentOnly: true,
    run: async (subject, name) => {
      await using(subject, name, async (storage) => {
        await storage.putBytes('f.a', new Blob([LARGE_BYTES]))
        await storage.putBytes('f.b', new Blob([SMALL_BYTES]))
        await storage.putBytes('f.gone', new Blob([SMALL_BYTES]))
        await storage.deleteBytes('f.gone')
      })
      await using(subject, name, async (again) => {
        expectEqual(await again.bytesKeys(), ['f.a', 'f.b'], 'the keys after opening again')
        await expectBytes(again, 'f.a', LARGE_BYTES, 'the large file again')
        await expectBytes(again, 'f.b', SMALL_BYTES, 'the small file again')
      })
    },
  },
]

/** What each storage does. */
const EACH_STORAGE: readonly ContractCase[] = [
  {
    name: 'starts empty, with the four tables',
    run: (subject, name) => using(subject, name, (s) => expectContents(s, {}, 'a new storage')),
  },
  {
    name: 'gives back what was written to every table',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write(puts(EVERY_TABLE))
        await expectContents(storage, EVERY_TABLE, 'after one write')
      }),
  },
  {
    name: 'gives back the tables asked for, each whole, when asked for some',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write(puts(EVERY_TABLE))
        const whole = await storage.load()
        const some = await storage.load(['meta', 'outbox'])
        expectEqual([...some.meta], [...whole.meta], 'meta')
        expectEqual([...some.outbox], [...whole.outbox], 'outbox')
      }),
  },
  {
    name: 'answers each table in ascending key order (code units), whatever the write order',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        const tables = Object.fromEntries(
          REPLICA_TABLES.map((table) => [
            table,
            Object.fromEntries(SCRAMBLED_KEYS.map((k) => [k, k])),
          ]),
        )
        for (const key of SCRAMBLED_KEYS) {
          await storage.write(REPLICA_TABLES.map((table) => ({ table, key, value: key })))
        }
        const loaded = await storage.load()
        for (const table of REPLICA_TABLES) {
          expectEqual([...loaded[table].keys()], [...SCRAMBLED_KEYS].sort(), `${table} keys`)
        }
        await expectContents(storage, tables, 'the values')
      }),
  },
  {
    name: 'overwrites, deletes (a missing key too) and clears, in the order given',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write(puts(EVERY_TABLE))
        await storage.write([
          { table: 'notes', key: 'n:1', value: { id: 1, title: 'new' } },
          { table: 'notes', key: 'n:2', delete: true },
          { table: 'notes', key: 'n:9', delete: true },
          { table: 'outbox', clear: true },
          { table: 'outbox', key: '000002', value: 'after the clear' },
          { table: 'meta', key: 'feed', value: '40' },
          { table: 'meta', key: 'feed', value: '42' },
          { table: 'conflicts', key: 'c:2', value: 2 },
          { table: 'conflicts', key: 'c:2', delete: true },
        ])
        await expectContents(
          storage,
          {
            notes: { 'n:1': { id: 1, title: 'new' } },
            outbox: { '000002': 'after the clear' },
            meta: { feed: '42', reset: false },
            conflicts: EVERY_TABLE.conflicts ?? {},
          },
          'after the second write',
        )
        await storage.write([])
        await storage.write([{ table: 'notes', clear: true }])
        await expectContents(
          storage,
          {
            outbox: { '000002': 'after the clear' },
            meta: { feed: '42', reset: false },
            conflicts: EVERY_TABLE.conflicts ?? {},
          },
          'after clearing notes',
        )
      }),
  },
  {
    name: 'keeps nothing of a write that fails midway (a value that is not JSON), for each kind',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write(puts(EVERY_TABLE))
        for (const [kind, make] of Object.entries(NOT_JSON)) {
          await expectRefused(
            storage.write([
              { table: 'notes', key: 'n:3', value: { id: 3 } },
              { table: 'outbox', clear: true },
              { table: 'meta', key: 'feed', delete: true },
              { table: 'conflicts', key: 'bad', value: make() },
              { table: 'notes', key: 'n:4', value: { id: 4 } },
            ]),
            'invalid',
            `a write holding ${kind}`,
          )
          await expectContents(storage, EVERY_TABLE, `after the write holding ${kind}`)
        }
      }),
  },
  {
    name: 'leaves out properties holding undefined, as JSON does',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write([{ table: 'notes', key: 'a', value: { a: 1, b: undefined, c: [2] } }])
        await expectContents(storage, { notes: { a: { a: 1, c: [2] } } }, 'the note')
      }),
  },
  {
    name: 'applies and settles concurrent writes in call order; a failed one does not stop the rest',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        const settled: string[] = []
        const writes = Array.from({ length: 60 }, (_, i) => {
          const key = String(i).padStart(3, '0')
          const value = i === 30 ? { bad: Number.NaN } : i
          return storage
            .write([
              { table: 'outbox', key, value },
              { table: 'meta', key: 'last', value },
            ])
            .then(
              () => settled.push(`${i}`),
              () => settled.push(`${i} refused`),
            )
        })
        await Promise.all(writes)
        expectEqual(
          settled,
          Array.from({ length: 60 }, (_, i) => (i === 30 ? '30 refused' : `${i}`)),
          'the order writes settled in',
        )
        const outbox = Object.fromEntries(
          Array.from({ length: 60 }, (_, i) => [String(i).padStart(3, '0'), i]).filter(
            ([, i]) => i !== 30,
          ),
        )
        await expectContents(storage, { outbox, meta: { last: 59 } }, 'after 60 writes')
      }),
  },
  {
    name: 'gives back JSON values exactly: nested, unicode, key order, numbers, large strings',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        await storage.write(puts({ notes: VALUES }))
        await expectContents(storage, { notes: VALUES }, 'the values')
      }),
  },
  {
    name: 'hands out copies: changing a value written or loaded changes nothing stored',
    run: (subject, name) =>
      using(subject, name, async (storage) => {
        const note = { id: 1, tags: ['a'] }
        const written = storage.write([{ table: 'notes', key: 'n:1', value: note }])
        note.tags.push('changed after write')
        await written
        const first = await storage.load()
        ;(first.notes.get('n:1') as { tags: string[] }).tags.push('changed after load')
        await expectContents(storage, { notes: { 'n:1': { id: 1, tags: ['a'] } } }, 'the note')
      }),
  },
  {
    name: 'rejects load and write once closed (close twice is fine)',
    run: async (subject, name) => {
      const storage = await subject.open(name)
      await storage.write(puts(EVERY_TABLE))
      await storage.close()
      await storage.close()
      await expectRefused(storage.load(), 'closed', 'load after close')
      await expectRefused(storage.write(puts(EVERY_TABLE)), 'closed', 'write after close')
    },
  },
  {
    name: 'keeps everything across close and open, a write not yet settled at close() included',
    persistentOnly: true,
    run: async (subject, name) => {
      const storage = await subject.open(name)
      await storage.write(puts(EVERY_TABLE))
      await storage.write(puts({ notes: VALUES }))
      await storage.write([{ table: 'notes', key: 'n:2', delete: true }])
      const last = storage.write([{ table: 'meta', key: 'feed', value: 'last' }])
      await storage.close()
      await last
      const expected: TableEntries = {
        ...EVERY_TABLE,
        notes: { 'n:1': EVERY_TABLE.notes?.['n:1'], ...VALUES },
        meta: { feed: 'last', reset: false },
      }
      await using(subject, name, async (again) => {
        await expectContents(again, expected, 'after opening again')
        await again.write([{ table: 'outbox', clear: true }])
      })
      await using(subject, name, (third) =>
        expectContents(third, { ...expected, outbox: {} }, 'after a third open'),
      )
    },
  },
]

/** Opens storage `key` of `storages`, runs `body`, closes it whatever happened. */
async function usingKey(
  storages: ReplicaStorages,
  key: string,
  body: (storage: ReplicaStorage) => Promise<void>,
): Promise<void> {
  const storage = await storages.open(key)
  try {
    await body(storage)
  } finally {
    await storage.close()
  }
}

const NOTEBOOK_A = 'nb.n4Qv0b6mJx8y2kTqR1sZ3w'
const NOTEBOOK_B = 'nb.Zt3kq0PaW1c9yq2mBv7xLg'

/** What storages by key (one per notebook) do. */
const EACH_KEY: readonly ContractCase[] = [
  {
    name: 'keeps each key (notebook) apart, and removes one without touching the others',
    run: async (subject, name) => {
      const storages = subject.keyed(name)
      await usingKey(storages, NOTEBOOK_A, (a) => a.write(puts(EVERY_TABLE)))
      await usingKey(storages, NOTEBOOK_B, async (b) => {
        await expectContents(b, {}, 'another key, new')
        await b.write([{ table: 'notes', key: 'n:9', value: { id: 9 } }])
      })
      await usingKey(storages, NOTEBOOK_A, (a) => expectContents(a, EVERY_TABLE, 'key A'))
      await storages.remove(NOTEBOOK_A)
      await storages.remove('nb.never-opened')
      await usingKey(storages, NOTEBOOK_A, (a) => expectContents(a, {}, 'key A once removed'))
      await usingKey(storages, NOTEBOOK_B, (b) =>
        expectContents(b, { notes: { 'n:9': { id: 9 } } }, 'key B after A was removed'),
      )
      for (const key of ['', '../x', 'a/b', '..', 'é']) {
        await expectRefused(storages.open(key), 'invalid', `the key ${JSON.stringify(key)}`)
        await expectRefused(storages.remove(key), 'invalid', `removing ${JSON.stringify(key)}`)
      }
    },
  },
  {
    name: 'removes a key’s files’ bytes with it, and keeps another key’s',
    run: async (subject, name) => {
      const storages = subject.keyed(name)
      await usingKey(storages, NOTEBOOK_A, (a) => a.putBytes('f.1', new Blob([SMALL_BYTES])))
      await usingKey(storages, NOTEBOOK_B, async (b) => {
        expectEqual(await b.bytesKeys(), [], 'another key’s bytes, new')
        await b.putBytes('f.1', new Blob([LARGE_BYTES]))
      })
      await usingKey(storages, NOTEBOOK_A, (a) => expectBytes(a, 'f.1', SMALL_BYTES, 'key A'))
      await storages.remove(NOTEBOOK_A)
      await usingKey(storages, NOTEBOOK_A, async (a) => {
        expectEqual(await a.bytesKeys(), [], 'key A’s bytes once removed')
      })
      await usingKey(storages, NOTEBOOK_B, (b) => expectBytes(b, 'f.1', LARGE_BYTES, 'key B'))
    },
  },
  {
    name: 'keeps every key (notebook) across close and open',
    persistentOnly: true,
    run: async (subject, name) => {
      const first = subject.keyed(name)
      await usingKey(first, NOTEBOOK_A, (a) => a.write(puts(EVERY_TABLE)))
      await usingKey(first, NOTEBOOK_B, (b) => b.write(puts({ meta: { feed: 'b' } })))
      const again = subject.keyed(name)
      await usingKey(again, NOTEBOOK_A, (a) => expectContents(a, EVERY_TABLE, 'key A again'))
      await usingKey(again, NOTEBOOK_B, (b) =>
        expectContents(b, { meta: { feed: 'b' } }, 'key B again'),
      )
    },
  },
]

export const CASES: readonly ContractCase[] = [...EACH_STORAGE, ...EACH_STORAGE_BYTES, ...EACH_KEY]

/** Runs the case called `caseName` (the page calls this).
 * @public: the Chromium test loads this module by its URL (import(contract)).
 */
export async function runCase(
  caseName: string,
  subject: StorageUnderTest,
  name: string,
): Promise<void> {
  const found = CASES.find((c) => c.name === caseName)
  if (found === undefined) throw new Error(`no contract case ${caseName}`)
  await found.run(subject, name)
}
