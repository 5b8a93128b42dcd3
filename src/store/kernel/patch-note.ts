import { parseJson } from '../../client/parse-json.js'
import type { NoteFields, PatchKind } from '../types.js'
import { mergePatchInto } from './merge-patch.js'
import { setField } from './set-field.js'

/**
 * The note that an update makes (NoteStore.update): a fresh parse of the stored JSON with
 * `fields` applied, shallowly ('merge', the spec's PATCH: each field replaces the stored one, a
 * null included) or by RFC 7396 ('merge-patch': a null removes, objects merge). The caller then
 * serializes, measures and stores it, or drops it.
 * ('{"id":1,"a":1}', { a: null }, 'merge') -> { id: 1, a: null }
 * ('{"id":1,"a":1}', { a: null }, 'merge-patch') -> { id: 1 }
 */
export function patchNote(json: string, fields: NoteFields, kind: PatchKind): NoteFields {
  const note = parseJson(json) as NoteFields
  if (kind === 'merge-patch') mergePatchInto(note, fields)
  else for (const key of Object.keys(fields)) setField(note, key, fields[key])
  return note
}
