/**
 * NotesClient: every operation of the notes API as a typed method. It keeps the last ETag it saw
 * of each note, so that updates and deletes are conditional unless told otherwise; it sends an
 * Idempotency-Key with every create and batch, so that its retries never apply a write twice;
 * and it turns every problem the service answers into a typed error (errors.ts).
 */
import { ChangeFeed, type EventsOptions } from './change-feed.js'
import { NotesProblem, problemOf } from './errors.js'
import { EtagMemory } from './etag-memory.js'
import { newIdempotencyKey } from './idempotency-key.js'
import { nextLink } from './link-header.js'
import type { RetryOptions } from './retry-policy.js'
import { type Reply, type TokenSource, Transport } from './transport.js'
import type {
  BatchAnswer,
  BatchOptions,
  BatchRequest,
  BatchResult,
  CreateOptions,
  DeleteOptions,
  IfMatch,
  ListOptions,
  Note,
  NoteFields,
  NoteList,
  NotePage,
  NoteResult,
  PagesOptions,
  UpdateOptions,
} from './types.js'

export interface NotesClientOptions {
  /** Where the service is: 'http://127.0.0.1:3000' (a path prefix is kept). */
  baseUrl: string | URL
  /**
   * A service key or a user token (JWT), sent as `Authorization: Bearer`; or a function that
   * gives one, called before every request (so that a token can be renewed).
   */
  token?: TokenSource | undefined
  /** The fetch to call (default: the global one). */
  fetch?: typeof fetch | undefined
  /** Retries of network failures, 503 and 429 (default: 3, waiting at most 10 s each). */
  retries?: RetryOptions | undefined
  /** Aborts every request of this client, and ends its feeds. */
  signal?: AbortSignal | undefined
  /** How many notes' ETags the client remembers for If-Match (default 10,000; 0: none). */
  rememberEtags?: number | undefined
}

const JSON_TYPE = 'application/json'
const MERGE_PATCH_TYPE = 'application/merge-patch+json'
const NOTE_PATH = /^\/api\/note\/(-?[0-9]+)$/

export class NotesClient {
  readonly #transport: Transport
  readonly #etags: EtagMemory

  constructor(options: NotesClientOptions) {
    this.#transport = new Transport(options)
    this.#etags = new EtagMemory(options.rememberEtags ?? 10_000)
  }

  /** The ETag the client last saw of note `id` (what an update sends as If-Match by default). */
  etagOf(id: number | string): string | undefined {
    return this.#etags.get(id)
  }

  /** POST /api/note: creates a note, once, however often the request has to be retried. */
  async create(fields: NoteFields, options: CreateOptions = {}): Promise<NoteResult> {
    const reply = await this.#transport.send({
      method: 'POST',
      path: '/api/note',
      headers: {
        'content-type': JSON_TYPE,
        'idempotency-key': options.idempotencyKey ?? newIdempotencyKey(),
      },
      body: JSON.stringify(fields),
      repeatable: true,
      signal: options.signal,
    })
    return this.#noteResult(reply)
  }

  /** GET /api/note/:id: the note, or undefined when there is none with this id. */
  async get(
    id: number | string,
    options: { signal?: AbortSignal | undefined } = {},
  ): Promise<NoteResult | undefined> {
    const reply = await this.#transport.send({
      method: 'GET',
      path: notePath(id),
      repeatable: true,
      signal: options.signal,
    })
    if (reply.status === 404 && reply.body === undefined) {
      this.#etags.forget(id)
      return undefined
    }
    return this.#noteResult(reply)
  }

  /**
   * PATCH /api/note/:id: `fields` replace the note's fields of the same name (or, with
   * `mergePatch`, are merged into it as RFC 7396 says). Conditional on the ETag last seen of the
   * note unless `ifMatch` says otherwise. Throws ConflictError (412) when the note changed
   * meanwhile, NoteNotFoundError when it does not exist.
   */
  async update(
    id: number | string,
    fields: NoteFields,
    options: UpdateOptions = {},
  ): Promise<NoteResult> {
    const headers: Record<string, string> = {
      'content-type': options.mergePatch === true ? MERGE_PATCH_TYPE : JSON_TYPE,
    }
    const ifMatch = this.#ifMatch(id, options.ifMatch)
    if (ifMatch !== undefined) headers['if-match'] = ifMatch
    const reply = await this.#transport.send({
      method: 'PATCH',
      path: notePath(id),
      headers,
      body: JSON.stringify(fields),
      // With If-Match, a PATCH whose answer was lost and that is sent again is refused (412), not
      // applied twice; without it, it could be applied over a change made meanwhile.
      repeatable: ifMatch !== undefined,
      signal: options.signal,
    })
    const result = this.#noteResult(reply)
    if (String(result.note.id) !== String(id)) this.#etags.forget(id)
    return result
  }

  /**
   * DELETE /api/note/:id: answers the id as the service echoes it (a string). Conditional like
   * update. Throws NoteNotFoundError when there is no such note, except when the request was
   * sent again after a lost answer: the first one deleted it, and the delete counts as done.
   */
  async delete(id: number | string, options: DeleteOptions = {}): Promise<string> {
    const ifMatch = this.#ifMatch(id, options.ifMatch)
    const reply = await this.#transport.send({
      method: 'DELETE',
      path: notePath(id),
      ...(ifMatch === undefined ? {} : { headers: { 'if-match': ifMatch } }),
      repeatable: ifMatch !== undefined,
      signal: options.signal,
    })
    const gone = reply.status === 404 && reply.body === undefined && reply.lostAnswer
    if (reply.status !== 200 && !gone) throw problemOf(reply.status, reply.headers, reply.body)
    this.#etags.forget(id)
    return gone ? String(id) : (dataOf(reply) as string)
  }

  /** GET /api/note: every note (or those matching `q`), oldest first unless `order: 'desc'`. */
  async list(options: ListOptions = {}): Promise<NoteList> {
    const query = new URLSearchParams()
    if (options.order !== undefined) query.set('order', options.order)
    if (options.q !== undefined) query.set('q', options.q)
    const search = query.size === 0 ? '' : `?${query}`
    const reply = await this.#read(`/api/note${search}`, options.signal)
    return listOf(reply)
  }

  /**
   * The list one page at a time (`limit` notes each, 100 by default), following
   * `Link: rel="next"` until the last page. Keyset paging: a walk meets every note that exists
   * throughout it exactly once, whatever changes meanwhile.
   */
  async *pages(options: PagesOptions = {}): AsyncGenerator<NotePage, undefined, undefined> {
    const query = new URLSearchParams({ limit: String(options.limit ?? 100) })
    if (options.order !== undefined) query.set('order', options.order)
    if (options.q !== undefined) query.set('q', options.q)
    let path: string | undefined = `/api/note?${query}`
    while (path !== undefined) {
      const reply = await this.#read(path, options.signal)
      const next = nextLink(reply.headers.get('link'))
      yield { ...listOf(reply), next }
      path = next
    }
    return undefined
  }

  /**
   * POST /api/batch: the requests applied in order, all or nothing, once (an Idempotency-Key is
   * sent). Answers each request's answer; throws the problem of the one that failed (its detail
   * names its index), and then nothing was applied.
   */
  async batch(requests: readonly BatchRequest[], options: BatchOptions = {}): Promise<BatchResult> {
    const sent = requests.map((request) => this.#conditional(request, options.ifMatch))
    const reply = await this.#transport.send({
      method: 'POST',
      path: '/api/batch',
      headers: {
        'content-type': JSON_TYPE,
        'idempotency-key': options.idempotencyKey ?? newIdempotencyKey(),
      },
      body: JSON.stringify({ requests: sent }),
      repeatable: true,
      signal: options.signal,
    })
    const answers = dataOf(reply) as BatchAnswer[]
    for (const [i, answer] of answers.entries()) this.#learn(sent[i], answer)
    return { answers, replayed: reply.headers.get('idempotent-replayed') === 'true' }
  }

  /**
   * The change feed: created, updated and deleted notes, in version order, each once, and a
   * `reset` when the service's history no longer reaches back to `since` (reload the list, then
   * go on). It resumes across drops and restarts; it ends when `signal` aborts or the loop over
   * it is left (`break`, `return()`).
   */
  events(options: EventsOptions = {}): ChangeFeed {
    return new ChangeFeed(this.#transport, options)
  }

  #read(path: string, signal: AbortSignal | undefined): Promise<Reply> {
    return this.#transport.send({ method: 'GET', path, repeatable: true, signal })
  }

  #ifMatch(id: number | string, given: IfMatch | undefined): string | undefined {
    if (given === false) return undefined
    return given ?? this.#etags.get(id)
  }

  #noteResult(reply: Reply): NoteResult {
    const note = dataOf(reply) as Note
    const etag = reply.headers.get('etag') ?? undefined
    this.#etags.remember(note.id, etag)
    return { note, etag, replayed: reply.headers.get('idempotent-replayed') === 'true' }
  }

  /** A PATCH or DELETE of a batch with the If-Match of its note added, unless it has one. */
  #conditional(request: BatchRequest, ifMatch: false | undefined): BatchRequest {
    if (ifMatch === false || request.method === 'POST') return request
    const id = NOTE_PATH.exec(request.url)?.[1]
    const headers = request.headers ?? {}
    if (
      id === undefined ||
      Object.keys(headers).some((name) => name.toLowerCase() === 'if-match')
    ) {
      return request
    }
    const etag = this.#etags.get(Number(id))
    return etag === undefined ? request : { ...request, headers: { ...headers, 'if-match': etag } }
  }

  /** What a batch's answer tells of its note's ETag. */
  #learn(request: BatchRequest | undefined, answer: BatchAnswer): void {
    if (request === undefined || answer.status !== 200) return
    if (request.method === 'DELETE') {
      const id = NOTE_PATH.exec(request.url)?.[1]
      if (id !== undefined) this.#etags.forget(Number(id))
      return
    }
    const note = (answer.body as { data?: Note } | null)?.data
    if (note !== undefined) this.#etags.remember(note.id, answer.headers.etag)
  }
}

/** '/api/note/7' for 7; an id is a path segment, percent-encoded. */
function notePath(id: number | string): string {
  return `/api/note/${encodeURIComponent(String(id))}`
}

/** The `data` of a 200 answer; any other answer is thrown as its problem. */
function dataOf(reply: Reply): unknown {
  if (reply.status !== 200) throw problemOf(reply.status, reply.headers, reply.body)
  const body = reply.body
  if (typeof body !== 'object' || body === null || !('data' in body)) {
    throw new NotesProblem(
      {
        type: 'about:blank',
        title: 'Unexpected answer',
        status: reply.status,
        detail: 'The service answered 200 without a {"data": ...} document.',
      },
      reply.headers,
    )
  }
  return body.data
}

function listOf(reply: Reply): NoteList {
  const notes = dataOf(reply) as Note[]
  const total = reply.headers.get('x-total-count')
  return {
    notes,
    version: reply.headers.get('notes-version') ?? undefined,
    total: total === null ? undefined : Number(total),
    etag: reply.headers.get('etag') ?? undefined,
  }
}
