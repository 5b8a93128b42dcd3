import { parseJson } from '../../client/parse-json.js'
import type { NoteFields, PatchKind } from '../types.js'
import { mergePatchInto } from './merge-patch.js'
import { setField } from './set-field.js'

/**
 * The note that an update makes (NoteStore.update): a fresh parse of the stored JSON with
 * `fields` applied, shallowly ('merge', the spec's PATCH: each field replaces the stored one, a
 * null included), by RFC 7396 ('merge-patch': a null removes, objects merge), or in place of it
 * ('replace', a PUT: the fields with the note's id, where the body's `id` was or else at the end,
 * as a create places it). The caller then serializes, measures and stores it, or drops it.
 * ('{"id":1,"a":1}', { a: null }, 'merge') -> { id: 1, a: null }
 * ('{"id":1,"a":1}', { a: null }, 'merge-patch') -> { id: 1 }
 * ('{"id":1,"a":1}', { b: 2 }, 'replace') -> { b: 2, id: 1 }
 * ('{"id":1,"a":1}', { id: 9, b: 2 }, 'replace') -> { id: 1, b: 2 }
 */
export function patchNote(json: string, fields: NoteFields, kind: PatchKind): NoteFields {
  const note = parseJson(json) as NoteFields
  if (kind === 'replace') return replacement(fields, note.id)
  if (kind === 'merge-patch') mergePatchInto(note, fields)
  else for (const key of Object.keys(fields)) setField(note, key, fields[key])
  return note
}

function replacement(fields: NoteFields, id: unknown): NoteFields {
  const note: NoteFields = {}
  for (const key of Object.keys(fields)) setField(note, key, key === 'id' ? id : fields[key])
  if (!Object.hasOwn(fields, 'id')) note.id = id
  return note
}
