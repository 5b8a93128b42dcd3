import { createHash } from 'node:crypto'
import type { Random } from './prng.js'

/*
 * The isolation run's files and uploads (isolation-run.ts): callers upload files to their own and
 * to shared notebooks (some bytes in several notebooks at once, some marked with their notebook's
 * tag so that the run's check of every answer sees them leak), read, list and delete them by
 * every notebook's ids, and start resumable uploads whose URLs others then try. A model of each
 * notebook's files says every status and body: a file is its notebook's alone, so another
 * notebook's id is the file 404 even for the same bytes, and a stranger gets the notebook's 404.
 */

/** An answer as the run reads it. */
export interface FileAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** Where a request goes: the notebook the path names (undefined: made up) and its prefix. */
export interface FilePlace<N> {
  notebook: N | undefined
  prefix: string
}

/** What the run lends the file steps. */
export interface FileRunContext<C, N> {
  rng: Random
  /** Sends `bytes` (or nothing) as the body, with these headers. */
  sendRaw(
    who: C,
    method: string,
    path: string,
    bytes: Buffer | undefined,
    headers: Record<string, string>,
  ): Promise<FileAnswer>
  placeOf(who: C): FilePlace<N>
  /** 'stranger' or 'viewer' when the place refuses the request before any file is looked at. */
  refusalAt(who: C, place: FilePlace<N>, write: boolean): string | undefined
  /** The problem JSON of each refusal, word for word: a stranger's 404, a viewer's 403. */
  refusals: { stranger: string; viewer: string }
  /** The caller's default notebook: what '/api' and '/api/notebooks/me' name for them. */
  homeOf(who: C): N | undefined
  /** A notebook id nobody was given. */
  madeUpId(): string
  /** An answer's headers but those that differ from one answer to the next. */
  headersOf(answer: FileAnswer): string
  /** The notebook's tag ('user-2', 'nb-7'), as its notes' marks name it. */
  tagOf(notebook: N): string
  /** Whether the notebook was deleted (its files went with it). */
  goneOf(notebook: N): boolean
  fail(message: string): never
}

/** A step's answer and how the run counts it. */
export interface FileStep {
  answer: FileAnswer
  label: string
  crossing: boolean
}

/** The kinds of request the file steps send, with their weights in the run's mix. */
export const FILE_KINDS: readonly (readonly [number, string])[] = [
  [1.5, 'file-upload'],
  [1.5, 'file-get'],
  [0.6, 'file-list'],
  [0.5, 'file-delete'],
  [0.8, 'upload-start'],
  [0.8, 'upload-foreign'],
]

const TUS = { 'tus-resumable': '1.0.0' }
const PART_TYPE = 'application/offset+octet-stream'
const TYPES = ['text/plain', 'image/png', 'application/pdf']
/** Bytes several notebooks hold alike: their ids are the same, their files are not. */
const SHARED_CONTENTS = Array.from({ length: 4 }, (_, k) =>
  Buffer.from(`shared file ${k} `.repeat(20 + k * 7)),
)

const problem = (status: number, title: string, detail: string): string =>
  JSON.stringify({ type: 'about:blank', title, status, detail })
const NO_FILE = problem(404, 'Not Found', 'This notebook holds no file with this id.')
const NO_UPLOAD = problem(
  404,
  'Not Found',
  'This notebook has no upload with this id (or it expired).',
)

interface HeldFile {
  bytes: Buffer
  /** Its JSON as the upload that stored it answered it. */
  json: string
}

interface StartedUpload<N> {
  notebook: N
  /** Its path as the Location header gave it. */
  url: string
  /** Its id: the path's last segment. */
  id: string
  offset: number
  length: number
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** The file steps of one run, over its model of every notebook's files. */
export function fileSteps<C, N extends object>(context: FileRunContext<C, N>) {
  const { rng, fail } = context
  const files = new WeakMap<N, Map<string, HeldFile>>()
  /** Every file id a notebook was given, with the notebook: ids to try elsewhere. */
  const seen: { id: string; notebook: N }[] = []
  const uploads: StartedUpload<N>[] = []
  let made = 0

  const filesOf = (notebook: N): Map<string, HeldFile> => {
    let held = files.get(notebook)
    if (held === undefined || context.goneOf(notebook)) {
      held = new Map()
      files.set(notebook, held)
    }
    return held
  }
  /** New bytes: shared ones, or bytes marked with the notebook's tag (a leak the run sees). */
  const contentFor = (notebook: N | undefined): Buffer => {
    if (notebook === undefined || rng.chance(0.5)) return rng.pick(SHARED_CONTENTS)
    made++
    return Buffer.from(`mark-${context.tagOf(notebook)}-${made}-0 `.repeat(rng.between(1, 40)))
  }
  /** A file id: mostly one this notebook holds, else one of another's, else made up. */
  const fileIdFor = (notebook: N | undefined): { id: string; foreign: boolean } => {
    const mine = notebook === undefined ? [] : [...filesOf(notebook).keys()]
    if (mine.length > 0 && rng.chance(0.55)) return { id: rng.pick(mine), foreign: false }
    if (seen.length > 0 && rng.chance(0.85)) {
      const other = rng.pick(seen)
      return { id: other.id, foreign: other.notebook !== notebook }
    }
    return { id: sha256(Buffer.from(`made up ${rng.int(1e9)}`)), foreign: false }
  }
  /**
   * Checks a refusal word for word and, for a stranger, now and then, that a made-up notebook's
   * answer to the same request is the same, headers too.
   */
  const refused = async (
    who: C,
    answer: FileAnswer,
    refusal: string,
    request: {
      method: string
      place: FilePlace<N>
      tail: string
      bytes?: Buffer | undefined
      headers?: Record<string, string>
    },
  ): Promise<void> => {
    const { method, place, tail, bytes, headers = {} } = request
    const status = refusal === 'viewer' ? 403 : 404
    const body =
      method === 'HEAD' ? '' : context.refusals[refusal === 'viewer' ? 'viewer' : 'stranger']
    expect(`${method} ${place.prefix}${tail} by a ${refusal}`, answer, status, body)
    if (refusal === 'stranger' && place.notebook !== undefined && rng.chance(0.3)) {
      const path = `/api/notebooks/${context.madeUpId()}${tail}`
      const none = await context.sendRaw(who, method, path, bytes, headers)
      if (none.body !== answer.body || context.headersOf(none) !== context.headersOf(answer)) {
        fail(
          `a stranger's ${method} ${tail} told a real notebook from a made-up one: ${answer.status} ${context.headersOf(answer)} vs ${none.status} ${context.headersOf(none)}`,
        )
      }
    }
  }
  const expect = (what: string, answer: FileAnswer, status: number, body?: string): void => {
    if (answer.status !== status || (body !== undefined && answer.body !== body)) {
      fail(
        `${what} answered ${answer.status} ${answer.body.slice(0, 300)}, not ${status} ${body?.slice(0, 300) ?? ''}`,
      )
    }
  }
  /** The file the answer stored, in the model (the first upload's JSON, for bytes held already). */
  const stored = (notebook: N, bytes: Buffer, json: string): void => {
    const id = sha256(bytes)
    const held = filesOf(notebook)
    if (!held.has(id)) {
      held.set(id, { bytes, json })
      seen.push({ id, notebook })
    }
  }

  return async function fileStep(who: C, kind: string): Promise<FileStep | undefined> {
    const place = context.placeOf(who)
    const nb = place.notebook
    const write = kind === 'file-upload' || kind === 'file-delete' || kind === 'upload-start'
    const refusal = kind === 'upload-foreign' ? undefined : context.refusalAt(who, place, write)
    let crossing = refusal === 'stranger'
    let label = refusal === undefined ? kind : `${kind} (${refusal})`
    let answer: FileAnswer

    if (kind === 'file-upload') {
      const bytes = contentFor(nb)
      const type = rng.pick(TYPES)
      const headers = { 'content-type': type }
      answer = await context.sendRaw(who, 'POST', `${place.prefix}/files`, bytes, headers)
      if (refusal !== undefined) {
        await refused(who, answer, refusal, {
          method: 'POST',
          place,
          tail: '/files',
          bytes,
          headers,
        })
      } else {
        const notebook = nb as N
        const before = filesOf(notebook).get(sha256(bytes))
        expect(`POST ${place.prefix}/files`, answer, 201)
        const data = (
          JSON.parse(answer.body) as { data: { id: string; size: number; type: string } }
        ).data
        if (before !== undefined) {
          expect(`POST of bytes held already`, answer, 201, `{"data":${before.json}}`)
        } else if (data.id !== sha256(bytes) || data.size !== bytes.length || data.type !== type) {
          fail(
            `POST ${place.prefix}/files stored ${answer.body}, not ${bytes.length} bytes of ${type}`,
          )
        }
        stored(notebook, bytes, JSON.stringify(data))
      }
    } else if (kind === 'file-get' || kind === 'file-delete') {
      const { id, foreign } = fileIdFor(nb)
      const method = kind === 'file-get' ? 'GET' : 'DELETE'
      const tail = `/files/${id}`
      answer = await context.sendRaw(who, method, `${place.prefix}${tail}`, undefined, {})
      crossing ||= foreign
      if (refusal !== undefined) {
        await refused(who, answer, refusal, { method, place, tail })
      } else {
        const held = filesOf(nb as N)
        const file = held.get(id)
        if (file === undefined) {
          if (foreign) label = `${kind} (another notebook's id)`
          expect(`${method} ${place.prefix}${tail}`, answer, 404, NO_FILE)
        } else if (kind === 'file-get') {
          expect(`GET ${place.prefix}${tail}`, answer, 200, file.bytes.toString('utf8'))
          if (answer.headers.etag !== `"${id}"`)
            fail(`GET ${tail} answered ETag ${answer.headers.etag}`)
        } else {
          expect(`DELETE ${place.prefix}${tail}`, answer, 204, '')
          held.delete(id)
        }
      }
    } else if (kind === 'file-list') {
      answer = await context.sendRaw(who, 'GET', `${place.prefix}/files?limit=100`, undefined, {})
      if (refusal !== undefined) {
        await refused(who, answer, refusal, { method: 'GET', place, tail: '/files?limit=100' })
      } else {
        // The first page: a long run's notebooks hold more than a page of files.
        const listed = [...filesOf(nb as N).values()].slice(0, 100).map((file) => file.json)
        expect(`GET ${place.prefix}/files`, answer, 200, `{"data":[${listed.join(',')}]}`)
      }
    } else if (kind === 'upload-start') {
      // Created with part of its bytes, or all of them (then it is a file of the notebook).
      const bytes = contentFor(nb)
      const sent = rng.chance(0.5) ? bytes.length : rng.between(0, bytes.length - 1)
      const part = bytes.subarray(0, sent)
      const headers = { ...TUS, 'upload-length': String(bytes.length), 'content-type': PART_TYPE }
      answer = await context.sendRaw(who, 'POST', `${place.prefix}/uploads`, part, headers)
      if (refusal !== undefined) {
        await refused(who, answer, refusal, {
          method: 'POST',
          place,
          tail: '/uploads',
          bytes: part,
          headers,
        })
      } else {
        const notebook = nb as N
        expect(`POST ${place.prefix}/uploads`, answer, 201, '')
        const url = String(answer.headers.location)
        if (!url.startsWith(`${place.prefix}/uploads/`)) {
          fail(`POST ${place.prefix}/uploads answered Location ${url}`)
        }
        if (answer.headers['upload-offset'] !== String(sent)) {
          fail(
            `POST ${place.prefix}/uploads kept ${answer.headers['upload-offset']} of ${sent} bytes`,
          )
        }
        const id = url.slice(url.lastIndexOf('/') + 1)
        uploads.push({ notebook, url, id, offset: sent, length: bytes.length })
        if (sent === bytes.length) {
          // Its last byte made it a file of the notebook (the one stored first, for bytes held).
          const held = filesOf(notebook).get(sha256(bytes))
          const done = await context.sendRaw(who, 'GET', url, undefined, {})
          expect(`GET ${url}`, done, 200, held === undefined ? undefined : `{"data":${held.json}}`)
          const data = done.body.slice('{"data":'.length, -1)
          const file = JSON.parse(data) as { id: string; size: number }
          if (file.id !== sha256(bytes) || file.size !== bytes.length) {
            fail(`the upload at ${url} became ${done.body}`)
          }
          stored(notebook, bytes, data)
        }
      }
    } else {
      // Another caller's upload, by its URL or by its id under the caller's own notebook: HEAD
      // (a member of its notebook learns its offset) or PATCH (refused, changing nothing).
      if (uploads.length === 0) return undefined
      const upload = rng.pick(uploads)
      const own = rng.chance(0.5)
      const url = own ? `${place.prefix}/uploads/${upload.id}` : upload.url
      const prefix = url.slice(0, url.lastIndexOf('/uploads/'))
      // '/api' and '/api/notebooks/me' name the caller's own default notebook, whoever made it.
      const target =
        prefix === '/api' || prefix === '/api/notebooks/me'
          ? context.homeOf(who)
          : own
            ? nb
            : upload.notebook
      const at: FilePlace<N> = { notebook: target, prefix }
      // A member's PATCH at offset 0 of an upload at 0 would store a byte: a HEAD instead.
      const patch = upload.offset > 0 && rng.chance(0.4)
      const method = patch ? 'PATCH' : 'HEAD'
      const bytes = patch ? Buffer.from('x') : undefined
      const headers = patch ? { ...TUS, 'upload-offset': '0', 'content-type': PART_TYPE } : TUS
      answer = await context.sendRaw(who, method, url, bytes, headers)
      const refusedBy = context.refusalAt(who, at, patch)
      const its = target === upload.notebook
      crossing = refusedBy === 'stranger' || !its
      label = `${kind} (${refusedBy ?? (its ? 'its notebook' : 'another notebook')})`
      const tail = `/uploads/${upload.id}`
      if (refusedBy !== undefined) {
        await refused(who, answer, refusedBy, { method, place: at, tail, bytes, headers })
      } else if (!its || context.goneOf(upload.notebook)) {
        expect(`${method} ${url}`, answer, 404, method === 'HEAD' ? '' : NO_UPLOAD)
      } else if (method === 'HEAD') {
        expect(`HEAD ${url}`, answer, 200, '')
        if (answer.headers['upload-length'] !== String(upload.length)) {
          fail(`HEAD ${url} answered Upload-Length ${answer.headers['upload-length']}`)
        }
      } else {
        // At offset 0 of an upload that holds bytes: refused, nothing stored.
        expect(`PATCH ${url}`, answer, 409)
      }
    }
    return { answer, label, crossing }
  }
}
