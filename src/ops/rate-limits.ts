import rateLimit, { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpProblem } from '../api/problem.js'

export interface RateLimitsOptions {
  /** Requests per window per client; 0 turns rate limiting off. */
  max: number
  /** The window, in ms. */
  windowMs: number
  /**
   * The access key a request carries, named (never the key itself), when it is a valid one:
   * it is counted under that key, wherever it comes from. Without, it counts for its address.
   */
  keyOf?: ((request: FastifyRequest) => string | undefined) | undefined
}

/** Not counted, and answered without RateLimit headers: a health check must never get 429. */
export const RATE_LIMIT_EXEMPT: ReadonlySet<string> = new Set(['/healthz', '/readyz'])

/**
 * At most `max` requests per `windowMs` per client, counted with
 * @fastify/rate-limit in a fixed window that starts at the client's first request. A client is
 * its access key when it sends a valid one, else its address (an IPv6 address by its /64, as
 * the plugin does by default). Every answer carries `RateLimit-Limit`, `RateLimit-Remaining`
 * and `RateLimit-Reset` (seconds until the window ends; the IETF draft's names); past the limit
 * the answer is 429 with `Retry-After` and problem JSON.
 *
 * The counting hook runs on every request Fastify answers, the 404s and 405s of the not-found
 * handler included, before the access check, so refused keys are counted against their address.
 * The plugin's own per-route hooks would miss the not-found handler, so the plugin is registered
 * with `global: false` and its handler added as one onRequest hook for the whole app.
 * The fast lane does not take requests while this is on (app.ts), so every request is counted.
 * Not counted, and without the headers: the health checks, CORS preflights (answered by the CORS
 * hook before this one, so that a 429 still carries the CORS headers a page needs to read it),
 * load shedding's 503s, and what is answered before any hook (a URL Fastify cannot decode, and
 * the 400/408/431 of Node's parser).
 * Counts live in this process, in an LRU of the plugin's size (5,000 clients); each instance
 * counts for itself. The plugin's LocalStore hands every request of a client the same counter
 * object and reads it after an await, so requests of one client started in the same tick would
 * all see the last count; requests from the network each start in their own tick (pipelined ones
 * run one after another, http/pipelining.ts), so each sees its own.
 */
export function registerRateLimits(app: FastifyInstance, options: RateLimitsOptions): void {
  const { max, windowMs, keyOf } = options
  if (max === 0) return
  app.register(rateLimit, {
    global: false,
    max,
    timeWindow: windowMs,
    enableDraftSpec: true,
    keyGenerator: (request) => {
      const key = keyOf?.(request)
      if (key !== undefined) return `key ${key}`
      // request.ip is the socket's remoteAddress, which Node forgets once the socket is gone.
      const ip = request.ip as string | undefined
      return ip === undefined ? 'address unknown' : `address ${normalizeIP(ip)}`
    },
    allowList: (request) => RATE_LIMIT_EXEMPT.has(request.routeOptions.url ?? ''),
    // Thrown, so it reaches the app's error handler, which answers it as problem JSON.
    errorResponseBuilder: (_request, context) =>
      new HttpProblem(
        429,
        `Too many requests: the limit is ${context.max} per ${windowText(windowMs)}; retry after ${Math.ceil(context.ttl / 1000)} s.`,
      ),
  })
  let limit: ((request: FastifyRequest, reply: unknown) => Promise<void>) | undefined
  // The plugin's decorator exists once it has loaded, which is before the app is ready.
  app.addHook('onReady', (done) => {
    limit = app.rateLimit() as typeof limit
    done()
  })
  app.addHook('onRequest', (request, reply) => (limit as NonNullable<typeof limit>)(request, reply))
}

/** 60000 -> '60 s', 1500 -> '1500 ms' */
function windowText(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`
}
