/**
 * The stream of every notebook the caller can read (`GET /api/events?notebooks=all`), as the
 * items `NotesClient.allChanges()` yields. One position (the stream's event id, opaque) resumes
 * every notebook at once; the feed under it (change-feed.ts) sends it as `Last-Event-ID` after a
 * drop, as it does for one notebook's feed.
 */
import type { FeedDecoder } from './change-feed.js'
import { parseJson } from './parse-json.js'
import type { Note, Notebook } from './types.js'

/**
 * One item of the all-notebooks feed, each with the stream's `position` after it (what
 * `allChanges({ since })` resumes from):
 * - `opened`: a connection was made (the first, or one after a drop); its position is where the
 *   stream stands, every notebook included.
 * - `created`, `updated`, `deleted`: a change in notebook `notebook` (its id), in that notebook's
 *   order.
 * - `joined`: the caller gained a notebook (as `notebooks()` lists it); its changes follow from now.
 * - `left`: the caller lost notebook `notebook` (removed, left, or it was deleted); nothing more of
 *   it follows.
 * - `reset`: the position was older than notebook `notebook`'s history: load it again, then go on.
 */
export type NotebooksEvent =
  | { type: 'opened'; position: string }
  | { type: 'created' | 'updated'; position: string; notebook: string; note: Note }
  | { type: 'deleted'; position: string; notebook: string; id: number }
  | { type: 'joined'; position: string; notebook: Notebook }
  | { type: 'left'; position: string; notebook: string }
  | { type: 'reset'; position: string; notebook: string }

export const NOTEBOOKS_EVENTS_PATH = '/api/events?notebooks=all'

/** The stream's messages as NotebooksEvents; it does not end of itself. */
export const NOTEBOOKS_DECODER: FeedDecoder<NotebooksEvent> = {
  item(type, position, data) {
    switch (type) {
      case 'message':
        return { type: 'opened', position }
      case 'created':
      case 'updated': {
        const { notebook, note } = parseJson(data) as { notebook: string; note: Note }
        return { type, position, notebook, note }
      }
      case 'deleted': {
        const { notebook, note } = parseJson(data) as { notebook: string; note: { id: number } }
        return { type, position, notebook, id: note.id }
      }
      case 'joined':
        return { type, position, notebook: (parseJson(data) as { notebook: Notebook }).notebook }
      // `left` names the notebook as listed (or by its id alone, when left while away).
      case 'left':
        return { type, position, notebook: (parseJson(data) as { notebook: Notebook }).notebook.id }
      case 'reset':
        return { type, position, notebook: (parseJson(data) as { notebook: string }).notebook }
      // A notebook's own stream says `revoked` where this one says `left`.
      case 'revoked':
        return {
          type: 'left',
          position,
          notebook: (parseJson(data) as { notebook: string }).notebook,
        }
      default:
        return undefined
    }
  },
  last: () => false,
}
