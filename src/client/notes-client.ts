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
import { conditional, EtagMemory, learn } from './etag-memory.js'
import { FilesClient } from './files-client.js'
import { newIdempotencyKey } from './idempotency-key.js'
import { NOTEBOOKS_DECODER, NOTEBOOKS_EVENTS_PATH, type NotebooksEvent } from './notebooks-feed.js'
import {
  dataOf,
  listOf,
  memberPath,
  NOTEBOOKS_PATH,
  nextPage,
  notebookPath,
  pageQuery,
  revisionPageOf,
  trashPageOf,
} from './replies.js'
import { type Reply, Transport } from './transport.js'
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
  NotesClientOptions,
  PagesOptions,
  ReplaceOptions,
  RestoreOptions,
  Revision,
  RevisionPage,
  RevisionsOptions,
  Role,
  TrashOptions,
  TrashPage,
  UpdateOptions,
} from './types.js'

export type { NotesClientOptions } from './types.js'

/** A note's id as a method takes it: its number, or the text of it. */
type Id = number | string

const JSON_TYPE = 'application/json'
const MERGE_PATCH_TYPE = 'application/merge-patch+json'

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

  /** The files of this client's notebook: upload, list, download, delete. */
  get files(): FilesClient {
    return new FilesClient(this.#transport, this.#root)
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
    const reply = await this.#read(this.#notePath(id), options.signal)
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
      const next = nextPage(this.#root, reply)
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
    const sent = requests.map((request) => conditional(this.#etags, request, options.ifMatch))
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
    for (const [i, answer] of answers.entries()) learn(this.#etags, sent[i], answer)
    return { answers, replayed: reply.headers.get('idempotent-replayed') === 'true' }
  }

  /**
   * GET /api/note/:id/revisions: a page of the note's revisions, newest first (the note as it is
   * now the first), and the `after` of the next; undefined when no live note has this id.
   */
  async revisions(id: Id, options: RevisionsOptions = {}): Promise<RevisionPage | undefined> {
    const path = `${this.#notePath(id)}/revisions${pageQuery(options)}`
    return revisionPageOf(await this.#read(path, options.signal))
  }

  /** GET /api/note/:id/revisions/:version: one revision, or undefined (no such note or version). */
  async revision(
    id: Id,
    version: string,
    options: CallOptions = {},
  ): Promise<Revision | undefined> {
    const path = `${this.#notePath(id)}/revisions/${encodeURIComponent(version)}`
    const reply = await this.#read(path, options.signal)
    return reply.status === 404 && reply.body === undefined
      ? undefined
      : (dataOf(reply) as Revision)
  }

  /**
   * POST /api/note/:id/restore: the note made that revision's content again, as a PUT of it (a
   * new write), conditional like update. Throws ConflictError (412) when the note changed, a 404
   * NotesProblem when the history holds no such version.
   */
  async restore(id: Id, version: string, options: RestoreOptions = {}): Promise<NoteResult> {
    const ifMatch = this.#ifMatch(id, options.ifMatch)
    const path = `${this.#notePath(id)}/restore`
    // As a PUT: a repeat after a lost answer makes the same note (or meets a 412 under If-Match).
    const reply = await this.#sendJson('POST', path, { version }, true, options.signal, ifMatch)
    return this.#noteResult(reply)
  }

  /** GET /api/trash: a page of the deleted notes, most recently deleted first. */
  async trash(options: TrashOptions = {}): Promise<TrashPage> {
    return trashPageOf(await this.#read(`${this.#root}/trash${pageQuery(options)}`, options.signal))
  }

  /**
   * POST /api/trash/:id/restore: the most recently deleted note with this id back at the end of
   * the list. Throws NoteNotFoundError when the trash has none, a 409 NotesProblem when a live
   * note holds the id. Not sent again after a lost answer: a repeat could restore an older one.
   */
  async restoreFromTrash(id: Id, options: CallOptions = {}): Promise<NoteResult> {
    const path = `${this.#trashPath(id)}/restore`
    return this.#noteResult(await this.#send('POST', path, false, options.signal))
  }

  /**
   * DELETE /api/trash/:id: the most recently deleted note with this id gone for good, with its
   * revisions; false when the trash has none. Not sent again after a lost answer, as above.
   */
  async purge(id: Id, options: CallOptions = {}): Promise<boolean> {
    const reply = await this.#send('DELETE', this.#trashPath(id), false, options.signal)
    if (reply.status === 204) return true
    if (reply.status === 404 && reply.body === undefined) return false
    throw problemOf(reply.status, reply.headers, reply.body)
  }

  /** DELETE /api/trash: every deleted note gone for good; answers how many went. */
  async emptyTrash(options: CallOptions = {}): Promise<number> {
    const reply = await this.#send('DELETE', `${this.#root}/trash`, true, options.signal)
    return (dataOf(reply) as { purged: number }).purged
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
    const path = `/api/invites/${encodeURIComponent(token)}`
    return dataOf(await this.#send('POST', path, false, options.signal)) as Notebook
  }

  #notePath(id: number | string): string {
    return `${this.#root}/note/${encodeURIComponent(String(id))}`
  }

  #trashPath(id: number | string): string {
    return `${this.#root}/trash/${encodeURIComponent(String(id))}`
  }

  #sendJson(
    method: 'POST' | 'PATCH' | 'PUT',
    path: string,
    body: unknown,
    repeatable: boolean,
    signal: AbortSignal | undefined,
    ifMatch?: string,
  ): Promise<Reply> {
    const headers: Record<string, string> = { 'content-type': JSON_TYPE }
    if (ifMatch !== undefined) headers['if-match'] = ifMatch
    const text = JSON.stringify(body)
    return this.#transport.send({ method, path, headers, body: text, repeatable, signal })
  }

  /**
   * A DELETE answered 204. Sent again after a lost answer (it cannot apply twice), and then a 404
   * means the first one was done.
   */
  async #remove(path: string, signal: AbortSignal | undefined): Promise<void> {
    const reply = await this.#send('DELETE', path, true, signal)
    if (reply.status === 204 || (reply.status === 404 && reply.lostAnswer)) return
    throw problemOf(reply.status, reply.headers, reply.body)
  }

  #read(path: string, signal: AbortSignal | undefined): Promise<Reply> {
    return this.#send('GET', path, true, signal)
  }

  /** A request without a body. */
  #send(method: string, path: string, repeatable: boolean, signal?: AbortSignal): Promise<Reply> {
    return this.#transport.send({ method, path, repeatable, signal })
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
}
