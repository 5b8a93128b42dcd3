import { NotesProblem, problemOf } from './errors.js'
import type { Reply } from './transport.js'
import type { Note, NoteList } from './types.js'

/*
 * What the client reads of the service's answers, and the paths of its notebooks.
 */

export const NOTEBOOKS_PATH = '/api/notebooks'

/** '/api/notebooks/n4Q' for 'n4Q'; an id is a path segment, percent-encoded. */
export function notebookPath(id: string): string {
  return `${NOTEBOOKS_PATH}/${encodeURIComponent(id)}`
}

export function memberPath(id: string, user: string): string {
  return `${notebookPath(id)}/members/${encodeURIComponent(user)}`
}

/** The `data` of a 200 (or `status`) answer; any other answer is thrown as its problem. */
export function dataOf(reply: Reply, status = 200): unknown {
  if (reply.status !== status) throw problemOf(reply.status, reply.headers, reply.body)
  const body = reply.body
  if (typeof body !== 'object' || body === null || !('data' in body)) {
    throw new NotesProblem(
      {
        type: 'about:blank',
        title: 'Unexpected answer',
        status: reply.status,
        detail: `The service answered ${reply.status} without a {"data": ...} document.`,
      },
      reply.headers,
    )
  }
  return body.data
}

export function listOf(reply: Reply): NoteList {
  const notes = dataOf(reply) as Note[]
  const total = reply.headers.get('x-total-count')
  return {
    notes,
    version: reply.headers.get('notes-version') ?? undefined,
    total: total === null ? undefined : Number(total),
    etag: reply.headers.get('etag') ?? undefined,
  }
}
