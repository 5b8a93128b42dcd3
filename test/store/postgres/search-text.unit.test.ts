import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { foldText } from '../../../src/store/postgres/search-text.js'

/** The definition: each character upper- then lower-cased where each step gives one character. */
function reference(text: string): string {
  let folded = ''
  for (const ch of text) {
    if (ch === '\u0000' || (ch.length === 1 && ch >= '\ud800' && ch <= '\udfff')) {
      folded += '\ufffd'
      continue
    }
    const one = (s: string) => [...s].length === 1
    const upper = ch.toUpperCase()
    const base = one(upper) ? upper : ch
    const lower = base.toLowerCase()
    folded += one(lower) ? lower : base
  }
  return folded
}

describe('foldText (the PostgreSQL q index)', () => {
  const cases: [string, string][] = [
    ['BrÖt', 'bröt'],
    ['ſ', 's'],
    ['\u212a', 'k'],
    ['ß', 'ß'],
    ['A\u0000b', 'a\ufffdb'],
    ['Hello, World! ~\u007f', 'hello, world! ~\u007f'],
    ['', ''],
  ]
  for (const [text, folded] of cases) {
    it(`${JSON.stringify(text)} -> ${JSON.stringify(folded)}`, () => {
      assert.equal(foldText(text), folded)
    })
  }

  it('folds every ASCII character, and any string, as the definition does', () => {
    const ascii = String.fromCharCode(...Array.from({ length: 128 }, (_, i) => i))
    assert.equal(foldText(ascii), reference(ascii))
    assert.equal(foldText(ascii.slice(1)), ascii.slice(1).toLowerCase())
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' })), (text) => {
        assert.equal(foldText(text), reference(text))
      }),
      { numRuns: 2000 },
    )
  })
})
