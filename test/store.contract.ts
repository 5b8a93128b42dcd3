import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  type NoteFields,
  type NoteRecord,
  type NoteStore,
  type PatchKind,
  PreconditionFailed,
  StoreFullError,
} from '../src/store/types.js'
import { RFC7396_EXAMPLES, withIdJson } from './merge-patch-cases.js'

export interface ContractStoreOptions {
  maxNotes?: number
  maxBytes?: number
  now?: () => number
}

/**
 * The behaviour every NoteStore must have. Each backend's test file calls this with a factory;
 * `await` works for both synchronous and promise-returning stores.
 */
export function runStoreContract(
  name: string,
  makeRawStore: (options: ContractStoreOptions) => NoteStore,
): void {
  const makeStore = (options: ContractStoreOptions) => textView(makeRawStore(options))
  const fixedClock = (t: number) => () => t
  const parse = (json: string | undefined): unknown =>
    json === undefined ? undefined : JSON.parse(json)

  describe(`NoteStore contract: ${name}`, () => {
    it('creates a note with every field plus a time-based id that overrides a body id', async () => {
      const store = makeStore({ now: fixedClock(1_700_000_000_000) })
      const json = await store.create({ title: 'a', id: 'mine', n: [1, { x: null }] })
      assert.deepEqual(parse(json), { title: 'a', id: 1_700_000_000_000, n: [1, { x: null }] })
    })

    it('gives ids equal to the clock when it moves, and last + 1 when it does not', async () => {
      let t = 1000
      const store = makeStore({ now: () => t })
      const ids: unknown[] = []
      for (const next of [1000, 1000, 1000, 5000, 5000, 2000]) {
        t = next
        ids.push((parse(await store.create({})) as { id: number }).id)
      }
      assert.deepEqual(ids, [1000, 1001, 1002, 5000, 5001, 5002])
    })

    it('skips ids that a patched note already holds', async () => {
      const store = makeStore({ now: fixedClock(100) })
      await store.create({}) // id 100
      await store.update(100, { id: 101 })
      await store.create({}) // 101 is taken, and so would be max(now, 100 + 1)
      assert.deepEqual(parse(await store.list()), [{ id: 101 }, { id: 102 }])
    })

    it('steps over an id that a patch moved ahead of the next one', async () => {
      const store = makeStore({ now: fixedClock(100) })
      await store.create({}) // id 100
      await store.update(100, { id: 102 })
      await store.create({}) // 101
      await store.create({}) // 102 is taken: 103
      await store.create({}) // 104
      assert.deepEqual(
        (parse(await store.list()) as { id: number }[]).map((note) => note.id),
        [102, 101, 103, 104],
      )
      assert.deepEqual(parse(await store.get(102)), { id: 102 })
      assert.deepEqual(parse(await store.get(103)), { id: 103 })
    })

    it('lists notes in insertion order, and [] when empty', async () => {
      const store = makeStore({ now: fixedClock(1) })
      assert.equal(await store.list(), '[]')
      await store.create({ a: 1 })
      await store.create({ b: 2 })
      assert.deepEqual(parse(await store.list()), [
        { a: 1, id: 1 },
        { b: 2, id: 2 },
      ])
    })

    it('gets a note by id and answers undefined for a missing one', async () => {
      const store = makeStore({ now: fixedClock(7) })
      await store.create({ t: 'x' })
      assert.deepEqual(parse(await store.get(7)), { t: 'x', id: 7 })
      assert.equal(await store.get(8), undefined)
    })

    it('merges a patch shallowly, keeping the list position', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({ a: 1, nested: { x: 1, y: 2 } })
      await store.create({ b: 1 })
      const merged = await store.update(1, { nested: { z: 3 }, c: 'new' })
      assert.deepEqual(parse(merged), { a: 1, nested: { z: 3 }, id: 1, c: 'new' })
      assert.deepEqual(parse(await store.list()), [
        { a: 1, nested: { z: 3 }, id: 1, c: 'new' },
        { b: 1, id: 2 },
      ])
      assert.equal(await store.update(99, { a: 2 }), undefined)
    })

    it('moves a note to a patched id and leaves the old id empty', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({})
      await store.update(1, { id: 50 })
      assert.equal(await store.get(1), undefined)
      assert.deepEqual(parse(await store.get(50)), { id: 50 })
    })

    it('does not find a note whose id was patched to a string', async () => {
      const store = makeStore({ now: fixedClock(7) })
      await store.create({})
      await store.update(7, { id: '7' })
      assert.equal(await store.get(7), undefined)
      assert.deepEqual(parse(await store.list()), [{ id: '7' }])
    })

    it('acts on the first note in list order when two share an id', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({ n: 'first' }) // 1
      await store.create({ n: 'second' }) // 2
      await store.create({ n: 'third' }) // 3
      await store.update(3, { id: 2 })
      await store.update(1, { id: 2 })
      assert.deepEqual(parse(await store.get(2)), { n: 'first', id: 2 })
      assert.equal(await store.delete(2), true)
      assert.deepEqual(parse(await store.get(2)), { n: 'second', id: 2 })
      assert.equal(await store.delete(2), true)
      assert.deepEqual(parse(await store.get(2)), { n: 'third', id: 2 })
      assert.deepEqual(parse(await store.list()), [{ n: 'third', id: 2 }])
    })

    it('deletes a note and answers false for a missing one', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({})
      await store.create({})
      assert.equal(await store.delete(1), true)
      assert.equal(await store.delete(1), false)
      assert.deepEqual(parse(await store.list()), [{ id: 2 }])
    })

    it('stores __proto__, constructor and prototype as plain data', async () => {
      const store = makeStore({ now: fixedClock(1) })
      const fields = JSON.parse(
        '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},"prototype":2}',
      )
      const json = await store.create(fields)
      assert.equal(
        json,
        '{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},"prototype":2,"id":1}',
      )
      const patched = await store.update(1, JSON.parse('{"__proto__":{"again":1}}'))
      assert.equal(
        patched,
        '{"__proto__":{"again":1},"constructor":{"prototype":{"x":1}},"prototype":2,"id":1}',
      )
      assert.equal(({} as Record<string, unknown>).polluted, undefined)
      assert.equal(({} as Record<string, unknown>).again, undefined)
    })

    it('does not modify the fields object it is given', async () => {
      const store = makeStore({ now: fixedClock(1) })
      const fields = { id: 'keep', a: 1 }
      await store.create(fields)
      const patch = { b: 2 }
      await store.update(1, patch)
      assert.deepEqual(fields, { id: 'keep', a: 1 })
      assert.deepEqual(patch, { b: 2 })
    })

    it('refuses a create past the note cap and keeps what it has', async () => {
      const store = makeStore({ now: fixedClock(1), maxNotes: 2 })
      await store.create({ a: 1 })
      await store.create({ a: 2 })
      await assert.rejects(async () => store.create({ a: 3 }), StoreFullError)
      assert.deepEqual(parse(await store.list()), [
        { a: 1, id: 1 },
        { a: 2, id: 2 },
      ])
      await store.delete(1)
      assert.deepEqual(parse(await store.create({ a: 3 })), { a: 3, id: 3 })
    })

    it('refuses writes past the byte cap, and counts bytes as UTF-8', async () => {
      const store = makeStore({ now: fixedClock(1), maxBytes: 40 })
      await store.create({ t: 'é' }) // {"t":"é","id":1} is 17 bytes
      assert.equal((await store.stats()).bytes, 17)
      await assert.rejects(async () => store.create({ t: 'x'.repeat(20) }), StoreFullError)
      await assert.rejects(async () => store.update(1, { t: 'x'.repeat(30) }), StoreFullError)
      assert.deepEqual(parse(await store.list()), [{ t: 'é', id: 1 }])
      await store.update(1, { t: 'x'.repeat(20) })
      assert.deepEqual(await store.stats(), {
        notes: 1,
        bytes: 35,
        maxNotes: 1_000_000,
        maxBytes: 40,
      })
      await store.delete(1)
      assert.equal((await store.stats()).bytes, 0)
    })
    for (const { target, patch, result } of RFC7396_EXAMPLES) {
      it(`applies the merge patch ${patch} to ${target} as RFC 7396 does: ${result}`, async () => {
        const store = makeStore({ now: fixedClock(1) })
        await store.create(JSON.parse(target))
        await store.create({ other: true })
        const patched = await store.update(1, JSON.parse(patch), 'merge-patch')
        assert.deepEqual(parse(patched), JSON.parse(withIdJson(result, 1)))
        assert.deepEqual(parse(await store.list()), [
          JSON.parse(withIdJson(result, 1)),
          { other: true, id: 2 },
        ])
        assert.equal(
          (await store.stats()).bytes,
          Buffer.byteLength(`${patched}{"other":true,"id":2}`),
        )
      })
    }

    it('keeps the shallow merge by default and for kind "merge": null is a value', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({ a: { b: 1, c: 2 }, d: 3 })
      assert.equal(await store.update(1, { a: { b: null } }), '{"a":{"b":null},"d":3,"id":1}')
      assert.equal(await store.update(1, { d: null }, 'merge'), '{"a":{"b":null},"d":null,"id":1}')
    })

    it('merge patch: keeps each kept key in its place and adds new ones at the end', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({ a: 1, b: { x: 1, y: 2 }, c: 3 })
      assert.equal(
        await store.update(
          1,
          { c: null, b: { x: null, z: [null, { n: null }] }, e: 5, a: 0 },
          'merge-patch',
        ),
        '{"a":0,"b":{"y":2,"z":[null,{"n":null}]},"id":1,"e":5}',
      )
      assert.equal(await store.update(2, { a: 1 }, 'merge-patch'), undefined)
      assert.equal(
        await store.update(1, {}, 'merge-patch'),
        '{"a":0,"b":{"y":2,"z":[null,{"n":null}]},"id":1,"e":5}',
      )
    })

    it('merge patch: __proto__ and constructor are plain data at any depth', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create(JSON.parse('{"deep":{"__proto__":{"keep":1,"drop":2}}}'))
      const patch = JSON.parse(
        '{"__proto__":{"polluted":true},"deep":{"__proto__":{"drop":null,"again":true},"constructor":{"prototype":{"x":1}}},"new":{"a":{"__proto__":{"b":null,"c":true}}}}',
      )
      const before = JSON.stringify(patch)
      const patched = await store.update(1, patch, 'merge-patch')
      assert.equal(
        patched,
        '{"deep":{"__proto__":{"keep":1,"again":true},"constructor":{"prototype":{"x":1}}},"id":1,"__proto__":{"polluted":true},"new":{"a":{"__proto__":{"c":true}}}}',
      )
      assert.equal(JSON.stringify(patch), before)
      assert.equal(({} as Record<string, unknown>).polluted, undefined)
      assert.equal(({} as Record<string, unknown>).again, undefined)
      assert.equal(({} as Record<string, unknown>).c, undefined)
      assert.equal(Object.getPrototypeOf(JSON.parse(patched as string).deep), Object.prototype)
      const removed = await store.update(
        1,
        JSON.parse('{"__proto__":null,"deep":{"__proto__":null}}'),
        'merge-patch',
      )
      assert.equal(
        removed,
        '{"deep":{"constructor":{"prototype":{"x":1}}},"id":1,"new":{"a":{"__proto__":{"c":true}}}}',
      )
    })

    it('merge patch: moves the note to a patched id, and one that removes id leaves it listed but unreachable', async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({ a: 1 }) // 1
      await store.create({ b: 1 }) // 2
      assert.equal(await store.update(1, { id: 50 }, 'merge-patch'), '{"a":1,"id":50}')
      assert.equal(await store.get(1), undefined)
      assert.equal(await store.get(50), '{"a":1,"id":50}')
      assert.equal(await store.update(50, { id: null, a: 2 }, 'merge-patch'), '{"a":2}')
      assert.equal(await store.get(50), undefined)
      assert.equal(await store.update(50, { id: 50 }, 'merge-patch'), undefined)
      assert.equal(await store.delete(50), false)
      assert.equal(await store.list(), '[{"a":2},{"b":1,"id":2}]')
      assert.equal((await store.stats()).notes, 2)
      // The id it held is free again for creates.
      await store.update(2, { id: 3 }, 'merge-patch')
      assert.equal(await store.create({}), '{"id":4}')
    })

    it('merge patch: refuses a note grown past the byte cap and changes nothing', async () => {
      const store = makeStore({ now: fixedClock(1), maxBytes: 40 })
      await store.create({ t: 'é', o: { a: 1 } }) // {"t":"é","o":{"a":1},"id":1} is 29 bytes
      assert.equal((await store.stats()).bytes, 29)
      await assert.rejects(
        async () => store.update(1, { t: null, o: { b: 'x'.repeat(20) } }, 'merge-patch'),
        StoreFullError,
      )
      assert.equal(await store.list(), '[{"t":"é","o":{"a":1},"id":1}]')
      assert.equal((await store.stats()).bytes, 29)
      // Removing fields makes room: the cap applies to the merged result.
      assert.equal(
        await store.update(1, { t: null, o: { a: null, b: 'x'.repeat(12) } }, 'merge-patch'),
        '{"o":{"b":"xxxxxxxxxxxx"},"id":1}',
      )
      assert.equal((await store.stats()).bytes, 33)
    })
  })
}

/**
 * The store's notes as JSON text, which is what the contract's first tests compare: create, get
 * and update answer the note's JSON, list the array's.
 */
function textView(store: NoteStore) {
  const text = (note: NoteRecord | undefined | PreconditionFailed): string | undefined => {
    if (note instanceof PreconditionFailed) throw new Error('unexpected PreconditionFailed')
    return note?.json
  }
  return {
    create: async (fields: NoteFields) => (await store.create(fields)).json,
    list: async () => (await store.list()).json,
    get: async (id: number) => text(await store.get(id)),
    update: async (id: number, fields: NoteFields, kind?: PatchKind) =>
      text(await store.update(id, fields, kind)),
    delete: async (id: number) => store.delete(id),
    stats: async () => store.stats(),
  }
}
