import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  type Change,
  IdempotencyKeyReusedError,
  type MaybePromise,
  type NoteFields,
  type NoteRecord,
  type NoteStore,
  type NoteWriter,
  type PageQuery,
  type PatchKind,
  PreconditionFailed,
  StoreFullError,
} from '../../src/store/types.js'
import { RFC7396_EXAMPLES, withIdJson } from './merge-patch-cases.js'

export interface ContractStoreOptions {
  maxNotes?: number
  maxBytes?: number
  now?: () => number
  /** Changes kept for replay (CHANGE_HISTORY). */
  historyLimit?: number
}

/**
 * Resolves once `ready()` holds (a store may deliver its changes asynchronously), checked every
 * 5 ms; 20 s at most, a bound on waiting that a machine busy with other test files keeps.
 */
export async function waitUntil(ready: () => boolean): Promise<void> {
  for (const giveUpAt = Date.now() + 20_000; !ready(); ) {
    if (Date.now() > giveUpAt) throw new Error('timed out waiting for the store')
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A page query with the defaults filled in: { limit: 100, order: 'asc' } unless given. */
export const page = (query: Partial<PageQuery>): PageQuery => ({
  limit: 100,
  order: 'asc',
  after: undefined,
  q: undefined,
  ...query,
})

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

    it('applies every one of many concurrent updates and deletes of one note, losing none', async () => {
      const store = makeStore({ now: fixedClock(100) })
      await store.create({}) // id 100
      await store.create({ keep: true }) // id 101
      const fields = Array.from({ length: 40 }, (_, i) => `f${i}`)
      const answers = await Promise.all(fields.map((f) => store.update(100, { [f]: true })))
      assert.ok(answers.every((json) => typeof json === 'string'))
      const note = parse(await store.get(100)) as Record<string, unknown>
      assert.deepEqual(Object.keys(note).sort(), ['id', ...fields].sort())
      const deletes = await Promise.all([1, 2, 3, 4].map(() => store.delete(100)))
      assert.deepEqual(deletes.sort(), [false, false, false, true])
      assert.deepEqual(parse(await store.list()), [{ keep: true, id: 101 }])
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
      // A deleted note counts until it leaves the trash.
      await assert.rejects(async () => store.create({ a: 3 }), StoreFullError)
      assert.equal(await store.purge(1), true)
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
    it("replace: the body's fields become the note, its id kept in place, its list position kept", async () => {
      const store = makeStore({ now: fixedClock(1) })
      await store.create({ a: 1, nested: { x: 1 } })
      await store.create({ b: 1 })
      assert.equal(
        await store.update(1, { c: 'new', nested: { y: 2 } }, 'replace'),
        '{"c":"new","nested":{"y":2},"id":1}',
      )
      // A body id is overridden where it stands, as on create: the note stays at its id.
      assert.equal(
        await store.update(1, JSON.parse('{"__proto__":{"a":1},"id":7,"e":[null]}'), 'replace'),
        '{"__proto__":{"a":1},"id":1,"e":[null]}',
      )
      assert.equal(await store.get(7), undefined)
      assert.equal(await store.update(1, {}, 'replace'), '{"id":1}')
      assert.equal(await store.list(), '[{"id":1},{"b":1,"id":2}]')
      assert.equal((await store.stats()).bytes, 8 + 14)
      assert.equal(await store.update(99, { a: 2 }, 'replace'), undefined)
    })

    it('replace: refuses a note past the byte cap and changes nothing; a smaller one frees bytes', async () => {
      const store = makeStore({ now: fixedClock(1), maxBytes: 40 })
      await store.create({ t: 'é', o: { a: 1 } }) // {"t":"é","o":{"a":1},"id":1} is 29 bytes
      await assert.rejects(
        async () => store.update(1, { t: 'x'.repeat(40) }, 'replace'),
        StoreFullError,
      )
      assert.equal(await store.list(), '[{"t":"é","o":{"a":1},"id":1}]')
      assert.equal(await store.update(1, { u: 2 }, 'replace'), '{"u":2,"id":1}')
      assert.equal((await store.stats()).bytes, 14)
    })

    describe('versions, conditions, pages, search, idempotency and changes', () => {
      const raw = (now = 1000) => makeRawStore({ now: fixedClock(now) })

      it('replaces under If-Match and If-Unmodified-Since, as one updated change', async () => {
        const store = raw(3000)
        const start = await store.version()
        const note = await store.create({ a: 1, b: 2 })
        const noteThen = { json: note.json, etag: note.etag, modified: note.modified }
        assert.deepEqual(
          await store.update(3000, { c: 3 }, 'replace', { ifMatch: ['"other"'] }),
          new PreconditionFailed(noteThen),
        )
        assert.deepEqual(
          await store.update(3000, { c: 3 }, 'replace', { ifUnmodifiedSince: 1000 }),
          new PreconditionFailed(noteThen),
        )
        const written = (await store.update(3000, { c: 3 }, 'replace', {
          ifMatch: [note.etag],
        })) as NoteRecord
        assert.equal(written.json, '{"c":3,"id":3000}')
        assert.equal(written.etag, JSON.stringify(await store.version()))
        assert.equal((await store.get(3000))?.json, '{"c":3,"id":3000}')
        const changes = (await store.changesSince(start, 100)) ?? []
        assert.deepEqual(
          changes.map(({ type, data }) => [type, data]),
          [
            ['created', '{"a":1,"b":2,"id":3000}'],
            ['updated', '{"c":3,"id":3000}'],
          ],
        )
        assert.equal(await store.update(3001, { c: 3 }, 'replace', { ifMatch: '*' }), undefined)
      })

      it("advances the version on every write; a note's ETag is the version its write made", async () => {
        const store = raw()
        const versions = [await store.version()]
        const created = await store.create({ a: 1 })
        versions.push(await store.version())
        assert.equal(created.etag, JSON.stringify(versions[1]))
        assert.equal(created.modified, 1000)
        assert.deepEqual(await store.get(1000), created)
        const updated = await store.update(1000, { a: 2 })
        versions.push(await store.version())
        assert.equal((updated as NoteRecord).etag, JSON.stringify(versions[2]))
        assert.equal(await store.delete(1000), true)
        versions.push(await store.version())
        assert.equal(new Set(versions).size, 4)
        const list = await store.list()
        assert.deepEqual(list, { json: '[]', version: versions[3], count: 0 })
      })

      it('applies If-Match and If-Unmodified-Since atomically with the write', async () => {
        const store = raw(5000)
        const note = await store.create({ a: 1 })
        const stale = await store.update(5000, { a: 2 }, 'merge', { ifMatch: ['"other"'] })
        const noteThen = { json: note.json, etag: note.etag, modified: note.modified }
        assert.deepEqual(stale, new PreconditionFailed(noteThen))
        const written = (await store.update(5000, { a: 3 }, 'merge', {
          ifMatch: ['"x"', noteThen.etag],
        })) as NoteRecord
        const matched = { json: written.json, etag: written.etag, modified: written.modified }
        assert.equal(matched.json, '{"a":3,"id":5000}')
        assert.deepEqual(
          await store.delete(5000, { ifMatch: [noteThen.etag] }),
          new PreconditionFailed(matched),
        )
        assert.deepEqual(
          await store.delete(5000, { ifUnmodifiedSince: 4000 }),
          new PreconditionFailed(matched),
        )
        assert.equal(await store.delete(5000, { ifMatch: '*', ifUnmodifiedSince: 5000 }), true)
        assert.equal(await store.delete(5000, { ifMatch: '*' }), false)
        assert.equal(await store.update(5000, {}, 'merge', { ifMatch: '*' }), undefined)
      })

      it('pages by list position both ways, and a walk survives writes between pages', async () => {
        const store = raw(1)
        for (let i = 0; i < 5; i++) await store.create({ n: i })
        const first = await store.page(page({ limit: 2 }))
        assert.equal(first.json, '[{"n":0,"id":1},{"n":1,"id":2}]')
        assert.equal(first.total, 5)
        assert.equal(first.version, await store.version())
        assert.equal(typeof first.next, 'number')
        await store.delete(3)
        await store.update(2, { id: 9 })
        await store.create({ n: 5 })
        const second = await store.page(page({ limit: 2, after: first.next }))
        assert.equal(second.json, '[{"n":3,"id":4},{"n":4,"id":5}]')
        const third = await store.page(page({ limit: 2, after: second.next }))
        assert.deepEqual([third.json, third.next, third.total], ['[{"n":5,"id":6}]', undefined, 5])
        const down = await store.page(page({ limit: 3, order: 'desc' }))
        assert.equal(down.json, '[{"n":5,"id":6},{"n":4,"id":5},{"n":3,"id":4}]')
        const rest = await store.page(page({ limit: 3, order: 'desc', after: down.next }))
        assert.deepEqual([rest.json, rest.next], ['[{"n":1,"id":9},{"n":0,"id":1}]', undefined])
      })

      it('searches string values at any depth, any case, never keys, and pages the matches', async () => {
        const store = raw(1)
        await store.create({ title: 'Buy BREAD' }) // 1
        await store.create({ bread: 'key only' }) // 2
        await store.create({ deep: [{ x: ['brEad crumbs'] }] }) // 3
        await store.create({ t: 'Crème BRÛLÉE', n: 'bread' }) // 4
        await store.create({ t: 'ſtraße 100%' }) // 5
        const all = await store.page(page({ q: 'bread' }))
        assert.deepEqual(
          [all.json, all.total, all.next],
          [
            '[{"title":"Buy BREAD","id":1},{"deep":[{"x":["brEad crumbs"]}],"id":3},{"t":"Crème BRÛLÉE","n":"bread","id":4}]',
            3,
            undefined,
          ],
        )
        const one = await store.page(page({ q: 'BREAD', limit: 1, order: 'desc' }))
        assert.deepEqual([one.json, one.total], ['[{"t":"Crème BRÛLÉE","n":"bread","id":4}]', 3])
        const two = await store.page(page({ q: 'BREAD', limit: 1, order: 'desc', after: one.next }))
        assert.equal(two.json, '[{"deep":[{"x":["brEad crumbs"]}],"id":3}]')
        assert.equal(
          (await store.page(page({ q: 'brûlée' }))).json,
          '[{"t":"Crème BRÛLÉE","n":"bread","id":4}]',
        )
        assert.equal((await store.page(page({ q: 'STRASSE' }))).total, 0)
        assert.equal(
          (await store.page(page({ q: 'Straße 100%' }))).json,
          '[{"t":"ſtraße 100%","id":5}]',
        )
        assert.equal((await store.page(page({ q: '"' }))).total, 0)
        assert.equal((await store.page(page({ q: 'id' }))).total, 0)
      })

      it('orders sort=updated by the time of last write, then id (not a number last), then list position', async () => {
        let t = 10
        const store = makeRawStore({ now: () => t })
        await store.create({ n: 'a' }) // id 10, position 1
        await store.create({ n: 'b' }) // id 11, position 2
        t = 20
        await store.create({ n: 'c' }) // id 20, position 3
        t = 30
        await store.update(10, { w: 1 }) // a: (30, 10)
        t = 5 // the clock went back
        await store.update(20, { w: 1 }) // c: (5, 20)
        t = 30
        await store.update(11, { id: 'x' }) // b: (30, Infinity, 2)
        await store.create({ n: 'd' }) // id 30: (30, 30)
        await store.create({ n: 'e' }) // id 31
        await store.update(31, { id: 'y' }) // e: (30, Infinity, 7)
        const byChange = { sort: 'updated' } as const
        const whole = await store.page(page(byChange))
        const ascending = [
          '{"n":"c","id":20,"w":1}',
          '{"n":"a","id":10,"w":1}',
          '{"n":"d","id":30}',
          '{"n":"b","id":"x"}',
          '{"n":"e","id":"y"}',
        ]
        assert.deepEqual(
          [whole.json, whole.total, whole.next, whole.version],
          [`[${ascending.join(',')}]`, 5, undefined, await store.version()],
        )
        const down = await store.page(page({ ...byChange, order: 'desc' }))
        assert.equal(down.json, `[${ascending.toReversed().join(',')}]`)
        // Pages of two, through the notes written in the same ms, both ways.
        for (const order of ['asc', 'desc'] as const) {
          const walked: string[] = []
          const nexts: unknown[] = []
          let after: PageQuery['after']
          do {
            const one = await store.page(page({ ...byChange, order, limit: 2, after }))
            walked.push(one.json)
            nexts.push(one.next)
            after = one.next
          } while (after !== undefined)
          const notes = order === 'asc' ? ascending : ascending.toReversed()
          assert.deepEqual(walked, [
            `[${notes.slice(0, 2).join(',')}]`,
            `[${notes.slice(2, 4).join(',')}]`,
            `[${notes[4]}]`,
          ])
          assert.deepEqual(
            nexts,
            order === 'asc'
              ? [
                  { modified: 30, id: 10, position: 1 },
                  { modified: 30, id: Number.POSITIVE_INFINITY, position: 2 },
                  undefined,
                ]
              : [
                  { modified: 30, id: Number.POSITIVE_INFINITY, position: 2 },
                  { modified: 30, id: 10, position: 1 },
                  undefined,
                ],
          )
        }
        await assert.rejects(
          async () => store.page(page({ after: { modified: 30, id: 10, position: 1 } })),
          TypeError,
        )
        await assert.rejects(async () => store.page(page({ ...byChange, after: 3 })), TypeError)
      })

      it('searches in the order of last change, counting the matches, and pages them both ways', async () => {
        let t = 1
        const store = makeRawStore({ now: () => t })
        for (const title of ['Bread 1', 'milk', 'bread 3', 'BREAD 4', 'tea']) {
          await store.create({ title })
          t++
        }
        await store.update(1, { title: 'Bread 1, again' }) // at 6
        const byChange = { sort: 'updated', q: 'bread' } as const
        const all = await store.page(page(byChange))
        assert.deepEqual(
          [all.json, all.total, all.next],
          [
            '[{"title":"bread 3","id":3},{"title":"BREAD 4","id":4},{"title":"Bread 1, again","id":1}]',
            3,
            undefined,
          ],
        )
        const one = await store.page(page({ ...byChange, order: 'desc', limit: 2 }))
        assert.deepEqual(
          [one.json, one.total, one.next],
          [
            '[{"title":"Bread 1, again","id":1},{"title":"BREAD 4","id":4}]',
            3,
            { modified: 4, id: 4, position: 4 },
          ],
        )
        const two = await store.page(
          page({ ...byChange, order: 'desc', limit: 2, after: one.next }),
        )
        assert.deepEqual([two.json, two.next], ['[{"title":"bread 3","id":3}]', undefined])
        const up = await store.page(
          page({ ...byChange, limit: 1, after: { modified: 3, id: 3, position: 3 } }),
        )
        assert.deepEqual(
          [up.json, up.next],
          ['[{"title":"BREAD 4","id":4}]', { modified: 4, id: 4, position: 4 }],
        )
        assert.equal((await store.page(page({ sort: 'updated', q: 'coffee' }))).json, '[]')
      })

      it('visits every note not written during an updated walk once, and one written in it again with its last content', async () => {
        let t = 100
        const store = makeRawStore({ now: () => t })
        for (let n = 0; n < 6; n++) {
          await store.create({ n })
          t++
        }
        const byChange = { sort: 'updated', limit: 2 } as const
        const first = await store.page(page(byChange))
        assert.equal(first.json, '[{"n":0,"id":100},{"n":1,"id":101}]')
        t = 200
        await store.update(100, { v: 2 }) // seen already: comes again at the end
        await store.update(103, { v: 2 }) // not seen yet: comes once, at the end
        await store.delete(104)
        await store.create({ n: 6 }) // id 200, at 200: after 100 (id 100) and 103 in the same ms
        const second = await store.page(page({ ...byChange, after: first.next }))
        assert.equal(second.json, '[{"n":2,"id":102},{"n":5,"id":105}]')
        const third = await store.page(page({ ...byChange, after: second.next }))
        assert.equal(third.json, '[{"n":0,"id":100,"v":2},{"n":3,"id":103,"v":2}]')
        const fourth = await store.page(page({ ...byChange, after: third.next }))
        assert.deepEqual(
          [fourth.json, fourth.next, fourth.total],
          ['[{"n":6,"id":200}]', undefined, 6],
        )
        // Newest first: the notes written during the walk were ahead of it, and are not seen.
        const down = await store.page(page({ ...byChange, order: 'desc' }))
        assert.equal(down.json, '[{"n":6,"id":200},{"n":3,"id":103,"v":2}]')
        t = 300
        await store.update(102, { v: 3 })
        const rest = await store.page(
          page({ ...byChange, order: 'desc', limit: 10, after: down.next }),
        )
        assert.equal(rest.json, '[{"n":0,"id":100,"v":2},{"n":5,"id":105},{"n":1,"id":101}]')
      })

      it('stores creates that arrive together in arrival order, up to the note cap', async () => {
        const store = makeRawStore({ now: fixedClock(1), maxNotes: 5 })
        const results = await Promise.allSettled(
          Array.from({ length: 8 }, async (_, n) => store.create({ n })),
        )
        assert.deepEqual(
          results.map((r) => (r.status === 'fulfilled' ? r.value.json : r.reason.name)),
          [
            '{"n":0,"id":1}',
            '{"n":1,"id":2}',
            '{"n":2,"id":3}',
            '{"n":3,"id":4}',
            '{"n":4,"id":5}',
            'StoreFullError',
            'StoreFullError',
            'StoreFullError',
          ],
        )
        assert.equal((await store.list()).count, 5)
      })

      it('creates once per idempotency key, and refuses the key with another body', async () => {
        const store = raw(7)
        const first = await store.createOnce('k1', 'body-a', { a: 1 })
        assert.equal(first.replayed, false)
        assert.equal(first.note.json, '{"a":1,"id":7}')
        await store.update(7, { a: 2 })
        const again = await store.createOnce('k1', 'body-a', { a: 1 })
        assert.deepEqual(again, { note: first.note, replayed: true })
        await assert.rejects(
          async () => store.createOnce('k1', 'body-b', { b: 1 }),
          IdempotencyKeyReusedError,
        )
        const other = await store.createOnce('k2', 'body-a', { a: 1 })
        assert.deepEqual([other.replayed, other.note.json], [false, '{"a":1,"id":8}'])
        assert.equal((await store.stats()).notes, 2)
      })

      it('answers the changes after a version, and undefined for a token it never gave', async () => {
        const store = raw(10)
        const start = await store.version()
        await store.create({ a: 1 })
        const afterCreate = await store.version()
        await store.update(10, { a: 2 })
        await store.delete(10)
        const changes = (await store.changesSince(start, 100)) ?? []
        assert.deepEqual(
          changes.map(({ type, data }) => [type, data]),
          [
            ['created', '{"a":1,"id":10}'],
            ['updated', '{"a":2,"id":10}'],
            ['deleted', '{"id":10}'],
          ],
        )
        assert.equal(changes[0]?.version, afterCreate)
        assert.equal(changes[2]?.version, await store.version())
        assert.deepEqual(
          changes.map((change) => change.sequence - (changes[0]?.sequence ?? 0)),
          [0, 1, 2],
        )
        assert.deepEqual(await store.changesSince(start, 1), changes.slice(0, 1))
        assert.deepEqual(await store.changesSince(await store.version(), 100), [])
        assert.equal(await store.changesSince('nope.1', 100), undefined)
        assert.equal(
          await store.changesSince(`${start.slice(0, start.lastIndexOf('.'))}.zz`, 100),
          undefined,
        )
      })

      it('tells every subscriber each change once, in order, until it unsubscribes', async () => {
        const store = raw(20)
        const seen: string[] = []
        const stop = store.subscribe((change) => seen.push(`${change.type} ${change.data}`))
        await store.create({})
        await store.update(20, { b: 1 })
        await store.delete(20)
        const deadline = Date.now() + 5000
        while (seen.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
        stop()
        await store.create({})
        await new Promise((r) => setTimeout(r, 50))
        assert.deepEqual(seen, [
          'created {"id":20}',
          'updated {"id":20,"b":1}',
          'deleted {"id":20}',
        ])
      })
    })
    describe('versions, conditions, pages, idempotency and history', () => {
      const raw = (options: ContractStoreOptions = {}) =>
        makeRawStore({ now: fixedClock(1), ...options })
      const ids = (json: string) => (JSON.parse(json) as { id: number }[]).map((note) => note.id)

      it('advances the version on every write and gives each written note that version as its ETag', async () => {
        const store = raw()
        const start = await store.version()
        const created = await store.create({ a: 1 })
        const afterCreate = await store.version()
        assert.notEqual(afterCreate, start)
        assert.equal(created.etag, JSON.stringify(afterCreate))
        assert.equal(created.modified, 1)
        assert.equal((await store.get(1))?.etag, created.etag)
        const list = await store.list()
        assert.equal(list.version, afterCreate)
        assert.equal(list.count, 1)
        const updated = await store.update(1, { b: 2 })
        assert.ok(updated !== undefined && !(updated instanceof PreconditionFailed))
        const afterUpdate = await store.version()
        assert.equal(updated.etag, JSON.stringify(afterUpdate))
        assert.notEqual(afterUpdate, afterCreate)
        assert.equal(await store.delete(1), true)
        assert.notEqual(await store.version(), afterUpdate)
        // A read or a refused write changes nothing.
        const now = await store.version()
        await store.get(1)
        await store.list()
        assert.equal(await store.delete(1), false)
        assert.equal(await store.version(), now)
      })

      it('applies If-Match and If-Unmodified-Since atomically, and answers the current note when they fail', async () => {
        let t = 5000
        const store = raw({ now: () => t })
        const first = await store.create({ a: 1 }) // id 5000, modified 5000
        const etag = first.etag
        const failed = await store.update(5000, { a: 2 }, 'merge', { ifMatch: ['"nope"'] })
        assert.ok(failed instanceof PreconditionFailed)
        assert.equal(failed.current.json, '{"a":1,"id":5000}')
        assert.equal(failed.current.etag, etag)
        assert.equal((await store.get(5000))?.json, '{"a":1,"id":5000}')
        t = 9000
        const done = await store.update(5000, { a: 2 }, 'merge', { ifMatch: ['"x"', etag] })
        assert.ok(done !== undefined && !(done instanceof PreconditionFailed))
        assert.equal(done.json, '{"a":2,"id":5000}')
        assert.equal(done.modified, 9000)
        // The old ETag no longer matches; '*' matches any note; a missing note is undefined/false.
        assert.ok((await store.delete(5000, { ifMatch: [etag] })) instanceof PreconditionFailed)
        assert.equal(await store.update(1, { a: 3 }, 'merge', { ifMatch: '*' }), undefined)
        assert.equal(await store.delete(1, { ifMatch: '*' }), false)
        // If-Unmodified-Since: written at 9.000 s, so 8 s fails and 9 s passes.
        assert.ok(
          (await store.update(5000, { a: 3 }, 'merge', { ifUnmodifiedSince: 8000 })) instanceof
            PreconditionFailed,
        )
        assert.equal(await store.delete(5000, { ifUnmodifiedSince: 9000 }), true)
      })

      it('pages by keyset in both orders, with totals and a next position while more follow', async () => {
        let t = 100
        const store = raw({ now: () => t++ })
        for (let i = 0; i < 5; i++) await store.create({ n: i }) // ids 100-104
        const asc = await store.page({ limit: 2, order: 'asc', after: undefined, q: undefined })
        assert.deepEqual(ids(asc.json), [100, 101])
        assert.equal(asc.total, 5)
        assert.equal(asc.version, await store.version())
        assert.notEqual(asc.next, undefined)
        const asc2 = await store.page({ limit: 2, order: 'asc', after: asc.next, q: undefined })
        assert.deepEqual(ids(asc2.json), [102, 103])
        const asc3 = await store.page({ limit: 2, order: 'asc', after: asc2.next, q: undefined })
        assert.deepEqual(ids(asc3.json), [104])
        assert.equal(asc3.next, undefined)
        const desc = await store.page({ limit: 3, order: 'desc', after: undefined, q: undefined })
        assert.deepEqual(ids(desc.json), [104, 103, 102])
        // A note deleted at the cursor, and one created meanwhile: the walk goes on from its place.
        await store.delete(102)
        t = 105
        await store.create({ n: 5 }) // 105
        const desc2 = await store.page({ limit: 3, order: 'desc', after: desc.next, q: undefined })
        assert.deepEqual(ids(desc2.json), [101, 100])
        assert.equal(desc2.next, undefined)
        assert.equal(desc2.total, 5)
        const exact = await store.page({ limit: 5, order: 'asc', after: undefined, q: undefined })
        assert.deepEqual(ids(exact.json), [100, 101, 103, 104, 105])
        assert.equal(exact.next, undefined)
        const empty = await store.page({
          limit: 5,
          order: 'asc',
          after: exact.next ?? 1e9,
          q: undefined,
        })
        assert.equal(empty.json, '[]')
      })

      it('searches string values at any depth, case-insensitively, never keys, and pages the matches', async () => {
        let t = 1
        const store = raw({ now: () => t++ })
        await store.create({ title: 'Buy BREAD' }) // 1
        await store.create({ bread: 'key only' }) // 2
        await store.create({ deep: [{ x: ['wholebread'] }] }) // 3
        await store.create({ n: 5, t: true, q: 'say "bread"\n' }) // 4
        await store.create({ title: 'bréad' }) // 5
        const all = await store.page({ limit: 10, order: 'asc', after: undefined, q: 'BrEaD' })
        assert.deepEqual(ids(all.json), [1, 3, 4])
        assert.equal(all.total, 3)
        const first = await store.page({ limit: 2, order: 'desc', after: undefined, q: 'bread' })
        assert.deepEqual(ids(first.json), [4, 3])
        const rest = await store.page({ limit: 2, order: 'desc', after: first.next, q: 'bread' })
        assert.deepEqual(ids(rest.json), [1])
        assert.equal(rest.total, 3)
        const quoted = await store.page({
          limit: 10,
          order: 'asc',
          after: undefined,
          q: '"bread"\n',
        })
        assert.deepEqual(ids(quoted.json), [4])
        const accent = await store.page({ limit: 10, order: 'asc', after: undefined, q: 'BRÉ' })
        assert.deepEqual(ids(accent.json), [5])
        const none = await store.page({ limit: 10, order: 'asc', after: undefined, q: 'title' })
        assert.equal(none.json, '[]')
        assert.equal(none.total, 0)
      })

      it('creates once per idempotency key, replays the first note, and refuses the key with another body', async () => {
        let t = 10
        const store = raw({ now: () => t++ })
        const first = await store.createOnce('k-1', 'print-a', { a: 1 })
        assert.equal(first.replayed, false)
        assert.equal(first.note.json, '{"a":1,"id":10}')
        await store.update(10, { a: 2 })
        const again = await store.createOnce('k-1', 'print-a', { a: 1 })
        assert.equal(again.replayed, true)
        assert.equal(again.note.json, '{"a":1,"id":10}')
        assert.equal(again.note.etag, first.note.etag)
        await assert.rejects(
          async () => store.createOnce('k-1', 'print-b', { a: 9 }),
          IdempotencyKeyReusedError,
        )
        assert.equal((await store.stats()).notes, 1)
        const other = await store.createOnce('k-2', 'print-a', { a: 1 })
        assert.equal(other.replayed, false)
        assert.equal((await store.stats()).notes, 2)
      })

      it('keeps a history of changes that replays from any version it still holds', async () => {
        const store = raw({ now: fixedClock(1), historyLimit: 3 })
        const seen: Change[] = []
        const stop = store.subscribe((change) => seen.push(change))
        const v0 = await store.version()
        await store.create({ a: 1 }) // 1
        const v1 = await store.version()
        await store.update(1, { b: 2 })
        await store.create({ c: 3 }) // 2
        await store.delete(1)
        const v4 = await store.version()
        await waitUntil(() => seen.length === 4)
        stop()
        assert.deepEqual(
          seen.map((change) => [change.type, change.data]),
          [
            ['created', '{"a":1,"id":1}'],
            ['updated', '{"a":1,"id":1,"b":2}'],
            ['created', '{"c":3,"id":2}'],
            ['deleted', '{"id":1}'],
          ],
        )
        assert.equal(seen.at(-1)?.version, v4)
        assert.equal(seen[0]?.version, v1)
        for (let i = 1; i < seen.length; i++) {
          assert.equal((seen[i] as Change).sequence, (seen[i - 1] as Change).sequence + 1)
        }
        assert.deepEqual(await store.changesSince(v1, 10), seen.slice(1))
        assert.deepEqual(await store.changesSince(v1, 1), seen.slice(1, 2))
        assert.deepEqual(await store.changesSince(v4, 10), [])
        // Four changes, three kept: v0 is too old; garbage and other stores' tokens are unknown.
        assert.equal(await store.changesSince(v0, 10), undefined)
        assert.equal(await store.changesSince('nonsense', 10), undefined)
        assert.equal(await store.changesSince(`${v4}0`, 10), undefined)
        await store.create({ d: 4 })
        assert.equal(seen.length, 4, 'stopped listeners hear nothing')
      })
    })
  })
  runBatchContract(name, makeRawStore)
}

/**
 * The batch part of the contract (NoteStore.batch): all or nothing, in order, seen
 * whole by readers and subscribers, at most once per key. `work` is written as the HTTP batch
 * writes it: every write called at once, the outcomes awaited only when the store answers
 * promises (a memory store's batch must be synchronous).
 */
function runBatchContract(
  name: string,
  makeRawStore: (options: ContractStoreOptions) => NoteStore,
): void {
  type Outcome = NoteRecord | boolean | undefined | PreconditionFailed | Error
  /** Each write run, caught, then `decide` over the outcomes, synchronously when they all are. */
  const batchOf =
    (
      writes: ((writer: NoteWriter) => MaybePromise<Outcome>)[],
      decide?: (o: Outcome[]) => string | undefined,
    ) =>
    (writer: NoteWriter): MaybePromise<string | undefined> => {
      const outcomes: MaybePromise<Outcome>[] = writes.map((write) => {
        try {
          const outcome = write(writer)
          // A copy: a synchronous store's record changes under its next write.
          return outcome instanceof Promise
            ? outcome.catch((err: unknown) => err as Error)
            : typeof outcome === 'object' && 'json' in outcome
              ? { ...outcome }
              : outcome
        } catch (err) {
          return err as Error
        }
      })
      const judge = (settled: Outcome[]) =>
        decide !== undefined
          ? decide(settled)
          : settled.every(
                (o) =>
                  o !== undefined &&
                  o !== false &&
                  !(o instanceof PreconditionFailed) &&
                  !(o instanceof Error),
              )
            ? settled
                .map((o) => (typeof o === 'object' ? (o as NoteRecord).json : String(o)))
                .join('|')
            : undefined
      return outcomes.some((o) => o instanceof Promise)
        ? Promise.all(outcomes).then(judge)
        : judge(outcomes as Outcome[])
    }
  const fixedClock = (t: number) => () => t

  describe(`NoteStore batch contract: ${name}`, () => {
    it('keeps every write of a batch, in order, each seeing the ones before it', async () => {
      const store = makeRawStore({ now: fixedClock(100) })
      await store.create({ a: 1 }) // 100
      await store.create({ b: 1 }) // 101
      const before = await store.version()
      const seen: Change[] = []
      const stop = store.subscribe((change) => seen.push(change))
      const result = await store.batch(
        batchOf([
          (w) => w.update(100, { x: 1 }),
          (w) => w.delete(101),
          (w) => w.create({ c: 1 }),
          (w) => w.update(100, { y: 2 }),
          (w) => w.create({ d: 1 }),
        ]),
      )
      assert.deepEqual(result, {
        body: '{"a":1,"id":100,"x":1}|true|{"c":1,"id":102}|{"a":1,"id":100,"x":1,"y":2}|{"d":1,"id":103}',
        replayed: false,
      })
      assert.equal(
        (await store.list()).json,
        '[{"a":1,"id":100,"x":1,"y":2},{"c":1,"id":102},{"d":1,"id":103}]',
      )
      await waitUntil(() => seen.length === 5)
      stop()
      assert.deepEqual(
        seen.map((change) => change.type),
        ['updated', 'deleted', 'created', 'updated', 'created'],
      )
      assert.deepEqual(await store.changesSince(before, 100), seen)
      assert.equal(seen.at(-1)?.version, await store.version())
      const note = await store.get(100)
      assert.equal(note?.etag, `"${(seen[3] as Change).version}"`)
    })

    it('applies nothing of a batch that one write refuses, and the next write follows on', async () => {
      const store = makeRawStore({ now: fixedClock(100) })
      await store.create({ a: 1 }) // 100
      await store.create({ b: 1 }) // 101
      const stale = (await store.get(101))?.etag as string
      await store.update(101, { b: 2 })
      const before = {
        list: (await store.list()).json,
        version: await store.version(),
        stats: await store.stats(),
      }
      const seen: Change[] = []
      const stop = store.subscribe((change) => seen.push(change))
      const refusals: [string, (w: NoteWriter) => MaybePromise<Outcome>][] = [
        ['a missing note', (w) => w.update(999, { z: 1 })],
        ['a missing note to delete', (w) => w.delete(999)],
        ['a failed If-Match', (w) => w.update(101, { z: 1 }, 'merge', { ifMatch: [stale] })],
      ]
      for (const [what, refused] of refusals) {
        const result = await store.batch(
          batchOf([
            (w) => w.update(100, { id: 500, x: 1 }),
            (w) => w.create({ c: 1 }),
            (w) => w.delete(101),
            (w) => w.create({ d: 1 }),
            refused,
          ]),
        )
        assert.equal(result, undefined, what)
        assert.equal((await store.list()).json, before.list, what)
        assert.equal(await store.version(), before.version, what)
        assert.deepEqual(await store.stats(), before.stats, what)
        assert.deepEqual(await store.changesSince(before.version, 10), [], what)
        assert.equal((await store.get(100))?.json, '{"a":1,"id":100}', what)
        assert.equal(await store.get(500), undefined, what)
      }
      const next = await store.create({ e: 1 })
      assert.equal(next.json, '{"e":1,"id":102}')
      const changes = (await store.changesSince(before.version, 10)) ?? []
      assert.deepEqual(
        changes.map((change) => change.data),
        ['{"e":1,"id":102}'],
      )
      await waitUntil(() => seen.length === 1)
      stop()
      assert.deepEqual(seen, changes)
    })

    it('puts a note back in the order of last change when its batch is undone', async () => {
      let t = 100
      const store = makeRawStore({ now: () => t })
      await store.create({ a: 1 }) // 100
      t = 101
      await store.create({ b: 1 }) // 101
      const byChange = page({ sort: 'updated' })
      const before = (await store.page(byChange)).json
      t = 200
      const result = await store.batch(
        batchOf([
          (w) => w.update(100, { id: 'moved' }),
          (w) => w.delete(101),
          (w) => w.create({ c: 1 }),
          (w) => w.update(999, {}),
        ]),
      )
      assert.equal(result, undefined)
      assert.equal((await store.page(byChange)).json, before)
      assert.equal(before, '[{"a":1,"id":100},{"b":1,"id":101}]')
      await store.update(100, { a: 2 })
      assert.equal(
        (await store.page(page({ sort: 'updated', order: 'desc' }))).json,
        '[{"a":2,"id":100},{"b":1,"id":101}]',
      )
    })

    it('refuses a batch past the note or byte cap whole, and frees what it took', async () => {
      const store = makeRawStore({ now: fixedClock(1), maxNotes: 3, maxBytes: 200 })
      await store.create({ n: 0 })
      let full: Error | undefined
      const decide = (outcomes: Outcome[]) => {
        full = outcomes.find((o): o is Error => o instanceof Error)
        return full === undefined ? 'kept' : undefined
      }
      const tooMany = await store.batch(
        batchOf(
          [(w) => w.create({ n: 1 }), (w) => w.create({ n: 2 }), (w) => w.create({ n: 3 })],
          decide,
        ),
      )
      assert.equal(tooMany, undefined)
      assert.ok(full instanceof StoreFullError)
      const tooBig = await store.batch(
        batchOf(
          [(w) => w.update(1, { n: 'x'.repeat(100) }), (w) => w.create({ n: 'y'.repeat(100) })],
          decide,
        ),
      )
      assert.equal(tooBig, undefined)
      assert.ok(full instanceof StoreFullError)
      assert.deepEqual(await store.stats(), { notes: 1, bytes: 14, maxNotes: 3, maxBytes: 200 })
      const fits = await store.batch(
        batchOf([(w) => w.create({ n: 1 }), (w) => w.create({ n: 2 })], decide),
      )
      assert.equal(fits?.body, 'kept')
      assert.equal((await store.list()).json, '[{"n":0,"id":1},{"n":1,"id":2},{"n":2,"id":3}]')
    })

    it('rethrows what `work` throws, with nothing applied', async () => {
      const store = makeRawStore({ now: fixedClock(1) })
      await store.create({ n: 0 })
      const before = await store.version()
      const boom = new Error('boom')
      await assert.rejects(
        async () =>
          store.batch((w) => {
            const created = w.create({ n: 1 })
            if (created instanceof Promise) return created.then(() => Promise.reject(boom))
            throw boom
          }),
        boom,
      )
      assert.equal(await store.version(), before)
      assert.equal((await store.list()).json, '[{"n":0,"id":1}]')
    })

    it('applies a batch at most once per key, and keeps no key for a batch it refused', async () => {
      const store = makeRawStore({ now: fixedClock(10) })
      let runs = 0
      const counted = (writes: ((w: NoteWriter) => MaybePromise<Outcome>)[]) => {
        const work = batchOf(writes)
        return (w: NoteWriter) => {
          runs++
          return work(w)
        }
      }
      const refused = await store.batch(counted([(w) => w.delete(999)]), {
        key: 'b1',
        fingerprint: 'f1',
      })
      assert.equal(refused, undefined)
      const first = await store.batch(counted([(w) => w.create({ a: 1 })]), {
        key: 'b1',
        fingerprint: 'f1',
      })
      assert.deepEqual(first, { body: '{"a":1,"id":10}', replayed: false })
      await store.update(10, { a: 2 })
      const again = await store.batch(counted([(w) => w.create({ a: 1 })]), {
        key: 'b1',
        fingerprint: 'f1',
      })
      assert.deepEqual(again, { body: '{"a":1,"id":10}', replayed: true })
      assert.equal(runs, 2)
      await assert.rejects(
        async () =>
          store.batch(counted([(w) => w.create({ a: 1 })]), { key: 'b1', fingerprint: 'f2' }),
        IdempotencyKeyReusedError,
      )
      assert.equal((await store.stats()).notes, 1)
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
    purge: async (id: number) => store.purge(id),
    stats: async () => store.stats(),
  }
}
