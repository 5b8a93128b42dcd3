import { mergeSequences } from './sequence-merge.js'
import type { NoteFields } from './types.js'

/** What mergeNotes answers. */
export interface NoteMerge {
  /** The merged note: both sides' edits, and theirs at every conflicting path. */
  merged: NoteFields
  /** JSON Pointers (RFC 6901) of the values both sides changed differently, in note order. */
  conflicts: string[]
}

/** A field that one version does not have. */
const ABSENT = Symbol('absent')
type Value = unknown

/** A run of letters or digits (with the marks that combine with them), or any other character. */
const TOKEN = /[\p{L}\p{N}\p{M}]+|[^\p{L}\p{N}\p{M}]/gsu

/**
 * A three-way merge of two versions of a note made from one base (docs/client.md):
 * - a field changed on one side only takes that side; changed the same way on both, that value;
 * - objects merge field by field, at any depth; the keys keep the order both sides gave them;
 * - a string changed on both sides merges by words (a run of letters or digits; every other
 *   character is a token of its own): the same edit on both sides is made once, two different
 *   insertions at one place are both kept (theirs first), and different changes to the same
 *   words are a conflict;
 * - anything else changed differently on both sides (arrays, numbers, booleans, null, a deletion
 *   against an edit, a change of type) is a conflict.
 * A conflicting path holds theirs in `merged`, and `id` is always theirs.
 *
 * mergeNotes({ id: 1, a: 'x', b: 1 }, { id: 1, a: 'y', b: 1 }, { id: 1, a: 'x', b: 2 })
 *   -> { merged: { id: 1, a: 'y', b: 2 }, conflicts: [] }
 * mergeNotes({ t: 'the cat sat' }, { t: 'the black cat sat' }, { t: 'the cat sat down' })
 *   -> { merged: { t: 'the black cat sat down' }, conflicts: [] }
 * mergeNotes({ t: 'the cat sat' }, { t: 'the dog sat' }, { t: 'the cow sat' })
 *   -> { merged: { t: 'the cow sat' }, conflicts: ['/t'] }
 * mergeNotes({ tags: ['a'] }, { tags: ['a', 'b'] }, { tags: [] })
 *   -> { merged: { tags: [] }, conflicts: ['/tags'] }
 * mergeNotes({ 'a/b': { '~': 1 } }, { 'a/b': { '~': 2 } }, { 'a/b': {} })
 *   -> { merged: { 'a/b': {} }, conflicts: ['/a~1b/~0'] }
 */
export function mergeNotes(base: NoteFields, mine: NoteFields, theirs: NoteFields): NoteMerge {
  const conflicts: string[] = []
  const merged = mergeObjects(base, mine, theirs, '', conflicts, true)
  return { merged, conflicts }
}

function mergeValues(
  base: Value,
  mine: Value,
  theirs: Value,
  path: string,
  conflicts: string[],
): Value {
  if (isObject(mine) && isObject(theirs)) {
    return mergeObjects(isObject(base) ? base : {}, mine, theirs, path, conflicts, false)
  }
  if (same(mine, theirs) || same(base, mine)) return theirs
  if (same(base, theirs)) return mine
  if (typeof base === 'string' && typeof mine === 'string' && typeof theirs === 'string') {
    const text = mergeSequences(words(base), words(mine), words(theirs))
    if (!text.conflict) return text.tokens.join('')
  }
  conflicts.push(path)
  return theirs
}

function mergeObjects(
  base: NoteFields,
  mine: NoteFields,
  theirs: NoteFields,
  path: string,
  conflicts: string[],
  top: boolean,
): NoteFields {
  const values = new Map<string, Value>()
  const found = new Map<string, string[]>()
  for (const key of new Set([...Object.keys(theirs), ...Object.keys(mine), ...Object.keys(base)])) {
    const here: string[] = []
    const value =
      top && key === 'id'
        ? field(theirs, key)
        : mergeValues(
            field(base, key),
            field(mine, key),
            field(theirs, key),
            pointer(path, key),
            here,
          )
    if (value !== ABSENT) values.set(key, value)
    found.set(key, here)
  }
  // The keys in the order both sides left them (merged as a sequence too), then any kept key
  // that order lost (one side removed it, the other changed it: theirs keeps it).
  const order = mergeSequences(Object.keys(base), Object.keys(mine), Object.keys(theirs)).tokens
  const keys = new Set([...order, ...Object.keys(theirs), ...Object.keys(mine)])
  const merged: NoteFields = {}
  for (const key of keys) {
    if (values.has(key)) setField(merged, key, values.get(key))
  }
  for (const key of keys) conflicts.push(...(found.get(key) ?? []))
  return merged
}

/** '' + 'a/b' -> '/a~1b'; '/x' + '~' -> '/x/~0' (RFC 6901) */
function pointer(path: string, key: string): string {
  return `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`
}

/** 'Hello, wörld 42' -> ['Hello', ',', ' ', 'wörld', ' ', '42'] */
function words(text: string): string[] {
  return text.match(TOKEN) ?? []
}

function field(object: NoteFields, key: string): Value {
  return Object.hasOwn(object, key) ? object[key] : ABSENT
}

function isObject(value: Value): value is NoteFields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The same JSON: scalars by value, arrays and objects by their text (key order included). */
function same(x: Value, y: Value): boolean {
  if (x === y) return true
  if (typeof x !== 'object' || typeof y !== 'object' || x === null || y === null) return false
  return JSON.stringify(x) === JSON.stringify(y)
}

/** `note[key] = value`, with '__proto__' a plain field rather than the prototype. */
function setField(note: NoteFields, key: string, value: Value): void {
  if (key === '__proto__') {
    Object.defineProperty(note, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    })
  } else {
    note[key] = value
  }
}
