import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { trackAllowedMethods } from './allowed-methods.js'
import type { Config } from './config.js'
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './error-handling.js'
import { registerJsonBodyParser } from './json-body.js'
import { setUpLogging } from './request-logging.js'
import { registerNoteRoutes } from './routes/notes.js'
import type { NoteStore } from './store/types.js'

export type AppConfig = Pick<
  Config,
  | 'bodyLimit'
  | 'maxDepth'
  | 'logRequests'
  | 'headersTimeoutMs'
  | 'requestTimeoutMs'
  | 'keepAliveTimeoutMs'
  | 'socketTimeoutMs'
>

export interface AppOptions {
  /** Where the notes live. */
  store: NoteStore
  /** Limits and timeouts; `DEFAULT_CONFIG` has the shipped values. */
  config: AppConfig
  /** Fastify's logger option: pino options, or false (the default) for silence. */
  logger?: FastifyServerOptions['logger']
}

/**
 * Builds the notes service without listening: tests call it through `inject`, the server
 * listens on it. Timeouts and limits are set here so both run the same server.
 */
export function buildApp({ store, config, logger = false }: AppOptions): FastifyInstance {
  const logging = setUpLogging(logger, config.logRequests)
  const app = Fastify({
    ...logging.options,
    bodyLimit: config.bodyLimit,
    connectionTimeout: config.socketTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    http: {
      headersTimeout: config.headersTimeoutMs,
      // Node checks the two timeouts above only this often (30 s by default).
      connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
    },
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    routerOptions: {
      ignoreTrailingSlash: true,
      // Every :id segment reaches parseNoteId, however long, and gets the contract's 404.
      maxParamLength: 16 * 1024,
    },
  })
  logging.attach(app)
  const allowFor = trackAllowedMethods(app)
  registerJsonBodyParser(app, { maxDepth: config.maxDepth })
  registerErrorHandling(app, { bodyLimit: config.bodyLimit, allowFor })
  registerNoteRoutes(app, store)
  return app
}
