import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import { PROBLEM_CONTENT_TYPE, problem } from '../api/problem.js'

export interface LoadSheddingOptions {
  /** Mean event-loop delay, in ms over one sample second, above which requests get 503; 0 turns it off. */
  maxEventLoopDelayMs: number
}

/** Seconds a client is told to wait: the pressure is measured again every second. */
const RETRY_AFTER_S = 1

/**
 * When the event loop lags (a stall, or more work than one core can do), answers at once with
 * 503, Retry-After and problem JSON instead of letting every client wait behind the backlog.
 * The answer is sent from @fastify/under-pressure's pressureHandler because the plugin's own error
 * would reach the error handler, which turns every 5xx into an opaque 500; Fastify skips the rest
 * of the request once the reply is sent.
 */
export function registerLoadShedding(app: FastifyInstance, options: LoadSheddingOptions): void {
  if (options.maxEventLoopDelayMs === 0) return
  const body = Buffer.from(
    JSON.stringify(problem(503, `The server is overloaded; retry after ${RETRY_AFTER_S} s.`)),
  )
  app.register(underPressure, {
    maxEventLoopDelay: options.maxEventLoopDelayMs,
    retryAfter: RETRY_AFTER_S,
    pressureHandler: (_request, reply) => {
      reply
        .code(503)
        .header('retry-after', String(RETRY_AFTER_S))
        .header('content-type', PROBLEM_CONTENT_TYPE)
        .send(body)
    },
  })
}
