import type { NoteFields } from '../types.js'
import { setField } from './set-field.js'

/**
 * Where a created note's id goes in its JSON (the id always overrides the body's), as
 * `{ ...fields, id }` would place it without copying the object: at the end, or where the body's
 * own `id` was. The JSON is the four pieces joined once the third, the id's slot, holds the id:
 * { a: 1 } -> ['{"a":1', ',"id":', <id>, '}']
 * {} -> ['{', '"id":', <id>, '}']
 * { id: 'x', a: 1 } -> ['{', '"id":', <id>, ',"a":1}']
 * { a: 1, id: 'x', b: 2 } -> ['{"a":1', ',"id":', <id>, ',"b":2}']
 * The slot is there so that serializeWithId fills it and joins this very array: a create makes
 * no more objects than it did with the rule written inline (bench W4).
 */
function piecesAroundId(fields: NoteFields): [string, string, string | number, string] {
  if (!Object.hasOwn(fields, 'id')) {
    const json = JSON.stringify(fields)
    return json === '{}' ? ['{', '"id":', '', '}'] : [json.slice(0, -1), ',"id":', '', '}']
  }
  const before: NoteFields = {}
  const after: NoteFields = {}
  let seen = false
  for (const key of Object.keys(fields)) {
    if (key === 'id') seen = true
    else setField(seen ? after : before, key, fields[key])
  }
  const head = JSON.stringify(before)
  const tail = JSON.stringify(after)
  return [
    head.slice(0, -1),
    head === '{}' ? '"id":' : ',"id":',
    '',
    tail === '{}' ? '}' : `,${tail.slice(1)}`,
  ]
}

/** The JSON of a created note: { a: 1 }, 5 -> '{"a":1,"id":5}'; { id: 'x', a: 1 }, 5 -> '{"id":5,"a":1}' */
export function serializeWithId(fields: NoteFields, id: number): string {
  const pieces = piecesAroundId(fields)
  pieces[2] = id
  // join() makes one flat string. A template literal would store a rope of five pieces, holding
  // the whole stringify output behind a slice: ~300 bytes a small note instead of ~160, and more
  // objects for every garbage collection to copy (bench W4, W6).
  return pieces.join('')
}

/**
 * The JSON of a note to be created before and after its id, for a store that learns the id only
 * where it stores the note (PostgreSQL fills it in): { a: 1 } -> ['{"a":1,"id":', '}'].
 */
export function jsonAroundId(fields: NoteFields): [before: string, after: string] {
  const [open, separator, , close] = piecesAroundId(fields)
  return [open + separator, close]
}

/**
 * Whether an `id` field can be found by a path id: only finite numbers can equal one (Infinity,
 * from `1e400`, is serialized as null). 7 -> true; '7', Infinity, NaN, undefined -> false.
 */
export function isIndexable(id: unknown): id is number {
  return typeof id === 'number' && Number.isFinite(id)
}
