import assert from 'node:assert/strict'
import { it } from 'node:test'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { describeEachStore } from '../support/each-store.js'
import { dataOf, fakeClock, JSON_HEADERS } from '../support/helpers.js'

async function fill(app: FastifyInstance, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: JSON_HEADERS,
      payload: JSON.stringify({ n: i, title: i % 3 === 0 ? `Fizz ${i}` : `note ${i}` }),
    })
  }
}

const ns = (body: unknown) => (body as { n: number }[]).map((note) => note.n)

/** The check that ends a cursor: FNV-1a of its body, 32 bits, in base 36. */
function cursorCheck(body: string): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < body.length; i++) {
    hash ^= body.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  return (hash >>> 0).toString(36)
}

/** The URL in a `Link: <url>; rel="next"` header, or undefined. */
function nextOf(link: unknown): string | undefined {
  if (link === undefined) return undefined
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link))
  assert.ok(match, `a Link header: ${String(link)}`)
  return match[1]
}

describeEachStore('pages and search', (suite) => {
  it('walks the list a page at a time, with Link: rel="next" while more follow', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 5)
    const first = await app.inject('/api/note?limit=2')
    assert.equal(first.statusCode, 200)
    assert.deepEqual(ns(dataOf(first)), [0, 1])
    assert.equal(first.headers['x-total-count'], '5')
    assert.equal(first.headers['notes-version'], 'e.5')
    assert.equal(first.headers.etag, '"e.5"')
    const second = await app.inject(nextOf(first.headers.link) as string)
    assert.deepEqual(ns(dataOf(second)), [2, 3])
    const last = await app.inject(nextOf(second.headers.link) as string)
    assert.deepEqual(ns(dataOf(last)), [4])
    assert.equal(last.headers.link, undefined)
  })

  it('walks from the newest with order=desc, keeping limit, order and q in the next link', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 7)
    const first = await app.inject('/api/note?order=desc&limit=2&q=fizz&other=1')
    assert.deepEqual(ns(dataOf(first)), [6, 3])
    assert.equal(first.headers['x-total-count'], '3')
    const next = nextOf(first.headers.link) as string
    assert.match(next, /^\/api\/note\?limit=2&order=desc&q=fizz&after=d[0-9a-z]+\.[0-9a-z]+$/)
    const rest = await app.inject(next)
    assert.deepEqual(ns(dataOf(rest)), [0])
    assert.equal(rest.headers.link, undefined)
  })

  it('reverses the whole list with order alone, filters with q alone, and pages by 100 with after alone', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 150)
    const reversed = await app.inject('/api/note?order=desc')
    assert.equal(ns(dataOf(reversed)).length, 150)
    assert.equal(ns(dataOf(reversed))[0], 149)
    assert.equal(reversed.headers.link, undefined)
    const fizz = await app.inject('/api/note?q=FIZZ')
    assert.equal(ns(dataOf(fizz)).length, 50)
    assert.equal(fizz.headers['x-total-count'], '50')
    const first = await app.inject('/api/note?limit=1')
    const after = new URL(nextOf(first.headers.link) as string, 'http://x').searchParams.get(
      'after',
    )
    const page = await app.inject(`/api/note?after=${after}`)
    assert.deepEqual(
      ns(dataOf(page)),
      Array.from({ length: 100 }, (_, i) => i + 1),
    )
    assert.match(nextOf(page.headers.link) as string, /^\/api\/note\?limit=100&after=/)
  })

  it('answers the contract body for a list without paging parameters', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 2)
    const plain = await app.inject('/api/note?x=1&page=2')
    assert.equal(
      plain.body,
      '{"data":[{"n":0,"title":"Fizz 0","id":1000},{"n":1,"title":"note 1","id":1001}]}',
    )
    assert.equal(plain.headers.link, undefined)
  })

  it('refuses a bad limit, after, order or q with a 400 naming it', async () => {
    const { app } = suite.buildApp()
    await fill(app, 3)
    const first = await app.inject('/api/note?limit=1&order=desc')
    const descAfter = new URL(nextOf(first.headers.link) as string, 'http://x').searchParams.get(
      'after',
    ) as string
    const tampered = descAfter.replace(/^d(.)/, (_, c: string) => `d${c === '1' ? '2' : '1'}`)
    for (const [query, named] of [
      ['limit=0', /^limit must be a whole number from 1 to 1000; got "0"\.$/],
      ['limit=1001', /^limit must be/],
      ['limit=abc', /^limit must be/],
      ['limit=', /^limit must be/],
      ['limit=1.5', /^limit must be/],
      ['order=up', /^order must be "asc" or "desc"; got "up"\.$/],
      ['after=garbage', /^after must be the cursor/],
      [`after=${tampered}`, /^after must be the cursor/],
      [`after=${descAfter}`, /^after belongs to a walk with order=desc/],
      ['q=', /^q must be 1 to 256 characters/],
      [`q=${'x'.repeat(257)}`, /^q must be 1 to 256 characters of text to search for; got 257\.$/],
    ] as const) {
      const response = await app.inject(`/api/note?${query}`)
      assert.equal(response.statusCode, 400, query)
      assert.equal(response.headers['content-type'], 'application/problem+json')
      const problem = JSON.parse(response.body) as { status: number; detail: string }
      assert.equal(problem.status, 400)
      assert.match(problem.detail, named, query)
    }
    assert.equal((await app.inject(`/api/note?q=${'é'.repeat(256)}`)).statusCode, 200)
  })

  it('answers 304 to a page whose version has not changed', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 3)
    const page = await app.inject('/api/note?limit=2')
    const again = await app.inject({
      url: '/api/note?limit=2',
      headers: { 'if-none-match': String(page.headers.etag) },
    })
    assert.equal(again.statusCode, 304)
    assert.equal(again.body, '')
  })

  it('visits every note that exists throughout a walk exactly once, whatever is written between pages', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 1, max: 7 }),
        fc.constantFrom('asc', 'desc'),
        fc.array(
          fc.record({
            kind: fc.constantFrom('create', 'update', 'delete'),
            pick: fc.nat(),
          }),
          { maxLength: 40 },
        ),
        async (initial, limit, order, writes) => {
          const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
          await fill(app, initial)
          const ids = (dataOf(await app.inject('/api/note')) as { id: number }[]).map((n) => n.id)
          const throughout = new Set(ids)
          const seen: number[] = []
          let url: string | undefined = `/api/note?limit=${limit}&order=${order}`
          let step = 0
          while (url !== undefined) {
            const page = await app.inject(url)
            seen.push(...(dataOf(page) as { id: number }[]).map((n) => n.id))
            url = nextOf(page.headers.link)
            // A few writes between pages: deleted notes leave `throughout`.
            for (const write of writes.slice(step, step + 3)) {
              const live = (dataOf(await app.inject('/api/note')) as { id: number }[]).map(
                (n) => n.id,
              )
              const id = live[write.pick % Math.max(1, live.length)]
              if (write.kind === 'create' || id === undefined) {
                await app.inject({
                  method: 'POST',
                  url: '/api/note',
                  headers: JSON_HEADERS,
                  payload: '{"new":true}',
                })
              } else if (write.kind === 'update') {
                await app.inject({
                  method: 'PATCH',
                  url: `/api/note/${id}`,
                  headers: JSON_HEADERS,
                  payload: '{"changed":true}',
                })
              } else {
                await app.inject({ method: 'DELETE', url: `/api/note/${id}` })
                throughout.delete(id)
              }
            }
            step += 3
          }
          assert.equal(new Set(seen).size, seen.length, 'no note twice')
          for (const id of throughout) assert.ok(seen.includes(id), `note ${id} seen`)
          const inOrder = [...seen].sort((a, b) => (order === 'asc' ? a - b : b - a))
          assert.deepEqual(seen, inOrder, 'in list order')
        },
      ),
      // A fresh PostgreSQL schema costs ~0.1 s: 20 runs per lane there, 40 in all.
      { numRuns: suite.store === 'postgres' ? 20 : 40 },
    )
  })

  it('orders by last change with sort=updated, both ways, with its sort in every next link', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 5) // ids 1000-1004, written at 1000-1004
    for (const id of [1001, 1003]) {
      await app.inject({
        method: 'PATCH',
        url: `/api/note/${id}`,
        headers: JSON_HEADERS,
        payload: '{"seen":1}',
      })
    }
    const whole = await app.inject('/api/note?sort=updated')
    assert.deepEqual(ns(dataOf(whole)), [0, 2, 4, 1, 3])
    assert.equal(whole.headers['x-total-count'], '5')
    assert.equal(whole.headers.link, undefined)
    const first = await app.inject('/api/note?sort=updated&order=desc&limit=2&q=note')
    assert.equal(first.statusCode, 200)
    assert.equal(
      first.body,
      '{"data":[{"n":1,"title":"note 1","id":1001,"seen":1},{"n":4,"title":"note 4","id":1004}]}',
    )
    assert.equal(first.headers['x-total-count'], '3')
    assert.equal(first.headers['notes-version'], 'e.7')
    // After the note written at 1004 with id 1004 (position 5): 'udrw_irw_5' in base 36.
    assert.equal(
      first.headers.link,
      `</api/note?limit=2&sort=updated&order=desc&q=note&after=udrw_irw_5.${cursorCheck('udrw_irw_5')}>; rel="next"`,
    )
    const rest = await app.inject(nextOf(first.headers.link) as string)
    assert.equal(rest.body, '{"data":[{"n":2,"title":"note 2","id":1002}]}')
    assert.equal(rest.headers.link, undefined)
    const up = await app.inject('/api/note?limit=3&sort=updated')
    assert.deepEqual(ns(dataOf(up)), [0, 2, 4])
    const upRest = await app.inject(nextOf(up.headers.link) as string)
    assert.deepEqual(ns(dataOf(upRest)), [1, 3])
    assert.equal(upRest.headers['x-total-count'], '5')
    const created = await app.inject('/api/note?sort=created')
    const plain = await app.inject('/api/note')
    assert.deepEqual([created.body, created.headers.link], [plain.body, undefined])
  })

  it('refuses a bad sort, and a cursor of one sort with the other, with a 400 naming them', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await fill(app, 3)
    const cursorOf = async (url: string) =>
      new URL(nextOf((await app.inject(url)).headers.link) as string, 'http://x').searchParams.get(
        'after',
      ) as string
    const byCreation = await cursorOf('/api/note?limit=1')
    const byChange = await cursorOf('/api/note?limit=1&sort=updated')
    const byChangeDesc = await cursorOf('/api/note?limit=1&sort=updated&order=desc')
    for (const [query, detail] of [
      ['sort=name', 'sort must be "created" or "updated"; got "name".'],
      ['sort=', 'sort must be "created" or "updated"; got "".'],
      [
        `sort=updated&after=${byCreation}`,
        'after belongs to a walk with sort=created; keep sort=created to go on, or start again without after.',
      ],
      [
        `after=${byChange}`,
        'after belongs to a walk with sort=updated; keep sort=updated to go on, or start again without after.',
      ],
      [
        `sort=created&after=${byChange}`,
        'after belongs to a walk with sort=updated; keep sort=updated to go on, or start again without after.',
      ],
      [
        `sort=updated&after=${byChangeDesc}`,
        'after belongs to a walk with order=desc; keep order=desc to go on, or start again without after.',
      ],
      [
        `sort=updated&after=${byChange.replace('_i', '_f')}`,
        'after must be the cursor from a Link: rel="next" header of this list, as it was given.',
      ],
    ] as const) {
      const response = await app.inject(`/api/note?${query}`)
      assert.equal(response.statusCode, 400, query)
      assert.equal(response.headers['content-type'], 'application/problem+json')
      assert.deepEqual(JSON.parse(response.body), {
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail,
      })
    }
  })

  it('visits every note not written during an updated walk exactly once, and each written one (asc) with its last content', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 1, max: 7 }),
        fc.constantFrom('asc', 'desc'),
        fc.array(
          fc.record({ kind: fc.constantFrom('create', 'update', 'delete'), pick: fc.nat() }),
          { maxLength: 30 },
        ),
        async (initial, limit, order, writes) => {
          const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
          await fill(app, initial)
          const listed = async () => dataOf(await app.inject('/api/note')) as { id: number }[]
          const untouched = new Set((await listed()).map((note) => note.id))
          const written = new Set<number>()
          const seen: { id: number; json: string }[] = []
          let url: string | undefined = `/api/note?limit=${limit}&sort=updated&order=${order}`
          let step = 0
          while (url !== undefined) {
            const page = await app.inject(url)
            for (const note of dataOf(page) as { id: number }[]) {
              seen.push({ id: note.id, json: JSON.stringify(note) })
            }
            url = nextOf(page.headers.link)
            // Writes during the walk only: one after its last page is not in it.
            if (url === undefined) break
            for (const write of writes.slice(step, step + 3)) {
              const live = (await listed()).map((note) => note.id)
              const id = live[write.pick % Math.max(1, live.length)]
              if (write.kind === 'create' || id === undefined) {
                await app.inject({
                  method: 'POST',
                  url: '/api/note',
                  headers: JSON_HEADERS,
                  payload: `{"step":${step}}`,
                })
              } else if (write.kind === 'update') {
                await app.inject({
                  method: 'PATCH',
                  url: `/api/note/${id}`,
                  headers: JSON_HEADERS,
                  payload: `{"step":${step}}`,
                })
                untouched.delete(id)
                written.add(id)
              } else {
                await app.inject({ method: 'DELETE', url: `/api/note/${id}` })
                untouched.delete(id)
                written.delete(id)
              }
            }
            step += 3
          }
          const ids = seen.map((note) => note.id)
          for (const id of untouched) {
            assert.equal(ids.filter((seenId) => seenId === id).length, 1, `note ${id} once`)
          }
          if (order === 'asc') {
            const last = new Map((await listed()).map((note) => [note.id, JSON.stringify(note)]))
            for (const id of written) {
              assert.equal(
                seen.findLast((note) => note.id === id)?.json,
                last.get(id),
                `note ${id}`,
              )
            }
          }
        },
      ),
      { numRuns: suite.store === 'postgres' ? 15 : 30 },
    )
  })
})
