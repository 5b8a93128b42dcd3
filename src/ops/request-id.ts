import { randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { REQUEST_ID_HEADER } from '../api/answer.js'

/**
 * An id a caller may choose: up to 128 characters that are safe in a header and a log line.
 * 'b7e2c9a0-1f3d-4c55-9a8e-6f0d2b1c3e4f', 'web-1:42', 'YWJj+/=' pass; '', 'a b', '<script>' do not.
 */
const ACCEPTED_ID = /^[\w.:@/+=~-]{1,128}$/

/** Generated ids are made this many at a time. */
const ID_BLOCK = 1024

/**
 * Request ids: called with a request (Fastify's `genReqId`, the fast lane), the caller's
 * X-Request-Id when it is acceptable, else a new one; `next()` is a new one, for answers written
 * before any request could be read (clientErrorHandler, http/refusals.ts).
 */
export interface RequestIdGenerator {
  (request: IncomingMessage): string
  next: () => string
}

/**
 * New ids are a random 48-bit prefix and a counter, '3f9a0c1b7d2e-1', '3f9a0c1b7d2e-2'...:
 * unique across restarts and instances in practice, for a fraction of the cost of a UUID per
 * request.
 *
 * Ids are made ID_BLOCK at a time, as one flat string that each id is a slice of. An id built per
 * request by concatenation is a rope (a V8 ConsString), and Node's validation of the response
 * header (a regex test) then takes V8's slow runtime path to flatten it: about 700 of the 64,000
 * instructions of a GET (npm run bench:instructions). A slice keeps its whole block (about 20 KB)
 * alive; nothing keeps ids beyond their request, but anything that ever caches many should copy
 * them first.
 */
export function requestIdGenerator(): RequestIdGenerator {
  const prefix = `${randomBytes(6).toString('hex')}-`
  let count = 0
  let block = ''
  /** Where each id of the block starts: id i is block.slice(bounds[i], bounds[i + 1]). */
  const bounds = new Uint32Array(ID_BLOCK + 1)
  let next = ID_BLOCK
  const refill = (): void => {
    const ids: string[] = new Array(ID_BLOCK)
    let end = 0
    for (let i = 0; i < ID_BLOCK; i++) {
      const id = prefix + (++count).toString(36)
      ids[i] = id
      end += id.length
      bounds[i + 1] = end
    }
    block = ids.join('')
    next = 0
  }
  const newId = (): string => {
    if (next === ID_BLOCK) refill()
    // Cut here rather than all at once in refill: 1,024 slices held until used outlive young-
    // generation GCs and get copied (350 more instructions per GET than slicing on demand).
    const start = bounds[next++] as number
    return block.slice(start, bounds[next])
  }
  const forRequest = (request: IncomingMessage): string => {
    const incoming = request.headers[REQUEST_ID_HEADER]
    if (typeof incoming === 'string' && ACCEPTED_ID.test(incoming)) return incoming
    return newId()
  }
  return Object.assign(forRequest, { next: newId })
}

/**
 * Gives every request an id (the caller's X-Request-Id, or a generated one), which Fastify puts
 * on each of the request's log lines as `reqId`, and echoes it in the X-Request-Id response header.
 */
export function registerRequestIds(app: FastifyInstance, generate: RequestIdGenerator): void {
  app.setGenReqId(generate)
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id)
    done()
  })
}

type FrameworkErrorHandler = (
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
) => void

/**
 * Fastify answers URLs its router cannot read through the `frameworkErrors` option without
 * running any hook; this wrapper gives those answers the X-Request-Id header too.
 */
export function withRequestIdHeader(handler: FrameworkErrorHandler): FrameworkErrorHandler {
  return (error, request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id)
    handler(error, request, reply)
  }
}
