import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { mergeNotes, type NoteFields } from '../../src/client/index.js'

/**
 * mergeNotes against a model: a random base note (nested objects, numbers, arrays, strings of
 * words) and random edits of it on two sides, each edit known to the model by where it is (a
 * field, a word, the gap before a word). The model knows which edits overlap and so what the merge
 * must answer: every edit that overlaps none of the other side's survives, a conflict is reported
 * exactly where both sides changed one word or field differently, and such a path holds theirs.
 * Words of one side's edits sit at least two words from the other side's (or on the very same
 * word or gap, on purpose): neighbouring words have their exact tests in merge-notes.unit.test.ts.
 */

type Gen = fc.GeneratorValue

/** One side's edit of a string, in the base's words: the word at `at`, or the gap before it. */
type WordEdit =
  | { kind: 'replace'; at: number; word: string }
  | { kind: 'delete'; at: number }
  | { kind: 'insert'; at: number; word: string }

/** What the model expects of a value: the merged value, the conflicts under it. */
interface Expected {
  value: unknown
  conflicts: string[]
  /** Both sides inserted different things at one place (theirs first): the order of the two is not symmetric there. */
  samePlace: boolean
}

interface Planned {
  base: unknown
  mine: unknown
  theirs: unknown
  expected: Expected
}

const ABSENT = Symbol('absent')
const LETTERS = ['a', 'ж', 'é', '字', 'Ω', 'b']
const KEYS = ['title', 'body', 'n', 'tags', 'meta', 'a/b', '~k', 'done']

let fresh = 0
const freshWord = (side: string) => `${side}${LETTERS[fresh % LETTERS.length]}${fresh++}`

/** The footprint of an edit on the word line: word i at i, the gap before word i at i - 0.5. */
const place = (edit: WordEdit) => (edit.kind === 'insert' ? edit.at - 0.5 : edit.at)

function wordEdits(g: Gen, n: number, side: string): WordEdit[] {
  const edits: WordEdit[] = []
  const count = g(fc.integer, { min: 0, max: 3 })
  for (let i = 0; i < count; i++) {
    const kind = g(fc.constantFrom, 'replace', 'delete', 'insert') as WordEdit['kind']
    const at = g(fc.integer, { min: 0, max: kind === 'insert' ? n : n - 1 })
    const edit: WordEdit = kind === 'delete' ? { kind, at } : { kind, at, word: freshWord(side) }
    if (edits.every((other) => place(other) !== place(edit))) edits.push(edit)
  }
  return edits
}

/** base words with one side's edits: 'w0 w1 w2' + delete 1, insert X at 2 -> 'w0 X w2'. */
function applyWords(words: readonly string[], edits: readonly WordEdit[]): string[] {
  const out: string[] = []
  for (let i = 0; i <= words.length; i++) {
    for (const edit of edits) if (edit.kind === 'insert' && edit.at === i) out.push(edit.word)
    if (i === words.length) break
    const edit = edits.find((e) => e.kind !== 'insert' && e.at === i)
    if (edit === undefined) out.push(words[i] as string)
    else if (edit.kind === 'replace') out.push(edit.word)
  }
  return out
}

const sameEdit = (x: WordEdit, y: WordEdit) => JSON.stringify(x) === JSON.stringify(y)

function planText(g: Gen, path: string): Planned {
  const n = g(fc.integer, { min: 1, max: 8 })
  const words = Array.from({ length: n }, (_, i) => `w${LETTERS[i % LETTERS.length]}${i}`)
  const mine = wordEdits(g, n, 'm')
  const theirs: WordEdit[] = []
  for (const edit of wordEdits(g, n, 't')) {
    // Apart from mine, or on the very place of one edit of mine (and near no other), on purpose.
    const near = mine.filter((other) => Math.abs(place(other) - place(edit)) < 2)
    const twin =
      near.length === 1 && place(near[0] as WordEdit) === place(edit) ? near[0] : undefined
    if (near.length === 0) theirs.push(edit)
    else if (twin !== undefined) theirs.push(g(fc.boolean) ? twin : edit)
  }
  const mineWords = applyWords(words, mine)
  const theirWords = applyWords(words, theirs)
  let conflict = false
  let samePlace = false
  const merged: WordEdit[] = []
  for (const edit of theirs) {
    const twin = mine.find((other) => place(other) === place(edit))
    if (twin === undefined || sameEdit(twin, edit)) merged.push(edit)
    else if (edit.kind === 'insert') samePlace = true
    else conflict = true
  }
  const text = (list: string[]) => list.join(' ')
  // Two insertions at one place: theirs, then mine.
  const both: WordEdit[] = []
  for (const edit of theirs) {
    const twin = mine.find((other) => place(other) === place(edit))
    both.push(edit)
    if (edit.kind === 'insert' && twin !== undefined && !sameEdit(twin, edit)) both.push(twin)
  }
  for (const edit of mine)
    if (!theirs.some((other) => place(other) === place(edit))) both.push(edit)
  const value = conflict ? text(theirWords) : text(applyWords(words, both))
  return {
    base: text(words),
    mine: text(mineWords),
    theirs: text(theirWords),
    expected: {
      value,
      conflicts: conflict ? [path] : [],
      samePlace: samePlace && !conflict,
    },
  }
}

/** A number or an array, edited by replacing it: the same new value on both sides now and then. */
function planScalar(g: Gen, path: string): Planned {
  const array = g(fc.boolean)
  const base = array ? [1, 2] : 1
  const next = (side: number) => (array ? [side, fresh++] : side * 1000 + fresh++)
  const action = () => g(fc.constantFrom, 'keep', 'keep', 'set', 'same', 'type')
  const shared = next(3)
  const pick = (what: string, side: number): unknown =>
    what === 'keep' ? base : what === 'same' ? shared : what === 'type' ? true : next(side)
  const mine = pick(action(), 1)
  const theirs = pick(action(), 2)
  return { base, mine, theirs, expected: decided(base, mine, theirs, path) }
}

/** Whole values: one side changed takes it, the same change is that, two changes conflict. */
function decided(base: unknown, mine: unknown, theirs: unknown, path: string): Expected {
  const same = (x: unknown, y: unknown) =>
    x === y || (x !== ABSENT && y !== ABSENT && JSON.stringify(x) === JSON.stringify(y))
  if (same(mine, theirs) || same(base, mine))
    return { value: theirs, conflicts: [], samePlace: false }
  if (same(base, theirs)) return { value: mine, conflicts: [], samePlace: false }
  return { value: theirs, conflicts: [path], samePlace: false }
}

const pointer = (path: string, key: string) =>
  `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`

function planObject(g: Gen, path: string, depth: number): Planned {
  const keys = g(fc.uniqueArray, fc.constantFrom(...KEYS), {
    minLength: 1,
    maxLength: 4,
  }) as string[]
  const base: NoteFields = {}
  const mine: NoteFields = {}
  const theirs: NoteFields = {}
  const value: NoteFields = {}
  const conflicts: string[] = []
  let samePlace = false
  const put = (object: NoteFields, key: string, v: unknown) => {
    if (v !== ABSENT) object[key] = v
  }
  for (const key of keys) {
    const here = pointer(path, key)
    const kind = g(fc.constantFrom, 'text', 'text', 'scalar', depth < 2 ? 'object' : 'text')
    const planned =
      kind === 'text'
        ? planText(g, here)
        : kind === 'scalar'
          ? planScalar(g, here)
          : planObject(g, here, depth + 1)
    // Now and then a side removes the field instead: against an edit of the other, a conflict.
    const removes = () => g(fc.integer, { min: 0, max: 9 }) === 0
    const mineValue = removes() ? ABSENT : planned.mine
    const theirValue = removes() ? ABSENT : planned.theirs
    base[key] = planned.base
    put(mine, key, mineValue)
    put(theirs, key, theirValue)
    let expected = planned.expected
    if (mineValue === ABSENT || theirValue === ABSENT)
      expected = decided(planned.base, mineValue, theirValue, here)
    put(value, key, expected.value)
    conflicts.push(...expected.conflicts)
    samePlace ||= expected.samePlace
  }
  // Fields added: a key of one side's own, or the same key and value on both.
  const added = g(fc.constantFrom, 'none', 'mine', 'theirs', 'both', 'same')
  if (added === 'mine' || added === 'both') mine[`m${fresh++}`] = 'new'
  if (added === 'theirs' || added === 'both') theirs[`t${fresh++}`] = 'new'
  if (added === 'same') {
    mine.shared = 'new'
    theirs.shared = 'new'
  }
  for (const key of Object.keys(theirs)) if (!Object.hasOwn(base, key)) value[key] = theirs[key]
  for (const key of Object.keys(mine)) if (!Object.hasOwn(base, key)) value[key] = mine[key]
  return {
    base,
    mine,
    theirs,
    expected: { value, conflicts, samePlace: samePlace || added === 'both' },
  }
}

/** The value at a JSON Pointer, or ABSENT. */
function at(note: unknown, path: string): unknown {
  let node = note
  for (const part of path.split('/').slice(1)) {
    const key = part.replaceAll('~1', '/').replaceAll('~0', '~')
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) return ABSENT
    node = (node as NoteFields)[key]
  }
  return node
}

const notes = fc.gen().map((g) => planObject(g, '', 0))

describe('mergeNotes against a model of two sides editing one base', () => {
  it('keeps every edit that overlaps none of the other side, and reports exactly the overlapping ones', () => {
    fc.assert(
      fc.property(notes, ({ base, mine, theirs, expected }) => {
        const { merged, conflicts } = mergeNotes(
          base as NoteFields,
          mine as NoteFields,
          theirs as NoteFields,
        )
        assert.deepEqual(merged, expected.value)
        assert.deepEqual([...conflicts].sort(), [...expected.conflicts].sort())
        for (const path of conflicts) assert.deepEqual(at(merged, path), at(theirs, path))
      }),
      { numRuns: 500 },
    )
  })

  it('merges to byte-identical JSON both ways round (either device syncing first) when nothing conflicts and no two insertions meet', () => {
    fc.assert(
      fc.property(notes, ({ base, mine, theirs, expected }) => {
        fc.pre(expected.conflicts.length === 0 && !expected.samePlace)
        const one = mergeNotes(base as NoteFields, mine as NoteFields, theirs as NoteFields)
        const other = mergeNotes(base as NoteFields, theirs as NoteFields, mine as NoteFields)
        assert.equal(JSON.stringify(one.merged), JSON.stringify(other.merged))
        // Whichever device syncs second merges against the other's write: the same note either way.
        assert.deepEqual(other.merged, expected.value)
        assert.deepEqual(other.conflicts, [])
      }),
      { numRuns: 300 },
    )
  })

  it('is the identity when a side did nothing or both did the same', () => {
    fc.assert(
      fc.property(notes, ({ base, mine, theirs }) => {
        const b = base as NoteFields
        for (const x of [mine, theirs] as NoteFields[]) {
          assert.equal(JSON.stringify(mergeNotes(b, b, x).merged), JSON.stringify(x))
          assert.equal(JSON.stringify(mergeNotes(b, x, b).merged), JSON.stringify(x))
          assert.equal(JSON.stringify(mergeNotes(b, x, x).merged), JSON.stringify(x))
          assert.deepEqual(mergeNotes(b, x, x).conflicts, [])
        }
      }),
      { numRuns: 300 },
    )
  })
})
