import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { REQUEST_ID_HEADER } from '../api/answer.js'
import { PROBLEM_CONTENT_TYPE, problem } from '../api/problem.js'
import { closeLingering, isLingering, lingerOnClose } from './lingering-close.js'
import { afterResponsesOn } from './pipelining.js'

/**
 * How a connection ends after a refusal: the answer is read by the client, never
 * cut off by a reset, and nothing sent behind a refused body is taken for a next request.
 */

/**
 * The one place an answer is made to close its connection after a refusal: `Connection: close`
 * on the answer (through `setHeader`, the lane's or Fastify's), and a close that lingers
 * (lingering-close.ts), so that a request pipelined behind it, or the rest of a body still
 * arriving, meets no reset.
 */
export function closeAfterRefusal(
  request: IncomingMessage,
  setHeader: (name: string, value: string) => unknown,
): void {
  setHeader('connection', 'close')
  lingerOnClose(request.socket)
}

/**
 * Decides how a connection ends after an error answer of Fastify's (its error and not-found
 * handlers). A request answered before its body has all arrived (a 413 after the headers of a
 * large upload, a 415, a 404 to a POST) closes the connection when the rest of the body is
 * unbounded (chunked) or over the limit, so that the server reads and discards it for a bounded
 * time only and never takes what follows it for a next request; a body within the limit is read
 * to its end, as Node does, and the connection kept. Fastify closes after a body parser's error
 * itself ('Connection: close' on the reply), but not after a 415 or a 404; whenever the answer
 * closes the connection, the close lingers. 'complete' is still false for a bodiless request
 * while its headers are handled, so the body headers decide whether there is a body at all.
 */
export function endAfterError(
  request: FastifyRequest,
  reply: FastifyReply,
  bodyLimit: number,
): void {
  const { complete, headers } = request.raw
  let closes = reply.getHeader('connection') === 'close'
  if (complete === false) {
    const chunked = headers['transfer-encoding'] !== undefined
    const length = Number(headers['content-length'] ?? 0)
    if (chunked || length > bodyLimit) closes = true
  }
  if (closes) closeAfterRefusal(request.raw, (name, value) => reply.header(name, value))
}

/** Connections being refused (kept aside, like the pipelining queue, so sockets keep Node's shape). */
const refusing = new WeakSet<Socket>()

/**
 * Answers requests that Node's HTTP parser rejects before Fastify sees them, then closes the
 * connection: 431 for oversized headers, 408 for timeouts, 400 for anything malformed, each with
 * a new X-Request-Id from `requestId` (the lanes' generator: no request was read to take one from).
 * Responses already under way on the connection (pipelining) are finished first: the refusal
 * used to be written at once and the socket destroyed, so a POST followed in the same write by a
 * malformed request, or by any request after 'Connection: close', was stored while its client
 * read only the 400. The close lingers, so a client still sending reads the refusal
 * instead of a reset.
 */
export function clientErrorHandler(
  requestId: () => string,
): (error: Error & { code?: string }, socket: Socket) => void {
  return (error, socket) => refuseConnection(error, socket, requestId)
}

function refuseConnection(
  error: Error & { code?: string },
  socket: Socket,
  requestId: () => string,
): void {
  // A lingering connection's parser is cut off mid-request: Node reports that at its end.
  if (
    error.code === 'ECONNRESET' ||
    socket.destroyed ||
    refusing.has(socket) ||
    isLingering(socket)
  )
    return
  refusing.add(socket)
  // Read nothing more: the parser has failed, so later bytes can only fail again.
  socket.pause()
  let status = 400
  let detail = 'The request could not be parsed as HTTP/1.1.'
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    status = 431
    detail = 'The request line and headers are larger than the server accepts.'
  } else if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408
    detail = 'The request was not received in time; send it again, faster.'
  }
  afterResponsesOn(socket, () => {
    if (socket.writable) {
      const body = JSON.stringify(problem(status, detail))
      socket.write(
        `HTTP/1.1 ${status} ${problem(status, detail).title}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n${REQUEST_ID_HEADER}: ${requestId()}\r\n` +
          `Connection: close\r\n\r\n${body}`,
      )
    }
    closeLingering(socket)
  })
}
