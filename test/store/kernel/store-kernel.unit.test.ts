import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  keyReused,
  MAX_CACHED_SEARCHES,
  STORE_DEFAULTS,
} from '../../../src/store/kernel/defaults.js'
import {
  isIndexable,
  jsonAroundId,
  serializeWithId,
} from '../../../src/store/kernel/id-placement.js'
import { patchNote } from '../../../src/store/kernel/patch-note.js'
import { meets } from '../../../src/store/kernel/preconditions.js'
import { setField } from '../../../src/store/kernel/set-field.js'
import { etagOf, tokenSequence, versionToken } from '../../../src/store/kernel/version-token.js'
import {
  IdempotencyKeyReusedError,
  type NoteFields,
  type NoteRecord,
  type PatchKind,
  type Preconditions,
} from '../../../src/store/types.js'

/** The store kernel: what the memory and the PostgreSQL store mean the same way, once. */
describe('setField', () => {
  it('sets a field, and makes __proto__ a plain field instead of a prototype', () => {
    const note: NoteFields = { a: 1 }
    setField(note, 'b', 2)
    setField(note, '__proto__', { polluted: true })
    assert.equal(Object.getPrototypeOf(note), Object.prototype)
    assert.equal(({} as { polluted?: boolean }).polluted, undefined)
    assert.equal(JSON.stringify(note), '{"a":1,"b":2,"__proto__":{"polluted":true}}')
  })
})

describe('meets', () => {
  const note: NoteRecord = { json: '{"id":1}', etag: '"e.5"', modified: 1_500 }
  const cases: [string, Preconditions, boolean][] = [
    ['no conditions', {}, true],
    ['If-Match *', { ifMatch: '*' }, true],
    ['If-Match with the etag', { ifMatch: ['"e.4"', '"e.5"'] }, true],
    ['If-Match without it', { ifMatch: ['"e.4"'] }, false],
    ['If-Match of the weak form (strong comparison)', { ifMatch: ['W/"e.5"'] }, false],
    ['If-Unmodified-Since in the same second', { ifUnmodifiedSince: 1_000 }, true],
    ['If-Unmodified-Since later', { ifUnmodifiedSince: 2_000 }, true],
    ['If-Unmodified-Since the second before', { ifUnmodifiedSince: 0 }, false],
    ['both, one failing', { ifMatch: '*', ifUnmodifiedSince: 0 }, false],
  ]
  for (const [name, conditions, expected] of cases) {
    it(`${name} -> ${expected}`, () => {
      assert.equal(meets(note, conditions), expected)
    })
  }
})

describe('version tokens', () => {
  const tokens: [string, number, string][] = [
    ['k2x9q1', 0, 'k2x9q1.0'],
    ['k2x9q1', 5, 'k2x9q1.5'],
    ['k2x9q1', 36, 'k2x9q1.10'],
    ['a.b', 35, 'a.b.z'],
  ]
  for (const [epoch, sequence, token] of tokens) {
    it(`versionToken(${epoch}, ${sequence}) -> ${token}, and back`, () => {
      assert.equal(versionToken(epoch, sequence), token)
      assert.equal(tokenSequence(token, epoch), sequence)
    })
  }

  const refused: [string, string][] = [
    ['other.5', 'k2x9q1'],
    ['k2x9q1', 'k2x9q1'],
    ['k2x9q1.', 'k2x9q1'],
    ['k2x9q1.A', 'k2x9q1'],
    ['k2x9q1.-1', 'k2x9q1'],
    ['k2x9q1.5 ', 'k2x9q1'],
    ['k2x9q1.zzzzzzzzzzzz', 'k2x9q1'],
    ['xk2x9q1.5', 'k2x9q1'],
  ]
  for (const [token, epoch] of refused) {
    it(`tokenSequence(${JSON.stringify(token)}, ${epoch}) -> undefined`, () => {
      assert.equal(tokenSequence(token, epoch), undefined)
    })
  }

  it('quotes a version as the ETag of what it wrote', () => {
    assert.equal(etagOf('k2x9q1.5'), '"k2x9q1.5"')
  })
})

describe('id placement', () => {
  const cases: [NoteFields, string, [string, string]][] = [
    [{}, '{"id":7}', ['{"id":', '}']],
    [{ a: 1 }, '{"a":1,"id":7}', ['{"a":1,"id":', '}']],
    [{ id: 'x' }, '{"id":7}', ['{"id":', '}']],
    [{ id: 'x', a: 1 }, '{"id":7,"a":1}', ['{"id":', ',"a":1}']],
    [{ a: 1, id: 'x', b: 2 }, '{"a":1,"id":7,"b":2}', ['{"a":1,"id":', ',"b":2}']],
    [{ b: 1, id: null, 2: 'two' }, '{"2":"two","b":1,"id":7}', ['{"2":"two","b":1,"id":', '}']],
    [JSON.parse('{"__proto__":1,"id":0}'), '{"__proto__":1,"id":7}', ['{"__proto__":1,"id":', '}']],
  ]
  for (const [fields, json, around] of cases) {
    it(`${JSON.stringify(fields)} -> ${json}`, () => {
      const before = JSON.stringify(fields)
      assert.equal(serializeWithId(fields, 7), json)
      assert.deepEqual(jsonAroundId(fields), around)
      assert.equal(around.join('7'), json)
      // As `{ ...fields, id }` places it.
      assert.equal(JSON.stringify({ ...fields, id: 7 }), json)
      assert.equal(JSON.stringify(fields), before, 'the fields are not changed')
    })
  }

  const indexable: [unknown, boolean][] = [
    [7, true],
    [-0, true],
    [1.5, true],
    ['7', false],
    [Number.POSITIVE_INFINITY, false],
    [Number.NaN, false],
    [null, false],
    [undefined, false],
  ]
  for (const [id, expected] of indexable) {
    it(`isIndexable(${String(id)}) -> ${expected}`, () => {
      assert.equal(isIndexable(id), expected)
    })
  }
})

describe('patchNote', () => {
  const cases: [string, NoteFields, PatchKind, NoteFields][] = [
    ['{"id":1,"a":1}', { a: null }, 'merge', { id: 1, a: null }],
    ['{"id":1,"a":1}', { a: null }, 'merge-patch', { id: 1 }],
    ['{"id":1,"o":{"x":1,"y":2}}', { o: { y: 3 } }, 'merge', { id: 1, o: { y: 3 } }],
    ['{"id":1,"o":{"x":1,"y":2}}', { o: { y: null } }, 'merge-patch', { id: 1, o: { x: 1 } }],
    ['{"id":1}', { id: 9, b: [1] }, 'merge', { id: 9, b: [1] }],
    ['{"id":1,"a":1}', {}, 'merge-patch', { id: 1, a: 1 }],
  ]
  for (const [json, fields, kind, expected] of cases) {
    it(`${json} ${kind} ${JSON.stringify(fields)} -> ${JSON.stringify(expected)}`, () => {
      assert.deepEqual(patchNote(json, fields, kind), expected)
    })
  }

  it('keeps each field in its place and a patched __proto__ a plain field', () => {
    const patch = JSON.parse('{"__proto__":{"x":1},"a":2}') as NoteFields
    for (const kind of ['merge', 'merge-patch'] as const) {
      const note = patchNote('{"a":1,"id":1}', patch, kind)
      assert.equal(JSON.stringify(note), '{"a":2,"id":1,"__proto__":{"x":1}}')
      assert.equal(Object.getPrototypeOf(note), Object.prototype)
    }
  })
})

describe('store defaults', () => {
  it('are what the docs and CHANGE_HISTORY say', () => {
    assert.deepEqual(STORE_DEFAULTS, {
      historyLimit: 10_000,
      maxIdempotencyKeys: 100_000,
      idempotencyTtlMs: 86_400_000,
    })
    assert.equal(MAX_CACHED_SEARCHES, 16)
  })

  it('words a reused idempotency key the same in every store', () => {
    const err = keyReused()
    assert.ok(err instanceof IdempotencyKeyReusedError)
    assert.equal(
      err.message,
      'This Idempotency-Key was already used with a different request body.',
    )
  })
})
