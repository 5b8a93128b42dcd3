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
import { type Coding, type CodingChoice, Compression, encodedEtag, isLarge } from './compression.js'
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
/** Bytes that '{"data":' and '}' add around a note's JSON. */
const DATA_WRAPPING = 9
const VARY = 'vary'
const ACCEPT_ENCODING = 'Accept-Encoding'

/**
 * What each note operation means: which note it acts on, what it changes in the store, and what
 * it answers, conditions (DECISION 22), pages (23), idempotency keys (30) and compression (26)
 * included. The Fastify routes (note-routes.ts) and the fast lane (http/fast-lane.ts) only
 * translate a request into one of these calls and write the Answer back; neither decides anything
 * about a note.
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
  readonly #compression = new Compression()
  /**
   * The compressed answers of the cached list and pages, by their uncompressed Answer: made once
   * per version and coding, and dropped with it (DECISION 26). A promise while on the thread pool.
   */
  readonly #encodings = new WeakMap<Answer, Partial<Record<Coding, MaybePromise<Answer>>>>()

  constructor(store: NoteStore) {
    this.#store = store
  }

  /**
   * POST /api/note: stores the fields under a new id and answers the note with its ETag; with an
   * Idempotency-Key, at most once per key (DECISION 30).
   */
  create(fields: NoteFields, headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const choice = this.#compression.choose(headers['accept-encoding'])
    const key = headers['idempotency-key']
    if (key !== undefined) return this.#createOnce(key, fields, choice)
    const note = this.#store.create(fields)
    if (note instanceof Promise) {
      return note.then((settled) => this.#encoded(writtenAnswer(settled), choice))
    }
    return this.#encoded(writtenAnswer(note), choice)
  }

  /**
   * GET /api/note: every note in list order, or a page of them (DECISION 23). `search` is the
   * query string without its '?'. Answers 304 to a matching If-None-Match without reading the list
   * (uncompressed) or the store (compressed: from the version's cached answer).
   */
  list(search = '', headers: RequestHeaders = NO_REQUEST_HEADERS): MaybePromise<Answer> {
    const request = parseListQuery(search)
    if (request.kind === 'bad') return problemAnswer(400, request.detail)
    const ifNoneMatch = headers['if-none-match']
    const choice = this.#compression.choose(headers['accept-encoding'])
    if (choice !== undefined) {
      const answer = this.#listOrPage(request, search)
      if (answer instanceof Promise) {
        return answer.then((settled) => this.#encodedOnce(settled, choice, ifNoneMatch))
      }
      return this.#encodedOnce(answer, choice, ifNoneMatch)
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
    const choice = this.#compression.choose(headers['accept-encoding'])
    const note = this.#store.get(id)
    if (note instanceof Promise) {
      return note.then((settled) => this.#readEncoded(settled, headers, choice))
    }
    return this.#readEncoded(note, headers, choice)
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
    const choice = this.#compression.choose(headers['accept-encoding'])
    const conditions = conditionsOf(headers)
    const note = this.#store.update(id, fields, kind, conditions)
    if (note instanceof Promise) {
      return note.then((settled) => this.#encoded(updatedAnswer(settled), choice))
    }
    return this.#encoded(updatedAnswer(note), choice)
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

  #createOnce(
    key: string | string[],
    fields: NoteFields,
    choice: CodingChoice | undefined,
  ): MaybePromise<Answer> {
    // node:http joins a repeated header with ', ', which the test refuses like a list would be.
    if (typeof key !== 'string' || !VISIBLE_ASCII.test(key)) {
      return problemAnswer(
        400,
        'Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces), sent once.',
      )
    }
    const fingerprint = createHash('sha256').update(JSON.stringify(fields)).digest('base64url')
    const created = this.#store.createOnce(key, fingerprint, fields)
    if (created instanceof Promise) {
      return created.then((settled) => this.#encoded(onceAnswer(settled), choice))
    }
    return this.#encoded(onceAnswer(created), choice)
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
        VARY,
        ACCEPT_ENCODING,
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
      // A page may be compressed: its answers vary by Accept-Encoding, whatever their size.
      VARY,
      ACCEPT_ENCODING,
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
        VARY,
        ACCEPT_ENCODING,
      ])
      this.#listRecord = list
    }
    return this.#listAnswer
  }

  /**
   * A cached list or page answer in the chosen coding, compressed once per version (kept beside
   * the uncompressed answer until a write replaces that), or a 304 when If-None-Match names the
   * representation's ETag, compressed or not ('"v.9-br"' or '"v.9"').
   */
  #encodedOnce(
    identity: Answer,
    choice: CodingChoice,
    ifNoneMatch: string | undefined,
  ): MaybePromise<Answer> {
    const { body } = identity
    const compressible =
      identity.status === 200 && body !== undefined && (choice.always || isLarge(body))
    const etag = etagOf(identity)
    const representation = compressible ? encodedEtag(etag, choice.coding) : etag
    if (ifNoneMatch !== undefined && noneMatch(ifNoneMatch, representation)) {
      return notModified(identity, representation)
    }
    if (!compressible) return identity
    let encodings = this.#encodings.get(identity)
    if (encodings === undefined) {
      encodings = {}
      this.#encodings.set(identity, encodings)
    }
    const { coding } = choice
    const cached = encodings[coding]
    if (cached !== undefined) return cached
    const compressed = this.#compression.compress(body, coding, 'cached')
    // Too many compressions under way: this one answer goes uncompressed, and is not cached.
    if (compressed === undefined) return identity
    if (compressed instanceof Promise) {
      const slot = encodings
      // Every request for this version and coding waits for the same compression.
      const pending = compressed.then(
        (bytes) => {
          const answer = encodedAnswer(identity, coding, bytes)
          slot[coding] = answer
          return answer
        },
        (err: unknown) => {
          delete slot[coding]
          throw err
        },
      )
      slot[coding] = pending
      return pending
    }
    const answer = encodedAnswer(identity, coding, compressed)
    encodings[coding] = answer
    return answer
  }

  /** readAnswer, compressed when it should be (readAnswer has set Vary already). */
  #readEncoded(
    note: NoteRecord | undefined,
    headers: RequestHeaders,
    choice: CodingChoice | undefined,
  ): MaybePromise<Answer> {
    const answer = readAnswer(note, headers, choice)
    return choice === undefined ? answer : this.#encoded(answer, choice)
  }

  /**
   * An answer compressed for this request alone (a note, a write's answer, a problem) when its
   * body is over 1 KiB (or identity is refused); such an answer varies by Accept-Encoding either
   * way. Answers of 1 KiB or less (W1, W4, W5) and 304s come back as they are.
   */
  #encoded(answer: Answer, choice: CodingChoice | undefined): MaybePromise<Answer> {
    const { body } = answer
    if (body === undefined) return answer
    const large = isLarge(body)
    if (!large && choice?.always !== true) return answer
    if (choice === undefined) return withVary(answer)
    const { coding } = choice
    const compressed = this.#compression.compress(body, coding, 'request')
    if (compressed === undefined) return withVary(answer)
    if (compressed instanceof Promise) {
      return compressed.then((bytes) => encodedAnswer(answer, coding, bytes))
    }
    return encodedAnswer(answer, coding, compressed)
  }
}

/** The value of the answer's ETag header ('"v.9"'), which every list and page answer has. */
function etagOf(answer: Answer): string {
  const { headers } = answer
  for (let i = 0; i + 1 < headers.length; i += 2) {
    if (headers[i] === 'etag') return headers[i + 1] as string
  }
  throw new Error('the answer has no ETag')
}

/** The headers a 304 repeats from the 200 it stands for (RFC 9110 §15.4.5). */
const NOT_MODIFIED_HEADERS = new Set([
  'etag',
  'notes-version',
  'last-modified',
  'cache-control',
  VARY,
])

/** 304 for `answer`, whose representation has the ETag `etag`. */
function notModified(answer: Answer, etag: string): Answer {
  const headers: string[] = []
  const from = answer.headers
  for (let i = 0; i + 1 < from.length; i += 2) {
    const name = from[i] as string
    if (NOT_MODIFIED_HEADERS.has(name))
      headers.push(name, name === 'etag' ? etag : (from[i + 1] as string))
  }
  return new Answer(304, undefined, undefined, headers)
}

/**
 * `answer` with `body` compressed in `coding`: Content-Encoding, Vary, and for a 200 (whose ETag
 * names its body) the ETag of the compressed representation; a 412 keeps the note's ETag.
 */
function encodedAnswer(answer: Answer, coding: Coding, body: Buffer): Answer {
  const headers: string[] = []
  let varies = false
  const from = answer.headers
  for (let i = 0; i + 1 < from.length; i += 2) {
    const name = from[i] as string
    let value = from[i + 1] as string
    if (name === 'etag' && answer.status === 200) value = encodedEtag(value, coding)
    else if (name === VARY) varies = true
    headers.push(name, value)
  }
  headers.push('content-encoding', coding)
  if (!varies) headers.push(VARY, ACCEPT_ENCODING)
  return new Answer(answer.status, answer.contentType, body, headers)
}

/** `answer`, uncompressed, with Vary: Accept-Encoding (another request may get it compressed). */
function withVary(answer: Answer): Answer {
  if (answer.headers.includes(VARY)) return answer
  return new Answer(answer.status, answer.contentType, answer.body, [
    ...answer.headers,
    VARY,
    ACCEPT_ENCODING,
  ])
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
    if (noneMatch(ifNoneMatch, etag)) {
      validators[1] = etag
      return new Answer(304, undefined, undefined, validators)
    }
  } else if (
    headers['if-modified-since'] !== undefined &&
    notModifiedSince(headers['if-modified-since'], note.modified)
  ) {
    return new Answer(304, undefined, undefined, validators)
  }
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
