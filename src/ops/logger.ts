import { fstatSync } from 'node:fs'
import type { FastifyServerOptions } from 'fastify'
import type { LogLevel } from '../config/value-parsers.js'

/**
 * pino options: JSON lines in production, pino-pretty when a person is watching a terminal.
 * pino-pretty runs in a worker thread, so the request path never waits on formatting.
 *
 * When stdout is a pipe or a socket (a log collector, a container runtime, a test harness), the
 * JSON lines go through `out` (process.stdout) rather than pino's own writer of file descriptor 1.
 * Such a pipe is often non-blocking, and whenever it was full pino's writer slept 100 ms before
 * trying again: at 64 KiB or so per 100 ms it fell behind under request logging (6-9 MB behind
 * after 5 s of 13,000 requests a second), and at SIGTERM the process could not exit until it had
 * caught up, 7.7 s after it had closed. Node's stream writes again as soon as the pipe has room.
 * A file (or /dev/null) never fills that way, and pino's buffered writer is the faster there.
 */
export function loggerOptions(
  level: LogLevel,
  out: NodeJS.WriteStream & { readonly fd: number },
): FastifyServerOptions['logger'] {
  if (out.isTTY === true) {
    return {
      level,
      transport: {
        target: 'pino-pretty',
        options: { translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' },
      },
    }
  }
  return isPipe(out) ? { level, stream: out } : { level }
}

function isPipe(out: { readonly fd: number }): boolean {
  try {
    const stat = fstatSync(out.fd)
    return stat.isFIFO() || stat.isSocket()
  } catch {
    return false
  }
}
