import type { ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import type { NoteExport, NoteStore } from '../store/types.js'
import { noneMatch } from './conditional.js'
import { parseListQuery } from './page-query.js'

/** The media type of an export: one note's JSON a line, each line ending in '\n'. */
export const NDJSON_CONTENT_TYPE = 'application/x-ndjson'

const NDJSON = /application\/x-ndjson/i

/** Why an export with page or search parameters is refused (400). */
const EXPORT_IS_WHOLE =
  'An export (Accept: application/x-ndjson) is the whole notebook: send it without limit, after, order, sort or q, or ask for application/json to page or search.'

/**
 * Whether an Accept header asks for the export: it names application/x-ndjson with a q above 0.
 * 'application/x-ndjson' -> true; 'application/json, application/x-ndjson;q=0.5' -> true;
 * 'application/x-ndjson;q=0' -> false; '*\/*' -> false (a plain client gets the spec's list).
 */
export function wantsExport(accept: string | string[] | undefined): boolean {
  // Every GET of the list asks this (the fast lane too): one test without an allocation first.
  if (typeof accept !== 'string' || !NDJSON.test(accept)) return false
  for (const range of accept.toLowerCase().split(',')) {
    const [type, ...params] = range.split(';').map((part) => part.trim())
    if (type !== NDJSON_CONTENT_TYPE) continue
    const q = params.find((param) => param.startsWith('q='))
    return q === undefined || Number(q.slice(2)) > 0
  }
  return false
}

/** What GET /api/note with Accept: application/x-ndjson answers. */
export type ExportAnswer =
  | { readonly kind: 'refused'; readonly status: number; readonly detail: string }
  | {
      /** 200 with the lines, or 304 (`body` undefined) when If-None-Match holds its ETag. */
      readonly kind: 'export' | 'not-modified'
      /** Notes-Version: the version of the snapshot. */
      readonly version: string
      /** The export's ETag: its version's, told apart from the JSON list's. */
      readonly etag: string
      /** X-Total-Count: the notes in the snapshot (undefined for a 304). */
      readonly count: number | undefined
      /** The lines; undefined for HEAD and 304. */
      readonly body: ExportStream | undefined
    }

/** 'k2x9q1.5' -> '"k2x9q1.5-ndjson"': the same version's list in JSON has '"k2x9q1.5"'. */
function exportEtag(version: string): string {
  return `"${version}-ndjson"`
}

/**
 * What an export means, free of the transport: refused with a 400 when the query
 * asks for a page or a search (an export is the whole notebook); a 304 when If-None-Match holds
 * the ETag of the current version's export; else the store's snapshot as a stream of lines (HEAD:
 * its version and count, the snapshot let go at once). `search` is the query string without its
 * '?'. Other query parameters are ignored, as the list ignores them.
 */
export async function exportNotes(
  store: NoteStore,
  search: string,
  ifNoneMatch: string | undefined,
  head: boolean,
): Promise<ExportAnswer> {
  if (parseListQuery(search).kind !== 'whole') {
    return { kind: 'refused', status: 400, detail: EXPORT_IS_WHOLE }
  }
  if (ifNoneMatch !== undefined) {
    const version = await store.version()
    const etag = exportEtag(version)
    if (noneMatch(ifNoneMatch, etag)) {
      return { kind: 'not-modified', version, etag, count: undefined, body: undefined }
    }
  }
  const opened = await store.exportNotes()
  const { version, count } = opened
  if (head) await opened.close()
  const body = head ? undefined : new ExportStream(opened)
  return { kind: 'export', version, etag: exportEtag(version), count, body }
}

/**
 * An export's lines as a Readable with backpressure: the next chunk of notes is asked of the
 * store only when the reader has taken the last one (read() is called again once the socket
 * drained), so what is held at once is about a chunk, whatever the notebook's size. Destroyed
 * early (the client went away, a shutdown), it closes the export, which lets go of its snapshot.
 *   chunks ['{"id":1}', '{"id":2}'] -> '{"id":1}\n{"id":2}\n'
 */
export class ExportStream extends Readable {
  readonly #export: NoteExport
  readonly #chunks: AsyncIterator<readonly string[]>
  #reading = false

  constructor(opened: NoteExport) {
    // About one chunk of notes ahead of the socket; the store reads no further meanwhile.
    super({ highWaterMark: 64 * 1024 })
    this.#export = opened
    this.#chunks = opened.chunks()
  }

  override _read(): void {
    if (this.#reading) return
    this.#reading = true
    this.#chunks.next().then(
      (step) => {
        this.#reading = false
        if (this.destroyed) return
        if (step.done === true) {
          this.push(null)
          return
        }
        const lines = step.value
        // An empty chunk asks for the next one at once (push of '' would not).
        if (lines.length === 0) this._read()
        else if (this.push(`${lines.join('\n')}\n`)) this._read()
      },
      (err: unknown) => {
        this.#reading = false
        this.destroy(err instanceof Error ? err : new Error(String(err)))
      },
    )
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#export.close().then(
      () => callback(err),
      () => callback(err),
    )
  }
}

/**
 * The exports being sent now, so that a shutdown ends them at once (as it ends event streams):
 * a slow reader does not hold a SIGTERM. An export is followed until its response is finished
 * (every byte handed to the socket), not only until the store's snapshot is read: a reader that
 * stopped can leave megabytes queued in the response. One cut short ends without the last chunk
 * of HTTP/1.1 chunked encoding, so its client sees an error, never a short file taken for whole.
 */
export class OpenExports {
  readonly #open = new Map<ExportStream, ServerResponse>()
  #closing = false

  /** True once close() has been called: no export may start. */
  get closing(): boolean {
    return this.#closing
  }

  /** Exports being sent now. */
  get size(): number {
    return this.#open.size
  }

  /** Follows `stream`, sent on `response`, until the response is finished or closed. */
  track(stream: ExportStream, response: ServerResponse): void {
    if (this.#closing) {
      stream.destroy()
      return
    }
    this.#open.set(stream, response)
    const forget = () => this.#open.delete(stream)
    response.once('finish', forget)
    response.once('close', forget)
  }

  /** Ends every export now. */
  close(): void {
    this.#closing = true
    for (const [stream, response] of this.#open) {
      stream.destroy()
      response.destroy()
    }
    this.#open.clear()
  }
}
