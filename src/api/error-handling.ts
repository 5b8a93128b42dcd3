import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { closeLingering, isLingering, lingerOnClose } from '../http/lingering-close.js'
import { afterResponsesOn } from '../http/pipelining.js'
import type { FailureLog } from '../ops/failure-log.js'
import { REQUEST_ID_HEADER } from '../ops/request-id.js'
import { IdempotencyKeyReusedError, StoreFullError, StoreUnavailableError } from '../store/types.js'
import { PROBLEM_CONTENT_TYPE, problem, sendProblem } from './problem.js'

export interface ErrorHandlingOptions {
  bodyLimit: number
  /** Answers the Allow header for a path the app serves, undefined for any other path. */
  allowFor: (path: string) => string | undefined
  /** Where failed requests are logged; the fast lane reports to the same one. */
  failures: FailureLog
}

/**
 * The one place errors become responses: RFC 9457 problem JSON for every error we own,
 * 405 with Allow for a known path and an unknown method, 204 with Allow for OPTIONS.
 */
export function registerErrorHandling(app: FastifyInstance, options: ErrorHandlingOptions): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const { status, detail, headers } = problemForError(error, options.bodyLimit)
    options.failures.report(error, status, detail, request.id)
    endAfterError(request, reply, options.bodyLimit)
    sendProblem(reply, status, detail, headers)
  })

  app.setNotFoundHandler((request, reply) => {
    endAfterError(request, reply, options.bodyLimit)
    const allow = options.allowFor(pathOf(request.url))
    if (allow === undefined) {
      sendProblem(reply, 404, 'Nothing is served at this path; the notes are at /api/note.')
    } else if (request.method === 'OPTIONS') {
      reply.code(204).header('allow', allow).send()
    } else {
      sendProblem(reply, 405, `${request.method} is not allowed here; use ${allow}.`, { allow })
    }
  })
}

/**
 * Decides how a connection ends after an error answer (DECISION 18). A request answered before
 * its body has all arrived (a 413 after the headers of a large upload, a 415, a 404 to a POST)
 * closes the connection when the rest of the body is unbounded (chunked) or over the limit, so
 * that the server reads and discards it for a bounded time only and never takes what follows it
 * for a next request; a body within the limit is read to its end, as Node does, and the
 * connection kept. Fastify closes after a body parser's error itself, but not after a 415 or a
 * 404. Whenever the answer closes the connection, the close lingers (lingering-close.ts).
 * 'complete' is still false for a bodiless request while its headers are handled, so the body
 * headers decide whether there is a body at all.
 */
function endAfterError(request: FastifyRequest, reply: FastifyReply, bodyLimit: number): void {
  const { complete, headers, socket } = request.raw
  if (complete === false) {
    const chunked = headers['transfer-encoding'] !== undefined
    const length = Number(headers['content-length'] ?? 0)
    if (chunked || length > bodyLimit) reply.header('connection', 'close')
  }
  if (reply.getHeader('connection') === 'close') lingerOnClose(socket)
}

/**
 * The status and detail a failed request is answered with: 507 for a full store, the error's own
 * 4xx status, and an opaque 500 for anything else (log those: they are bugs).
 */
export function problemForError(
  error: Error & { statusCode?: number; code?: string },
  bodyLimit: number,
): { status: number; detail: string; headers?: Record<string, string> } {
  if (error instanceof StoreUnavailableError) {
    return {
      status: 503,
      detail: `${error.message} Retry in ${error.retryAfterSeconds} s.`,
      headers: { 'retry-after': String(error.retryAfterSeconds) },
    }
  }
  if (error instanceof StoreFullError) {
    return { status: 507, detail: `${error.message} Delete notes to make room.` }
  }
  if (error instanceof IdempotencyKeyReusedError) {
    return {
      status: 422,
      detail: `${error.message} Send a new key for a new note, or the same body to repeat the first request.`,
    }
  }
  const status = statusOf(error)
  if (status >= 500) {
    return { status: 500, detail: 'The server failed to answer this request; it has been logged.' }
  }
  return { status, detail: clientErrorDetail(error, bodyLimit) }
}

/**
 * Fastify's answer for URLs its router cannot read (the `frameworkErrors` option): 400 for a
 * malformed percent-encoding, else as the error handler answers.
 */
export function frameworkErrorHandler(
  options: Pick<ErrorHandlingOptions, 'bodyLimit' | 'failures'>,
): (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void {
  return (error, request, reply) => {
    const { status, detail, headers } =
      error.code === 'FST_ERR_BAD_URL'
        ? { status: 400, detail: 'The URL has a malformed percent-encoding.', headers: undefined }
        : problemForError(error, options.bodyLimit)
    options.failures.report(error, status, detail, request.id)
    sendProblem(reply, status, detail, headers)
  }
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
 * read only the 400. The close lingers (DECISION 18), so a client still sending reads the refusal
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

function statusOf(error: { statusCode?: number | undefined }): number {
  const status = error.statusCode
  return typeof status === 'number' && status >= 400 && status <= 599 ? status : 500
}

function clientErrorDetail(error: Error & { code?: string }, bodyLimit: number): string {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return 'Send the body as JSON: Content-Type application/json (or application/*+json), in UTF-8.'
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return `The request body is larger than the limit of ${bodyLimit} bytes.`
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'The request body is not as long as its Content-Length header says.'
    default:
      return error.message
  }
}

/**
 * The path as the router matched it: query and fragment cut, percent-encoding decoded except
 * for '%2F', which stays inside its segment.
 * '/api/note?x=1' -> '/api/note'; '/api/%6eote#f' -> '/api/note'; '/api%2Fnote' -> '/api%2Fnote'
 */
export function pathOf(url: string): string {
  const end = url.search(/[?#]/)
  const path = end === -1 ? url : url.slice(0, end)
  if (!path.includes('%')) return path
  return path
    .split(/%2f/i)
    .map((part) => {
      try {
        return decodeURIComponent(part)
      } catch {
        return part
      }
    })
    .join('%2F')
}
