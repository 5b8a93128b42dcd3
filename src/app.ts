import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { trackAllowedMethods } from './allowed-methods.js'
import { registerApiDocs } from './api-docs.js'
import { registerCloseConnections } from './close-connections.js'
import type { Config } from './config.js'
import { registerCors } from './cors.js'
import {
  clientErrorHandler,
  frameworkErrorHandler,
  registerErrorHandling,
} from './error-handling.js'
import { withFastLane } from './fast-lane.js'
import { registerHealthChecks } from './health.js'
import { createHttpServer } from './http-server.js'
import { registerJsonBodyParser } from './json-body.js'
import { registerLoadShedding } from './load-shedding.js'
import { createRequestRecorder, registerMetrics } from './metrics.js'
import { buildOpenApiDocument } from './openapi.js'
import { readPackageInfo } from './package-info.js'
import { inOrder } from './pipelining.js'
import { registerRequestIds, requestIdGenerator, withRequestIdHeader } from './request-id.js'
import { setUpLogging } from './request-logging.js'
import { listBody, registerNoteRoutes } from './routes/notes.js'
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
  | 'corsOrigin'
  | 'metrics'
  | 'docs'
  | 'maxEventLoopDelayMs'
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
  const requestId = requestIdGenerator()
  const recorder = config.metrics ? createRequestRecorder() : undefined
  // One cache of the encoded list for both lanes.
  const encodeList = listBody()
  let closing = false
  // The note routes' everyday requests skip Fastify unless a feature that lives in Fastify's hooks
  // is on; `app.inject` always goes through Fastify (tests reach the lane through the listener).
  const fastLane =
    !config.logRequests && config.corsOrigin.length === 0 && config.maxEventLoopDelayMs === 0
  const app: FastifyInstance = Fastify({
    ...logging.options,
    bodyLimit: config.bodyLimit,
    serverFactory: (fastifyHandler) => {
      const listener = fastLane
        ? withFastLane(
            {
              store,
              encodeList,
              bodyLimit: config.bodyLimit,
              maxDepth: config.maxDepth,
              requestId,
              closing: () => closing,
              logError: (err, reqId) => app.log.error({ reqId, err }, 'request failed'),
              record: recorder?.record.bind(recorder),
            },
            fastifyHandler,
          )
        : fastifyHandler
      return createHttpServer(inOrder(listener), config)
    },
    clientErrorHandler,
    frameworkErrors: withRequestIdHeader(frameworkErrorHandler),
    // While closing, Fastify answered requests still arriving on open connections with a bare
    // 503; serve them instead: Fastify adds 'Connection: close', so the client reconnects and
    // is refused (DECISION 16: finish requests in flight, never a 5xx).
    return503OnClosing: false,
    routerOptions: {
      ignoreTrailingSlash: true,
      // Every :id segment reaches parseNoteId, however long, and gets the contract's 404.
      maxParamLength: 16 * 1024,
    },
  })
  logging.attach(app)
  app.addHook('preClose', (done) => {
    closing = true
    done()
  })
  const allowFor = trackAllowedMethods(app)
  registerCloseConnections(app)
  registerLoadShedding(app, { maxEventLoopDelayMs: config.maxEventLoopDelayMs })
  registerJsonBodyParser(app, { maxDepth: config.maxDepth })
  registerErrorHandling(app, { bodyLimit: config.bodyLimit, allowFor })
  // Hooks first, so that they apply to every route registered after them.
  registerRequestIds(app, requestId)
  registerCors(app, { origins: config.corsOrigin })
  if (recorder !== undefined) registerMetrics(app, { store, recorder })
  registerHealthChecks(app)
  const { version } = readPackageInfo()
  const document = buildOpenApiDocument({ version, metrics: config.metrics, docs: config.docs })
  registerApiDocs(app, { document, ui: config.docs })
  registerNoteRoutes(app, store, encodeList)
  return app
}
