import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { exceedsDepth } from '../../src/api/json-depth.js'

describe('exceedsDepth', () => {
  const cases: [string, number, boolean][] = [
    ['{}', 1, false],
    ['{"a":{}}', 1, true],
    ['{"a":{}}', 2, false],
    ['{"a":[[1]]}', 2, true],
    ['{"a":[[1]]}', 3, false],
    ['{"a":"[[[[[[[[[[[["}', 1, false],
    ['{"a":"\\"[[[[[[[[[[["}', 1, false],
    ['{"a":"\\\\","b":[[[[[1]]]]]}', 3, true],
    [`{"a":${'['.repeat(64)}${']'.repeat(64)}}`, 64, true],
    [`{"a":${'['.repeat(63)}${']'.repeat(63)}}`, 64, false],
    [`{"a":[],"b":[],"c":[],"d":[],"e":[]}`, 2, false],
  ]
  for (const [text, max, expected] of cases) {
    it(`${text.length > 40 ? `${text.slice(0, 40)}...` : text} with max ${max} -> ${expected}`, () => {
      assert.equal(exceedsDepth(text, max), expected)
    })
  }
})
