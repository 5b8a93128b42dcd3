import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ID_TAKEN, type Revision } from '../../../src/store/archive.js'
import { Capacity } from '../../../src/store/kernel/capacity.js'
import { IdSpace } from '../../../src/store/kernel/id-space.js'
import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../../src/store/memory/memory-store.js'
import {
  findRevision,
  HistoryBudget,
  keepState,
  pastOf,
} from '../../../src/store/memory/revisions.js'
import { type ArchiveStoreOptions, runArchiveContract } from '../../support/archive.contract.js'
import { PromisedNoteStore } from '../../support/promised-store.js'

const options = ({
  maxNotes = 1_000_000,
  maxBytes = 1 << 28,
  now,
  archive,
}: ArchiveStoreOptions) => ({
  maxNotes,
  maxBytes,
  ...(now === undefined ? {} : { now }),
  ...(archive === undefined ? {} : { archive }),
})

runArchiveContract('MemoryNoteStore', (o) => new MemoryNoteStore(options(o)))
runArchiveContract(
  'PromisedNoteStore (asynchronous wrapper)',
  (o) => new PromisedNoteStore(options(o)),
)
// A notebook beside another that holds notes and history: the bounds are its own, the history's
// bytes the service's.
runArchiveContract('a notebook of MemoryNotebooks', (o) => {
  const { maxNotes, maxBytes, ...rest } = options(o)
  const notebooks = new MemoryNotebooks({
    maxNotes: 2 * maxNotes,
    maxBytes: 2 * maxBytes,
    maxNotesPerNotebook: maxNotes,
    maxBytesPerNotebook: maxBytes,
    ...rest,
  })
  const other = notebooks.notebook('other')
  const note = other.create({ other: true })
  if (o.archive?.maxHistoryBytes === undefined)
    other.update(JSON.parse(note.json).id, { edited: 1 })
  return notebooks.notebook('mine')
})

/** A store of its own whose history budget the test reads, keeping `noteHistory` states a note. */
function withBudget(
  noteHistory: number,
  now?: () => number,
): { budget: HistoryBudget; store: MemoryNoteStore } {
  const budget = new HistoryBudget(1 << 30)
  const shared = {
    ids: new IdSpace(),
    capacity: new Capacity(1000, 1 << 24, 'The service'),
    history: budget,
  }
  const store = new MemoryNoteStore({
    maxNotes: 1000,
    maxBytes: 1 << 24,
    archive: { noteHistory },
    shared,
    ...(now === undefined ? {} : { now }),
  })
  return { budget, store }
}

// The soak found it: the budget's queue of revisions by age grew with every write, though the
// count bound had let those revisions go long before.
test('the history budget keeps its queue within twice the revisions kept, plus a floor', () => {
  const { budget, store } = withBudget(3)
  const ids = Array.from(
    { length: 10 },
    (_, i) => JSON.parse(store.create({ i }).json).id as number,
  )
  for (let round = 0; round < 2000; round++) for (const id of ids) store.update(id, { round })
  // 10 notes keep 2 past states each: 20 live, and the pairs passed over stay under 2 x 20 + 1024.
  assert.equal(budget.live, 20)
  assert.ok(budget.queued <= 2 * 20 + 1024 + 1, `queued ${budget.queued}`)
  assert.equal(store.revisions(ids[0] as number, 10, undefined)?.revisions.length, 3)
})

// A revision keeps its ETag as a sequence of the first state's epoch; a history imported from
// another store can hold ETags of other epochs, and every one must come back exactly.
test('answers every past version exactly, whichever epoch its ETag is of', () => {
  const budget = new HistoryBudget(1 << 30)
  const rules = { noteHistory: 10, historyMs: 1e12, budget }
  const entry = {
    id: 1,
    json: '{"id":1,"v":9}',
    etag: '"k2x9q1.9"',
    modified: 9,
    bytes: 14,
    position: 1,
    alive: true,
    change: 'updated' as const,
    past: undefined,
  }
  const states: [string, Revision['change']][] = [
    ['"k2x9q1.1"', 'created'],
    ['"other.5"', 'updated'],
    ['"k2x9q1.10"', 'updated'],
    ['"k2x9q1.010"', 'updated'],
    ['"not a token"', 'created'],
    ['"k2x9q1.zz"', 'updated'],
  ]
  states.forEach(([etag, change], i) => {
    keepState(entry, etag, i, change, `{"id":1,"v":${i}}`, 14, rules, 100)
  })
  const expected = states.map(([etag, change], i) => ({
    version: etag.slice(1, -1),
    at: i,
    change,
    json: `{"id":1,"v":${i}}`,
  }))
  assert.deepEqual(pastOf(entry), expected)
  for (const revision of expected) {
    assert.deepEqual(findRevision(entry, revision.version, 0), revision)
  }
  assert.equal(findRevision(entry, 'k2x9q1.a', 0), undefined)
  // The oldest go first, with what they said: the rest stay exact.
  keepState(
    entry,
    '"k2x9q1.zzz"',
    6,
    'updated',
    '{"id":1,"v":6}',
    14,
    { ...rules, noteHistory: 4 },
    100,
  )
  assert.deepEqual(pastOf(entry), [
    ...expected.slice(4),
    { version: 'k2x9q1.zzz', at: 6, change: 'updated', json: '{"id":1,"v":6}' },
  ])
  assert.equal(budget.live, 3)
})

// A note's past states let go from the oldest leave their slots behind for a while, cleared a
// few at a time: every read must see the states kept, and only those, at any moment between.
test('keeps a long history exact while its oldest states go, write after write', () => {
  let t = 1000
  const { budget, store } = withBudget(40, () => t)
  const id = JSON.parse(store.create({ n: 0 }).json).id as number
  // Every state written, newest first: [n, version, change].
  const written: [number, string, Revision['change']][] = []
  const remember = (change: Revision['change']) => {
    const note = store.get(id)
    assert.ok(note !== undefined)
    written.unshift([JSON.parse(note.json).n as number, note.etag.slice(1, -1), change])
  }
  remember('created')
  const check = (label: string) => {
    const expected = written.slice(0, 40)
    const all = store.revisions(id, 100, undefined)?.revisions ?? []
    assert.deepEqual(
      all.map((r) => [JSON.parse(r.json).n, r.version, r.change]),
      expected,
      label,
    )
    // Paged 7 at a time, the same revisions in the same order.
    const paged: Revision[] = []
    let after: string | undefined
    do {
      const page = store.revisions(id, 7, after)
      assert.ok(page !== undefined)
      paged.push(...page.revisions)
      after = page.next
    } while (after !== undefined)
    assert.deepEqual(paged, all, label)
    for (const revision of all) assert.deepEqual(store.revision(id, revision.version), revision)
    for (const [, version] of written.slice(40)) {
      assert.equal(store.revision(id, version), undefined, `${label}: ${version} let go`)
    }
    assert.equal(budget.live, Math.min(written.length, 40) - 1, label)
    const pastBytes = all.slice(1).reduce((sum, r) => sum + Buffer.byteLength(r.json), 0)
    assert.equal(budget.bytes, pastBytes, label)
  }
  for (let n = 1; n <= 100; n++) {
    t++
    store.update(id, { n })
    remember('updated')
    check(`after update ${n}`)
  }
  assert.equal(store.delete(id), true)
  const back = store.untrash(id)
  assert.ok(back !== undefined && back !== ID_TAKEN)
  remember('created')
  check('restored from the trash')
  for (let n = 101; n <= 150; n++) {
    t++
    store.update(id, { n })
    remember('updated')
    check(`after update ${n}`)
  }
})
