import { createServer, type RequestListener, type Server } from 'node:http'
import type { Config } from './config.js'

export type ServerTimeouts = Pick<
  Config,
  'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'socketTimeoutMs'
>

/**
 * The HTTP/1.1 server the app listens on, with the service's timeouts (DECISION 15). Fastify
 * sets keepAliveTimeout, requestTimeout and the socket timeout only on servers it creates itself,
 * so they are set here for the server made through its `serverFactory`.
 */
export function createHttpServer(listener: RequestListener, timeouts: ServerTimeouts): Server {
  const server = createServer(
    {
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      // Node checks the headers and request timeouts only this often (30 s by default).
      connectionsCheckingInterval: Math.min(1000, timeouts.headersTimeoutMs),
    },
    listener,
  )
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs
  // Ends a connection that has been silent this long, whatever it is doing.
  server.setTimeout(timeouts.socketTimeoutMs)
  return server
}
