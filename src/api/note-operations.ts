import { createHash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import {
  type IdempotentCreate,
  type ListRecord,
  type MaybePromise,
  type NoteFields,
  type NoteRecord,
  type NoteStore,
  type PageQuery,
  type PageRecord,
  type PatchKind,
  PreconditionFailed,
  type Preconditions,
} from '../store/types.js'
import { httpDate, noneMatch, notModifiedSince, writeConditions } from './conditional.js'
import { type ListRequest, nextPageUrl, parseListQuery } from './page-query.js'
import { problemAnswer } from './problem.js'

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

const NO_HEADERS: readonly string[] = Object.freeze([])

/**
 * What to answer, free of any transport: the Fastify routes and the fast lane each write it as it
 * is, so a status, header or body decided here reaches every client the same way.
 */
export class Answer {
  constructor(
    readonly status: number,
    /** The media type of `body`; undefined with no body at all (then no Content-Type either). */
    readonly contentType: string | undefined,
    readonly body: string | Buffer | undefined,
    /** Further response headers as a flat [name, value, ...] list; usually empty. */
    readonly headers: readonly string[] = NO_HEADERS,
  ) {}
}

/** The contract's not-found: 404, no body and no Content-Type (`Content-Length: 0`). */
export const NOT_FOUND: Answer = Object.freeze(new Answer(404, undefined, undefined))

/** The request headers an operation reads (conditions, idempotency keys); node:http's shape. */
export type RequestHeaders = IncomingHttpHeaders

const NO_REQUEST_HEADERS: RequestHeaders = Object.freeze({})
const NOTES_PATH = '/api/note'
/** Page answers kept per version (bench W8: the same page asked for again and again). */
const MAX_CACHED_PAGES = 64
const VISIBLE_ASCII = /^[\x21-\x7e]{1,255}$/

/**
 * What each note operation means: which note it acts on, what it changes in the store, and what
 * it answers, conditions (DECISION 22), pages (23) and idempotency keys (30) included. The Fastify
 * routes (note-routes.ts) and the fast lane (http/fast-lane.ts) only translate a request into one
 * of these calls and write the Answer back; neither decides anything about a note.
 *
 * `id` is the `:id` segment read by parseNoteId: undefined when the segment is not a decimal
 * integer, which finds nothing. `headers` are the request's (only the ones named here are read).
 * A synchronous store gets a synchronous answer (no microtask); each method tests for a promise
 * itself rather than through one shared helper, whose call of its callback would see every answer
 * function (bench:instructions W4 and W5 measured the helper at about +1% per request).
 * Store errors (StoreFullError, IdempotencyKeyReusedError) are thrown or rejected as they are; the
 * lanes turn them into problems with problemForError.
 */
export class NoteOperations {
  readonly #store: NoteStore
  // The list's last record and its Answer: the store returns the same record until a write, so
  // repeated reads send the same Buffer without building or encoding it again (bench W3:
  // 10,000 notes, about 1 MB, answered some 6 times as fast as building it per request).
  #listRecord: ListRecord | undefined
  #listAnswer: Answer = NOT_FOUND
  /** Page answers of one version, by query string. */
  #pages = { version: '', answers: new Map<string, Answer>() }

  constructor(store: NoteStore) {
    this.#store = store
  }

  /**
   * POST /api/note: stores the fields under a new id and answers the note with its ETag; with an
   * Idempotency-Key, at most once per key (DECISION 30).
   */
  create(fields: NoteFields, headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const key = headers['idempotency-key']
    if (key !== undefined) return this.#createOnce(key, fields)
    const note = this.#store.create(fields)
    if (note instanceof Promise) return note.then(writtenAnswer)
    return writtenAnswer(note)
  }

  /**
   * GET /api/note: every note in list order, or a page of them (DECISION 23). `search` is the
   * query string without its '?'. Answers 304 to a matching If-None-Match without reading the list.
   */
  list(search = '', headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const request = parseListQuery(search)
    if (request.kind === 'bad') return problemAnswer(400, request.detail)
    const ifNoneMatch = headers['if-none-match']
    if (ifNoneMatch !== undefined) {
      const version = this.#store.version()
      if (version instanceof Promise) {
        return version.then((settled) => this.#listIfChanged(request, search, ifNoneMatch, settled))
      }
      return this.#listIfChanged(request, search, ifNoneMatch, version)
    }
    return this.#listOrPage(request, search)
  }

  /** GET /api/note/:id: the note with its validators, a 304, or the contract's 404. */
  get(id: number | undefined, headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    if (id === undefined) return NOT_FOUND
    const note = this.#store.get(id)
    if (note instanceof Promise) return note.then((settled) => readAnswer(settled, headers))
    return readAnswer(note, headers)
  }

  /**
   * PATCH /api/note/:id: the fields merged over the note (shallow, or RFC 7396 for a merge patch:
   * DECISION 25), under If-Match / If-Unmodified-Since (412 when they fail), or the contract's 404.
   */
  update(
    id: number | undefined,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    headers: RequestHeaders = NO_REQUEST_HEADERS,
  ): MaybePromise<Answer> {
    if (id === undefined) return NOT_FOUND
    const conditions = conditionsOf(headers)
    const note = this.#store.update(id, fields, kind, conditions)
    if (note instanceof Promise) return note.then(updatedAnswer)
    return updatedAnswer(note)
  }

  /**
   * DELETE /api/note/:id: removes the note and answers the segment exactly as received (after
   * percent-decoding), as a string: '007' -> {"data":"007"}. Conditions as for update.
   */
  delete(
    id: number | undefined,
    segment: string,
    headers: RequestHeaders = NO_REQUEST_HEADERS,
  ): MaybePromise<Answer> {
    if (id === undefined) return NOT_FOUND
    const found = this.#store.delete(id, conditionsOf(headers))
    if (found instanceof Promise) return found.then((value) => deletedAnswer(value, segment))
    return deletedAnswer(found, segment)
  }

  #createOnce(key: string | string[], fields: NoteFields): MaybePromise<Answer> {
    // node:http joins a repeated header with ', ', which the test refuses like a list would be.
    if (typeof key !== 'string' || !VISIBLE_ASCII.test(key)) {
      return problemAnswer(
        400,
        'Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces), sent once.',
      )
    }
    const fingerprint = createHash('sha256').update(JSON.stringify(fields)).digest('base64url')
    const created = this.#store.createOnce(key, fingerprint, fields)
    if (created instanceof Promise) return created.then(onceAnswer)
    return onceAnswer(created)
  }

  #listIfChanged(
    request: ListRequest,
    search: string,
    ifNoneMatch: string,
    version: string,
  ): MaybePromise<Answer> {
    const etag = `"${version}"`
    if (noneMatch(ifNoneMatch, etag)) {
      return new Answer(304, undefined, undefined, [
        'etag',
        etag,
        'notes-version',
        version,
        'cache-control',
        'no-cache',
      ])
    }
    return this.#listOrPage(request, search)
  }

  #listOrPage(request: ListRequest, search: string): MaybePromise<Answer> {
    if (request.kind !== 'page') {
      const list = this.#store.list()
      if (list instanceof Promise) return list.then((settled) => this.#listAnswerFor(settled))
      return this.#listAnswerFor(list)
    }
    const cached = this.#pages.answers.get(search)
    if (cached !== undefined) {
      // A page is cached with its version: it stands while the store is still at that version.
      const version = this.#store.version()
      if (version instanceof Promise) {
        return version.then((settled) =>
          settled === this.#pages.version ? cached : this.#page(request.query, search),
        )
      }
      if (version === this.#pages.version) return cached
    }
    return this.#page(request.query, search)
  }

  #page(query: PageQuery, search: string): MaybePromise<Answer> {
    const page = this.#store.page(query)
    if (page instanceof Promise)
      return page.then((settled) => this.#pageAnswerFor(settled, query, search))
    return this.#pageAnswerFor(page, query, search)
  }

  #pageAnswerFor(page: PageRecord, query: PageQuery, search: string): Answer {
    const headers = [
      'etag',
      `"${page.version}"`,
      'notes-version',
      page.version,
      'x-total-count',
      String(page.total),
      'cache-control',
      'no-cache',
    ]
    if (page.next !== undefined) {
      headers.push('link', `<${nextPageUrl(NOTES_PATH, query, page.next)}>; rel="next"`)
    }
    const answer = new Answer(200, JSON_CONTENT_TYPE, encodeData(page.json), headers)
    let pages = this.#pages
    if (pages.version !== page.version) {
      pages = { version: page.version, answers: new Map() }
      this.#pages = pages
    }
    if (pages.answers.size >= MAX_CACHED_PAGES) pages.answers.clear()
    pages.answers.set(search, answer)
    return answer
  }

  #listAnswerFor(list: ListRecord): Answer {
    if (list !== this.#listRecord) {
      this.#listAnswer = new Answer(200, JSON_CONTENT_TYPE, encodeData(list.json), [
        'etag',
        `"${list.version}"`,
        'notes-version',
        list.version,
        'x-total-count',
        String(list.count),
        'cache-control',
        'no-cache',
      ])
      this.#listRecord = list
    }
    return this.#listAnswer
  }
}

/** The If-Match or If-Unmodified-Since of a write, if any. */
function conditionsOf(headers: RequestHeaders): Preconditions | undefined {
  const ifMatch = headers['if-match']
  const ifUnmodifiedSince = headers['if-unmodified-since']
  if (ifMatch === undefined && ifUnmodifiedSince === undefined) return undefined
  return writeConditions(ifMatch, ifUnmodifiedSince)
}

/** A note just written: 200 {"data":note} with its new ETag. */
function writtenAnswer(note: NoteRecord): Answer {
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${note.json}}`, ['etag', note.etag])
}

function onceAnswer({ note, replayed }: IdempotentCreate): Answer {
  if (!replayed) return writtenAnswer(note)
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${note.json}}`, [
    'etag',
    note.etag,
    'idempotent-replayed',
    'true',
  ])
}

function readAnswer(note: NoteRecord | undefined, headers: RequestHeaders): Answer {
  if (note === undefined) return NOT_FOUND
  const validators = [
    'etag',
    note.etag,
    'last-modified',
    httpDate(note.modified),
    'cache-control',
    'no-cache',
  ]
  const ifNoneMatch = headers['if-none-match']
  const unchanged =
    ifNoneMatch !== undefined
      ? noneMatch(ifNoneMatch, note.etag)
      : headers['if-modified-since'] !== undefined &&
        notModifiedSince(headers['if-modified-since'], note.modified)
  if (unchanged) return new Answer(304, undefined, undefined, validators)
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${note.json}}`, validators)
}

function updatedAnswer(note: NoteRecord | undefined | PreconditionFailed): Answer {
  if (note === undefined) return NOT_FOUND
  if (note instanceof PreconditionFailed) return preconditionFailed(note)
  return writtenAnswer(note)
}

function deletedAnswer(found: boolean | PreconditionFailed, segment: string): Answer {
  if (found instanceof PreconditionFailed) return preconditionFailed(found)
  // parseNoteId let through only digits and an optional '-', which need no JSON escaping.
  return found ? dataAnswer(`"${segment}"`) : NOT_FOUND
}

/** 412, carrying the note's current ETag so that the client can fetch the newer version. */
function preconditionFailed({ current }: PreconditionFailed): Answer {
  const { status, contentType, body } = problemAnswer(
    412,
    `The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now ${current.etag}. GET it, and send that ETag in If-Match to write over it.`,
  )
  return new Answer(status, contentType, body, [
    'etag',
    current.etag,
    'last-modified',
    httpDate(current.modified),
  ])
}

/** '{"id":1}' -> 200 {"data":{"id":1}} */
function dataAnswer(json: string): Answer {
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${json}}`)
}

/** '[1]' -> Buffer of '{"data":[1]}', written straight into one allocation. */
function encodeData(json: string): Buffer {
  const prefix = '{"data":'
  const body = Buffer.allocUnsafeSlow(prefix.length + Buffer.byteLength(json) + 1)
  let at = body.write(prefix, 0, 'latin1')
  at += body.write(json, at, 'utf8')
  body.write('}', at, 'latin1')
  return body
}
