import type { FastifyServerOptions } from 'fastify'
import type { LogLevel } from '../config/config.js'

/**
 * pino options: JSON lines in production, pino-pretty when a person is watching a terminal.
 * pino-pretty runs in a worker thread, so the request path never waits on formatting.
 *
 * The JSON lines go through `out` (process.stdout), not pino's own writer of file descriptor 1.
 * A pipe that a log collector (or a test harness) reads is non-blocking, and whenever it was full
 * pino's writer slept 100 ms before trying again: writing at most 64 KiB per 100 ms, it fell
 * behind under request logging (6-9 MB behind after 5 s of 13,000 requests a second), and at
 * SIGTERM the process could not exit until it had caught up, 7.7 s after it had closed. Node's
 * stream writes again as soon as the pipe has room.
 */
export function loggerOptions(
  level: LogLevel,
  out: NodeJS.WriteStream,
): FastifyServerOptions['logger'] {
  if (out.isTTY !== true) return { level, stream: out }
  return {
    level,
    transport: {
      target: 'pino-pretty',
      options: { translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' },
    },
  }
}
