import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SHARED_ROOM_ADVICE } from '../../src/store/kernel/capacity.js'
import {
  type Change,
  IdempotencyKeyReusedError,
  type Notebooks,
  type NoteRecord,
  type NoteStore,
  PreconditionFailed,
  StoreFullError,
} from '../../src/store/types.js'
import { page, waitUntil } from './store.contract.js'

export interface ContractNotebooksOptions {
  now?: () => number
  /** Service-wide caps. */
  maxNotes?: number
  maxBytes?: number
  maxNotesPerNotebook?: number
  maxBytesPerNotebook?: number
}

/** '[{"n":"a","id":1},{"id":3}]' -> [1, 3] */
const idsOf = (json: string) => (JSON.parse(json) as { id: unknown }[]).map((note) => note.id)

/** A store's note as plain values, to compare before and after (a record may change in place). */
const copy = (note: NoteRecord | undefined | PreconditionFailed | boolean) =>
  note === undefined || typeof note === 'boolean' || note instanceof PreconditionFailed
    ? note
    : { json: note.json, etag: note.etag, modified: note.modified }

/** Everything a reader of the store could see, to show that a write elsewhere changed none of it. */
async function seen(store: NoteStore, ids: readonly number[]) {
  const list = await store.list()
  const notes = await Promise.all(ids.map(async (id) => copy(await store.get(id))))
  return {
    list: { json: list.json, version: list.version, count: list.count },
    version: await store.version(),
    page: await store.page(page({ limit: 1, order: 'desc' })),
    notes,
    stats: await store.stats(),
  }
}

/**
 * The behaviour every Notebooks implementation must have: each notebook is a store
 * of its own, nothing crosses between two, ids are unique over all, and the caps hold per notebook
 * and overall. Every notebook must also pass the NoteStore contract
 * (test/support/store.contract.ts).
 */
export function runNotebooksContract(
  name: string,
  makeNotebooks: (options: ContractNotebooksOptions) => Notebooks,
): void {
  const fixedClock = (t: number) => () => t
  // Every cap given, so that no answer depends on an implementation's defaults.
  const make = (options: ContractNotebooksOptions = {}) =>
    makeNotebooks({
      now: fixedClock(1000),
      maxNotes: 1 << 24,
      maxBytes: 1 << 24,
      maxNotesPerNotebook: 1 << 24,
      maxBytesPerNotebook: 1 << 24,
      ...options,
    })

  describe(`Notebooks contract: ${name}`, () => {
    it('lists, pages and searches each notebook alone, with its own counts', async () => {
      const notebooks = make({ now: fixedClock(1) })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ n: 'a1', t: 'bread' }) // 1
      await b.create({ n: 'b1', t: 'bread' }) // 2
      await a.create({ n: 'a2' }) // 3
      await b.create({ n: 'b2', t: 'bread' }) // 4
      await a.create({ n: 'a3', t: 'Bread' }) // 5
      assert.deepEqual(
        { ...(await a.list()), version: '' },
        {
          json: '[{"n":"a1","t":"bread","id":1},{"n":"a2","id":3},{"n":"a3","t":"Bread","id":5}]',
          version: '',
          count: 3,
        },
      )
      assert.equal(
        (await b.list()).json,
        '[{"n":"b1","t":"bread","id":2},{"n":"b2","t":"bread","id":4}]',
      )
      const first = await a.page(page({ limit: 2 }))
      assert.deepEqual([idsOf(first.json), first.total], [[1, 3], 3])
      const rest = await a.page(page({ limit: 2, after: first.next }))
      assert.deepEqual([idsOf(rest.json), rest.total, rest.next], [[5], 3, undefined])
      const down = await a.page(page({ limit: 2, order: 'desc' }))
      assert.deepEqual(idsOf(down.json), [5, 3])
      // A's cursor in B walks B's own notes: a suffix of B's list, walked backwards.
      const downRest = idsOf((await b.page(page({ order: 'desc', after: down.next }))).json)
      assert.deepEqual(downRest, [4, 2].slice(2 - downRest.length))
      const bread = await a.page(page({ q: 'bread' }))
      assert.deepEqual([idsOf(bread.json), bread.total], [[1, 5], 2])
      const breadPage = await a.page(page({ q: 'BREAD', limit: 1, order: 'desc' }))
      assert.deepEqual([idsOf(breadPage.json), breadPage.total], [[5], 2])
      const breadRest = await a.page(
        page({ q: 'BREAD', limit: 1, order: 'desc', after: breadPage.next }),
      )
      assert.deepEqual([idsOf(breadRest.json), breadRest.next], [[1], undefined])
      assert.deepEqual(idsOf((await b.page(page({ q: 'bread' }))).json), [2, 4])
      // Whatever the cursor (B's too), a walk in A meets only A's notes: a suffix of A's list.
      for (let after = 0; after <= 8; after++) {
        const got = idsOf((await a.page(page({ after }))).json)
        assert.deepEqual(got, [1, 3, 5].slice(3 - got.length), `after ${after}`)
      }
    })

    it("answers another notebook's id as not found, whatever the conditions, and leaves its note be", async () => {
      const notebooks = make()
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const mine = copy(await a.create({ mine: true })) // 1000
      const theirs = copy(await b.create({ theirs: true })) as NoteRecord // 1001
      const before = { a: await seen(a, [1000, 1001]), b: await seen(b, [1000, 1001]) }
      assert.equal(await a.get(1001), undefined)
      assert.equal(await a.update(1001, { x: 1 }), undefined)
      assert.equal(await a.update(1001, { x: 1 }, 'merge-patch'), undefined)
      for (const conditions of [
        { ifMatch: [theirs.etag] },
        { ifMatch: ['"nope"'] },
        { ifMatch: '*' as const },
        { ifUnmodifiedSince: 0 },
      ]) {
        assert.equal(await a.update(1001, { x: 1 }, 'merge', conditions), undefined)
        assert.equal(await a.delete(1001, conditions), false)
      }
      assert.equal(await a.delete(1001), false)
      assert.deepEqual(await seen(a, [1000, 1001]), before.a)
      assert.deepEqual(await seen(b, [1000, 1001]), before.b)
      assert.deepEqual(before.a.notes, [mine, undefined])
      assert.deepEqual(before.b.notes, [undefined, theirs])
      // B's ETag is not A's: on A's own note it is a failed condition, as any stranger's would be.
      const refused = await a.update(1000, { x: 1 }, 'merge', { ifMatch: [theirs.etag] })
      assert.deepEqual(refused, new PreconditionFailed(mine as NoteRecord))
    })

    it("keeps a notebook's version, list and ETags as they are while another writes", async () => {
      let t = 1000
      const notebooks = make({ now: () => t })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ a: 1 }) // 1000
      const before = await seen(a, [1000])
      const versionsOfB = [await b.version()]
      t = 5000
      await b.create({ b: 1 }) // 5000
      versionsOfB.push(await b.version())
      await b.update(5000, { b: 2 })
      versionsOfB.push(await b.version())
      await b.createOnce('k', 'f', { b: 3 }) // 5001
      versionsOfB.push(await b.version())
      await b.delete(5000)
      versionsOfB.push(await b.version())
      assert.deepEqual(await seen(a, [1000]), before)
      assert.equal(new Set(versionsOfB).size, 5)
      assert.equal(versionsOfB.includes(before.version), false)
    })

    it('knows no version token of another notebook: its changes answer undefined, a reset', async () => {
      const notebooks = make()
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const startA = await a.version()
      const startB = await b.version()
      assert.notEqual(startA, startB)
      const noteA = await a.create({ a: 1 }) // 1000
      const etagA = noteA.etag
      const noteB = await b.create({ b: 1 }) // 1001
      assert.notEqual(etagA, noteB.etag)
      await b.update(1001, { b: 2 })
      await a.update(1000, { a: 2 })
      const tokensOfB = [startB, JSON.parse(noteB.etag) as string, await b.version()]
      for (const token of tokensOfB) assert.equal(await a.changesSince(token, 100), undefined)
      assert.equal(await b.changesSince(startA, 100), undefined)
      assert.equal(await b.changesSince(await a.version(), 100), undefined)
      const changes = (await a.changesSince(startA, 100)) ?? []
      assert.deepEqual(
        changes.map(({ type, data, version }) => [type, data, version]),
        [
          ['created', '{"a":1,"id":1000}', JSON.parse(etagA)],
          ['updated', '{"a":2,"id":1000}', await a.version()],
        ],
      )
      assert.deepEqual(
        ((await b.changesSince(startB, 100)) ?? []).map(({ type, data }) => [type, data]),
        [
          ['created', '{"b":1,"id":1001}'],
          ['updated', '{"b":2,"id":1001}'],
        ],
      )
    })

    it("tells a notebook's subscribers of its own changes only", async () => {
      const notebooks = make()
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const heard: { a: Change[]; b: Change[] } = { a: [], b: [] }
      const stopA = a.subscribe((change) => heard.a.push(change))
      const stopB = b.subscribe((change) => heard.b.push(change))
      await a.create({ a: 1 }) // 1000
      await b.create({ b: 1 }) // 1001
      await b.update(1001, { b: 2 })
      await a.delete(1000)
      await b.delete(1001)
      await notebooks.notebook('c').create({ c: 1 }) // 1002
      await waitUntil(() => heard.a.length >= 2 && heard.b.length >= 3)
      await new Promise((resolve) => setTimeout(resolve, 20))
      stopA()
      stopB()
      assert.deepEqual(
        heard.a.map(({ type, data }) => [type, data]),
        [
          ['created', '{"a":1,"id":1000}'],
          ['deleted', '{"id":1000}'],
        ],
      )
      assert.deepEqual(
        heard.b.map(({ type, data }) => [type, data]),
        [
          ['created', '{"b":1,"id":1001}'],
          ['updated', '{"b":2,"id":1001}'],
          ['deleted', '{"id":1001}'],
        ],
      )
      assert.equal(heard.a[1]?.sequence, (heard.a[0]?.sequence ?? 0) + 1)
      assert.equal(heard.b[2]?.sequence, (heard.b[0]?.sequence ?? 0) + 2)
      assert.equal(heard.a[1]?.version, await a.version())
    })

    it('keeps idempotency keys per notebook: the same key in two is two keys', async () => {
      const notebooks = make()
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const firstA = await a.createOnce('k', 'body-a', { a: 1 })
      const firstB = await b.createOnce('k', 'body-b', { b: 1 })
      assert.deepEqual(
        [firstA.replayed, firstA.note.json, firstB.replayed, firstB.note.json],
        [false, '{"a":1,"id":1000}', false, '{"b":1,"id":1001}'],
      )
      assert.deepEqual(await a.createOnce('k', 'body-a', { a: 1 }), {
        note: copy(firstA.note),
        replayed: true,
      })
      assert.deepEqual(await b.createOnce('k', 'body-b', { b: 1 }), {
        note: copy(firstB.note),
        replayed: true,
      })
      // A's body under B's key is a reuse in B, not a replay of A's note.
      await assert.rejects(
        async () => b.createOnce('k', 'body-a', { a: 1 }),
        IdempotencyKeyReusedError,
      )
      const fresh = await notebooks.notebook('c').createOnce('k', 'body-a', { a: 1 })
      assert.deepEqual([fresh.replayed, fresh.note.json], [false, '{"a":1,"id":1002}'])
      assert.deepEqual(
        [(await a.stats()).notes, (await b.stats()).notes, (await notebooks.stats()).notes],
        [1, 1, 3],
      )
    })

    it('gives ids unique over every notebook to creates interleaved at one clock', async () => {
      const notebooks = make()
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const c = notebooks.notebook('c')
      const made: string[] = []
      for (const [store, n] of [
        [a, 1],
        [b, 2],
        [a, 3],
        [c, 4],
        [b, 5],
      ] as const) {
        made.push((await store.create({ n })).json)
      }
      assert.deepEqual(made, [
        '{"n":1,"id":1000}',
        '{"n":2,"id":1001}',
        '{"n":3,"id":1002}',
        '{"n":4,"id":1003}',
        '{"n":5,"id":1004}',
      ])
      assert.deepEqual(
        [idsOf((await a.list()).json), idsOf((await b.list()).json), idsOf((await c.list()).json)],
        [[1000, 1002], [1001, 1004], [1003]],
      )
      // Creates in flight together, in every notebook: still no id twice.
      const together = await Promise.all(
        Array.from({ length: 30 }, async (_, n) => ([a, b, c][n % 3] as NoteStore).create({ n })),
      )
      const ids = together.map((note) => (JSON.parse(note.json) as { id: number }).id)
      assert.deepEqual(
        [...ids].sort((x, y) => x - y),
        Array.from({ length: 30 }, (_, n) => 1005 + n),
      )
    })

    it('steps over an id that a PATCH gave a note in another notebook', async () => {
      let t = 1000
      const notebooks = make({ now: () => t })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ a: 1 }) // 1000
      assert.equal(
        (copy(await a.update(1000, { id: 1002 })) as NoteRecord).json,
        '{"a":1,"id":1002}',
      )
      assert.equal((await b.create({ b: 1 })).json, '{"b":1,"id":1001}')
      assert.equal((await b.create({ b: 2 })).json, '{"b":2,"id":1003}')
      assert.equal(await b.get(1002), undefined)
      assert.equal((await a.get(1002))?.json, '{"a":1,"id":1002}')
      // Just above now: the clock's next id is taken in A, so B's create takes the one after.
      t = 2000
      await a.update(1002, { id: 2000 })
      assert.equal((await b.create({ b: 3 })).json, '{"b":3,"id":2001}')
      // An id that was held and is free again: a create may have it.
      await a.update(2000, { id: 3000 }, 'merge-patch')
      await a.delete(3000)
      t = 3000
      assert.equal((await notebooks.notebook('c').create({})).json, '{"id":3000}')
    })

    it("lets a PATCH give a note an id another notebook's note holds; each finds and deletes its own", async () => {
      const notebooks = make()
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ a: 1 }) // 1000
      await b.create({ b: 1 }) // 1001
      await b.update(1001, { id: 1000 })
      assert.equal((await a.get(1000))?.json, '{"a":1,"id":1000}')
      assert.equal((await b.get(1000))?.json, '{"b":1,"id":1000}')
      assert.equal(await a.delete(1000), true)
      assert.equal(await a.get(1000), undefined)
      assert.equal((await b.get(1000))?.json, '{"b":1,"id":1000}')
      assert.equal((await b.list()).json, '[{"b":1,"id":1000}]')
      assert.equal((await a.create({})).json, '{"id":1002}')
    })

    it("refuses a create past its notebook's note cap, changes nothing, and leaves the others room", async () => {
      const notebooks = make({ maxNotes: 10, maxNotesPerNotebook: 2 })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ n: 1 }) // 1000
      await a.create({ n: 2 }) // 1001
      const before = await seen(a, [1000, 1001])
      for (const attempt of [() => a.create({ n: 3 }), () => a.createOnce('k', 'f', { n: 3 })]) {
        await assert.rejects(
          async () => attempt(),
          new StoreFullError('This notebook holds its maximum of 2 notes.'),
        )
      }
      assert.deepEqual(await seen(a, [1000, 1001]), before)
      assert.equal((await b.create({ n: 4 })).json, '{"n":4,"id":1002}')
      assert.equal((await b.create({ n: 5 })).json, '{"n":5,"id":1003}')
      assert.deepEqual(await notebooks.stats(), {
        notes: 4,
        bytes: 4 * 17,
        maxNotes: 10,
        maxBytes: 1 << 24,
      })
      await a.delete(1000)
      // A deleted note counts until it leaves the trash.
      await assert.rejects(async () => a.create({}), StoreFullError)
      assert.equal(await a.purge(1000), true)
      // The key was not kept by the refused create: this is its first use.
      assert.equal((await a.createOnce('k', 'f', { n: 3 })).replayed, false)
    })

    it("refuses a write past its notebook's byte cap, and a shrinking write gives room back", async () => {
      const notebooks = make({ maxBytes: 1000, maxBytesPerNotebook: 40 })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ t: 'é' }) // {"t":"é","id":1000} is 20 bytes
      const full = new StoreFullError('This notebook holds its maximum of 40 bytes of notes.')
      await assert.rejects(async () => a.create({ t: 'x'.repeat(10) }), full)
      const before = await seen(a, [1000])
      await assert.rejects(async () => a.update(1000, { t: 'x'.repeat(30) }), full)
      assert.deepEqual(await seen(a, [1000]), before)
      // {"t":"xxxxxxxxxxxxxxxxxxx","id":1001}: 37 bytes, in B's own 40.
      assert.equal(
        (await b.create({ t: 'x'.repeat(19) })).json,
        `{"t":"${'x'.repeat(19)}","id":1001}`,
      )
      await a.update(1000, { t: null }) // {"t":null,"id":1000}: 20 bytes
      await a.update(1000, { t: 'x'.repeat(20) }) // 38 bytes
      assert.deepEqual(
        [await a.stats(), await b.stats(), await notebooks.stats()],
        [
          { notes: 1, bytes: 38, maxNotes: 1 << 24, maxBytes: 40 },
          { notes: 1, bytes: 37, maxNotes: 1 << 24, maxBytes: 40 },
          { notes: 2, bytes: 75, maxNotes: 1 << 24, maxBytes: 1000 },
        ],
      )
    })

    it("refuses a write past the service's caps in any notebook, and a delete in one frees room for another", async () => {
      const notebooks = make({ maxNotes: 3, maxNotesPerNotebook: 2 })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({}) // 1000
      await a.create({}) // 1001
      await b.create({}) // 1002
      const before = { a: await seen(a, [1000, 1001]), b: await seen(b, [1002]) }
      await assert.rejects(
        async () => b.create({}),
        new StoreFullError('The service holds its maximum of 3 notes.', SHARED_ROOM_ADVICE),
      )
      // Both caps passed: the notebook's is the one named.
      await assert.rejects(
        async () => a.create({}),
        new StoreFullError('This notebook holds its maximum of 2 notes.'),
      )
      await assert.rejects(
        async () => notebooks.notebook('c').createOnce('k', 'f', {}),
        new StoreFullError('The service holds its maximum of 3 notes.', SHARED_ROOM_ADVICE),
      )
      assert.deepEqual({ a: await seen(a, [1000, 1001]), b: await seen(b, [1002]) }, before)
      assert.deepEqual((await notebooks.stats()).notes, 3)
      assert.equal(await a.delete(1001), true)
      // The trash of one notebook counts toward the service's caps, until it is emptied.
      await assert.rejects(async () => b.create({}), StoreFullError)
      assert.equal(await a.emptyTrash(), 1)
      assert.equal((await b.create({})).json, '{"id":1003}')
      assert.deepEqual(await notebooks.stats(), {
        notes: 3,
        bytes: 33,
        maxNotes: 3,
        maxBytes: 1 << 24,
      })
    })

    it("refuses an update past the service's byte cap and changes nothing; shrinking elsewhere makes room", async () => {
      const notebooks = make({ maxBytes: 60, maxBytesPerNotebook: 50 })
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      await a.create({ t: 'x'.repeat(20) }) // {"t":"xxxxxxxxxxxxxxxxxxxx","id":1000}: 38 bytes
      await b.create({ t: '' }) // {"t":"","id":1001}: 18 bytes
      const before = { a: await seen(a, [1000]), b: await seen(b, [1001]) }
      const full = new StoreFullError(
        'The service holds its maximum of 60 bytes of notes.',
        SHARED_ROOM_ADVICE,
      )
      await assert.rejects(async () => b.update(1001, { t: 'y'.repeat(10) }), full)
      await assert.rejects(async () => b.create({ u: 1 }), full)
      assert.deepEqual({ a: await seen(a, [1000]), b: await seen(b, [1001]) }, before)
      await a.update(1000, { t: 'x' }, 'merge-patch') // {"t":"x","id":1000}: 19 bytes
      const grown = copy(await b.update(1001, { t: 'y'.repeat(10) })) as NoteRecord
      assert.equal(grown.json, '{"t":"yyyyyyyyyy","id":1001}')
      assert.deepEqual(await notebooks.stats(), {
        notes: 2,
        bytes: 19 + 28,
        maxNotes: 1 << 24,
        maxBytes: 60,
      })
    })

    it('counts notes and bytes over every notebook, and each notebook its own', async () => {
      const notebooks = make({
        now: fixedClock(1),
        maxNotes: 100,
        maxBytes: 10_000,
        maxNotesPerNotebook: 10,
        maxBytesPerNotebook: 1000,
      })
      assert.deepEqual(await notebooks.stats(), {
        notes: 0,
        bytes: 0,
        maxNotes: 100,
        maxBytes: 10_000,
      })
      const a = notebooks.notebook('a')
      await a.create({}) // {"id":1}: 8 bytes
      await a.create({ é: 'é' }) // {"é":"é","id":2}: 18 bytes
      await notebooks.notebook('b').create({}) // 8
      await notebooks.notebook('b').delete(3)
      await notebooks.notebook('c').create({ c: [1, 2] }) // {"c":[1,2],"id":4}: 18
      assert.deepEqual(await notebooks.stats(), {
        notes: 3,
        bytes: 44,
        maxNotes: 100,
        maxBytes: 10_000,
      })
      assert.deepEqual(await a.stats(), { notes: 2, bytes: 26, maxNotes: 10, maxBytes: 1000 })
      assert.deepEqual(await notebooks.notebook('b').stats(), {
        notes: 0,
        bytes: 0,
        maxNotes: 10,
        maxBytes: 1000,
      })
    })

    it('gives the same notebook for the same name, and treats names as opaque strings', async () => {
      const notebooks = make({ now: fixedClock(1) })
      const names = ['a', 'A', 'a ', '', '__proto__', 'constructor', '0', 'ü/../b']
      for (const nb of names) await notebooks.notebook(nb).create({ nb })
      for (const [i, nb] of names.entries()) {
        assert.equal(
          (await notebooks.notebook(nb).list()).json,
          `[${JSON.stringify({ nb, id: i + 1 })}]`,
        )
      }
      assert.equal((await notebooks.stats()).notes, names.length)
    })
  })
}
