import type { MaybePromise, NoteFields, NoteStore, PatchKind } from '../store/types.js'

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

/**
 * What each note operation means: which note it acts on, what it changes in the store, and what
 * it answers. The Fastify routes (note-routes.ts) and the fast lane (http/fast-lane.ts) only
 * translate a request into one of these calls and write the Answer back; neither decides anything
 * about a note.
 *
 * `id` is the `:id` segment read by parseNoteId: undefined when the segment is not a decimal
 * integer, which finds nothing. A synchronous store gets a synchronous answer (no microtask);
 * each method tests for a promise itself rather than through one shared helper, whose call of
 * its callback would see every answer function (bench:instructions W4 and W5 measured the
 * helper at about +1% per request).
 * Store errors (StoreFullError) are thrown or rejected as they are; the lanes turn them into
 * problems with problemForError.
 */
export class NoteOperations {
  readonly #store: NoteStore
  // The list's last text and its Answer: the store returns the same string until a write, so
  // repeated reads send the same Buffer without building or encoding it again (bench W3:
  // 10,000 notes, about 1 MB, answered some 6 times as fast as building it per request).
  #listJson: string | undefined
  #listAnswer: Answer = NOT_FOUND

  constructor(store: NoteStore) {
    this.#store = store
  }

  /** POST /api/note: stores the fields under a new id and answers the note. */
  create(fields: NoteFields): MaybePromise<Answer> {
    const json = this.#store.create(fields)
    if (json instanceof Promise) return json.then(dataAnswer)
    return dataAnswer(json)
  }

  /** GET /api/note: every note in list order. */
  list(): MaybePromise<Answer> {
    const json = this.#store.list()
    if (json instanceof Promise) return json.then((text) => this.#listAnswerFor(text))
    return this.#listAnswerFor(json)
  }

  /** GET /api/note/:id: the note, or the contract's 404. */
  get(id: number | undefined): MaybePromise<Answer> {
    if (id === undefined) return NOT_FOUND
    const json = this.#store.get(id)
    if (json instanceof Promise) return json.then(noteAnswer)
    return noteAnswer(json)
  }

  /**
   * PATCH /api/note/:id: the fields merged over the note (shallow, or RFC 7396 for a merge patch:
   * DECISION 25), or the contract's 404.
   */
  update(
    id: number | undefined,
    fields: NoteFields,
    kind: PatchKind = 'merge',
  ): MaybePromise<Answer> {
    if (id === undefined) return NOT_FOUND
    const json = this.#store.update(id, fields, kind)
    if (json instanceof Promise) return json.then(noteAnswer)
    return noteAnswer(json)
  }

  /**
   * DELETE /api/note/:id: removes the note and answers the segment exactly as received (after
   * percent-decoding), as a string: '007' -> {"data":"007"}.
   */
  delete(id: number | undefined, segment: string): MaybePromise<Answer> {
    if (id === undefined) return NOT_FOUND
    const found = this.#store.delete(id)
    if (found instanceof Promise) return found.then((value) => deletedAnswer(value, segment))
    return deletedAnswer(found, segment)
  }

  #listAnswerFor(json: string): Answer {
    if (json !== this.#listJson) {
      this.#listAnswer = new Answer(200, JSON_CONTENT_TYPE, encodeData(json))
      this.#listJson = json
    }
    return this.#listAnswer
  }
}

/** '{"id":1}' -> 200 {"data":{"id":1}} */
function dataAnswer(json: string): Answer {
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${json}}`)
}

function noteAnswer(json: string | undefined): Answer {
  return json === undefined ? NOT_FOUND : dataAnswer(json)
}

function deletedAnswer(found: boolean, segment: string): Answer {
  // parseNoteId let through only digits and an optional '-', which need no JSON escaping.
  return found ? dataAnswer(`"${segment}"`) : NOT_FOUND
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
