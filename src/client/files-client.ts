import { problemOf } from './errors.js'
import { dataOf } from './replies.js'
import type { Transport } from './transport.js'

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
  signal?: AbortSignal | undefined
}

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

  /** POST /api/files: stores the bytes, and answers the file they are. */
  async upload(
    bytes: Blob | Uint8Array<ArrayBuffer>,
    options: UploadOptions = {},
  ): Promise<StoredFile> {
    const type =
      options.type ??
      (bytes instanceof Blob && bytes.type !== '' ? bytes.type : 'application/octet-stream')
    const reply = await this.#transport.send({
      method: 'POST',
      path: `${this.#root}/files`,
      headers: { 'content-type': type },
      body: bytes,
      repeatable: true,
      signal: options.signal,
    })
    return dataOf(reply, 201) as StoredFile
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
