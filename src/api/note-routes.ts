import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { MaybePromise, NoteFields } from '../store/types.js'
import { parseNoteId } from './note-id.js'
import type { Answer, NoteOperations } from './note-operations.js'

/** The two route patterns of the contract, also the `route` label of their metrics. */
export const NOTES_ROUTE = '/api/note'
export const NOTE_ROUTE = '/api/note/:id'

interface IdParams {
  id: string
}

/**
 * The five operations as Fastify routes: each reads what the operation needs from the request,
 * calls it, and writes its Answer. What an operation answers is decided in NoteOperations.
 */
export function registerNoteRoutes(app: FastifyInstance, operations: NoteOperations): void {
  app.post(NOTES_ROUTE, (request, reply) => write(reply, operations.create(bodyFields(request))))

  app.get(NOTES_ROUTE, (_request, reply) => write(reply, operations.list()))

  app.get<{ Params: IdParams }>(NOTE_ROUTE, (request, reply) =>
    write(reply, operations.get(parseNoteId(request.params.id))),
  )

  app.patch<{ Params: IdParams }>(NOTE_ROUTE, (request, reply) =>
    write(reply, operations.update(parseNoteId(request.params.id), bodyFields(request))),
  )

  app.delete<{ Params: IdParams }>(NOTE_ROUTE, (request, reply) => {
    const segment = request.params.id
    return write(reply, operations.delete(parseNoteId(segment), segment))
  })
}

/** The body parser only lets JSON objects through; a request with no body at all means `{}`. */
function bodyFields(request: FastifyRequest): NoteFields {
  const { body } = request
  return typeof body === 'object' && body !== null ? (body as NoteFields) : {}
}

/** Sends the answer now, or when it settles (a rejection reaches Fastify's error handler). */
function write(reply: FastifyReply, answer: MaybePromise<Answer>): undefined | Promise<void> {
  if (answer instanceof Promise) return answer.then((settled) => send(reply, settled))
  send(reply, answer)
  return undefined
}

function send(reply: FastifyReply, answer: Answer): void {
  reply.code(answer.status)
  if (answer.contentType !== undefined) reply.header('content-type', answer.contentType)
  const { headers } = answer
  for (let i = 0; i + 1 < headers.length; i += 2) {
    reply.header(headers[i] as string, headers[i + 1])
  }
  reply.send(answer.body)
}
