import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { mergeNotes, type NoteFields } from '../../src/client/index.js'

type Case = [
  what: string,
  base: NoteFields,
  mine: NoteFields,
  theirs: NoteFields,
  merged: NoteFields,
  conflicts: string[],
]

const CASES: Case[] = [
  [
    'a field changed on one side takes that side',
    { a: 1, b: 1 },
    { a: 2, b: 1 },
    { a: 1, b: 3 },
    { a: 2, b: 3 },
    [],
  ],
  [
    'a field changed the same way on both takes that value',
    { a: 1 },
    { a: [2] },
    { a: [2] },
    { a: [2] },
    [],
  ],
  ['a field removed on one side is gone', { a: 1, b: 1 }, { b: 1 }, { a: 1, b: 2 }, { b: 2 }, []],
  [
    'fields added on both sides are all kept, theirs first',
    { a: 1 },
    { a: 1, m: 1 },
    { a: 1, t: 1 },
    { a: 1, t: 1, m: 1 },
    [],
  ],
  [
    'objects merge field by field, at any depth',
    { o: { p: { x: 1, y: 1 } } },
    { o: { p: { x: 2, y: 1 } } },
    { o: { p: { x: 1, y: 3 } }, z: 0 },
    { o: { p: { x: 2, y: 3 } }, z: 0 },
    [],
  ],
  [
    'a number changed differently is a conflict that keeps theirs',
    { n: 1 },
    { n: 2 },
    { n: 3 },
    { n: 3 },
    ['/n'],
  ],
  [
    'an array changed differently is a conflict',
    { tags: ['a'] },
    { tags: ['a', 'b'] },
    { tags: [] },
    { tags: [] },
    ['/tags'],
  ],
  [
    'a boolean against null is a conflict',
    { done: false },
    { done: true },
    { done: null },
    { done: null },
    ['/done'],
  ],
  [
    'a deletion against an edit is a conflict: theirs deleted',
    { a: 'x', b: 1 },
    { a: 'y', b: 1 },
    { b: 1 },
    { b: 1 },
    ['/a'],
  ],
  [
    'an edit against a deletion is a conflict: theirs edited',
    { a: 'x' },
    {},
    { a: 'y' },
    { a: 'y' },
    ['/a'],
  ],
  ['a change of type is a conflict', { a: 'one' }, { a: 1 }, { a: 'two' }, { a: 'two' }, ['/a']],
  [
    'the same key added with different strings is a conflict',
    {},
    { a: 'x' },
    { a: 'y' },
    { a: 'y' },
    ['/a'],
  ],
  [
    'an object added on both sides merges over {}',
    { a: 1 },
    { a: { x: 1 } },
    { a: { y: 2 } },
    { a: { y: 2, x: 1 } },
    [],
  ],
  [
    'pointers escape ~ and / (RFC 6901)',
    { 'a/b': { '~': 1 } },
    { 'a/b': { '~': 2 } },
    { 'a/b': { '~': 3 } },
    { 'a/b': { '~': 3 } },
    ['/a~1b/~0'],
  ],
  ['id is theirs, never a conflict', { id: 1 }, { id: 2 }, { id: 3 }, { id: 3 }, []],
  [
    'id below the top is a field like any other',
    { o: { id: 1 } },
    { o: { id: 2 } },
    { o: { id: 3 } },
    { o: { id: 3 } },
    ['/o/id'],
  ],
  [
    'conflicts come in note order',
    { b: 1, a: 1, c: 1 },
    { b: 2, a: 2, c: 2 },
    { b: 3, a: 3, c: 2 },
    { b: 3, a: 3, c: 2 },
    ['/b', '/a'],
  ],
  // Text: merged by words.
  [
    'different words of one string both change',
    { t: 'one two three four' },
    { t: 'one 2 three four' },
    { t: 'one two three 4' },
    { t: 'one 2 three 4' },
    [],
  ],
  [
    'insertions at different places are both made',
    { t: 'the cat sat' },
    { t: 'the black cat sat' },
    { t: 'the cat sat down' },
    { t: 'the black cat sat down' },
    [],
  ],
  [
    'two insertions at one place are both kept, theirs first',
    { t: 'a b' },
    { t: 'a X b' },
    { t: 'a Y b' },
    { t: 'a Y X b' },
    [],
  ],
  [
    'the same insertion on both sides is made once',
    { t: 'a b' },
    { t: 'a X b' },
    { t: 'a X b' },
    { t: 'a X b' },
    [],
  ],
  [
    'the same deletion on both sides is made once, beside another',
    { t: 'a b c d e' },
    { t: 'a c d e' },
    { t: 'a c d' },
    { t: 'a c d' },
    [],
  ],
  [
    'one word changed differently is a conflict: the whole string is theirs',
    { t: 'the cat sat' },
    { t: 'the dog sat down' },
    { t: 'the cow sat' },
    { t: 'the cow sat' },
    ['/t'],
  ],
  [
    'a deleted word against a changed one is a conflict',
    { t: 'a b c' },
    { t: 'a c' },
    { t: 'a B c' },
    { t: 'a B c' },
    ['/t'],
  ],
  [
    'an insertion inside a word the other side changed is a conflict',
    { t: 'ab' },
    { t: 'aXb' },
    { t: 'cd' },
    { t: 'cd' },
    ['/t'],
  ],
  [
    'neighbouring words deleted on each side share their space',
    { t: 'a b c' },
    { t: 'a b' },
    { t: 'a c' },
    { t: 'a ' },
    [],
  ],
  // Words anchor the diff: 'c' stays matched to 'c', rather than the spaces matched and 'c'
  // replaced by 'd' (which would meet the deletion of 'd').
  [
    'a word stays matched to itself',
    { t: 'a b c d' },
    { t: 'a b c' },
    { t: 'a X Y c' },
    { t: 'a X Y c' },
    [],
  ],
  [
    'deleting a word and inserting before the next are apart',
    { t: 'a b c' },
    { t: 'a c' },
    { t: 'a b X c' },
    { t: 'a X c' },
    [],
  ],
  [
    'punctuation is a token of its own',
    { t: 'Hello, world.' },
    { t: 'Hello, world!' },
    { t: 'Hi, world.' },
    { t: 'Hi, world!' },
    [],
  ],
  [
    'a punctuation mark changed differently is a conflict',
    { t: 'Hello, world' },
    { t: 'Hello; world' },
    { t: 'Hello world' },
    { t: 'Hello world' },
    ['/t'],
  ],
  [
    'words are Unicode letters and digits',
    { t: 'naïve café 42' },
    { t: 'naïve cafés 42' },
    { t: 'ça naïve café 42' },
    { t: 'ça naïve cafés 42' },
    [],
  ],
  [
    'a decomposed accent stays in its word',
    { t: 'cafe\u0301 noir' },
    { t: 'cafe\u0301 blanc' },
    { t: 'the cafe\u0301 noir' },
    { t: 'the cafe\u0301 blanc' },
    [],
  ],
  [
    'letters of other scripts make words',
    { t: '猫 が 座った' },
    { t: '犬 が 座った' },
    { t: '猫 が 立った' },
    { t: '犬 が 立った' },
    [],
  ],
  [
    'a string only one side changed is that side, whatever the other did elsewhere',
    { t: 'a', u: 'b' },
    { t: 'A', u: 'b' },
    { t: 'a', u: 'B' },
    { t: 'A', u: 'B' },
    [],
  ],
]

describe('mergeNotes', () => {
  for (const [what, base, mine, theirs, merged, conflicts] of CASES) {
    it(what, () => {
      const result = mergeNotes(base, mine, theirs)
      assert.equal(JSON.stringify(result.merged), JSON.stringify(merged))
      assert.deepEqual(result.conflicts, conflicts)
    })
  }

  it('keeps the key order both sides gave, and a key one side moved where it moved it', () => {
    const base = { a: 1, b: 1, c: 1 }
    const moved = { c: 1, a: 1, b: 1 }
    assert.equal(
      JSON.stringify(mergeNotes(base, moved, { a: 1, b: 2, c: 1 }).merged),
      '{"c":1,"a":1,"b":2}',
    )
    assert.equal(
      JSON.stringify(mergeNotes(base, { a: 1, b: 2, c: 1 }, moved).merged),
      '{"c":1,"a":1,"b":2}',
    )
  })

  it('keeps __proto__, constructor and prototype as plain fields', () => {
    const base = JSON.parse('{"__proto__":{"x":1},"constructor":1}') as NoteFields
    const mine = JSON.parse('{"__proto__":{"x":2},"constructor":1}') as NoteFields
    const theirs = JSON.parse('{"__proto__":{"x":1},"constructor":1,"prototype":3}') as NoteFields
    const { merged, conflicts } = mergeNotes(base, mine, theirs)
    assert.equal(JSON.stringify(merged), '{"__proto__":{"x":2},"constructor":1,"prototype":3}')
    assert.equal(Object.getPrototypeOf(merged), Object.prototype)
    assert.deepEqual(conflicts, [])
  })

  it('changes none of the notes it is given', () => {
    const notes = [
      { t: 'a b', o: { x: 1 } },
      { t: 'a X b', o: { x: 2 } },
      { t: 'a b c', o: {} },
    ]
    const before = JSON.stringify(notes)
    mergeNotes(...(notes as unknown as [NoteFields, NoteFields, NoteFields]))
    assert.equal(JSON.stringify(notes), before)
  })

  it('merges strings past a thousand edits apart as one change each (a bounded diff)', () => {
    const words = (prefix: string) =>
      Array.from({ length: 1200 }, (_, i) => `${prefix}${i}`).join(' ')
    const base = { t: `start ${words('b')} end` }
    const { merged, conflicts } = mergeNotes(
      base,
      { t: `begin ${words('m')} end` },
      { t: `start ${words('b')} stop` },
    )
    assert.deepEqual(conflicts, [])
    assert.equal(merged.t, `begin ${words('m')} stop`)
  })
})
