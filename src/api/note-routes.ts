import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Directory } from '../store/directory.js'
import type { MaybePromise, NoteFields, PatchKind } from '../store/types.js'
import { Answer, NOTES_PATH } from './answer.js'
import { sendAnswer } from './answer-head.js'
import { BATCH_PATH } from './batch.js'
import { exportNotes, NDJSON_CONTENT_TYPE, wantsExport } from './note-export.js'
import { parseNoteId } from './note-id.js'
import type { NoteOperations } from './note-operations.js'
import { isRefused, type Refused, type Target, targetOf } from './notebook-access.js'
import type { NotebookServices } from './notebook-services.js'
import { sendProblem } from './problem.js'
import { queryOf } from './request-target.js'

/** The two route patterns of the contract, also the `route` label of their metrics. */
export const NOTE_ROUTE = `${NOTES_PATH}/:id`

/** The same routes in a notebook named by the path: `/api/notebooks/:nb/note`. */
const NOTEBOOK_NOTES_ROUTE = '/api/notebooks/:nb/note'
const NOTEBOOK_BATCH_ROUTE = '/api/notebooks/:nb/batch'

/** '/api/notebooks/<nb>/note': where a page's Link sends a caller who listed that notebook. */
export function notebookNotesPath(nb: string): string {
  return `/api/notebooks/${encodeURIComponent(nb)}/note`
}

interface IdParams {
  id: string
}

interface NotebookParams {
  nb: string
}

/** What a route's operation acts on: the operations of one notebook, and its store's name. */
interface Scope {
  readonly operations: NoteOperations
  readonly store: string
}

type Services = Pick<NotebookServices, 'operations' | 'operationsAs' | 'store' | 'exports'>

/**
 * The six operations as Fastify routes: each reads what the operation needs from the request,
 * calls it, and writes its Answer. What an operation answers is decided in NoteOperations.
 * They are served twice: at `/api/note`, on the caller's default notebook, and at
 * `/api/notebooks/:nb/note`, on the notebook the path names (`me` being the default one), with
 * exactly the same meaning, once the caller's role there allows the request.
 */
export function registerNoteRoutes(
  app: FastifyInstance,
  services: Services,
  directory?: Directory,
): void {
  // The caller's default notebook: what they read and write is that notebook's alone.
  registerNoteOperations(app, services, NOTES_PATH, BATCH_PATH, (request) => ({
    operations: services.operations(request.notebook),
    store: request.notebook,
  }))
  registerNoteOperations(
    app,
    services,
    NOTEBOOK_NOTES_ROUTE,
    NOTEBOOK_BATCH_ROUTE,
    (request, reply, write) => {
      const { nb } = request.params as NotebookParams
      const target = targetOf(request, nb, directory, write)
      const scope = (settled: Target | Refused): Scope | undefined => {
        if (isRefused(settled)) {
          sendProblem(reply, settled.status, settled.detail)
          return undefined
        }
        const { store, guardedFor } = settled
        const operations =
          write && guardedFor !== undefined
            ? services.operationsAs(store, guardedFor)
            : services.operations(store, notebookNotesPath(nb))
        return { operations, store }
      }
      return target instanceof Promise ? target.then(scope) : scope(target)
    },
  )
}

/**
 * The note routes at `notes` (and the batch at `batch`), each on the scope `scopeOf` gives it,
 * which has answered the request itself (a refusal) when it gives none.
 */
function registerNoteOperations(
  app: FastifyInstance,
  services: Services,
  notes: string,
  batch: string,
  scopeOf: (
    request: FastifyRequest,
    reply: FastifyReply,
    write: boolean,
  ) => MaybePromise<Scope | undefined>,
): void {
  const note = `${notes}/:id`
  const serve = (
    request: FastifyRequest,
    reply: FastifyReply,
    isWrite: boolean,
    operation: (scope: Scope) => MaybePromise<Answer> | Promise<FastifyReply>,
  ): undefined | Promise<unknown> => {
    const scope = scopeOf(request, reply, isWrite)
    if (scope instanceof Promise) {
      return scope.then((settled) =>
        settled === undefined ? reply : send(reply, operation(settled)),
      )
    }
    return scope === undefined ? undefined : send(reply, operation(scope))
  }

  app.post(notes, (request, reply) =>
    serve(request, reply, true, ({ operations }) =>
      operations.create(bodyFields(request), request.headers),
    ),
  )

  app.get(notes, (request, reply) =>
    serve(request, reply, false, ({ operations, store }) =>
      wantsExport(request.headers.accept)
        ? sendExport(request, reply, services, store)
        : operations.list(queryOf(request.url), request.headers),
    ),
  )

  app.get<{ Params: IdParams }>(note, (request, reply) =>
    serve(request, reply, false, ({ operations }) =>
      operations.get(parseNoteId(request.params.id), request.headers),
    ),
  )

  app.patch<{ Params: IdParams }>(note, (request, reply) =>
    serve(request, reply, true, ({ operations }) =>
      operations.update(
        parseNoteId(request.params.id),
        bodyFields(request),
        patchKind(request.headers['content-type']),
        request.headers,
      ),
    ),
  )

  app.put<{ Params: IdParams }>(note, (request, reply) =>
    serve(request, reply, true, ({ operations }) =>
      operations.update(
        parseNoteId(request.params.id),
        bodyFields(request),
        'replace',
        request.headers,
      ),
    ),
  )

  app.delete<{ Params: IdParams }>(note, (request, reply) => {
    const segment = request.params.id
    return serve(request, reply, true, ({ operations }) =>
      operations.delete(parseNoteId(segment), segment, request.headers),
    )
  })

  app.post(batch, (request, reply) =>
    serve(request, reply, true, ({ operations }) =>
      operations.batch(bodyFields(request), request.headers),
    ),
  )
}

/**
 * GET /api/note with Accept: application/x-ndjson: the caller's notebook as a
 * stream of lines with its Notes-Version, written with backpressure by Fastify's stream sending
 * (which destroys the stream, and so closes the export, when the client goes away). HEAD answers
 * the head alone. While shutting down, 503 with Retry-After, as the change feed answers.
 */
async function sendExport(
  request: FastifyRequest,
  reply: FastifyReply,
  services: Pick<NotebookServices, 'store' | 'exports'>,
  notebook: string,
): Promise<FastifyReply> {
  const { exports } = services
  if (exports.closing) {
    return sendProblem(reply, 503, 'The service is shutting down. Export again in a moment.', {
      'retry-after': '1',
    })
  }
  const ifNoneMatch = request.headers['if-none-match']
  const answer = await exportNotes(
    services.store(notebook),
    queryOf(request.url),
    ifNoneMatch,
    request.method === 'HEAD',
  )
  if (answer.kind === 'refused') return sendProblem(reply, answer.status, answer.detail)
  const vary = reply.getHeader('vary')
  reply
    .header('etag', answer.etag)
    .header('notes-version', answer.version)
    .header('cache-control', 'no-cache')
    // Not compressed; Accept-Encoding is named as on every list answer, for caches keyed by it.
    .header('vary', `${vary === undefined ? '' : `${String(vary)}, `}Accept, Accept-Encoding`)
  if (answer.kind === 'not-modified') return reply.code(304).send()
  reply
    .code(200)
    .header('content-type', NDJSON_CONTENT_TYPE)
    .header('x-total-count', String(answer.count))
  if (answer.body === undefined) return reply.send()
  exports.track(answer.body, reply.raw)
  return reply.send(answer.body)
}

/** The body parser only lets JSON objects through; a request with no body at all means `{}`. */
export function bodyFields(request: FastifyRequest): NoteFields {
  const { body } = request
  return typeof body === 'object' && body !== null ? (body as NoteFields) : {}
}

/**
 * Merge patch: application/merge-patch+json is an RFC 7396 merge patch; application/json, any
 * other +json type and no body at all keep the spec's shallow merge. The media type is compared
 * as Fastify's parser compares it (parameters off, trimmed, case-insensitive), and the parser has
 * already refused a charset other than UTF-8 with 415. The fast lane takes only
 * 'application/json', so a merge patch always comes this way.
 * 'Application/Merge-Patch+JSON; charset=utf-8' -> 'merge-patch'; 'application/json' -> 'merge'
 */
export function patchKind(contentType: string | undefined): PatchKind {
  if (contentType === undefined) return 'merge'
  const semicolon = contentType.indexOf(';')
  const mediaType = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim()
  return mediaType.toLowerCase() === 'application/merge-patch+json' ? 'merge-patch' : 'merge'
}

/**
 * Sends the answer now, or when it settles (a rejection reaches Fastify's error handler); an
 * export has sent itself.
 */
export function send(
  reply: FastifyReply,
  answer: MaybePromise<Answer> | Promise<FastifyReply>,
): undefined | Promise<unknown> {
  if (answer instanceof Promise) {
    return answer.then((settled) =>
      settled instanceof Answer ? sendAnswer(reply, settled) : settled,
    )
  }
  sendAnswer(reply, answer)
  return undefined
}
