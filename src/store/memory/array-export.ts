import type { NoteExport } from '../types.js'

/** Notes a chunk of an in-memory export holds: big enough to write well, small enough to yield. */
const EXPORT_CHUNK_NOTES = 1000

/**
 * The export of a snapshot a memory store took: the notes' JSON strings (references to the
 * store's own, so a snapshot costs a pointer per note, never a copy of the text), handed out a
 * chunk at a time. ['{"id":1}', '{"id":2}', '{"id":3}'] with chunks of 2 -> ['{"id":1}', '{"id":2}'],
 * then ['{"id":3}'].
 */
export function arrayExport(
  version: string,
  notes: readonly string[],
  chunkNotes = EXPORT_CHUNK_NOTES,
): NoteExport {
  let closed = false
  async function* chunks(): AsyncGenerator<readonly string[]> {
    for (let at = 0; at < notes.length && !closed; at += chunkNotes) {
      yield notes.slice(at, at + chunkNotes)
    }
  }
  return {
    version,
    count: notes.length,
    chunks,
    close: async () => {
      closed = true
    },
  }
}
