import { createHash } from 'node:crypto'
import type {
  BatchKey,
  IdempotentCreate,
  ListRecord,
  MaybePromise,
  NoteFields,
  NoteRecord,
  NoteStore,
  PageQuery,
  PageRecord,
  PatchKind,
} from '../store/types.js'
import {
  Answer,
  JSON_CONTENT_TYPE,
  NOT_FOUND,
  NOTES_PATH,
  notModified,
  type RequestHeaders,
} from './answer.js'
import { ACCEPT_ENCODING, AnswerEncoding, VARY } from './answer-encoding.js'
import { parseBatch, runBatch } from './batch.js'
import { type CodingChoice, encodedEtag, isLarge } from './compression.js'
import { httpDate, noneMatch, notModifiedSince } from './conditional.js'
import { ListAnswers } from './list-answers.js'
import { type ListRequest, nextPageUrl, parseListQuery } from './page-query.js'
import { problemAnswer } from './problem.js'
import { createAnswer, deleteAnswer, updateAnswer, writtenAnswer } from './write-answers.js'

export type { RequestHeaders }

const NO_REQUEST_HEADERS: RequestHeaders = Object.freeze({})
const VISIBLE_ASCII = /^[\x21-\x7e]{1,255}$/
/** Bytes that '{"data":' and '}' add around a note's JSON. */
const DATA_WRAPPING = 9

/**
 * What each note operation means: which note it acts on, what it changes in the store, and what
 * it answers, conditions, pages, idempotency keys and compression (docs/api.md)
 * included. The Fastify routes (note-routes.ts) and the fast lane (http/fast-lane.ts) only
 * translate a request into one of these calls and write the Answer back with answer-head.ts;
 * neither decides anything about a note. How an answer is compressed (answer-encoding.ts) and
 * which list and page answers are kept (list-answers.ts) live beside it.
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
  readonly #cache = new ListAnswers()
  readonly #encoding = new AnswerEncoding()
  readonly #notesPath: string

  /**
   * `notesPath` is where the notes are listed, for the Link of a page: '/api/note', or
   * '/api/notebooks/<nb>/note' for the operations served at a notebook's own path.
   */
  constructor(store: NoteStore, notesPath = NOTES_PATH) {
    this.#store = store
    this.#notesPath = notesPath
  }

  /**
   * POST /api/note: stores the fields under a new id and answers the note with its ETag; with an
   * Idempotency-Key, at most once per key.
   */
  create(fields: NoteFields, headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const choice = this.#encoding.choose(headers['accept-encoding'])
    const key = headers['idempotency-key']
    if (key !== undefined) return this.#createOnce(key, fields, choice)
    const answer = createAnswer(this.#store, fields)
    if (answer instanceof Promise) {
      return answer.then((settled) => this.#encoding.encoded(settled, choice))
    }
    return this.#encoding.encoded(answer, choice)
  }

  /**
   * GET /api/note: every note in list order, or a page of them. `search` is the
   * query string without its '?'. Answers 304 to a matching If-None-Match without reading the list
   * (uncompressed) or the store (compressed: from the version's cached answer).
   */
  list(search = '', headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const request = parseListQuery(search)
    if (request.kind === 'bad') return problemAnswer(400, request.detail)
    const ifNoneMatch = headers['if-none-match']
    const choice = this.#encoding.choose(headers['accept-encoding'])
    if (choice !== undefined) {
      const answer = this.#listOrPage(request, search)
      if (answer instanceof Promise) {
        return answer.then((settled) => this.#encoding.encodedOnce(settled, choice, ifNoneMatch))
      }
      return this.#encoding.encodedOnce(answer, choice, ifNoneMatch)
    }
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
    const choice = this.#encoding.choose(headers['accept-encoding'])
    const note = this.#store.get(id)
    if (note instanceof Promise) {
      return note.then((settled) => this.#readEncoded(settled, headers, choice))
    }
    return this.#readEncoded(note, headers, choice)
  }

  /**
   * PATCH /api/note/:id: the fields merged over the note (shallow, or RFC 7396 for a merge patch:
   * by type), under If-Match / If-Unmodified-Since (412 when they fail), or the contract's 404.
   * PUT /api/note/:id is the same with `kind` 'replace': the fields become the note, its id kept.
   */
  update(
    id: number | undefined,
    fields: NoteFields,
    kind: PatchKind = 'merge',
    headers: RequestHeaders = NO_REQUEST_HEADERS,
  ): MaybePromise<Answer> {
    const choice = this.#encoding.choose(headers['accept-encoding'])
    const answer = updateAnswer(this.#store, id, fields, kind, headers)
    if (answer instanceof Promise) {
      return answer.then((settled) => this.#encoding.encoded(settled, choice))
    }
    return this.#encoding.encoded(answer, choice)
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
    return deleteAnswer(this.#store, id, segment, headers)
  }

  /**
   * POST /api/batch: the requests of the batch document `body` applied in order, all
   * or nothing (batch.ts); with an Idempotency-Key, at most once per key.
   */
  batch(body: NoteFields, headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const requests = parseBatch(body)
    if (requests instanceof Answer) return requests
    const key = headers['idempotency-key']
    let once: BatchKey | undefined
    if (key !== undefined) {
      if (typeof key !== 'string' || !VISIBLE_ASCII.test(key)) return badKey()
      // Not the fingerprint of a create's body: one key cannot stand for a create and a batch.
      once = { key, fingerprint: fingerprintOf(`batch ${JSON.stringify(body)}`) }
    }
    const choice = this.#encoding.choose(headers['accept-encoding'])
    const answer = runBatch(this.#store, requests, once)
    if (answer instanceof Promise) {
      return answer.then((settled) => this.#encoding.encoded(settled, choice))
    }
    return this.#encoding.encoded(answer, choice)
  }

  #createOnce(
    key: string | string[],
    fields: NoteFields,
    choice: CodingChoice | undefined,
  ): MaybePromise<Answer> {
    // node:http joins a repeated header with ', ', which the test refuses like a list would be.
    if (typeof key !== 'string' || !VISIBLE_ASCII.test(key)) return badKey()
    const fingerprint = fingerprintOf(JSON.stringify(fields))
    const created = this.#store.createOnce(key, fingerprint, fields)
    if (created instanceof Promise) {
      return created.then((settled) => this.#encoding.encoded(onceAnswer(settled), choice))
    }
    return this.#encoding.encoded(onceAnswer(created), choice)
  }

  #listIfChanged(
    request: ListRequest,
    search: string,
    ifNoneMatch: string,
    version: string,
  ): MaybePromise<Answer> {
    const etag = `"${version}"`
    if (noneMatch(ifNoneMatch, etag)) {
      return notModified(listHeaders(version, undefined), etag)
    }
    return this.#listOrPage(request, search)
  }

  #listOrPage(request: ListRequest, search: string): MaybePromise<Answer> {
    if (request.kind !== 'page') {
      const list = this.#store.list()
      if (list instanceof Promise) return list.then((settled) => this.#listAnswerFor(settled))
      return this.#listAnswerFor(list)
    }
    const cached = this.#cache.page(search)
    if (cached !== undefined) {
      // A page is cached with its version: it stands while the store is still at that version.
      // Its own, taken now: while the store's version is read, another page may be kept at another.
      const kept = this.#cache.pagesVersion
      const version = this.#store.version()
      if (version instanceof Promise) {
        return version.then((settled) =>
          settled === kept ? cached : this.#page(request.query, search),
        )
      }
      if (version === kept) return cached
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
    return this.#cache.keepPage(search, page.version, pageAnswer(page, query, this.#notesPath))
  }

  #listAnswerFor(list: ListRecord): Answer {
    return this.#cache.list(list) ?? this.#cache.keepList(list, listAnswer(list))
  }

  /** readAnswer, compressed when it should be (readAnswer has set Vary already). */
  #readEncoded(
    note: NoteRecord | undefined,
    headers: RequestHeaders,
    choice: CodingChoice | undefined,
  ): MaybePromise<Answer> {
    const answer = readAnswer(note, headers, choice)
    return choice === undefined ? answer : this.#encoding.encoded(answer, choice)
  }
}

function badKey(): Answer {
  return problemAnswer(
    400,
    'Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces), sent once.',
  )
}

/** What tells two bodies sent under one Idempotency-Key apart. */
function fingerprintOf(text: string): string {
  return createHash('sha256').update(text).digest('base64url')
}

/**
 * The headers of the list and of its pages: validators, the count when known, and Vary (a list
 * or page may be compressed, so its answers vary by Accept-Encoding whatever their size).
 */
function listHeaders(version: string, total: number | undefined): string[] {
  const headers = ['etag', `"${version}"`, 'notes-version', version]
  if (total !== undefined) headers.push('x-total-count', String(total))
  // Accept too: the same URL answers an export (NDJSON) to Accept: application/x-ndjson.
  headers.push('cache-control', 'no-cache', VARY, LIST_VARY)
  return headers
}

const LIST_VARY = `Accept, ${ACCEPT_ENCODING}`

/** The whole list: 200 {"data":[...]} with its version and count. */
function listAnswer(list: ListRecord): Answer {
  return new Answer(
    200,
    JSON_CONTENT_TYPE,
    encodeData(list.json),
    listHeaders(list.version, list.count),
  )
}

/** A page: as the list, with a Link to the next page while more follow. */
function pageAnswer(page: PageRecord, query: PageQuery, notesPath: string): Answer {
  const headers = listHeaders(page.version, page.total)
  if (page.next !== undefined) {
    headers.push('link', `<${nextPageUrl(notesPath, query, page.next)}>; rel="next"`)
  }
  return new Answer(200, JSON_CONTENT_TYPE, encodeData(page.json), headers)
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

/**
 * The note uncompressed, with its validators, or a 304. A note over 1 KiB may be compressed, so its
 * answers vary by Accept-Encoding, and If-None-Match is compared with the ETag of the
 * representation `choice` gets ('"v.9-gzip"' when it will be compressed with gzip).
 */
function readAnswer(
  note: NoteRecord | undefined,
  headers: RequestHeaders,
  choice: CodingChoice | undefined,
): Answer {
  if (note === undefined) return NOT_FOUND
  const validators = [
    'etag',
    note.etag,
    'last-modified',
    httpDate(note.modified),
    'cache-control',
    'no-cache',
  ]
  const large = isLarge(note.json, DATA_WRAPPING)
  if (large) validators.push(VARY, ACCEPT_ENCODING)
  const ifNoneMatch = headers['if-none-match']
  if (ifNoneMatch !== undefined) {
    const etag =
      choice !== undefined && (large || choice.always)
        ? encodedEtag(note.etag, choice.coding)
        : note.etag
    if (noneMatch(ifNoneMatch, etag)) return notModified(validators, etag)
  } else if (
    headers['if-modified-since'] !== undefined &&
    notModifiedSince(headers['if-modified-since'], note.modified)
  ) {
    return notModified(validators, note.etag)
  }
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${note.json}}`, validators)
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
