import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { matchesText } from '../../../src/store/kernel/search.js'
import { describeEachStore } from '../../support/each-store.js'
import { dataOf } from '../../support/helpers.js'

/** The definition, written plainly: some string value, at any depth, contains q (any case). */
function reference(q: string, note: unknown): boolean {
  const pattern = new RegExp(q.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'), 'iu')
  const walk = (value: unknown): boolean =>
    typeof value === 'string'
      ? pattern.test(value)
      : typeof value === 'object' && value !== null && Object.values(value).some(walk)
  return walk(note)
}

const cases: [string, unknown, boolean][] = [
  ['bread', { title: 'Buy BREAD' }, true],
  ['BREAD', { title: 'buy bread' }, true],
  ['title', { title: 'x' }, false],
  ['x', { xx: 1, y: [true, null, 12] }, false],
  ['12', { n: 12 }, false],
  ['a","b', { k: 'a', l: 'b' }, false],
  ['nnb', { k: '\nnb' }, false],
  ['\nnb', { k: 'a\nnb' }, true],
  ['"q"', { k: 'say "Q"' }, true],
  ['\\', { k: 'a\\b' }, true],
  ['\\', { 'a\\b': 'x' }, false],
  ['a-b', { t: 'A-B' }, true],
  ['😀', { '😀': 1, t: 'x' }, false],
  ['😀', { '😀': '😀' }, true],
  ['/(x)', { t: '/(X)' }, true],
  ['deep', { a: [{ b: { c: ['so DEEP'] } }] }, true],
  ['é', { t: 'CAFÉ' }, true],
  ['k', { t: '\u212a' }, true],
  ['a:', { a: 'b' }, false],
  ['b', { a: 'b' }, true],
  ['x', JSON.parse('{"__proto__":{"y":"x"}}'), true],
]

describe('matchesText (q)', () => {
  for (const [q, note, expected] of cases) {
    it(`${JSON.stringify(q)} in ${JSON.stringify(note)} -> ${expected}`, () => {
      assert.equal(matchesText(q)(JSON.stringify(note)), expected)
      assert.equal(reference(q, note), expected)
    })
  }

  it('agrees with the plain definition on random notes and texts', () => {
    const text = fc.string({
      unit: fc.constantFrom(
        'a',
        'B',
        'é',
        'É',
        '"',
        '\\',
        '\n',
        ':',
        ',',
        '{',
        'k',
        '\u212a',
        '😀',
      ),
      maxLength: 4,
    })
    fc.assert(
      fc.property(
        text.filter((q) => q.length > 0),
        fc
          .jsonValue({ maxDepth: 3 })
          .map((value) => ({ v: value, [JSON.stringify(value).slice(0, 3)]: 1 })),
        fc.dictionary(text, fc.oneof(text, fc.integer()), { maxKeys: 4 }),
        (q, a, b) => {
          for (const note of [a, b]) {
            assert.equal(
              matchesText(q)(JSON.stringify(note)),
              reference(q, note),
              JSON.stringify({ q, note }),
            )
          }
        },
      ),
      { numRuns: 3000 },
    )
  })
})

describeEachStore('GET /api/note?q=', (suite) => {
  it('answers, for each q of the table, exactly the notes the definition matches, in list order', async () => {
    // On PostgreSQL the pg_trgm index narrows the candidates first: it must never drop a match.
    const { app } = suite.buildApp()
    for (const [, note] of cases) {
      const created = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(note),
      })
      assert.equal(created.statusCode, 200)
    }
    const all = dataOf(await app.inject('/api/note')) as Record<string, unknown>[]
    for (const [q] of cases) {
      const response = await app.inject(`/api/note?q=${encodeURIComponent(q)}`)
      const expected = all.filter((note) => reference(q, note))
      assert.equal(response.body, JSON.stringify({ data: expected }), `q=${JSON.stringify(q)}`)
      assert.equal(response.headers['x-total-count'], String(expected.length))
    }
  })
})
