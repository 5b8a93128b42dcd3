import type { Entry } from './entries.js'
import type { ImageNote } from './records.js'
import { pastOf } from './revisions.js'

/** A memory store's entries as its image holds them (a journal's compaction), and back. */

/** A live entry holding an image's note (a load). */
export function entryOf(note: ImageNote): Entry {
  const { id } = JSON.parse(note.json) as { id?: unknown }
  const { json, etag, modified, position } = note
  return {
    id,
    json,
    etag,
    modified,
    bytes: Buffer.byteLength(json),
    position,
    alive: true,
    change: note.change ?? 'created',
    past: undefined,
  }
}

/** The live notes of `entries` (in list order) as an image holds them. */
export function imageNotes(entries: readonly Entry[]): ImageNote[] {
  const notes: ImageNote[] = []
  for (const entry of entries) {
    if (entry.alive) {
      notes.push(imageNote(entry))
    }
  }
  return notes
}

/** An entry as an image holds it: its state, place, change and past states. */
export function imageNote(entry: Entry): ImageNote {
  const note: ImageNote = {
    json: entry.json,
    etag: entry.etag,
    modified: entry.modified,
    position: entry.position,
  }
  const past = pastOf(entry)
  if (entry.change === 'updated') note.change = 'updated'
  if (past !== undefined) note.past = past
  return note
}
