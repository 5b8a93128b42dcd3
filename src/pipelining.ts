import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'

const kLastResponse = Symbol('notes.lastResponse')

type TrackedSocket = Socket & { [kLastResponse]?: ServerResponse | undefined }

/**
 * Runs pipelined requests on one connection one after another, as HTTP/1.1 requires
 * (RFC 9112 §9.3.2). Node parses every pipelined request at once and Fastify runs a request
 * without a body while an earlier one is still reading its body, so without this
 * 'PATCH /api/note/7' + 'DELETE /api/note/7' sent in one write deleted first and answered the
 * PATCH 404, and a GET after a POST listed the store as it was before the POST.
 * A request waits only when an earlier response on its connection has not finished, which
 * never happens without pipelining.
 */
export function registerPipelining(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket as TrackedSocket | null
    if (socket === null) {
      done()
      return
    }
    const response = reply.raw
    const previous = socket[kLastResponse]
    socket[kLastResponse] = response
    response.once('close', () => {
      if (socket[kLastResponse] === response) socket[kLastResponse] = undefined
    })
    if (previous === undefined || previous.closed) done()
    else previous.once('close', () => done())
  })
}
