import type { BatchAnswer, BatchRequest, Note } from './types.js'

/**
 * The ETags the client last saw, per note id, so that writes are conditional by default. Bounded:
 * past `limit` ids the one whose ETag changed (or was first seen) longest ago is forgotten (a Map
 * keeps insertion order, and a note whose ETag changes moves to the end).
 */
export class EtagMemory {
  readonly #limit: number
  readonly #etags = new Map<string, string>()

  constructor(limit: number) {
    this.#limit = limit
  }

  get(id: unknown): string | undefined {
    return this.#etags.get(String(id))
  }

  remember(id: unknown, etag: string | undefined): void {
    if (this.#limit <= 0) return
    const key = String(id)
    if (etag === undefined) {
      this.#etags.delete(key)
      return
    }
    // The same ETag again (a note read over and over) keeps its place: no Map churn per read.
    if (this.#etags.get(key) === etag) return
    this.#etags.delete(key)
    this.#etags.set(key, etag)
    if (this.#etags.size > this.#limit) {
      const oldest = this.#etags.keys().next().value
      if (oldest !== undefined) this.#etags.delete(oldest)
    }
  }

  forget(id: unknown): void {
    this.#etags.delete(String(id))
  }

  get size(): number {
    return this.#etags.size
  }
}

/** A batch's note urls: inside a notebook's batch, '/api/note' means that notebook. */
const NOTE_PATH = /^\/api\/note\/(-?[0-9]+)$/

/** A PUT, PATCH or DELETE of a batch with the If-Match `etags` has of its note, unless it has one. */
export function conditional(
  etags: EtagMemory,
  request: BatchRequest,
  ifMatch: false | undefined,
): BatchRequest {
  if (ifMatch === false || request.method === 'POST') return request
  const id = NOTE_PATH.exec(request.url)?.[1]
  const headers = request.headers ?? {}
  if (id === undefined || Object.keys(headers).some((name) => name.toLowerCase() === 'if-match')) {
    return request
  }
  const etag = etags.get(Number(id))
  return etag === undefined ? request : { ...request, headers: { ...headers, 'if-match': etag } }
}

/** What a batch's answer tells `etags` of its note's ETag. */
export function learn(
  etags: EtagMemory,
  request: BatchRequest | undefined,
  answer: BatchAnswer,
): void {
  if (request === undefined || answer.status !== 200) return
  if (request.method === 'DELETE') {
    const id = NOTE_PATH.exec(request.url)?.[1]
    if (id !== undefined) etags.forget(Number(id))
    return
  }
  const note = (answer.body as { data?: Note } | null)?.data
  if (note !== undefined) etags.remember(note.id, answer.headers.etag)
}
