import { createServer, type RequestListener, type Server } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { Config } from '../config/config.js'

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
  /** sentOrReceived(socket) when last checked. */
  bytes: number
  /** performance.now() when `bytes` last changed. */
  since: number
}

/**
 * libuv's stream handle; Node's own socket timeout reads `writeQueueSize` the same way (in Node
 * 20 and 24 alike). Without it, a client reading a large response slowly would be dropped:
 * test/raw-socket.test.ts 'keeps a client that reads a large response slowly' checks it.
 */
type SocketWithHandle = Socket & { _handle?: { writeQueueSize?: number } | null }

/**
 * Bytes read from the connection plus bytes handed to the kernel. `bytesWritten` also counts what
 * still waits in libuv's write queue, all of a large response as soon as it is written, so a
 * client reading it slowly but steadily would look silent without taking the queue off.
 */
function sentOrReceived(socket: SocketWithHandle): number {
  return socket.bytesRead + socket.bytesWritten - (socket._handle?.writeQueueSize ?? 0)
}

/**
 * Ends every connection that has had no traffic either way for `timeoutMs` (checked once a
 * second; a client that stops reading its responses is the usual case), as `server.setTimeout`
 * would. That re-arms a timer on every read and write of every connection (about 1.3% of the
 * instructions of a PATCH, bench W5); this looks at the byte counters of the open connections
 * once a second instead, so it costs nothing per request. Like Node's timeout, it sees progress
 * only up to the kernel: a client still draining the kernel's buffers looks silent.
 */
export function endSilentConnections(server: Server, timeoutMs: number): void {
  const connections = new Map<Socket, Traffic>()
  let timer: NodeJS.Timeout | undefined
  const check = (): void => {
    const now = performance.now()
    for (const [socket, traffic] of connections) {
      const bytes = sentOrReceived(socket)
      if (bytes !== traffic.bytes) {
        traffic.bytes = bytes
        traffic.since = now
      } else if (now - traffic.since >= timeoutMs) {
        socket.destroy()
      }
    }
  }
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { bytes: 0, since: performance.now() })
    socket.once('close', () => connections.delete(socket))
  })
  server.on('listening', () => {
    clearInterval(timer)
    timer = setInterval(check, checkingInterval(timeoutMs))
    timer.unref()
  })
  server.on('close', () => clearInterval(timer))
}
