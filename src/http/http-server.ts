import { type RequestListener, Server } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { Config } from '../config/config.js'
import { closeLingering, lingerOnClose } from './lingering-close.js'
import { lastResponseOn } from './pipelining.js'

export type ServerTimeouts = Pick<
  Config,
  'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'socketTimeoutMs'
>

/**
 * The HTTP/1.1 server the app listens on, with the service's timeouts. Fastify
 * sets keepAliveTimeout, requestTimeout and the socket timeout only on servers it creates itself,
 * so they are set here for the server made through its `serverFactory`.
 */
export function createHttpServer(listener: RequestListener, timeouts: ServerTimeouts): Server {
  return new ServiceServer(listener, timeouts)
}

/**
 * node:http's Server, except that closing it does not destroy the connections that are between
 * requests at once. Node's close() and Fastify's close() call
 * closeIdleConnections(), which did: a keep-alive client that had just sent its next request met
 * a reset (all 32 of 32 clients looping POSTs did). Here such a connection stays open: a request
 * that arrives on it is served with `Connection: close` (Fastify adds it while closing; the fast
 * lane leaves those requests to Fastify), and a connection still silent after the keep-alive
 * timeout (what `Keep-Alive: timeout=N` told the client; a client does not reuse a connection
 * idle that long) is closed then. server.ts cuts whatever is left at the shutdown deadline.
 * Every connection closes lingering from then on (lingering-close.ts), so a client that pipelined
 * a request behind its last answer reads that answer rather than a reset.
 */
class ServiceServer extends Server {
  readonly #connections = new Map<Socket, Traffic>()
  readonly #socketTimeoutMs: number
  #timer: NodeJS.Timeout | undefined
  #draining = false

  constructor(listener: RequestListener, timeouts: ServerTimeouts) {
    super(
      {
        headersTimeout: timeouts.headersTimeoutMs,
        requestTimeout: timeouts.requestTimeoutMs,
        // Node checks the headers and request timeouts only this often (30 s by default).
        connectionsCheckingInterval: checkingInterval(timeouts.headersTimeoutMs),
      },
      listener,
    )
    this.keepAliveTimeout = timeouts.keepAliveTimeoutMs
    this.#socketTimeoutMs = timeouts.socketTimeoutMs
    this.on('connection', (socket: Socket) => {
      this.#connections.set(socket, { bytes: 0, since: performance.now() })
      socket.once('close', () => this.#connections.delete(socket))
    })
    this.on('listening', () => {
      clearInterval(this.#timer)
      this.#timer = setInterval(() => this.#check(), checkingInterval(this.#socketTimeoutMs))
      this.#timer.unref()
    })
    this.on('close', () => clearInterval(this.#timer))
  }

  /** Begins draining (see the class); called by close(), by Fastify's close(), or directly. */
  override closeIdleConnections(): void {
    if (!this.#draining) {
      this.#draining = true
      for (const socket of this.#connections.keys()) lingerOnClose(socket)
    }
    this.#check()
  }

  /**
   * Ends every connection that has had no traffic either way for the socket timeout (a client
   * that stops reading its responses is the usual case), as `server.setTimeout` would. That
   * re-arms a timer on every read and write of every connection (about 1.3% of the instructions
   * of a PATCH, bench W5); this looks at the byte counters of the open connections once a second
   * instead, so it costs nothing per request. Like Node's timeout, it sees progress only up to
   * the kernel: a client still draining the kernel's buffers looks silent.
   * While draining, it also closes connections that are between requests and have been silent
   * for the keep-alive timeout.
   */
  #check(): void {
    const now = performance.now()
    for (const [socket, traffic] of this.#connections) {
      const bytes = sentOrReceived(socket)
      if (bytes !== traffic.bytes) {
        traffic.bytes = bytes
        traffic.since = now
      } else if (now - traffic.since >= this.#socketTimeoutMs) {
        socket.destroy()
      } else if (
        this.#draining &&
        now - traffic.since >= this.keepAliveTimeout &&
        lastResponseOn(socket) === undefined
      ) {
        closeLingering(socket)
      }
    }
  }
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
 * test/http/raw-socket.unit.test.ts 'keeps a client that reads a large response slowly' checks it.
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
