import { NotesNetworkError, problemOf } from './errors.js'
import { dataOf } from './replies.js'
import { backoffMs, sleep } from './retry-policy.js'
import type { Reply, Transport } from './transport.js'

/** A file as the service lists it. */
export interface StoredFile {
  /** The lowercase hex SHA-256 of its bytes. */
  id: string
  size: number
  /** Its media type. */
  type: string
  /** When it was first stored (RFC 3339). */
  created: string
}

/** One page of a notebook's files, oldest first. */
export interface FilePage {
  files: StoredFile[]
  /** `X-Total-Count`: the notebook's files. */
  total: number | undefined
  /** The path of the next page, or undefined on the last. */
  next: string | undefined
}

export interface UploadOptions {
  /** The file's media type; a Blob's own `type` by default, else application/octet-stream. */
  type?: string | undefined
  /** Ends the upload (the service's partial upload is removed) and rejects with the reason. */
  signal?: AbortSignal | undefined
  /**
   * Called with the bytes the service holds and the file's size: at 0, then after each part the
   * service acknowledged (so a part's bytes count once they are safe, not as they leave).
   */
  onProgress?: ((sent: number, total: number) => void) | undefined
  /**
   * Bytes per request (default 8 MiB). A file larger than this goes up resumably in parts of this
   * size; keep it under the body limit of any proxy in front of the service.
   */
  partSize?: number | undefined
  /** The stream's length in bytes: needed to upload a ReadableStream. */
  size?: number | undefined
}

/** What an upload may read its bytes from. */
export type UploadSource = Blob | Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array>

const DEFAULT_PART_SIZE = 8 << 20
const TUS = { 'tus-resumable': '1.0.0' }
/** Tries of one part in a row that move the offset nowhere, before the upload gives up. */
const STALLED_TRIES = 5

export interface DownloadOptions {
  /** The bytes [start, end) only (a Range request, answered 206). */
  range?: { start: number; end: number } | undefined
  signal?: AbortSignal | undefined
}

/**
 * The files of one notebook (`client.files`): upload, list, download and delete. An upload is
 * sent again after a lost answer or a 503 (the same bytes are the same file, so a repeat stores
 * nothing twice); a download answers the service's Response, whose body streams the bytes.
 */
export class FilesClient {
  readonly #transport: Transport
  /** '/api' or '/api/notebooks/<id>'. */
  readonly #root: string

  constructor(transport: Transport, root: string) {
    this.#transport = transport
    this.#root = root
  }

  /**
   * Stores the bytes as a file of the notebook and answers the file they are. Up to `partSize`
   * (8 MiB by default) they go in one POST /api/files, sent again after a lost answer (the same
   * bytes are the same file); a larger file, or any stream, goes resumably through
   * /api/uploads (tus 1.0), part by part: after a cut connection the client asks the service
   * how many bytes it holds and sends the rest, so no acknowledged byte is sent twice. Only the
   * part on its way is held in memory for a stream.
   */
  async upload(bytes: UploadSource, options: UploadOptions = {}): Promise<StoredFile> {
    const type =
      options.type ??
      (bytes instanceof Blob && bytes.type !== '' ? bytes.type : 'application/octet-stream')
    const partSize = Math.max(1, Math.floor(options.partSize ?? DEFAULT_PART_SIZE))
    const size =
      bytes instanceof Blob ? bytes.size : 'byteLength' in bytes ? bytes.byteLength : options.size
    if (size === undefined || !Number.isSafeInteger(size) || size < 0) {
      throw new TypeError('upload of a ReadableStream needs options.size, its length in bytes')
    }
    if (bytes instanceof ReadableStream || size > partSize) {
      return this.#resumable(partsOf(bytes, size, partSize), size, type, options)
    }
    options.onProgress?.(0, size)
    const reply = await this.#transport.send({
      method: 'POST',
      path: `${this.#root}/files`,
      headers: { 'content-type': type },
      body: bytes,
      repeatable: true,
      signal: options.signal,
    })
    const file = dataOf(reply, 201) as StoredFile
    options.onProgress?.(size, size)
    return file
  }

  async #resumable(
    parts: AsyncIterator<Uint8Array<ArrayBuffer> | Blob>,
    size: number,
    type: string,
    options: UploadOptions,
  ): Promise<StoredFile> {
    const transport = this.#transport
    const { signal, onProgress } = options
    const created = await transport.send({
      method: 'POST',
      path: `${this.#root}/uploads`,
      headers: {
        ...TUS,
        'upload-length': String(size),
        'upload-metadata': `filetype ${base64(type)}`,
      },
      // A repeat after a lost answer makes a second, empty upload, which expires unused.
      repeatable: true,
      signal,
    })
    if (created.status !== 201) throw problemOf(created.status, created.headers, created.body)
    const location = created.headers.get('location')
    if (location === null)
      throw new NotesNetworkError('POST /uploads answered no Location', { cause: created.status })
    const url = new URL(location, transport.url(`${this.#root}/uploads`)).href
    try {
      onProgress?.(0, size)
      let start = 0
      let offset = 0
      while (start < size) {
        const next = await parts.next()
        if (next.done === true)
          throw new TypeError(`the stream ended after ${start} of ${size} bytes`)
        const part = next.value
        const end = start + partLength(part)
        for (let stalled = 0; offset < end; ) {
          const from = offset
          offset = await this.#sendPart(url, part, start, offset, signal)
          if (offset > from) {
            stalled = 0
            onProgress?.(offset, size)
          } else if (++stalled >= STALLED_TRIES) {
            throw new NotesNetworkError(
              `the upload to ${url} stayed at ${offset} of ${size} bytes`,
              {
                cause: undefined,
              },
            )
          } else {
            await sleep(backoffMs(stalled - 1, transport.maxDelayMs), signal)
          }
        }
        start = end
      }
      const done = await transport.send({ method: 'GET', path: url, repeatable: true, signal })
      return dataOf(done) as StoredFile
    } catch (err) {
      // Ended here (aborted, refused, or a stream that broke): the partial upload is removed
      // rather than left to count toward the notebook's caps until it expires.
      await transport
        .send({ method: 'DELETE', path: url, headers: TUS, repeatable: true })
        .catch(() => {})
      throw err
    } finally {
      await parts.return?.()
    }
  }

  /**
   * Sends the part's bytes from `offset` (the part starts at `start`), and answers the offset the
   * service holds then: after the PATCH, or, when its answer was lost or refused as out of step,
   * as HEAD tells.
   */
  async #sendPart(
    url: string,
    part: Uint8Array<ArrayBuffer> | Blob,
    start: number,
    offset: number,
    signal: AbortSignal | undefined,
  ): Promise<number> {
    const transport = this.#transport
    let reply: Reply | undefined
    try {
      reply = await transport.send({
        method: 'PATCH',
        path: url,
        headers: {
          ...TUS,
          'content-type': 'application/offset+octet-stream',
          'upload-offset': String(offset),
        },
        body: offset === start ? part : from(part, offset - start),
        // Not sent again as it is: the service may hold some of it; HEAD says how much.
        repeatable: false,
        signal,
      })
    } catch (err) {
      if (!(err instanceof NotesNetworkError)) throw err
    }
    if (reply?.status === 204) return heldOffset(reply)
    // 409: another request moved the offset, or one still sends to it (a cut PATCH whose
    // request the service has not seen end yet).
    if (reply !== undefined && reply.status !== 409) {
      throw problemOf(reply.status, reply.headers, reply.body)
    }
    const head = await transport.send({
      method: 'HEAD',
      path: url,
      headers: TUS,
      repeatable: true,
      signal,
    })
    if (head.status !== 200) throw problemOf(head.status, head.headers, head.body)
    return heldOffset(head)
  }

  /** GET /api/files/:id as a Response (200, or 206 for a range); a problem is thrown. */
  async download(id: string, options: DownloadOptions = {}): Promise<Response> {
    const transport = this.#transport
    const headers: Record<string, string> = {}
    const authorization = await transport.authorization()
    if (authorization !== undefined) headers.authorization = authorization
    const { range } = options
    if (range !== undefined) headers.range = `bytes=${range.start}-${range.end - 1}`
    const init: RequestInit = { headers }
    const signal = options.signal ?? transport.signal
    if (signal !== undefined) init.signal = signal
    const response = await transport.fetch(transport.url(this.#filePath(id)), init)
    if (response.status === 200 || response.status === 206) return response
    const text = await response.text()
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {}
    throw problemOf(response.status, response.headers, body)
  }

  /** GET /api/files: one page of the notebook's files (`next` from the one before). */
  async list(
    options: { limit?: number; next?: string; signal?: AbortSignal } = {},
  ): Promise<FilePage> {
    const path =
      options.next ??
      `${this.#root}/files${options.limit === undefined ? '' : `?limit=${options.limit}`}`
    const reply = await this.#transport.send({
      method: 'GET',
      path,
      repeatable: true,
      signal: options.signal,
    })
    const total = reply.headers.get('x-total-count')
    const link = /<([^>]*)>;\s*rel="next"/.exec(reply.headers.get('link') ?? '')?.[1]
    return {
      files: dataOf(reply) as StoredFile[],
      total: total === null ? undefined : Number(total),
      next: link,
    }
  }

  /** DELETE /api/files/:id: false when the notebook held no such file. */
  async delete(id: string, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    const reply = await this.#transport.send({
      method: 'DELETE',
      path: this.#filePath(id),
      repeatable: true,
      signal: options.signal,
    })
    if (reply.status === 204) return true
    if (reply.status === 404) return false
    throw problemOf(reply.status, reply.headers, reply.body)
  }

  #filePath(id: string): string {
    return `${this.#root}/files/${encodeURIComponent(id)}`
  }
}

/** The Upload-Offset the service answered. */
function heldOffset(reply: Reply): number {
  const value = Number(reply.headers.get('upload-offset') ?? Number.NaN)
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new NotesNetworkError(`the service answered no Upload-Offset (status ${reply.status})`, {
      cause: reply.status,
    })
  }
  return value
}

/** The part from byte `at` on, without a copy. */
function from(part: Uint8Array<ArrayBuffer> | Blob, at: number): Uint8Array<ArrayBuffer> | Blob {
  return part instanceof Blob ? part.slice(at) : part.subarray(at)
}

function partLength(part: Uint8Array | Blob): number {
  return part instanceof Blob ? part.size : part.byteLength
}

/** UTF-8 bytes as base64, as tus's Upload-Metadata carries values. */
function base64(text: string): string {
  let binary = ''
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte)
  return btoa(binary)
}

/**
 * The source's first `size` bytes in parts of `partSize`: slices of a Blob or of bytes (nothing
 * read ahead), or a stream's chunks gathered into parts, one part in memory at a time (a stream
 * is read no further than `size`).
 */
async function* partsOf(
  source: UploadSource,
  size: number,
  partSize: number,
): AsyncGenerator<Uint8Array<ArrayBuffer> | Blob> {
  if (!(source instanceof ReadableStream)) {
    for (let at = 0; at < size; at += partSize) {
      yield source instanceof Blob
        ? source.slice(at, at + partSize)
        : source.subarray(at, at + partSize)
    }
    return
  }
  const reader = source.getReader()
  try {
    let part = new Uint8Array(Math.min(partSize, size))
    let filled = 0
    for (let left = size; left > 0; ) {
      const { done, value } = await reader.read()
      if (done) break
      const chunk = value.byteLength > left ? value.subarray(0, left) : value
      left -= chunk.byteLength
      for (let at = 0; at < chunk.byteLength; ) {
        const take = Math.min(part.byteLength - filled, chunk.byteLength - at)
        part.set(chunk.subarray(at, at + take), filled)
        filled += take
        at += take
        if (filled === part.byteLength) {
          yield part
          part = new Uint8Array(Math.min(partSize, left + chunk.byteLength - at))
          filled = 0
        }
      }
    }
    if (filled > 0) yield part.subarray(0, filled)
  } finally {
    reader.releaseLock()
  }
}
