import type { NoteRecord, Preconditions } from '../types.js'

/**
 * Whether a note meets a write's conditions: If-Match by strong comparison (or '*'
 * for any note), and If-Unmodified-Since, whose date has whole seconds, so a note written within
 * that second still meets it: modified 1500 meets ifUnmodifiedSince 1000, 2000 does not.
 */
export function meets(note: NoteRecord, { ifMatch, ifUnmodifiedSince }: Preconditions): boolean {
  if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.includes(note.etag)) return false
  if (ifUnmodifiedSince !== undefined && note.modified >= ifUnmodifiedSince + 1000) return false
  return true
}
