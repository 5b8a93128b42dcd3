/**
 * NotesClient: every operation of the notes API as a typed method. It keeps the last ETag it saw
 * of each note, so that updates and deletes are conditional unless told otherwise; it sends an
 * Idempotency-Key with every create and batch, so that its retries never apply a write twice;
 * and it turns every problem the service answers into a typed error (errors.ts). Its note
 * methods act on one notebook: the caller's default one (`/api/note`), or the one it was made
 * for (`notebook(id)`: `/api/notebooks/<id>/note`), with an ETag memory of its own.
 */
import { ChangeFeed, type EventsOptions } from './change-feed.js'
import { problemOf } from './errors.js'
import { EtagMemory } from './etag-memory.js'
import { newIdempotencyKey } from './idempotency-key.js'
import { nextLink } from './link-header.js'
import { NOTEBOOKS_DECODER, NOTEBOOKS_EVENTS_PATH, type NotebooksEvent } from './notebooks-feed.js'
import { dataOf, listOf, memberPath, NOTEBOOKS_PATH, notebookPath } from './replies.js'
import type { RetryOptions } from './retry-policy.js'
import { type Reply, type TokenSource, Transport } from './transport.js'
import type {
  BatchAnswer,
  BatchOptions,
  BatchRequest,
  BatchResult,
  CallOptions,
  CreateOptions,
  DeleteOptions,
  IfMatch,
  Invite,
  InviteOptions,
  ListOptions,
  Member,
  NewInvite,
  Note,
  Notebook,
  NoteFields,
  NoteList,
  NotePage,
  NoteResult,
  PagesOptions,
  ReplaceOptions,
  Role,
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
  /**
   * The notebook the note methods act on, by id ('me': the caller's default); left out, the
   * caller's default notebook at `/api/note`. `client.notebook(id)` makes such a client.
   */
  notebook?: string | undefined
}

const JSON_TYPE = 'application/json'
const MERGE_PATCH_TYPE = 'application/merge-patch+json'
/** A batch's note urls: inside a notebook's batch, '/api/note' means that notebook. */
const NOTE_PATH = /^\/api\/note\/(-?[0-9]+)$/

export class NotesClient {
  readonly #options: NotesClientOptions
  readonly #transport: Transport
  readonly #etags: EtagMemory
  /** Where the notebook's routes are: '/api' by default, '/api/notebooks/<id>' in a notebook. */
  readonly #root: string

  constructor(options: NotesClientOptions) {
    this.#options = options
    this.#transport = new Transport(options)
    this.#etags = new EtagMemory(options.rememberEtags ?? 10_000)
    this.#root = options.notebook === undefined ? '/api' : notebookPath(options.notebook)
  }

  /** The notebook this client's note methods act on, or undefined for the caller's default. */
  get notebookId(): string | undefined {
    return this.#options.notebook
  }

  /**
   * A client whose note methods (create, get, list, pages, update, delete, batch, events) act on
   * notebook `id`, under `/api/notebooks/<id>/`, with this client's options and an ETag memory of
   * its own.
   */
  notebook(id: string): NotesClient {
    return new NotesClient({ ...this.#options, notebook: id })
  }

  /** The ETag the client last saw of note `id` (what an update sends as If-Match by default). */
  etagOf(id: number | string): string | undefined {
    return this.#etags.get(id)
  }

  /** POST /api/note: creates a note, once, however often the request has to be retried. */
  async create(fields: NoteFields, options: CreateOptions = {}): Promise<NoteResult> {
    const reply = await this.#transport.send({
      method: 'POST',
      path: `${this.#root}/note`,
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
      path: this.#notePath(id),
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
      path: this.#notePath(id),
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
   * PUT /api/note/:id: `fields` become the whole note (the fields it does not name are gone; its
   * id stays the note's). How a note merged with mergeNotes is sent. Conditional like update.
   * Throws ConflictError (412) when the note changed meanwhile, NoteNotFoundError when it does
   * not exist.
   */
  async replace(
    id: number | string,
    fields: NoteFields,
    options: ReplaceOptions = {},
  ): Promise<NoteResult> {
    const headers: Record<string, string> = { 'content-type': JSON_TYPE }
    const ifMatch = this.#ifMatch(id, options.ifMatch)
    if (ifMatch !== undefined) headers['if-match'] = ifMatch
    const reply = await this.#transport.send({
      method: 'PUT',
      path: this.#notePath(id),
      headers,
      body: JSON.stringify(fields),
      // PUT is idempotent: sent again after a lost answer, it makes the same note (under If-Match
      // the repeat meets a 412, as an update's does).
      repeatable: true,
      signal: options.signal,
    })
    return this.#noteResult(reply)
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
      path: this.#notePath(id),
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
    const reply = await this.#read(`${this.#root}/note${search}`, options.signal)
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
    let path: string | undefined = `${this.#root}/note?${query}`
    while (path !== undefined) {
      const reply = await this.#read(path, options.signal)
      const next = this.#nextPage(nextLink(reply.headers.get('link')))
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
      path: `${this.#root}/batch`,
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
    return new ChangeFeed(this.#transport, options, `${this.#root}/events`)
  }

  /**
   * GET /api/events?notebooks=all: the changes of every notebook the caller can read, over one
   * connection, with `joined`, `left` and a per-notebook `reset` (notebooks-feed.ts). `since`: a
   * `position` it yielded. Resumes across drops as `events()` does; a user token only.
   */
  allChanges(options: EventsOptions = {}): ChangeFeed<NotebooksEvent> {
    return new ChangeFeed(this.#transport, options, NOTEBOOKS_EVENTS_PATH, NOTEBOOKS_DECODER)
  }

  /** GET /api/notebooks: the caller's notebooks, their default one first, then as they joined. */
  async notebooks(options: CallOptions = {}): Promise<Notebook[]> {
    return dataOf(await this.#read(NOTEBOOKS_PATH, options.signal)) as Notebook[]
  }

  /** GET /api/notebooks/:id: one notebook ('me': the caller's default). */
  async getNotebook(id: string, options: CallOptions = {}): Promise<Notebook> {
    return dataOf(await this.#read(notebookPath(id), options.signal)) as Notebook
  }

  /**
   * POST /api/notebooks: a new notebook (a name of 1-200 characters) with the caller as its
   * owner. Not sent again after a lost answer: the service would make a second one.
   */
  async createNotebook(name: string, options: CallOptions = {}): Promise<Notebook> {
    const reply = await this.#sendJson('POST', NOTEBOOKS_PATH, { name }, false, options.signal)
    return dataOf(reply, 201) as Notebook
  }

  /** PATCH /api/notebooks/:id (owner): renames it; answers it as listed. */
  async renameNotebook(id: string, name: string, options: CallOptions = {}): Promise<Notebook> {
    const reply = await this.#sendJson('PATCH', notebookPath(id), { name }, true, options.signal)
    return dataOf(reply) as Notebook
  }

  /**
   * DELETE /api/notebooks/:id (owner): removes it with every note in it. A default notebook is
   * kept (409).
   */
  async deleteNotebook(id: string, options: CallOptions = {}): Promise<void> {
    await this.#remove(notebookPath(id), options.signal)
  }

  /** GET /api/notebooks/:id/members (any member). */
  async members(id: string, options: CallOptions = {}): Promise<Member[]> {
    return dataOf(await this.#read(`${notebookPath(id)}/members`, options.signal)) as Member[]
  }

  /**
   * PUT /api/notebooks/:id/members/:user (owner): adds `user` (their `sub`, whether or not they
   * ever signed in) with `role`, or changes their role. The last owner stays (409).
   */
  async setMember(
    id: string,
    user: string,
    role: Role,
    options: CallOptions = {},
  ): Promise<Member> {
    const path = memberPath(id, user)
    return dataOf(await this.#sendJson('PUT', path, { role }, true, options.signal)) as Member
  }

  /**
   * DELETE /api/notebooks/:id/members/:user: removes a member (owner), or, with the caller's own
   * `sub`, leaves the notebook. The last owner stays (409).
   */
  async removeMember(id: string, user: string, options: CallOptions = {}): Promise<void> {
    await this.#remove(memberPath(id, user), options.signal)
  }

  /**
   * POST /api/notebooks/:id/invites (owner): an invitation, with its token, shown this once. Not
   * sent again after a lost answer: the service would make a second one.
   */
  async createInvite(id: string, options: InviteOptions): Promise<NewInvite> {
    const body: Record<string, unknown> = { role: options.role }
    if (options.expiresIn !== undefined) body.expires_in = options.expiresIn
    if (options.uses !== undefined) body.uses = options.uses
    const path = `${notebookPath(id)}/invites`
    const reply = await this.#sendJson('POST', path, body, false, options.signal)
    return dataOf(reply, 201) as NewInvite
  }

  /** GET /api/notebooks/:id/invites (owner): those still usable, without their tokens. */
  async invites(id: string, options: CallOptions = {}): Promise<Invite[]> {
    return dataOf(await this.#read(`${notebookPath(id)}/invites`, options.signal)) as Invite[]
  }

  /** DELETE /api/notebooks/:id/invites/:inviteId (owner): the invitation stops working. */
  async withdrawInvite(id: string, inviteId: string, options: CallOptions = {}): Promise<void> {
    const path = `${notebookPath(id)}/invites/${encodeURIComponent(inviteId)}`
    await this.#remove(path, options.signal)
  }

  /**
   * POST /api/invites/:token: joins the notebook with the invitation's role (a member keeps the
   * higher of the two); answers it as listed. An unknown, expired, used-up or withdrawn token is
   * a 404 problem; past 20 tries a minute, 429. Not sent again after a lost answer: it would use
   * the invitation twice.
   */
  async redeemInvite(token: string, options: CallOptions = {}): Promise<Notebook> {
    const reply = await this.#transport.send({
      method: 'POST',
      path: `/api/invites/${encodeURIComponent(token)}`,
      repeatable: false,
      signal: options.signal,
    })
    return dataOf(reply) as Notebook
  }

  #notePath(id: number | string): string {
    return `${this.#root}/note/${encodeURIComponent(String(id))}`
  }

  /**
   * The next page's path on this client's notebook: the link's query on this client's note path,
   * '/api/note?limit=2&after=a1.x' -> '/api/notebooks/n4Q/note?limit=2&after=a1.x'. The service
   * names the path the list was read at; a service of an earlier version named '/api/note' in a
   * notebook too, which would walk on in the default notebook.
   */
  #nextPage(link: string | undefined): string | undefined {
    if (link === undefined) return undefined
    const query = link.indexOf('?')
    return query === -1 ? link : `${this.#root}/note${link.slice(query)}`
  }

  #sendJson(
    method: 'POST' | 'PATCH' | 'PUT',
    path: string,
    body: unknown,
    repeatable: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Reply> {
    return this.#transport.send({
      method,
      path,
      headers: { 'content-type': JSON_TYPE },
      body: JSON.stringify(body),
      repeatable,
      signal,
    })
  }

  /**
   * A DELETE answered 204. Sent again after a lost answer (it cannot apply twice), and then a 404
   * means the first one was done.
   */
  async #remove(path: string, signal: AbortSignal | undefined): Promise<void> {
    const reply = await this.#transport.send({ method: 'DELETE', path, repeatable: true, signal })
    if (reply.status === 204 || (reply.status === 404 && reply.lostAnswer)) return
    throw problemOf(reply.status, reply.headers, reply.body)
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

  /** A PUT, PATCH or DELETE of a batch with the If-Match of its note added, unless it has one. */
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
