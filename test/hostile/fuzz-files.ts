import { createHash } from 'node:crypto'
import type { Random } from './prng.js'
import { header, type WireResponse } from './wire.js'

/*
 * The fuzz's files: uploads of random bytes (the same bytes again now and then, a type that is
 * not one), reads with random ranges and validators, deletes and lists, each checked against a
 * model of the notebook's files: exact bytes, ids, types, the headers every file answer must
 * carry, the order of the list.
 */

/** What a files request should get, decided when the case is made. */
export type FileExpectation =
  | { type: 'file-upload'; bytes: Buffer; contentType: string | undefined }
  | { type: 'file-get'; id: string; range: string | undefined; ifNoneMatch: boolean }
  | { type: 'file-delete'; id: string }
  | { type: 'file-list' }

interface ModelFile {
  readonly bytes: Buffer
  readonly type: string
}

/** The store's byte cap that files count toward beside the notes (the memory store's). */
export interface SharedRoom {
  readonly maxBytes: number
  /** The bytes the notes hold toward it, the trash's included. */
  notesBytes(): number
  /** Whether the trash holds notes (the refusal then says to empty it). */
  trashHolds(): boolean
}

/** The notebook's files as the service should hold them, in the order stored. */
export class FileModel {
  readonly files = new Map<string, ModelFile>()
  /** Bytes uploaded before, to send again (the same bytes are one file). */
  readonly sent: Buffer[] = []
  /** The cap the files share with the notes, on the memory store; none elsewhere. */
  readonly room: SharedRoom | undefined

  constructor(room?: SharedRoom) {
    this.room = room
  }

  /** The bytes of the files held: each file once, at its byte length. */
  get bytes(): number {
    let total = 0
    for (const file of this.files.values()) total += file.bytes.length
    return total
  }

  /**
   * The 507's detail when an upload of `bytes` finds no room beside the notes, else undefined.
   * The bytes of a file held take no more room, so they always pass.
   */
  refusal(bytes: Buffer): string | undefined {
    const room = this.room
    if (room === undefined || this.files.has(sha256(bytes))) return undefined
    if (room.notesBytes() + this.bytes + bytes.length <= room.maxBytes) return undefined
    const advice = room.trashHolds()
      ? 'Delete notes or files, or empty the trash, to make room: deleted notes count until they leave it.'
      : 'Delete notes or files to make room.'
    return `The store holds its maximum of ${room.maxBytes} bytes of notes and files. ${advice}`
  }
}

/** `size` bytes of the seeded generator, so that a seed replays the same uploads. */
function randomBuffer(rng: Random, size: number): Buffer {
  const bytes = Buffer.alloc(size)
  for (let i = 0; i < size; i++) bytes[i] = rng.int(256)
  return bytes
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** Types as sent, and the type the file keeps (undefined: refused with a 400). */
const TYPES: [string | undefined, string | undefined][] = [
  [undefined, 'application/octet-stream'],
  ['image/png', 'image/png'],
  ['IMAGE/JPEG', 'image/jpeg'],
  ['text/plain; charset=utf-8', 'text/plain; charset=utf-8'],
  ['text/html', 'text/html'],
  ['image/svg+xml', 'image/svg+xml'],
  ['application/json', 'application/json'],
  ['application/x-ndjson', 'application/x-ndjson'],
  ['png', undefined],
  ['text/plain; charset', undefined],
]
const SHOWN = new Set(['image/png', 'image/jpeg', 'text/plain'])

/** The parts of a request the fuzz frames (it adds its header noise and framing). */
export interface FileRequest {
  kind: string
  method: string
  target: string
  contentType?: string | undefined
  body?: Buffer
  headers?: [string, string][]
  expect: FileExpectation
}

/** The next files request, from the model's present state. */
export function fileCase(rng: Random, model: FileModel): FileRequest {
  const ids = [...model.files.keys()]
  const someId = (): string =>
    ids.length > 0 && rng.chance(0.85) ? rng.pick(ids) : sha256(Buffer.from(String(rng.int(1e9))))
  return rng.weighted<() => FileRequest>([
    [
      5,
      () => {
        const again = model.sent.length > 0 && rng.chance(0.2)
        const size = rng.pick([0, 1, 100, 4096, 70_000, rng.int(200_000)])
        const bytes = again ? rng.pick(model.sent) : randomBuffer(rng, size)
        const [contentType] = rng.pick(TYPES)
        return {
          kind: 'file-upload',
          method: 'POST',
          target: '/api/files',
          contentType,
          body: bytes,
          expect: { type: 'file-upload', bytes, contentType },
        }
      },
    ],
    [
      5,
      () => {
        const id = someId()
        const size = model.files.get(id)?.bytes.length ?? 1000
        const range = rng.pick([
          undefined,
          `bytes=0-${rng.int(size + 10)}`,
          `bytes=${rng.int(size + 10)}-`,
          `bytes=-${rng.int(size + 10)}`,
          `bytes=${rng.int(size)}-${rng.int(size)}`,
          'bytes=0-1,3-4',
          'bytes=x',
        ])
        const ifNoneMatch = rng.chance(0.1)
        const headers: [string, string][] = []
        if (range !== undefined) headers.push(['Range', range])
        if (ifNoneMatch) headers.push(['If-None-Match', `"${id}"`])
        return {
          kind: 'file-get',
          method: 'GET',
          target: `/api/files/${id}`,
          headers,
          expect: { type: 'file-get', id, range, ifNoneMatch },
        }
      },
    ],
    [
      2,
      () => {
        const id = someId()
        return {
          kind: 'file-delete',
          method: 'DELETE',
          target: `/api/files/${id}`,
          expect: { type: 'file-delete', id },
        }
      },
    ],
    [
      1,
      () => ({
        kind: 'file-list',
        method: 'GET',
        target: '/api/files?limit=1000',
        expect: { type: 'file-list' },
      }),
    ],
  ])()
}

/** The range a Range header asks of `size` bytes, as the service reads it ('whole', 'none'). */
function rangeOf(range: string | undefined, size: number): [number, number] | 'whole' | 'none' {
  const match = range === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(range)
  if (match === null) return 'whole'
  const [, first = '', last = ''] = match
  if (first === '' && last === '') return 'whole'
  if (size === 0) return 'none'
  if (first === '') {
    const suffix = Number(last)
    return suffix === 0 ? 'none' : [Math.max(0, size - suffix), size]
  }
  const start = Number(first)
  if (last !== '' && Number(last) < start) return 'whole'
  if (start >= size) return 'none'
  return [start, last === '' ? size : Math.min(size, Number(last) + 1)]
}

/** Undefined when the answer is what the model expects (and the model is updated), else why not. */
export function checkFile(
  expect: FileExpectation,
  response: WireResponse,
  model: FileModel,
): string | undefined {
  const status = response.status
  const json = () => JSON.parse(response.body.toString('utf8')) as { data: unknown }
  switch (expect.type) {
    case 'file-upload': {
      const kept = TYPES.find(([sent]) => sent === expect.contentType)?.[1]
      if (kept === undefined) return status === 400 ? undefined : `expected 400, got ${status}`
      const refusal = model.refusal(expect.bytes)
      if (refusal !== undefined) {
        if (status !== 507) return `expected 507 (${refusal}), got ${status}`
        const { detail } = json() as unknown as { detail?: unknown }
        return detail === refusal ? undefined : `the 507 says ${JSON.stringify(detail)}`
      }
      if (status !== 201) return `expected 201, got ${status}: ${response.body.toString('utf8')}`
      const id = sha256(expect.bytes)
      const first = model.files.get(id)
      const data = json().data as { id: string; size: number; type: string }
      const want = { id, size: expect.bytes.length, type: first?.type ?? kept }
      if (data.id !== want.id || data.size !== want.size || data.type !== want.type) {
        return `the upload answered ${JSON.stringify(data)}, the model ${JSON.stringify(want)}`
      }
      if (first === undefined) model.files.set(id, { bytes: expect.bytes, type: kept })
      if (model.sent.length < 20) model.sent.push(expect.bytes)
      return undefined
    }
    case 'file-get': {
      const file = model.files.get(expect.id)
      if (file === undefined) return status === 404 ? undefined : `expected 404, got ${status}`
      for (const [name, value] of [
        ['x-content-type-options', 'nosniff'],
        ['content-security-policy', "sandbox; default-src 'none'"],
        ['etag', `"${expect.id}"`],
      ]) {
        if (header(response, name as string) !== value) return `${name} is not ${value}`
      }
      if (expect.ifNoneMatch) return status === 304 ? undefined : `expected 304, got ${status}`
      const essence = file.type.split(';')[0] ?? ''
      const attachment = header(response, 'content-disposition') === 'attachment'
      if (attachment === SHOWN.has(essence)) return `Content-Disposition wrong for ${file.type}`
      const range = rangeOf(expect.range, file.bytes.length)
      if (range === 'none') return status === 416 ? undefined : `expected 416, got ${status}`
      const [start, end] = range === 'whole' ? [0, file.bytes.length] : range
      if (status !== (range === 'whole' ? 200 : 206)) return `expected a range, got ${status}`
      if (!response.body.equals(file.bytes.subarray(start, end))) {
        return `the bytes ${start}-${end} differ from the file's`
      }
      return header(response, 'content-type') === file.type
        ? undefined
        : `Content-Type ${header(response, 'content-type')}, the file is ${file.type}`
    }
    case 'file-delete': {
      const had = model.files.delete(expect.id)
      const want = had ? 204 : 404
      return status === want ? undefined : `expected ${want}, got ${status}`
    }
    case 'file-list': {
      if (status !== 200) return `expected 200, got ${status}`
      const ids = (json().data as { id: string }[]).map((file) => file.id)
      const want = [...model.files.keys()]
      if (JSON.stringify(ids) !== JSON.stringify(want)) return 'the list of files differs'
      const total = header(response, 'x-total-count')
      return total === String(want.length) ? undefined : `X-Total-Count ${total}`
    }
  }
}
