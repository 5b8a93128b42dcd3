import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { parseNoteId } from '../../src/api/note-id.js'

describe('parseNoteId', () => {
  const cases: [string, number | undefined][] = [
    ['7', 7],
    ['007', 7],
    ['0', 0],
    ['-3', -3],
    ['1795321368900', 1795321368900],
    ['9007199254740993', 9007199254740992],
    ['', undefined],
    ['abc', undefined],
    ['12abc', undefined],
    ['0x1F', undefined],
    ['1e3', undefined],
    ['12.0', undefined],
    ['+7', undefined],
    [' 7', undefined],
    ['7 ', undefined],
    ['--7', undefined],
    ['-', undefined],
    ['٣', undefined],
    ['7\n', undefined],
  ]
  for (const [segment, expected] of cases) {
    it(`reads ${JSON.stringify(segment)} as ${String(expected)}`, () => {
      assert.equal(parseNoteId(segment), expected)
    })
  }

  it('agrees with the grammar -?[0-9]+ on any string', () => {
    const grammar = /^-?[0-9]+$/
    const segments = fc.oneof(fc.string(), fc.stringMatching(/^[-0-9a+. e]{0,8}$/))
    fc.assert(
      fc.property(segments, (segment) => {
        const expected = grammar.test(segment) ? Number(segment) : undefined
        assert.equal(parseNoteId(segment), expected)
      }),
      { numRuns: 2000 },
    )
  })
})
