import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { MaybePromise, NoteFields, PatchKind } from '../store/types.js'
import { type Answer, NOTES_PATH } from './answer.js'
import { sendAnswer } from './answer-head.js'
import { BATCH_PATH } from './batch.js'
import { exportNotes, NDJSON_CONTENT_TYPE, wantsExport } from './note-export.js'
import { parseNoteId } from './note-id.js'
import type { NoteOperations } from './note-operations.js'
import type { NotebookServices } from './notebook-services.js'
import { sendProblem } from './problem.js'
import { queryOf } from './request-target.js'

/** The two route patterns of the contract, also the `route` label of their metrics. */
export const NOTE_ROUTE = `${NOTES_PATH}/:id`

interface IdParams {
  id: string
}

/**
 * The five operations as Fastify routes: each reads what the operation needs from the request,
 * calls it, and writes its Answer. What an operation answers is decided in NoteOperations.
 */
export function registerNoteRoutes(
  app: FastifyInstance,
  services: Pick<NotebookServices, 'operations' | 'store' | 'exports'>,
): void {
  // The operations of the caller's notebook: what they read and write is that notebook's alone.
  const of = (request: FastifyRequest): NoteOperations => services.operations(request.notebook)

  app.post(NOTES_PATH, (request, reply) =>
    write(reply, of(request).create(bodyFields(request), request.headers)),
  )

  app.get(NOTES_PATH, (request, reply) => {
    if (wantsExport(request.headers.accept)) return sendExport(request, reply, services)
    return write(reply, of(request).list(queryOf(request.url), request.headers))
  })

  app.get<{ Params: IdParams }>(NOTE_ROUTE, (request, reply) =>
    write(reply, of(request).get(parseNoteId(request.params.id), request.headers)),
  )

  app.patch<{ Params: IdParams }>(NOTE_ROUTE, (request, reply) =>
    write(
      reply,
      of(request).update(
        parseNoteId(request.params.id),
        bodyFields(request),
        patchKind(request.headers['content-type']),
        request.headers,
      ),
    ),
  )

  app.delete<{ Params: IdParams }>(NOTE_ROUTE, (request, reply) => {
    const segment = request.params.id
    return write(reply, of(request).delete(parseNoteId(segment), segment, request.headers))
  })

  app.post(BATCH_PATH, (request, reply) =>
    write(reply, of(request).batch(bodyFields(request), request.headers)),
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
): Promise<FastifyReply> {
  const { exports } = services
  if (exports.closing) {
    return sendProblem(reply, 503, 'The service is shutting down. Export again in a moment.', {
      'retry-after': '1',
    })
  }
  const ifNoneMatch = request.headers['if-none-match']
  const answer = await exportNotes(
    services.store(request.notebook),
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
function bodyFields(request: FastifyRequest): NoteFields {
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

/** Sends the answer now, or when it settles (a rejection reaches Fastify's error handler). */
function write(reply: FastifyReply, answer: MaybePromise<Answer>): undefined | Promise<void> {
  if (answer instanceof Promise) return answer.then((settled) => sendAnswer(reply, settled))
  sendAnswer(reply, answer)
  return undefined
}
