import { createServer, type RequestListener, type Server } from 'node:http'
import type { Socket } from 'node:net'
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
      connectionsCheckingInterval: checkingInterval(timeouts.headersTimeoutMs),
    },
    listener,
  )
  server.keepAliveTimeout = timeouts.keepAliveTimeoutMs
  endSilentConnections(server, timeouts.socketTimeoutMs)
  return server
}

/** How often a timeout of `ms` is checked: every second, or four times within a shorter one. */
function checkingInterval(ms: number): number {
  return Math.max(1, Math.min(1000, Math.ceil(ms / 4)))
}

interface Traffic {
  /** Bytes read plus bytes written on the connection when last checked. */
  bytes: number
  /** Date.now() when `bytes` last changed. */
  since: number
}

/**
 * Ends every connection that has had no traffic either way for `timeoutMs` (checked once a
 * second; a client that stops reading its responses is the usual case), as `server.setTimeout`
 * would. That re-arms a timer on every read and write of every connection (about 1.3% of the
 * instructions of a PATCH, bench W5); this looks at the byte counters of the open connections
 * once a second instead, so it costs nothing per request.
 */
export function endSilentConnections(server: Server, timeoutMs: number): void {
  const connections = new Map<Socket, Traffic>()
  let timer: NodeJS.Timeout | undefined
  const check = (): void => {
    const now = Date.now()
    for (const [socket, traffic] of connections) {
      const bytes = socket.bytesRead + socket.bytesWritten
      if (bytes !== traffic.bytes) {
        traffic.bytes = bytes
        traffic.since = now
      } else if (now - traffic.since >= timeoutMs) {
        socket.destroy()
      }
    }
  }
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { bytes: 0, since: Date.now() })
    socket.once('close', () => connections.delete(socket))
  })
  server.on('listening', () => {
    clearInterval(timer)
    timer = setInterval(check, checkingInterval(timeoutMs))
    timer.unref()
  })
  server.on('close', () => clearInterval(timer))
}
