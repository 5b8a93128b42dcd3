import { type MediaClass, NoteModel } from '../support/note-model.js'
import { type FileExpectation, type FileModel, fileCase } from './fuzz-files.js'
import { jsonObject, malformed, nestedObject, nonObject } from './json-text.js'
import type { Random } from './prng.js'

/** What a request should get, decided from the model before it is sent. */
export type Expectation =
  /** A create or an update whose body is good; the model decides 200 or 404 or 507. */
  | { type: 'create'; body: Buffer; media: MediaClass | 'absent'; key?: string }
  /** `query`: the query string without '?' (pages and search). */
  | { type: 'list'; query: string }
  /** `condition`: an If-None-Match naming an ETag. */
  | { type: 'get'; segment: string; condition?: Condition }
  | {
      type: 'patch'
      segment: string
      body: Buffer
      media: MediaClass | 'absent'
      condition?: Condition
    }
  | { type: 'delete'; segment: string; condition?: Condition }
  /** GET /api/trash (its X-Total-Count), or DELETE /api/trash (how many it purged). */
  | { type: 'trash'; empty: boolean }
  /** GET /api/note/:id/revisions: every state the model knows, newest first. */
  | { type: 'revisions'; segment: string }
  /** POST /api/trash/:id/restore. */
  | { type: 'untrash'; id: number }
  /**
   * POST /api/batch: `body` is the batch document; the model applies `items` to a
   * copy of itself and keeps the copy only when every one succeeds.
   */
  | { type: 'batch'; body: Buffer; items: BatchItem[]; key?: string }
  | { type: 'options'; allow: string }
  /** A problem JSON answer with this status, store unchanged. */
  | { type: 'problem'; status: number; allow?: string }
  /** Rejected by the HTTP parser: this status, then the connection closes; store unchanged. */
  | { type: 'reject'; status: 400 | 431; problemBody: boolean }
  /** The body stops half way and the client half-closes: a 400, or a close; store unchanged. */
  | { type: 'truncated' }
  /** A request on the notebook's files (fuzz-files.ts). */
  | FileExpectation

/**
 * A conditional header and the one strong ETag in it that could be the note's. Whether it still is
 * gets decided when the answer is checked: a write pipelined ahead of this request may have changed
 * the note since the case was made.
 */
interface Condition {
  readonly etag: string
}

/** One request inside a batch, and what it means when the batch gets to it. */
export interface BatchItem {
  /** Its method and url as the batch names them: 'requests[2] (PATCH /api/note/7): ...'. */
  method: string
  url: string
  write: BatchWrite
  /** Refused as a request (bad method, url, headers, body or Content-Type) before any applies. */
  refusal?: 400 | 415
}

/** The write a batch request makes, as the model applies it. */
type BatchWrite =
  | { type: 'create'; fields: Record<string, unknown> }
  | {
      type: 'patch'
      segment: string
      fields: Record<string, unknown>
      kind: 'merge' | 'merge-patch'
      condition?: Condition
    }
  | { type: 'delete'; segment: string; condition?: Condition }

export interface FuzzCase {
  /** A label for the statistics: 'create', 'bad-json', 'cl-te-conflict'... */
  kind: string
  method: string
  bytes: Buffer
  /** Half-close the connection after sending. */
  endAfter: boolean
  /** May be pipelined behind another request on the same write. */
  pipelinable: boolean
  expect: Expectation
}

const COLLECTION_ALLOW = 'GET, HEAD, OPTIONS, POST'
const NOTE_ALLOW = 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT'

/** Content-Type values and how they are treated (checked once against the service by hand). */
const JSON_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'Application/JSON',
  'APPLICATION/JSON; CHARSET=UTF-8',
  'application/json; charset="utf-8"',
  'application/merge-patch+json',
  'Application/Merge-Patch+JSON; charset=UTF-8',
  'application/merge-patch+json;charset="utf-8"',
  'application/problem+json',
  'application/vnd.api+json; charset=utf-8',
  'application/json; foo=bar',
  'application/json; charset=utf8',
  'application/json ; charset=utf-8',
  'application/json;',
  'application/x.y+json',
]
const OTHER_TYPES = [
  'text/plain',
  'text/json',
  'application/jsonx',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  '*/*',
  'application/',
  'json',
  'application/json+xml',
  'application/+json',
  'application/json, text/plain',
  'application /json',
  'text/html; charset=utf-8',
]
const BAD_CHARSET_TYPES = [
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json; charset=""',
  'application/json; charset=',
  'application/json; charset=iso-8859-1',
  'application/json;charset=utf-8,text/plain',
  'application/merge-patch+json; charset=ascii',
]

/**
 * A JSON media type is a merge patch when it is application/merge-patch+json, any
 * case, with any parameters; every other one is plain JSON. Only for the types above.
 */
function mediaOf(contentType: string): MediaClass {
  const mediaType = (contentType.split(';', 1)[0] as string).trim().toLowerCase()
  return mediaType === 'application/merge-patch+json' ? 'merge-patch' : 'json'
}

const NOT_ALLOWED_ON_COLLECTION = [
  'PUT',
  'DELETE',
  'PATCH',
  'TRACE',
  'PURGE',
  'PROPFIND',
  'SEARCH',
  'LOCK',
  'COPY',
]
const NOT_ALLOWED_ON_NOTE = [
  'POST',
  'TRACE',
  'PURGE',
  'PROPFIND',
  'SEARCH',
  'MKCOL',
  'UNLOCK',
  'REPORT',
]

// Not '/': the notes page is served there (UI is on by default).
const UNKNOWN_PATHS = [
  '/index.html',
  '/api',
  '/api/',
  '/api/notes',
  '/API/NOTE',
  '/api/Note',
  '//api/note',
  '/api//note',
  '/api/note/1/2',
  '/api/note/1/edit',
  '/api/./note',
  '/api/note/../note',
  '/api/../api/note',
  '/./api/note',
  '/api%2Fnote',
  '/api/note%2F1',
  '/favicon.ico',
  '/api/note.json',
  '/%61pi/notes',
  '/api/note/%2e%2e/x',
  '/ap%C3%AF/note',
  '/api/%F0%9F%98%80',
  '/.env',
  '/api/note;1/2',
]

const BAD_ENCODINGS = [
  '%',
  '%2',
  '%zz',
  '%G1',
  '%E0%A4%A',
  '%C3',
  '%C0%AF',
  '%ED%A0%80',
  '%FF',
  '%F4%90%80%80',
  '%E2%82',
]

export interface CaseLimits {
  bodyLimit: number
  maxDepth: number
}

/** Builds the next request and what it should get, from the model's present state. */
export function nextCase(
  rng: Random,
  model: NoteModel,
  limits: CaseLimits,
  files?: FileModel,
): FuzzCase {
  return rng.weighted<() => FuzzCase>([
    // With a model of the files, about 6% of requests are on files.
    [files === undefined ? 0 : 7, () => filesCase(rng, files as FileModel)],
    [14, () => createCase(rng, limits)],
    [6, () => listCase(rng, model)],
    [10, () => getCase(rng, model)],
    [10, () => patchCase(rng, model, limits)],
    [12, () => deleteCase(rng, model)],
    [2, () => trashCase(rng)],
    [3, () => revisionsCase(rng, model)],
    [2, () => untrashCase(rng, model)],
    [2, () => optionsCase(rng, model)],
    [3, () => notAllowedCase(rng, model)],
    [3, () => unknownPathCase(rng)],
    [12, () => badBodyCase(rng, model, limits)],
    [3, () => oversizeCase(rng, model, limits)],
    [3, () => badEncodingCase(rng)],
    [8, () => framingCase(rng)],
    [2, () => hugeHeadersCase(rng)],
    [2, () => truncatedCase(rng, limits)],
    // About 7% of requests are batches.
    [5, () => batchCase(rng, model, limits)],
    [1, () => batchCase(rng, model, limits, true)],
    [0.5, () => badBatchCase(rng)],
    [0.5, () => oversizeBatchCase(rng, limits)],
  ])()
}

// --- valid operations ---

function filesCase(rng: Random, files: FileModel): FuzzCase {
  const { kind, method, target, contentType, body, headers, expect } = fileCase(rng, files)
  return request(rng, kind, method, target, {
    contentType,
    ...(body === undefined ? {} : { body }),
    ...(headers === undefined ? {} : { headers }),
    expect,
  })
}

function createCase(rng: Random, limits: CaseLimits): FuzzCase {
  const { body, media, contentType } = goodBody(rng, limits)
  if (rng.chance(0.12)) {
    // Idempotency keys: a few, reused, so that repeats and conflicts happen; some malformed.
    const key = rng.weighted([
      [10, `key-${rng.int(6)}`],
      [1, rng.pick(['', 'has space', 'x'.repeat(256), '\u00e9'])],
    ])
    return request(rng, 'create-idempotent', 'POST', collectionPath(rng), {
      contentType,
      body,
      headers: [['Idempotency-Key', key]],
      expect: { type: 'create', body, media, key },
    })
  }
  return request(rng, 'create', 'POST', collectionPath(rng), {
    contentType,
    body,
    expect: { type: 'create', body, media },
  })
}

function listCase(rng: Random, model: NoteModel): FuzzCase {
  const method = rng.chance(0.8) ? 'GET' : 'HEAD'
  const path = collectionParts(rng)
  const search = rng.chance(0.4) ? pageQuery(rng, model) : ''
  const query = search === '' ? path.query : search
  return request(rng, method === 'GET' ? 'list' : 'head-list', method, `${path.base}?${query}`, {
    expect: { type: 'list', query },
  })
}

/** A page or search query, good or bad: limit, order, sort, q, a garbage after. */
function pageQuery(rng: Random, model: NoteModel): string {
  const parts: string[] = []
  if (rng.chance(0.6)) {
    parts.push(
      `limit=${rng.weighted([
        [8, String(rng.between(1, 20))],
        [1, rng.pick(['0', '1001', '1000', '-1', 'x', '', '1.5', '01', '99999'])],
      ])}`,
    )
  }
  if (rng.chance(0.4))
    parts.push(
      `order=${rng.weighted([
        [8, 'desc'],
        [2, 'asc'],
        [1, 'DESC'],
      ])}`,
    )
  if (rng.chance(0.4)) {
    // Text from a stored note's values mostly, so that searches find something.
    const words = model.notes.flatMap((n) => stringsIn(n.value)).filter((w) => w.length > 0)
    const text: string =
      words.length > 0 && rng.chance(0.7)
        ? sliceOf(rng, rng.pick(words))
        : rng.pick(['a', 'E', 'é', '€', '"', '\\', 'x'.repeat(257), '', ' ', '😀', 'İ'])
    // Every byte percent-encoded: a lone surrogate in a note goes as U+FFFD, as UTF-8 must.
    parts.push(
      `q=${[...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('')}`,
    )
  }
  if (rng.chance(0.3)) {
    parts.push(
      `sort=${rng.weighted([
        [8, 'updated'],
        [2, 'created'],
        [1, rng.pick(['', 'UPDATED', 'modified'])],
      ])}`,
    )
  }
  if (rng.chance(0.05))
    parts.push(`after=${rng.pick(['garbage', 'a1.2', '', 'a0.0', 'ua1_i1_1.x'])}`)
  if (rng.chance(0.1)) parts.push('other=1')
  return parts.join('&')
}

function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value]
  if (typeof value !== 'object' || value === null) return []
  return Object.values(value).flatMap(stringsIn)
}

/** A piece of the text, sometimes with its case changed. */
function sliceOf(rng: Random, text: string): string {
  const chars = [...text]
  const start = rng.int(chars.length)
  const piece = chars.slice(start, start + rng.between(1, 6)).join('')
  return rng.chance(0.3) ? piece.toUpperCase() : piece
}

function getCase(rng: Random, model: NoteModel): FuzzCase {
  const { raw, segment } = idSegment(rng, model)
  const method = rng.chance(0.85) ? 'GET' : 'HEAD'
  const { condition, headers } = conditionFor(rng, model, segment, 'If-None-Match')
  return request(rng, method === 'GET' ? 'get' : 'head-note', method, notePath(rng, raw), {
    headers,
    expect: { type: 'get', segment, ...(condition === undefined ? {} : { condition }) },
  })
}

function patchCase(rng: Random, model: NoteModel, limits: CaseLimits): FuzzCase {
  const { raw, segment } = idSegment(rng, model)
  const { body, media, contentType } = patchBody(rng, model, limits)
  const { condition, headers } = conditionFor(rng, model, segment, 'If-Match')
  return request(rng, 'patch', 'PATCH', notePath(rng, raw), {
    contentType,
    body,
    headers,
    expect: {
      type: 'patch',
      segment,
      body,
      media,
      ...(condition === undefined ? {} : { condition }),
    },
  })
}

/** A PATCH's body: mostly fields to merge, sometimes one that moves the note to another id. */
function patchBody(
  rng: Random,
  model: NoteModel,
  limits: CaseLimits,
  inBatch = false,
): { body: Buffer; media: MediaClass | 'absent'; contentType: string | undefined } {
  let { body, media, contentType } = goodBody(rng, limits, true, inBatch)
  if (rng.chance(0.08)) {
    // Move the note to another id: an existing note's (a duplicate), another integer, or rarely
    // one that no path can reach again ('"7"', 1.5, null): such notes stay for good, so they
    // must stay few or the store fills with them.
    const reachable = model.notes
      .map((n) => n.value.id)
      .filter((id) => typeof id === 'number' && /^-?[0-9]+$/.test(String(id)))
    const other = reachable.length > 0 ? rng.pick(reachable) : 1
    const id = rng.weighted<string>([
      [4, JSON.stringify(other) ?? '1'],
      [6, rng.pick(['7', '-3', '0', `${Date.now() + 5}`, '9007199254740991'])],
      [0.5, rng.pick(['"7"', '1.5', 'null', '1e400'])],
    ])
    body = Buffer.from(`{"id":${id}}`)
    media = 'json'
    contentType = 'application/json'
  }
  return { body, media, contentType }
}

function deleteCase(rng: Random, model: NoteModel): FuzzCase {
  const { raw, segment } = idSegment(rng, model)
  const { condition, headers } = conditionFor(rng, model, segment, 'If-Match')
  return request(rng, 'delete', 'DELETE', notePath(rng, raw), {
    headers,
    expect: { type: 'delete', segment, ...(condition === undefined ? {} : { condition }) },
  })
}

/** The trash: deleted notes count toward the caps until it is emptied, now and then. */
function trashCase(rng: Random): FuzzCase {
  const empty = rng.chance(0.5)
  return request(
    rng,
    empty ? 'empty-trash' : 'trash',
    empty ? 'DELETE' : 'GET',
    '/api/trash?limit=1',
    {
      expect: { type: 'trash', empty },
    },
  )
}

function revisionsCase(rng: Random, model: NoteModel): FuzzCase {
  const { raw, segment } = idSegment(rng, model)
  return request(rng, 'revisions', 'GET', `/api/note/${raw}/revisions`, {
    expect: { type: 'revisions', segment },
  })
}

/** A deleted note put back: one the trash holds, mostly, or an id it may not. */
function untrashCase(rng: Random, model: NoteModel): FuzzCase {
  const trashed = model.trash
    .map((note) => note.value.id)
    .filter((id): id is number => Number.isSafeInteger(id))
  const id =
    trashed.length > 0 && rng.chance(0.8)
      ? rng.pick(trashed)
      : rng.pick([...model.ids(), model.lastId + 1, 7])
  return request(rng, 'untrash', 'POST', `/api/trash/${id}/restore`, {
    expect: { type: 'untrash', id },
  })
}

function optionsCase(rng: Random, model: NoteModel): FuzzCase {
  if (rng.chance(0.5)) {
    return request(rng, 'options', 'OPTIONS', collectionPath(rng), {
      expect: { type: 'options', allow: COLLECTION_ALLOW },
    })
  }
  const { raw } = idSegment(rng, model)
  return request(rng, 'options', 'OPTIONS', notePath(rng, raw), {
    expect: { type: 'options', allow: NOTE_ALLOW },
  })
}

function notAllowedCase(rng: Random, model: NoteModel): FuzzCase {
  if (rng.chance(0.5)) {
    return request(rng, 'not-allowed', rng.pick(NOT_ALLOWED_ON_COLLECTION), collectionPath(rng), {
      expect: { type: 'problem', status: 405, allow: COLLECTION_ALLOW },
    })
  }
  const { raw } = idSegment(rng, model)
  return request(rng, 'not-allowed', rng.pick(NOT_ALLOWED_ON_NOTE), notePath(rng, raw), {
    expect: { type: 'problem', status: 405, allow: NOTE_ALLOW },
  })
}

function unknownPathCase(rng: Random): FuzzCase {
  let path = rng.pick(UNKNOWN_PATHS)
  if (rng.chance(0.1)) path = `/api/${'x'.repeat(rng.between(100, 11_000))}`
  const method = rng.pick(['GET', 'POST', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'PUT'])
  return request(rng, 'unknown-path', method, path + query(rng), {
    expect: { type: 'problem', status: 404 },
  })
}

// --- batches ---

/**
 * POST /api/batch with 1 to 20 requests drawn from the generators of the single writes: creates,
 * patches and deletes of notes that exist (not deleted earlier in the batch), mostly, and now and
 * then a missing id, a stale If-Match, a cap reached or a request the batch refuses as such.
 * `keyed`: with an Idempotency-Key from a small pool (half of it the creates'), sometimes resending the batch
 * that key was first used for, so that replays and conflicts with creates happen.
 */
function batchCase(rng: Random, model: NoteModel, limits: CaseLimits, keyed = false): FuzzCase {
  let key: string | undefined
  if (keyed) {
    key = rng.weighted([
      [5, `key-${rng.int(6)}`],
      [5, `batch-key-${rng.int(4)}`],
      [1, rng.pick(['', 'has space', 'x'.repeat(256), '\u00e9'])],
    ])
    const known = model.keys.get(key)
    // The batch first sent with this key, again: its fingerprint is 'batch <document>'.
    if (known?.fields.startsWith('batch ') && rng.chance(0.5)) {
      // Replayed whatever the notes are now: the model needs no items to check it.
      const body = Buffer.from(known.fields.slice('batch '.length))
      return batchRequest(rng, 'batch-idempotent', body, [], key)
    }
  }
  const count = rng.chance(0.6) ? rng.between(1, 4) : rng.between(5, 20)
  const live = model.notes
    .map((n) => n.value.id)
    .filter((id): id is number => typeof id === 'number' && /^-?[0-9]+$/.test(String(id)))
  const items: BatchItem[] = []
  const texts: string[] = []
  for (let i = 0; i < count; i++) {
    const { item, text } = rng.chance(0.02)
      ? refusedItem(rng, model, limits)
      : batchItem(rng, model, limits, live)
    items.push(item)
    texts.push(text)
  }
  const body = Buffer.from(`{"requests":[${texts.join(',')}]}`)
  return batchRequest(rng, keyed ? 'batch-idempotent' : 'batch', body, items, key)
}

/** One good request of a batch, and its text in the batch document. */
function batchItem(
  rng: Random,
  model: NoteModel,
  limits: CaseLimits,
  live: number[],
): { item: BatchItem; text: string } {
  const method = rng.weighted<'POST' | 'PATCH' | 'DELETE'>([
    [14, 'POST'],
    [10, 'PATCH'],
    [8, 'DELETE'],
  ])
  if (method === 'POST') {
    const { body, contentType } = goodBody(rng, limits, false, true)
    const fields = fieldsOf(body)
    const url = rng.chance(0.95) ? '/api/note' : '/api/note?x=1'
    return {
      item: { method, url, write: { type: 'create', fields } },
      text: itemText(rng, method, url, headersWith(rng, contentType, []), body),
    }
  }
  // Mostly a note that exists and that no earlier delete of this batch removed.
  const { raw, segment } =
    live.length > 0 && rng.chance(0.85) ? spell(rng, String(rng.pick(live))) : idSegment(rng, model)
  const url = `/api/note/${raw}${rng.chance(0.05) ? '?a=1' : ''}`
  const { condition, headers } = conditionFor(rng, model, segment, 'If-Match')
  if (method === 'DELETE') {
    const at = live.indexOf(NoteModel.parseId(segment) ?? Number.NaN)
    if (at !== -1) live.splice(at, 1)
    // A DELETE's Content-Type and body mean nothing, whatever they are.
    const junk = rng.chance(0.1)
    return {
      item: {
        method,
        url,
        write: { type: 'delete', segment, ...(condition === undefined ? {} : { condition }) },
      },
      text: itemText(
        rng,
        method,
        url,
        headersWith(rng, junk ? rng.pick(OTHER_TYPES) : undefined, headers),
        junk ? Buffer.from(nonObject(rng)) : undefined,
      ),
    }
  }
  const { body, media, contentType } = patchBody(rng, model, limits, true)
  return {
    item: {
      method,
      url,
      write: {
        type: 'patch',
        segment,
        fields: fieldsOf(body),
        // No Content-Type in a batch means JSON, a plain merge.
        kind: media === 'merge-patch' ? 'merge-patch' : 'merge',
        ...(condition === undefined ? {} : { condition }),
      },
    },
    text: itemText(rng, method, url, headersWith(rng, contentType, headers), body),
  }
}

/** A request the batch refuses before applying any: a 400 naming it, or a 415 for its media type. */
function refusedItem(
  rng: Random,
  model: NoteModel,
  limits: CaseLimits,
): { item: BatchItem; text: string } {
  const create = { type: 'create', fields: {} } as const
  const refused = (
    method: string,
    url: string,
    text: string,
    refusal: 400 | 415 = 400,
  ): { item: BatchItem; text: string } => ({
    item: { method, url, write: create, refusal },
    text,
  })
  const good = batchItem(rng, model, limits, [])
  const { method, url } = good.item
  const withBody = method !== 'DELETE'
  switch (rng.int(9)) {
    case 0: {
      const bad = rng.pick(['GET', 'post', 'PUT', 'HEAD', 'OPTIONS', ''])
      return refused(bad, '/api/note', `{"method":${JSON.stringify(bad)},"url":"/api/note"}`)
    }
    case 1: {
      const bad = rng.pick(['/api/note/1', '/api/notes', '/api', '', '/api/note/x/y'])
      return refused('POST', bad, `{"method":"POST","url":${JSON.stringify(bad)},"body":{}}`)
    }
    case 2: {
      const m = rng.pick(['PATCH', 'DELETE'])
      const bad = rng.pick(['/api/note', '/api/note/1/2', '/api/notes/1', '/api/note/%E0%A4%A'])
      return refused(m, bad, `{"method":"${m}","url":${JSON.stringify(bad)}}`)
    }
    case 3:
      if (!withBody)
        return refused(
          'DELETE',
          url,
          `{"method":"DELETE","url":${JSON.stringify(url)},"body":{},"extra":1}`,
        )
      return refused(
        method,
        url,
        `{"method":"${method}","url":${JSON.stringify(url)},"body":${nonObject(rng)}}`,
      )
    case 4: {
      const name = rng.pick(['Idempotency-Key', 'idempotency-key', 'IDEMPOTENCY-KEY'])
      return refused(
        method,
        url,
        `{"method":"${method}","url":${JSON.stringify(url)},"headers":{"${name}":"k"}}`,
      )
    }
    case 5: {
      const headers = rng.pick([
        '{"if-match":1}',
        '{"x-other":null}',
        '[]',
        '"x"',
        '{"content-type":{}}',
      ])
      return refused(
        method,
        url,
        `{"method":"${method}","url":${JSON.stringify(url)},"headers":${headers}}`,
      )
    }
    case 6: {
      const member = rng.pick(['"header":{}', '"Method":"POST"', '"id":1', '"query":""'])
      return refused(method, url, `{"method":"${method}","url":${JSON.stringify(url)},${member}}`)
    }
    case 7:
      return refused('?', '', rng.pick(['7', 'null', '[]', '"POST /api/note"', 'true']))
    default: {
      // A method batches do not take (PUT is one they take, its missing body being {}).
      if (!withBody) return refused('TRACE', url, `{"method":"TRACE","url":${JSON.stringify(url)}}`)
      const type = rng.chance(0.6) ? rng.pick(OTHER_TYPES) : rng.pick(BAD_CHARSET_TYPES)
      return refused(
        method,
        url,
        `{"method":"${method}","url":${JSON.stringify(url)},"headers":{"Content-Type":${JSON.stringify(type)}},"body":{}}`,
        415,
      )
    }
  }
}

/** {"method":"PATCH","url":"/api/note/7","headers":{...},"body":{...}}, members in random order. */
function itemText(
  rng: Random,
  method: string,
  url: string,
  headers: [string, string][],
  body: Buffer | undefined,
): string {
  const members = [`"method":"${method}"`, `"url":${JSON.stringify(url)}`]
  if (headers.length > 0) {
    members.push(
      `"headers":{${headers.map(([n, v]) => `${JSON.stringify(n)}:${JSON.stringify(v)}`).join(',')}}`,
    )
  }
  // An empty body (a create of no fields) is no body member at all, or an empty object.
  if (body !== undefined && body.length > 0) members.push(`"body":${body.toString('utf8')}`)
  else if (body !== undefined && rng.chance(0.5)) members.push('"body":{}')
  if (rng.chance(0.3)) members.reverse()
  return `{${members.join(',')}}`
}

/** A batch request's headers: its Content-Type if any (name in any case), its condition, noise. */
function headersWith(
  rng: Random,
  contentType: string | undefined,
  condition: [string, string][],
): [string, string][] {
  const headers: [string, string][] = []
  if (contentType !== undefined) {
    headers.push([rng.pick(['Content-Type', 'content-type', 'CONTENT-TYPE']), contentType])
  }
  for (const [name, value] of condition) {
    headers.push([rng.pick([name, name.toLowerCase()]), value])
  }
  if (rng.chance(0.05)) headers.push(['X-Ignored', 'yes'])
  return headers
}

/** The fields a good body parses to ({} for no body at all). */
function fieldsOf(body: Buffer): Record<string, unknown> {
  return body.length === 0 ? {} : (JSON.parse(body.toString('utf8')) as Record<string, unknown>)
}

/** A batch document that is not one: a 400 naming what is wrong, nothing applied. */
function badBatchCase(rng: Random): FuzzCase {
  const body = Buffer.from(
    rng.pick([
      '{}',
      '{"requests":[]}',
      '{"requests":{}}',
      '{"requests":null}',
      '{"requests":"POST /api/note"}',
      '{"requests":[{"method":"POST","url":"/api/note"}],"more":1}',
      '{"Requests":[{"method":"POST","url":"/api/note"}]}',
      '[{"method":"POST","url":"/api/note"}]',
      '"requests"',
    ]),
  )
  return request(rng, 'batch-bad-document', 'POST', '/api/batch', {
    contentType: 'application/json',
    body,
    expect: { type: 'problem', status: 400 },
  })
}

/** A batch document over the body limit (413), or one with a note body nested too deep (400). */
function oversizeBatchCase(rng: Random, limits: CaseLimits): FuzzCase {
  const big = rng.chance(0.5)
  const note = big
    ? `{"big":"${'x'.repeat(limits.bodyLimit - 40 + rng.pick([0, 1, 100, 1000]))}"}`
    : nestedObject(rng, limits.maxDepth + 1 + rng.pick([0, 1, 1, 2, 50]))
  const body = Buffer.from(`{"requests":[{"method":"POST","url":"/api/note","body":${note}}]}`)
  const item: BatchItem = {
    method: 'POST',
    url: '/api/note',
    write: { type: 'create', fields: JSON.parse(note) as Record<string, unknown> },
  }
  return {
    ...batchRequest(rng, 'batch-oversize', body, [item], undefined),
    pipelinable: false,
  }
}

function batchRequest(
  rng: Random,
  kind: string,
  body: Buffer,
  items: BatchItem[],
  key: string | undefined,
): FuzzCase {
  return request(rng, kind, 'POST', '/api/batch', {
    contentType: rng.pick(['application/json', 'application/json; charset=utf-8']),
    body,
    headers: key === undefined ? [] : [['Idempotency-Key', key]],
    expect: { type: 'batch', body, items, ...(key === undefined ? {} : { key }) },
  })
}

// --- hostile requests ---

function badBodyCase(rng: Random, model: NoteModel, limits: CaseLimits): FuzzCase {
  let text: Buffer
  let contentType: string | undefined = rng.pick(JSON_TYPES)
  let media: MediaClass | 'absent' = mediaOf(contentType)
  const kind = rng.weighted<string>([
    [4, 'bad-json'],
    [3, 'non-object'],
    [2, 'too-deep'],
    [3, 'invalid-utf8'],
    [2, 'bad-charset'],
    [3, 'bad-media-type'],
    [1, 'no-media-type'],
  ])
  switch (kind) {
    case 'bad-json':
      text = Buffer.from(malformed(rng))
      break
    case 'non-object':
      text = Buffer.from(nonObject(rng))
      break
    case 'too-deep':
      // nestedObject counts the body object: maxDepth + 1 is a field nested just at the limit.
      text = Buffer.from(nestedObject(rng, limits.maxDepth + 1 + rng.pick([0, 1, 1, 2, 50, 1000])))
      break
    case 'invalid-utf8':
      text = invalidUtf8(rng)
      break
    case 'bad-charset':
      text = Buffer.from(jsonObject(rng, 1, { maxDepth: 3, budget: 200 }))
      contentType = rng.pick(BAD_CHARSET_TYPES)
      media = 'unsupported-charset'
      break
    case 'bad-media-type':
      text = Buffer.from(rng.chance(0.5) ? '{"a":1}' : 'hello=world')
      contentType = rng.pick(OTHER_TYPES)
      media = 'unsupported-media'
      break
    default:
      text = Buffer.from('{"a":1}')
      contentType = undefined
      media = 'absent'
  }
  if (rng.chance(0.5)) {
    return request(rng, kind, 'POST', collectionPath(rng), {
      contentType,
      body: text,
      expect: { type: 'create', body: text, media },
    })
  }
  const { raw, segment } = idSegment(rng, model)
  return request(rng, kind, 'PATCH', notePath(rng, raw), {
    contentType,
    body: text,
    expect: { type: 'patch', segment, body: text, media },
  })
}

function oversizeCase(rng: Random, model: NoteModel, limits: CaseLimits): FuzzCase {
  const size = limits.bodyLimit + rng.pick([1, 2, 100, limits.bodyLimit])
  const body = Buffer.from(`{"big":"${'x'.repeat(size - 10)}"}`)
  const contentType = rng.pick(JSON_TYPES)
  const media = mediaOf(contentType)
  if (rng.chance(0.6)) {
    return request(rng, 'oversize', 'POST', collectionPath(rng), {
      contentType,
      body,
      expect: { type: 'create', body, media },
    })
  }
  const { raw, segment } = idSegment(rng, model)
  return request(rng, 'oversize', 'PATCH', notePath(rng, raw), {
    contentType,
    body,
    expect: { type: 'patch', segment, body, media },
  })
}

function badEncodingCase(rng: Random): FuzzCase {
  const bad = rng.pick(BAD_ENCODINGS)
  const path = rng.pick([
    `/api/note/${bad}`,
    `/api/note/1${bad}`,
    `/api/${bad}/1`,
    `/${bad}`,
    `/api/note/${bad}/`,
  ])
  const method = rng.pick(['GET', 'DELETE', 'HEAD'])
  return request(rng, 'bad-percent-encoding', method, path, {
    expect: { type: 'problem', status: 400 },
  })
}

/** Requests Node's HTTP parser must refuse: 400 and a closed connection, whatever follows. */
function framingCase(rng: Random): FuzzCase {
  const host = 'Host: fuzz\r\n'
  const json = 'Content-Type: application/json\r\n'
  const variants: (readonly [string, string])[] = [
    [
      'cl-te-conflict',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    ],
    [
      'te-cl-conflict',
      `POST /api/note HTTP/1.1\r\n${host}${json}Transfer-Encoding: chunked\r\nContent-Length: 11\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    ],
    [
      'two-content-lengths',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} `,
    ],
    [
      'same-content-lengths',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}`,
    ],
    [
      'content-length-list',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: 2, 2\r\n\r\n{}`,
    ],
    [
      'negative-content-length',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: -1\r\n\r\n{}`,
    ],
    [
      'huge-content-length',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: 99999999999999999999999\r\n\r\n{}`,
    ],
    [
      'hex-content-length',
      `POST /api/note HTTP/1.1\r\n${host}${json}Content-Length: 0x2\r\n\r\n{}`,
    ],
    [
      'te-not-chunked',
      `POST /api/note HTTP/1.1\r\n${host}${json}Transfer-Encoding: gzip\r\n\r\n{}`,
    ],
    [
      'te-chunked-not-last',
      `POST /api/note HTTP/1.1\r\n${host}${json}Transfer-Encoding: chunked, gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    ],
    [
      'bad-chunk-size',
      `POST /api/note HTTP/1.1\r\n${host}${json}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    ],
    [
      'chunk-size-overflow',
      `POST /api/note HTTP/1.1\r\n${host}${json}Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n{}\r\n0\r\n\r\n`,
    ],
    ['garbage-request-line', `${String.fromCharCode(rng.int(32))}GARBAGE\r\n\r\n`],
    ['lowercase-method', `get /api/note HTTP/1.1\r\n${host}\r\n`],
    [
      'unknown-method',
      `${rng.pick(['FOO', 'GETT', 'BREW', 'X'])} /api/note HTTP/1.1\r\n${host}\r\n`,
    ],
    ['bad-version', `GET /api/note HTTP/9.9\r\n${host}\r\n`],
    ['lf-only', `GET /api/note HTTP/1.1\n${host.trim()}\n\n`],
    ['space-before-colon', `GET /api/note HTTP/1.1\r\nHost : fuzz\r\n\r\n`],
    ['control-char-in-header', `GET /api/note HTTP/1.1\r\n${host}X-A: a\u0001b\r\n\r\n`],
    ['raw-utf8-in-target', `GET /api/note/\u00c3\u00a9 HTTP/1.1\r\n${host}\r\n`],
    ['control-char-in-target', `GET /api/note/\u007f HTTP/1.1\r\n${host}\r\n`],
    ['header-without-colon', `GET /api/note HTTP/1.1\r\n${host}JustAName\r\n\r\n`],
    ['obs-fold', `GET /api/note HTTP/1.1\r\n${host}X-A: a\r\n b\r\n\r\n`],
    ['missing-host', 'GET /api/note HTTP/1.1\r\n\r\n'],
  ]
  const [kind, text] = rng.pick(variants)
  return {
    kind,
    method: 'GET',
    bytes: Buffer.from(text, 'latin1'),
    endAfter: false,
    pipelinable: false,
    // Node answers a missing Host itself, with an empty 400 (see the README section).
    expect: { type: 'reject', status: 400, problemBody: kind !== 'missing-host' },
  }
}

function hugeHeadersCase(rng: Random): FuzzCase {
  if (rng.chance(0.5)) {
    const name = rng.chance(0.5) ? 'X-Big' : 'Cookie'
    const headers = `${name}: ${'a'.repeat(rng.between(17_000, 70_000))}\r\n`
    return raw('headers-over-limit', `GET /api/note HTTP/1.1\r\nHost: fuzz\r\n${headers}\r\n`, 431)
  }
  if (rng.chance(0.5)) {
    return raw(
      'target-over-limit',
      `GET /api/note/${'1'.repeat(rng.between(17_000, 40_000))} HTTP/1.1\r\nHost: fuzz\r\n\r\n`,
      431,
    )
  }
  let many = ''
  for (let i = 0; i < 1200; i++) many += `X-H${i}: ${'v'.repeat(12)}\r\n`
  return raw('many-headers-over-limit', `GET /api/note HTTP/1.1\r\nHost: fuzz\r\n${many}\r\n`, 431)
}

function truncatedCase(rng: Random, limits: CaseLimits): FuzzCase {
  const full = Buffer.from(
    jsonObject(rng, 1, { maxDepth: 3, budget: Math.min(500, limits.bodyLimit / 2) }),
  )
  const sent = full.subarray(0, rng.int(full.length))
  const chunked = rng.chance(0.3)
  const framing = chunked
    ? `Transfer-Encoding: chunked\r\n\r\n${full.length.toString(16)}\r\n`
    : `Content-Length: ${full.length}\r\n\r\n`
  const head = `POST /api/note HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n${framing}`
  return {
    kind: 'truncated-body',
    method: 'POST',
    bytes: Buffer.concat([Buffer.from(head, 'latin1'), sent]),
    endAfter: true,
    pipelinable: false,
    expect: { type: 'truncated' },
  }
}

// --- pieces ---

function raw(kind: string, text: string, status: 400 | 431): FuzzCase {
  return {
    kind,
    method: 'GET',
    bytes: Buffer.from(text, 'latin1'),
    endAfter: false,
    pipelinable: false,
    expect: { type: 'reject', status, problemBody: true },
  }
}

/** A good body and its Content-Type: a JSON object (or nothing at all, which means {}). */
function goodBody(
  rng: Random,
  limits: CaseLimits,
  forPatch = false,
  inBatch = false,
): { body: Buffer; media: MediaClass | 'absent'; contentType: string | undefined } {
  if (rng.chance(0.04)) {
    return rng.chance(0.5)
      ? { body: Buffer.alloc(0), media: 'absent', contentType: undefined }
      : jsonTyped(Buffer.alloc(0), rng.pick(JSON_TYPES))
  }
  let text: string
  // In a batch, twenty bodies share one body limit: no big ones there (oversizeBatchCase has those).
  if (!inBatch && rng.chance(0.02)) {
    // Near the limit, under or just at it.
    const size = limits.bodyLimit - rng.pick([0, 1, 50, Math.floor(limits.bodyLimit / 2)])
    text = `{"big":"${'y'.repeat(size - 10)}"}`
  } else if (rng.chance(0.03)) {
    // A field nested up to the limit (the body object is one level more).
    text = nestedObject(rng, rng.between(limits.maxDepth - 1, limits.maxDepth + 1))
  } else {
    text = jsonObject(rng, 1, {
      maxDepth: rng.between(1, 8),
      budget: !inBatch && rng.chance(0.1) ? 4000 : 300,
      // Random ids in PATCH bodies only now and then: each one strands a note for good.
      noIdKey: forPatch && rng.chance(0.95),
    })
  }
  return jsonTyped(Buffer.from(text), rng.pick(JSON_TYPES))
}

function jsonTyped(
  body: Buffer,
  contentType: string,
): { body: Buffer; media: MediaClass; contentType: string } {
  return { body, media: mediaOf(contentType), contentType }
}

function invalidUtf8(rng: Random): Buffer {
  const bad = rng.pick([
    [0xff],
    [0xc3],
    [0xc0, 0xaf],
    [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
    [0x80],
    [0xe2, 0x82],
  ])
  return Buffer.concat([Buffer.from('{"a":"'), Buffer.from(bad), Buffer.from('"}')])
}

function collectionPath(rng: Random): string {
  const path = collectionParts(rng)
  return path.query === '' ? path.base : `${path.base}?${path.query}`
}

/** A spelling of the collection's path, and noise for its query (none of it a page query). */
function collectionParts(rng: Random): { base: string; query: string } {
  const base = rng.weighted([
    [10, '/api/note'],
    [3, '/api/note/'],
    [1, '/api/%6eote'],
    [1, '/%61pi/note'],
  ])
  const query = rng.chance(0.85)
    ? ''
    : rng.pick(['', 'a=1', 'a=1&a=2', 'x=%zz', '%', 'id=5', 'qq=1', 'q'.repeat(2000)])
  return { base, query }
}

function notePath(rng: Random, rawSegment: string): string {
  return `/api/note/${rawSegment}${rng.chance(0.15) ? '/' : ''}${query(rng)}`
}

function query(rng: Random): string {
  if (rng.chance(0.85)) return ''
  return rng.pick([
    '?',
    '?a=1',
    '?a=1&a=2',
    '?x=%zz',
    '?%',
    '?q=%E2%82%AC',
    '?id=5',
    `?${'q'.repeat(2000)}`,
    '#frag',
    '?a=1#b',
  ])
}

/**
 * A raw :id segment and what it decodes to: an existing note's id in one of its spellings
 * ('007', '%37', '-3'), a free integer, or something that is not a decimal integer at all.
 */
/**
 * Sometimes a conditional header naming the note's ETag or an old one, once the
 * model knows the service's version epoch.
 */
function conditionFor(
  rng: Random,
  model: NoteModel,
  segment: string,
  name: 'If-None-Match' | 'If-Match',
): { condition?: Condition; headers: [string, string][] } {
  const at = model.find(segment)
  const etag = model.etagOf(at)
  if (etag === undefined || !rng.chance(0.2)) return { headers: [] }
  if (rng.chance(0.5))
    return { condition: { etag }, headers: [[name, rng.pick([etag, `"x", ${etag}`])]] }
  // Version 0 is the empty store's: no note's content was ever written at it.
  const never = `"${model.epoch}.0"`
  return { condition: { etag: never }, headers: [[name, rng.pick([never, 'W/"x"', '"x"'])]] }
}

function idSegment(rng: Random, model: NoteModel): { raw: string; segment: string } {
  const ids = model.notes
    .map((n) => n.value.id)
    .filter((id): id is number => typeof id === 'number' && /^-?[0-9]+$/.test(String(id)))
  const r = rng.next()
  if (ids.length > 0 && r < 0.65) return spell(rng, String(rng.pick(ids)))
  if (r < 0.8)
    return spell(
      rng,
      String(rng.pick([0, 1, -1, 7, Date.now(), model.lastId + 1, 2 ** 53, 10 ** 21])),
    )
  const other = rng.pick([
    'abc',
    '12abc',
    '0x1F',
    '1e3',
    '12.0',
    '+7',
    ' 7',
    '7 ',
    '..',
    '.',
    '-',
    '--1',
    '1-',
    '٣',
    '７',
    '€',
    '😀',
    '\u0000',
    '%',
    '/',
    '1/2',
    'null',
    'Infinity',
    'NaN',
    '9'.repeat(400),
    '1'.repeat(rng.between(1000, 11_000)),
  ])
  return { raw: encodeSegment(rng, other, true), segment: other }
}

/** Spells an id segment: leading zeros, percent-encoded digits, as is. */
function spell(rng: Random, digits: string): { raw: string; segment: string } {
  let segment = digits
  if (rng.chance(0.15)) {
    const negative = segment.startsWith('-')
    segment = (negative ? '-' : '') + '0'.repeat(rng.between(1, 5)) + segment.replace('-', '')
  }
  return { raw: encodeSegment(rng, segment, false), segment }
}

/** Percent-encodes a segment: always what must be, sometimes what need not be. */
function encodeSegment(rng: Random, segment: string, mustEncodeOnly: boolean): string {
  let out = ''
  for (const byte of Buffer.from(segment)) {
    const c = String.fromCharCode(byte)
    const safe = /[A-Za-z0-9\-._~!$&'()*+,;=:@]/.test(c)
    if (safe && (mustEncodeOnly || rng.chance(0.9))) out += c
    else {
      const hex = byte.toString(16).padStart(2, '0')
      out += `%${rng.chance(0.5) ? hex.toUpperCase() : hex}`
    }
  }
  return out
}

interface RequestParts {
  contentType?: string | undefined
  body?: Buffer
  /** Further headers: conditions, an Idempotency-Key. */
  headers?: [string, string][]
  expect: Expectation
}

/**
 * Writes a well-framed HTTP/1.1 request around the chosen target, with random but harmless
 * header noise: duplicates, odd casing, long values, Connection: close, Expect: 100-continue.
 */
function request(
  rng: Random,
  kind: string,
  method: string,
  target: string,
  parts: RequestParts,
): FuzzCase {
  const lines: string[] = [`${method} ${target} HTTP/1.1`]
  const headers: [string, string][] = [[rng.chance(0.9) ? 'Host' : 'host', '127.0.0.1']]
  if (parts.contentType !== undefined)
    headers.push([rng.chance(0.8) ? 'Content-Type' : 'content-TYPE', parts.contentType])
  if (parts.headers !== undefined) headers.push(...parts.headers)
  // Long values only while the head stays well under Node's 16 KiB header limit.
  const long = target.length < 8000 ? 'z'.repeat(rng.int(4000)) : 'z'
  if (rng.chance(0.3)) headers.push(['X-Fuzz', rng.pick(['1', 'a b', 'é', '\u00ff', '', long])])
  if (rng.chance(0.1)) headers.push(['X-Fuzz', 'duplicate'])
  // Node keeps the first Content-Type and drops the rest.
  if (rng.chance(0.05) && parts.contentType !== undefined)
    headers.push(['Content-Type', 'text/plain'])
  if (rng.chance(0.1))
    headers.push(['Accept', rng.pick(['*/*', 'application/json', 'text/html', ''])])
  if (rng.chance(0.05)) headers.push(['Connection', 'close'])
  if (rng.chance(0.05)) headers.push(['Connection', 'keep-alive'])
  if (rng.chance(0.03)) for (let i = 0; i < rng.int(80); i++) headers.push([`X-N${i}`, String(i)])
  const body = parts.body
  let framed: Buffer = Buffer.alloc(0)
  let chunked = false
  if (body !== undefined && (body.length > 0 || rng.chance(0.5))) {
    chunked = rng.chance(0.2)
    if (chunked) {
      headers.push(['Transfer-Encoding', rng.chance(0.9) ? 'chunked' : 'Chunked'])
      framed = chunk(rng, body)
    } else {
      headers.push(['Content-Length', String(body.length)])
      framed = body
    }
    if (rng.chance(0.03) && body.length > 0) headers.push(['Expect', '100-continue'])
  }
  for (const [name, value] of headers) lines.push(`${name}: ${value}`)
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1')
  const closes = headers.some(([n, v]) => n === 'Connection' && v === 'close')
  let expect = parts.expect
  if (
    chunked &&
    parts.contentType === undefined &&
    (expect.type === 'create' || expect.type === 'patch')
  ) {
    // Transfer-Encoding says a body is there (RFC 9112 §6.1), even an empty one, and a body
    // without a Content-Type is not JSON: 415. Only a request without framing has no body at all.
    expect = { ...expect, media: 'unsupported-media' }
  }
  return {
    kind,
    method,
    bytes: Buffer.concat([head, framed]),
    endAfter: false,
    pipelinable: !closes,
    expect,
  }
}

/** Chunked encoding with random chunk sizes: '{"a":1}' -> '3\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n'. */
function chunk(rng: Random, body: Buffer): Buffer {
  const parts: Buffer[] = []
  let at = 0
  while (at < body.length) {
    const size = Math.min(body.length - at, 1 + rng.int(Math.max(1, Math.min(body.length, 4096))))
    const ext = rng.chance(0.05) ? ';ext=1' : ''
    parts.push(
      Buffer.from(`${size.toString(16)}${ext}\r\n`, 'latin1'),
      body.subarray(at, at + size),
      Buffer.from('\r\n'),
    )
    at += size
  }
  parts.push(Buffer.from('0\r\n\r\n'))
  return Buffer.concat(parts)
}
