import { randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

export const REQUEST_ID_HEADER = 'x-request-id'

/**
 * An id a caller may choose: up to 128 characters that are safe in a header and a log line.
 * 'b7e2c9a0-1f3d-4c55-9a8e-6f0d2b1c3e4f', 'web-1:42', 'YWJj+/=' pass; '', 'a b', '<script>' do not.
 */
const ACCEPTED_ID = /^[\w.:@/+=~-]{1,128}$/

/**
 * Fastify's `genReqId`: the caller's X-Request-Id when it is acceptable, else the next id of a
 * random 48-bit prefix and a counter, '3f9a0c1b7d2e-1', '3f9a0c1b7d2e-2'...: unique across
 * restarts and instances in practice, for a fraction of the cost of a UUID per request.
 */
export function requestIdGenerator(): (request: IncomingMessage) => string {
  const prefix = randomBytes(6).toString('hex')
  let count = 0
  return (request) => {
    const incoming = request.headers[REQUEST_ID_HEADER]
    if (typeof incoming === 'string' && ACCEPTED_ID.test(incoming)) return incoming
    count++
    return `${prefix}-${count.toString(36)}`
  }
}

/**
 * Gives every request an id (the caller's X-Request-Id, or a generated one), which Fastify puts
 * on each of the request's log lines as `reqId`, and echoes it in the X-Request-Id response header.
 */
export function registerRequestIds(
  app: FastifyInstance,
  generate: (request: IncomingMessage) => string,
): void {
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
