import {
  type BatchKey,
  type MaybePromise,
  type NoteFields,
  type NoteRecord,
  type NoteStore,
  type NoteWriter,
  type PatchKind,
  StoreFullError,
} from '../store/types.js'
import { Answer, JSON_CONTENT_TYPE, NOTES_PATH, type RequestHeaders } from './answer.js'
import { parseNoteId } from './note-id.js'
import { PROBLEM_CONTENT_TYPE, problemAnswer } from './problem.js'
import { createAnswer, deleteAnswer, updateAnswer } from './write-answers.js'

/**
 * POST /api/batch: several writes applied in order, all or nothing. A batch is one
 * more adapter of the three writes: each request in it goes through write-answers.ts exactly as
 * it would alone, on the writer of one NoteStore.batch, and its answer is the one it would have
 * had alone. This file reads the batch document and puts the answers together.
 */

export const BATCH_PATH = '/api/batch'
/** Most requests in one batch. */
export const MAX_BATCH_REQUESTS = 1000
/**
 * How much deeper a note's fields sit in a batch document than in a request of their own:
 * {"requests":[{"body":{...}}]} puts the body object three levels down.
 */
export const BATCH_BODY_DEPTH = 3

/** One request of a batch, read and checked. */
export interface BatchRequest {
  readonly method: 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  readonly url: string
  /** The note id of a PUT, PATCH or DELETE (undefined: the segment names no note). */
  readonly id: number | undefined
  /** The `:id` segment of a PUT, PATCH or DELETE, percent-decoded; '' for a POST. */
  readonly segment: string
  readonly fields: NoteFields
  readonly kind: PatchKind
  /** The request's headers, names in lower case. */
  readonly headers: RequestHeaders
}

const MEMBERS = new Set(['method', 'url', 'headers', 'body'])
const JSON_MEDIA_TYPE = /^application\/(?:json|[\w!#$&^.-]+\+json)$/
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i

/**
 * The requests of a batch document (the body, already parsed as a JSON object), or the 400 (or
 * 415, for a request whose Content-Type is not JSON) that names what is wrong with it.
 */
export function parseBatch(body: NoteFields): BatchRequest[] | Answer {
  for (const name of Object.keys(body)) {
    if (name !== 'requests') {
      return badBatch(`The batch has an unknown member "${name}"; send {"requests": [...]}.`)
    }
  }
  const { requests } = body
  if (!Array.isArray(requests) || requests.length === 0 || requests.length > MAX_BATCH_REQUESTS) {
    return badBatch(
      `"requests" must be an array of 1 to ${MAX_BATCH_REQUESTS} requests, each {"method", "url", "headers"?, "body"?}.`,
    )
  }
  const parsed: BatchRequest[] = []
  for (let i = 0; i < requests.length; i++) {
    const request = parseRequest(requests[i], `requests[${i}]`)
    if (request instanceof Answer) return request
    parsed.push(request)
  }
  return parsed
}

function parseRequest(value: unknown, at: string): BatchRequest | Answer {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return badBatch(`${at} must be an object {"method", "url", "headers"?, "body"?}.`)
  }
  const request = value as Record<string, unknown>
  for (const name of Object.keys(request)) {
    if (!MEMBERS.has(name)) {
      return badBatch(
        `${at} has an unknown member "${name}"; a request has "method", "url", "headers" and "body".`,
      )
    }
  }
  const { method, url } = request
  if (method !== 'POST' && method !== 'PUT' && method !== 'PATCH' && method !== 'DELETE') {
    return badBatch(`${at}.method must be "POST", "PUT", "PATCH" or "DELETE".`)
  }
  if (typeof url !== 'string') return badBatch(`${at}.url must be a string.`)
  const headers = parseHeaders(request.headers, at)
  if (headers instanceof Answer) return headers
  // As alone: no query or fragment reaches the route, and a trailing slash is the same resource.
  let path = url.split(/[?#]/, 1)[0] as string
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1)
  let segment = ''
  if (method === 'POST') {
    if (path !== NOTES_PATH) return badBatch(`${at}.url must be "${NOTES_PATH}" for a POST.`)
  } else {
    const raw = path.startsWith(`${NOTES_PATH}/`) ? path.slice(NOTES_PATH.length + 1) : ''
    try {
      segment = raw.includes('/') ? '' : decodeURIComponent(raw)
    } catch {
      return badBatch(`${at}.url has a malformed percent-encoding.`)
    }
    if (segment === '') {
      return badBatch(`${at}.url must be "${NOTES_PATH}/{id}" for a ${method}.`)
    }
  }
  const contentType = headers['content-type']
  if (method !== 'DELETE' && typeof contentType === 'string') {
    const refusal = mediaTypeRefusal(contentType, at)
    if (refusal !== undefined) return refusal
  }
  let fields: NoteFields = {}
  if (method !== 'DELETE' && request.body !== undefined) {
    const { body } = request
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return badBatch(`${at}.body must be a JSON object, not ${describe(body)}.`)
    }
    fields = body as NoteFields
  }
  return {
    method,
    url,
    id: method === 'POST' ? undefined : parseNoteId(segment),
    segment,
    fields,
    kind: method === 'PUT' ? 'replace' : isMergePatch(contentType) ? 'merge-patch' : 'merge',
    headers,
  }
}

/** A request's headers, names in lower case; a create's Idempotency-Key belongs on the batch. */
function parseHeaders(value: unknown, at: string): RequestHeaders | Answer {
  if (value === undefined) return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return badBatch(`${at}.headers must be an object of header names and string values.`)
  }
  const headers: RequestHeaders = {}
  for (const [name, text] of Object.entries(value)) {
    if (typeof text !== 'string') {
      return badBatch(`${at}.headers["${name}"] must be a string.`)
    }
    const lower = name.toLowerCase()
    if (lower === 'idempotency-key') {
      return badBatch(
        `${at} carries an Idempotency-Key; send it on the batch (POST ${BATCH_PATH}), which is then applied at most once.`,
      )
    }
    // Only these mean anything to a write; the prototype-free copy keeps '__proto__' harmless.
    if (lower === 'content-type' || lower === 'if-match' || lower === 'if-unmodified-since') {
      headers[lower] = text
    }
  }
  return headers
}

/** As the body parser of a request alone: a JSON media type, in UTF-8. */
function mediaTypeRefusal(contentType: string, at: string): Answer | undefined {
  const semicolon = contentType.indexOf(';')
  const mediaType = (semicolon === -1 ? contentType : contentType.slice(0, semicolon))
    .trim()
    .toLowerCase()
  if (!JSON_MEDIA_TYPE.test(mediaType)) {
    return problemAnswer(
      415,
      `${at}: Content-Type "${contentType}" is not supported; the body of a request in a batch is JSON (application/json, or application/merge-patch+json for a merge patch).`,
    )
  }
  const charset = CHARSET.exec(contentType)?.[1]
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    return problemAnswer(415, `${at}: Charset "${charset}" is not supported; the batch is UTF-8.`)
  }
  return undefined
}

function isMergePatch(contentType: string | string[] | undefined): boolean {
  if (typeof contentType !== 'string') return false
  const semicolon = contentType.indexOf(';')
  const mediaType = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim()
  return mediaType.toLowerCase() === 'application/merge-patch+json'
}

/** A request's answer, or the error it failed with (a store that threw or rejected). */
type Outcome = Answer | Error

/**
 * Applies `requests` on `store` as one batch (under `once` when the batch has an
 * Idempotency-Key) and answers: 200 with every request's answer, or, when one fails, its status
 * with a problem naming its index, and nothing applied. A store error other than a full store
 * (a database that went away) is thrown as it is: nothing was applied either.
 */
export function runBatch(
  store: NoteStore,
  requests: readonly BatchRequest[],
  once: BatchKey | undefined,
): MaybePromise<Answer> {
  /** The first request that failed, and its answer or the store's refusal. */
  let failedAt = -1
  let failure: Answer | StoreFullError | undefined
  const decide = (outcomes: readonly Outcome[]): string | undefined => {
    const parts: string[] = []
    for (let i = 0; i < outcomes.length; i++) {
      const outcome = outcomes[i] as Outcome
      if (outcome instanceof Error) {
        if (!(outcome instanceof StoreFullError)) throw outcome
      } else if (outcome.status < 400) {
        parts.push(answerJson(outcome))
        continue
      }
      failedAt = i
      failure = outcome
      return undefined
    }
    return `{"data":[${parts.join(',')}]}`
  }
  const work = (writer: NoteWriter): MaybePromise<string | undefined> => {
    const outcomes: MaybePromise<Outcome>[] = []
    let pending = false
    for (const request of requests) {
      let outcome: MaybePromise<Outcome>
      try {
        outcome = apply(writer, request)
      } catch (err) {
        outcome = err as Error
      }
      if (outcome instanceof Promise) {
        pending = true
        // Later requests run after it in the store's order; each outcome is awaited below.
        outcomes.push(outcome.catch((err: unknown) => err as Error))
      } else {
        outcomes.push(outcome)
        // A synchronous store: nothing after a failure needs to run.
        if (!pending && (outcome instanceof Error || outcome.status >= 400)) break
      }
    }
    if (pending) return Promise.all(outcomes).then(decide)
    return decide(outcomes as Outcome[])
  }
  const result = store.batch(work, once)
  const answer = (kept: Awaited<typeof result>): MaybePromise<Answer> => {
    if (kept === undefined) {
      const request = requests[failedAt] as BatchRequest
      const refused = failure as Answer | StoreFullError
      if (refused instanceof StoreFullError || refused.status !== 412) {
        return failed(failedAt, request, refused)
      }
      // The ETag the request met inside the batch was never kept: name the one the note has now.
      const note = request.id === undefined ? undefined : store.get(request.id)
      return note instanceof Promise
        ? note.then((now) => preconditionFailed(failedAt, request, now))
        : preconditionFailed(failedAt, request, note)
    }
    const headers = kept.replayed ? ['idempotent-replayed', 'true'] : undefined
    return new Answer(200, JSON_CONTENT_TYPE, kept.body, headers)
  }
  return result instanceof Promise ? result.then(answer) : answer(result)
}

/** One request of a batch through the meaning of its write (write-answers.ts). */
function apply(writer: NoteWriter, request: BatchRequest): MaybePromise<Answer> {
  switch (request.method) {
    case 'POST':
      return createAnswer(writer, request.fields)
    case 'PUT':
    case 'PATCH':
      return updateAnswer(writer, request.id, request.fields, request.kind, request.headers)
    case 'DELETE':
      return deleteAnswer(writer, request.id, request.segment, request.headers)
  }
}

/** {"status":200,"headers":{"etag":"\"k2.5\""},"body":{"data":...}} */
function answerJson(answer: Answer): string {
  let headers = ''
  for (let i = 0; i + 1 < answer.headers.length; i += 2) {
    if (i > 0) headers += ','
    // Header names are the service's own lower-case tokens: no escaping needed.
    headers += `"${answer.headers[i] as string}":${JSON.stringify(answer.headers[i + 1])}`
  }
  const body = answer.body === undefined ? 'null' : String(answer.body)
  return `{"status":${answer.status},"headers":{${headers}},"body":${body}}`
}

/**
 * The answer to a batch whose request `index` failed: that request's status, as a problem whose
 * detail names it (the contract's empty 404 becomes a 404 problem).
 */
function failed(index: number, request: BatchRequest, outcome: Answer | StoreFullError): Answer {
  const at = `requests[${index}] (${request.method} ${request.url})`
  const tail = 'Nothing in the batch was applied.'
  if (outcome instanceof StoreFullError) {
    return problemAnswer(507, `${at}: ${outcome.message} ${outcome.advice} ${tail}`)
  }
  const { status } = outcome
  let detail = 'No note has this id.'
  if (outcome.contentType === PROBLEM_CONTENT_TYPE && outcome.body !== undefined) {
    detail = (JSON.parse(String(outcome.body)) as { detail: string }).detail
  }
  return problemAnswer(status, `${at}: ${detail} ${tail}`)
}

/**
 * The 412 of a batch, with nothing applied: the condition did not hold where the request stands in
 * the batch (after the ones before it, which may have changed the note), and the ETag it can be
 * written under is the one the note has now, outside the batch.
 */
function preconditionFailed(
  index: number,
  request: BatchRequest,
  note: NoteRecord | undefined,
): Answer {
  const now =
    note === undefined
      ? 'no note has this id now'
      : `the note's ETag is now ${note.etag} (send that in If-Match to write over it)`
  return problemAnswer(
    412,
    `requests[${index}] (${request.method} ${request.url}): its If-Match or If-Unmodified-Since does not hold at its place in the batch, after the requests before it; ${now}. Nothing in the batch was applied.`,
  )
}

function badBatch(detail: string): Answer {
  return problemAnswer(400, detail)
}

/** [] -> 'an array', null -> 'null', 3 -> 'a number' */
function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return `a ${typeof value}`
}
