import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { parseNoteId } from '../src/note-id.js'

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
})
