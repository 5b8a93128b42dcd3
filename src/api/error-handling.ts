import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { FileTooLargeError } from '../store/files.js'
import {
  AccessLostError,
  IdempotencyKeyReusedError,
  StoreFullError,
  StoreUnavailableError,
} from '../store/types.js'
import { NO_NOTEBOOK, needsRoleDetail } from './notebook-access.js'
import { sendProblem } from './problem.js'
import { pathOf } from './request-target.js'

/** Where a failed request is reported (ops/failure-log.ts's FailureLog is one). */
export interface FailureReporter {
  report(error: unknown, status: number, detail: string, requestId: string): void
}

export interface ErrorHandlingOptions {
  bodyLimit: number
  /** Answers the Allow header for a path the app serves, undefined for any other path. */
  allowFor: (path: string) => string | undefined
  /** Where failed requests are logged; the fast lane reports to the same one. */
  failures: FailureReporter
  /**
   * Decides, before an error answer is sent, whether it closes the connection, and makes that
   * close linger (http/refusals.ts's endAfterError): the connection is the server's business.
   */
  endConnection: (request: FastifyRequest, reply: FastifyReply) => void
  /**
   * For a path of a feature that is turned off (/docs, /metrics), the 404's detail saying so and
   * which setting turns it on; undefined for any other path.
   */
  turnedOff?: (path: string) => string | undefined
}

/**
 * The one place errors become responses: RFC 9457 problem JSON for every error we own,
 * 405 with Allow for a known path and an unknown method, 204 with Allow for OPTIONS.
 */
export function registerErrorHandling(app: FastifyInstance, options: ErrorHandlingOptions): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const { status, detail, headers } = problemForError(error, options.bodyLimit)
    options.failures.report(error, status, detail, request.id)
    options.endConnection(request, reply)
    sendProblem(reply, status, detail, headers)
  })

  app.setNotFoundHandler((request, reply) => {
    options.endConnection(request, reply)
    const path = pathOf(request.url)
    const allow = options.allowFor(path)
    if (allow === undefined) {
      const detail =
        options.turnedOff?.(path) ?? 'Nothing is served at this path; the notes are at /api/note.'
      sendProblem(reply, 404, detail)
    } else if (request.method === 'OPTIONS') {
      reply.code(204).header('allow', allow).send()
    } else {
      sendProblem(reply, 405, `${request.method} is not allowed here; use ${allow}.`, { allow })
    }
  })
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
  if (error instanceof AccessLostError) {
    // Removed or demoted while the request was on its way: answered for the role held now.
    return error.role === undefined
      ? { status: 404, detail: NO_NOTEBOOK }
      : { status: 403, detail: needsRoleDetail('editor', error.role) }
  }
  if (error instanceof FileTooLargeError) {
    return { status: 413, detail: `${error.message} Send a smaller file.` }
  }
  if (error instanceof StoreFullError) {
    return { status: 507, detail: `${error.message} ${error.advice}` }
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
