import { NotesProblem, problemOf } from './errors.js'
import { nextLink } from './link-header.js'
import type { Reply } from './transport.js'
import type { Note, NoteList, Revision, RevisionPage, TrashedNote, TrashPage } from './types.js'

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

/**
 * The `after` of the Link to the next page, the cursor a history or trash page continues from:
 * '</api/trash?limit=2&after=7>; rel="next"' -> '7'; no such link -> undefined.
 */
function cursorOf(reply: Reply): string | undefined {
  const link = nextLink(reply.headers.get('link'))
  if (link === undefined) return undefined
  return new URLSearchParams(link.slice(link.indexOf('?') + 1)).get('after') ?? undefined
}

/** A page of a note's revisions, or undefined for the empty 404 (no such live note). */
export function revisionPageOf(reply: Reply): RevisionPage | undefined {
  if (reply.status === 404 && reply.body === undefined) return undefined
  return { revisions: dataOf(reply) as Revision[], next: cursorOf(reply) }
}

/** A page of the trash, with its X-Total-Count. */
export function trashPageOf(reply: Reply): TrashPage {
  const notes = dataOf(reply) as TrashedNote[]
  const total = reply.headers.get('x-total-count')
  return { notes, total: total === null ? undefined : Number(total), next: cursorOf(reply) }
}

/** `?limit=...&after=...` of a page's options, or ''. */
export function pageQuery(options: {
  limit?: number | undefined
  after?: string | undefined
}): string {
  const query = new URLSearchParams()
  if (options.limit !== undefined) query.set('limit', String(options.limit))
  if (options.after !== undefined) query.set('after', options.after)
  return query.size === 0 ? '' : `?${query}`
}

/**
 * The next page's path on the notebook at `root` ('/api', '/api/notebooks/<id>'): the link's query
 * on that note path, '/api/note?limit=2&after=a1.x' -> '/api/notebooks/n4Q/note?limit=2&after=a1.x'.
 * The service names the path the list was read at; a service of an earlier version named
 * '/api/note' in a notebook too, which would walk on in the default notebook.
 */
export function nextPage(root: string, reply: Reply): string | undefined {
  const link = nextLink(reply.headers.get('link'))
  if (link === undefined) return undefined
  const query = link.indexOf('?')
  return query === -1 ? link : `${root}/note${link.slice(query)}`
}
