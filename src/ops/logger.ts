import type { FastifyServerOptions } from 'fastify'
import type { LogLevel } from '../config/config.js'

/**
 * pino options: JSON lines in production, pino-pretty when a person is watching a terminal.
 * pino-pretty runs in a worker thread, so the request path never waits on formatting.
 */
export function loggerOptions(level: LogLevel, isTty: boolean): FastifyServerOptions['logger'] {
  if (!isTty) return { level }
  return {
    level,
    transport: {
      target: 'pino-pretty',
      options: { translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' },
    },
  }
}
