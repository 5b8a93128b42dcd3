/**
 * The errors the client throws: every answer the service gives as a problem (RFC 9457) becomes a
 * NotesProblem carrying its status, title, detail and headers; a 412 is a ConflictError that
 * also carries the note's current ETag; a network failure that outlasted the retries is a
 * NotesNetworkError.
 */

/** The members of an RFC 9457 problem document the service sends. */
export interface ProblemDocument {
  type: string
  title: string
  status: number
  detail: string
}

/** An answer of the service that is not a success: `status`, `title`, `detail`, `type`, headers. */
export class NotesProblem extends Error {
  override name = 'NotesProblem'
  readonly status: number
  readonly title: string
  readonly detail: string
  readonly type: string
  /** The headers of the answer (Retry-After, ETag, WWW-Authenticate, ...). */
  readonly headers: Headers

  constructor(problem: ProblemDocument, headers: Headers) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`)
    this.status = problem.status
    this.title = problem.title
    this.detail = problem.detail
    this.type = problem.type
    this.headers = headers
  }
}

/**
 * The answer to an update or delete of a note that does not exist (the service's empty 404).
 * `get` answers `undefined` for a missing note instead of throwing this.
 */
export class NoteNotFoundError extends NotesProblem {
  override name = 'NoteNotFoundError'
}

/**
 * A 412: the note changed since the ETag sent in If-Match; nothing was written. `currentEtag` is
 * the ETag the note has now: get it, decide, and write again with that ETag.
 */
export class ConflictError extends NotesProblem {
  override name = 'ConflictError'
  readonly currentEtag: string | undefined

  constructor(problem: ProblemDocument, headers: Headers) {
    super(problem, headers)
    this.currentEtag = headers.get('etag') ?? undefined
  }
}

/** The service could not be reached (after the retries the request allowed). */
export class NotesNetworkError extends Error {
  override name = 'NotesNetworkError'

  constructor(message: string, options: { cause: unknown }) {
    super(message, options)
  }
}

/**
 * The error for a non-success answer: its problem JSON when it has one, else a problem made from
 * the status (the empty 404 of a missing note: 'Not Found').
 */
export function problemOf(status: number, headers: Headers, body: unknown): NotesProblem {
  const document = problemDocument(status, headers, body)
  if (status === 412) return new ConflictError(document, headers)
  if (status === 404 && body === undefined) return new NoteNotFoundError(document, headers)
  return new NotesProblem(document, headers)
}

function problemDocument(status: number, headers: Headers, body: unknown): ProblemDocument {
  const given = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {}
  const text = (name: string, fallback: string): string => {
    const value = given[name]
    return typeof value === 'string' ? value : fallback
  }
  const title = text('title', status === 404 ? 'Not Found' : `HTTP ${status}`)
  const fallbackDetail =
    status === 404 && body === undefined
      ? 'No note has this id.'
      : `The service answered ${status}${headers.get('content-type') === null ? '' : ` (${headers.get('content-type')})`} without a problem document.`
  return {
    type: text('type', 'about:blank'),
    title,
    status,
    detail: text('detail', fallbackDetail),
  }
}
