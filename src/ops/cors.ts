import type { FastifyCorsOptions } from '@fastify/cors'
import type { FastifyInstance, FastifyRequest } from 'fastify'

export interface CorsOptions {
  /** Origins allowed to call from a browser; `['*']` for any; empty leaves CORS off. */
  origins: readonly string[]
  /** Access keys are on: pages may send Authorization and read WWW-Authenticate. */
  accessKeys?: boolean
  /** Rate limits are on: pages may read the RateLimit-* headers. */
  rateLimits?: boolean
}

/** How long a browser may cache a preflight answer, in seconds. */
const PREFLIGHT_MAX_AGE = 600

/**
 * Lets browser pages on the given origins call the API. With no origins it registers nothing,
 * so a service without CORS pays nothing per request.
 *
 * A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered 204 with the
 * allowed methods and headers. Any other OPTIONS keeps its usual answer (204 with Allow, or 404)
 * and, like every other response, gets Access-Control-Allow-Origin when the origin is allowed.
 */
export function registerCors(app: FastifyInstance, options: CorsOptions): void {
  const { origins, accessKeys = false, rateLimits = false } = options
  if (origins.length === 0) return
  // Besides the CORS-safelisted ones: the conditions, retries and the feed's
  // resume, which a page sends.
  const allowedHeaders = [
    'Content-Type',
    'X-Request-Id',
    'If-Match',
    'If-None-Match',
    'If-Modified-Since',
    'If-Unmodified-Since',
    'Idempotency-Key',
    'Last-Event-ID',
    // A file's ranges, and resumable uploads (tus).
    'Range',
    'If-Range',
    'Tus-Resumable',
    'Upload-Length',
    'Upload-Offset',
    'Upload-Metadata',
  ]
  // Readable by page scripts besides the CORS-safelisted ones (Content-Type, Content-Length,
  // Last-Modified...): versions, pages, replays, and when to retry a 503 or 429.
  const exposedHeaders = [
    'X-Request-Id',
    'Allow',
    'ETag',
    'Notes-Version',
    'X-Total-Count',
    'Link',
    'Idempotent-Replayed',
    'Retry-After',
    'Location',
    'Content-Range',
    'Content-Disposition',
    'Tus-Resumable',
    'Tus-Version',
    'Tus-Extension',
    'Tus-Max-Size',
    'Upload-Offset',
    'Upload-Length',
    'Upload-Metadata',
    'Upload-Expires',
  ]
  if (accessKeys) {
    allowedHeaders.push('Authorization')
    exposedHeaders.push('WWW-Authenticate')
  }
  if (rateLimits) {
    exposedHeaders.push('RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset')
  }
  const common: FastifyCorsOptions = {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowedHeaders,
    exposedHeaders,
    maxAge: PREFLIGHT_MAX_AGE,
  }
  const preflight: FastifyCorsOptions = { ...common, preflight: true }
  // Without preflight handling, @fastify/cors hands OPTIONS on to the not-found handler.
  const other: FastifyCorsOptions = { ...common, preflight: false }
  // Imported only when CORS is on, like everything optional here.
  app.register(import('@fastify/cors'), {
    delegator: (request: FastifyRequest, callback) =>
      callback(null, isPreflight(request) ? preflight : other),
  })
}

function isPreflight(request: FastifyRequest): boolean {
  return (
    request.method === 'OPTIONS' &&
    request.headers.origin !== undefined &&
    request.headers['access-control-request-method'] !== undefined
  )
}
