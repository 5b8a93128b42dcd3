import type { IncomingMessage } from 'node:http'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { trackAllowedMethods } from './api/allowed-methods.js'
import { registerArchiveRoutes } from './api/archive-routes.js'
import { frameworkErrorHandler, registerErrorHandling } from './api/error-handling.js'
import { registerEventRoutes } from './api/event-routes.js'
import { DEFAULT_FEED_TUNING, type FeedTuning } from './api/feed-tuning.js'
import { registerFileRoutes } from './api/file-routes.js'
import { registerJsonBodyParser } from './api/json-body.js'
import { NoteOperations } from './api/note-operations.js'
import { notebookNotesPath, registerNoteRoutes } from './api/note-routes.js'
import { isRefused, type Refused, type Target, targetOf } from './api/notebook-access.js'
import { registerNotebookRoutes } from './api/notebook-routes.js'
import { NotebookServices } from './api/notebook-services.js'
import { problemAnswer } from './api/problem.js'
import { registerUploadRoutes } from './api/upload-routes.js'
import { AccessKeys } from './auth/access-keys.js'
import { Callers, registerCallers } from './auth/callers.js'
import type { UserTokens } from './auth/user-tokens.js'
import type { Config } from './config/config.js'
import { readPackageInfo } from './config/package-info.js'
import { registerCloseConnections } from './http/close-connections.js'
import { withFastLane } from './http/fast-lane.js'
import { createHttpServer } from './http/http-server.js'
import { closeLingering } from './http/lingering-close.js'
import { inOrder } from './http/pipelining.js'
import { clientErrorHandler, endAfterError } from './http/refusals.js'
import { describeService } from './openapi/service-document.js'
import { registerCors } from './ops/cors.js'
import { FailureLog } from './ops/failure-log.js'
import { registerHealthChecks } from './ops/health.js'
import { registerLoadShedding } from './ops/load-shedding.js'
import { createRequestRecorder, registerMetrics } from './ops/metrics.js'
import { registerRateLimits } from './ops/rate-limits.js'
import { registerRequestIds, requestIdGenerator, withRequestIdHeader } from './ops/request-id.js'
import { setUpLogging } from './ops/request-logging.js'
import { turnedOff } from './ops/turned-off.js'
import { registerApiDocs } from './pages/api-docs.js'
import { registerNotesPage } from './pages/notes-page.js'
import { FILE_LIMIT_DEFAULTS, type FileSpace } from './store/files.js'
import { memoryFileStores } from './store/memory/memory-file-stores.js'
import type { Notebooks, NoteStore, StoreGauges } from './store/types.js'
import { SHARED_NOTEBOOK } from './store/types.js'
import type { UploadStaging } from './store/uploads.js'

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
  | 'ui'
  | 'maxEventLoopDelayMs'
  | 'apiKeys'
  | 'apiReadKeys'
  | 'rateLimit'
  | 'rateLimitWindowMs'
  | 'maxEventStreams'
> &
  Partial<
    Pick<
      Config,
      | 'authIssuer'
      | 'authPageClientId'
      | 'authPageScope'
      | 'maxFileBytes'
      | 'maxFilesBytesPerUser'
      | 'maxFilesBytes'
    >
  >

export interface AppOptions {
  /** Where the notes live: one notebook for every request. Give this or `notebooks`. */
  store?: NoteStore
  /**
   * Where the notes live, a notebook per user when `userTokens` is given (and the shared
   * notebook for service keys); without it, every request acts on the shared notebook.
   */
  notebooks?: Notebooks
  /**
   * Where the files live, by notebook; defaults to `notebooks.files`, or files in memory beside a
   * `store` (whose caps are then FILE_LIMIT_DEFAULTS's; beside a memory store they count toward
   * its byte cap too).
   */
  files?: FileSpace
  /**
   * Where resumable uploads keep their bytes until they are files; in memory by default, counted
   * as the files of a memory store are.
   */
  uploads?: UploadStaging
  /** User tokens: each request under /api/ then needs one, or a service key. */
  userTokens?: UserTokens
  /** The clock a remembered user token's expiry is checked against (default Date.now). */
  now?: () => number
  /** Limits and timeouts; `DEFAULT_CONFIG` has the shipped values. */
  config: AppConfig
  /**
   * What each note operation of the shared notebook means and answers, served through both
   * lanes; defaults to `new NoteOperations(store)`. A test passes a subclass to change one
   * operation everywhere.
   */
  operations?: NoteOperations
  /** Fastify's logger option: pino options, or false (the default) for silence. */
  logger?: FastifyServerOptions['logger']
  /** The change feed's pacing, for tests (a heartbeat in ms rather than 15 s); defaults otherwise. */
  feed?: Partial<Omit<FeedTuning, 'maxStreams'>>
}

/** Who the lane serves when neither keys nor tokens are on: everyone, on the shared notebook. */
const OPEN_CALLER = { notebook: SHARED_NOTEBOOK, user: undefined } as const

/**
 * Builds the notes service without listening: tests call it through `inject`, the server
 * listens on it. Timeouts and limits are set here so both run the same server.
 */
export function buildApp({
  store,
  notebooks,
  files,
  uploads,
  userTokens,
  now,
  config,
  operations,
  logger = false,
  feed: feedTuning,
}: AppOptions): FastifyInstance {
  if ((store === undefined) === (notebooks === undefined)) {
    throw new TypeError('buildApp needs a store or notebooks, and not both.')
  }
  if (userTokens !== undefined && notebooks === undefined) {
    throw new TypeError('User tokens need notebooks: one per user.')
  }
  const storeOf = (notebook: string): NoteStore =>
    notebooks === undefined ? (store as NoteStore) : notebooks.notebook(notebook)
  /** What the health checks and metrics read: every notebook at once. */
  const whole = (notebooks ?? store) as StoreGauges
  const logging = setUpLogging(logger, config.logRequests)
  const requestId = requestIdGenerator()
  // One log for the failures of both lanes; `app.log` is read when something is logged.
  const failures = new FailureLog(() => app.log)
  const recorder = config.metrics ? createRequestRecorder() : undefined
  const accessKeys =
    config.apiKeys.length + config.apiReadKeys.length > 0
      ? new AccessKeys({ keys: config.apiKeys, readKeys: config.apiReadKeys })
      : undefined
  const callers = new Callers({ accessKeys, userTokens, ...(now === undefined ? {} : { now }) })
  const tuning: FeedTuning = {
    ...DEFAULT_FEED_TUNING,
    ...feedTuning,
    maxStreams: config.maxEventStreams,
  }
  // A stream must hear something before the socket timeout would close it as silent.
  tuning.heartbeatMs = Math.min(tuning.heartbeatMs, Math.ceil(config.socketTimeoutMs / 2))
  // Who may see which notebook: with user tokens, the notebooks' own directory.
  const directory = userTokens === undefined ? undefined : notebooks?.directory
  const services = new NotebookServices({
    storeOf,
    writerFor: directory === undefined ? undefined : notebooks?.writerFor.bind(notebooks),
    tuning,
    // With a notebook per user, no user holds more than a tenth of the streams.
    streamsPerNotebook:
      userTokens === undefined ? undefined : Math.max(1, Math.floor(tuning.maxStreams / 10)),
    onError: (err) => app.log.error({ err }, 'the change feed could not read the store'),
    closeConnection: closeLingering,
    ...(operations === undefined
      ? {}
      : {
          operations: (notebookStore, notebook) =>
            notebook === SHARED_NOTEBOOK ? operations : new NoteOperations(notebookStore),
        }),
  })
  const shared = services.operations(SHARED_NOTEBOOK)
  // Who the lane may serve, and from which notebook, decided without waiting.
  const operationsFor = !callers.guarding
    ? () => shared
    : (request: IncomingMessage) => {
        const decision = callers.decideNow(request)
        if (decision === undefined || !decision.allowed) return undefined
        return decision.notebook === SHARED_NOTEBOOK
          ? shared
          : services.operations(decision.notebook)
      }
  // The same for a notebook the path names (`me`, or one the caller is a member of).
  const operationsIn = (request: IncomingMessage, nb: string, write: boolean) => {
    const decision = callers.guarding ? callers.decideNow(request) : OPEN_CALLER
    if (decision === undefined || ('allowed' in decision && !decision.allowed)) return undefined
    const scope = (target: Target | Refused) => {
      if (isRefused(target)) return problemAnswer(target.status, target.detail)
      const { store, guardedFor } = target
      if (write && guardedFor !== undefined) return services.operationsAs(store, guardedFor)
      return services.operations(store, notebookNotesPath(nb))
    }
    const target = targetOf(decision, nb, directory, write)
    return target instanceof Promise ? target.then(scope) : scope(target)
  }
  let closing = false
  // The note routes' everyday requests skip Fastify unless a feature that lives in Fastify's hooks
  // is on; `app.inject` always goes through Fastify (tests reach the lane through the listener).
  // With access keys on, the lane takes only what the keys allow; Fastify answers the rest.
  const fastLane =
    !config.logRequests &&
    config.corsOrigin.length === 0 &&
    config.maxEventLoopDelayMs === 0 &&
    config.rateLimit === 0
  const app: FastifyInstance = Fastify({
    ...logging.options,
    bodyLimit: config.bodyLimit,
    serverFactory: (fastifyHandler) => {
      const listener = fastLane
        ? withFastLane(
            {
              operationsFor,
              operationsIn,
              bodyLimit: config.bodyLimit,
              maxDepth: config.maxDepth,
              requestId,
              closing: () => closing,
              failures,
              record: recorder?.record.bind(recorder),
            },
            fastifyHandler,
          )
        : fastifyHandler
      return createHttpServer(inOrder(listener), config)
    },
    clientErrorHandler: clientErrorHandler(requestId.next),
    frameworkErrors: withRequestIdHeader(
      frameworkErrorHandler({ bodyLimit: config.bodyLimit, failures }),
    ),
    // While closing, Fastify answered requests still arriving on open connections with a bare
    // 503; serve them instead: Fastify adds 'Connection: close', so the client reconnects and
    // is refused (finish requests in flight, never a 5xx).
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
  app.addHook('onClose', (_instance, done) => {
    failures.flush()
    done()
  })
  const allowFor = trackAllowedMethods(app)
  registerCloseConnections(app)
  registerLoadShedding(app, { maxEventLoopDelayMs: config.maxEventLoopDelayMs })
  registerJsonBodyParser(app, { maxDepth: config.maxDepth })
  registerErrorHandling(app, {
    bodyLimit: config.bodyLimit,
    allowFor,
    failures,
    endConnection: (request, reply) => endAfterError(request, reply, config.bodyLimit),
    turnedOff: turnedOff(config),
  })
  // Hooks first, so that they apply to every route registered after them.
  registerRequestIds(app, requestId)
  registerCors(app, {
    origins: config.corsOrigin,
    // An Authorization header: a service key or a user token.
    accessKeys: callers.guarding,
    rateLimits: config.rateLimit > 0,
  })
  // Counted before the access check, so that guessing keys is limited too.
  registerRateLimits(app, {
    max: config.rateLimit,
    windowMs: config.rateLimitWindowMs,
    keyOf: callers.guarding
      ? (request) => callers.decideNow(request.raw, request.routeOptions.url)?.key
      : undefined,
  })
  registerCallers(app, callers)
  if (recorder !== undefined) registerMetrics(app, { store: whole, recorder })
  registerHealthChecks(app, whole)
  const { version } = readPackageInfo()
  const document = describeService({
    version,
    metrics: config.metrics,
    docs: config.docs,
    ui: config.ui,
    accessKeys: accessKeys !== undefined,
    userTokens: userTokens !== undefined,
    rateLimits: config.rateLimit > 0,
    cors: config.corsOrigin.length > 0,
    loadShedding: config.maxEventLoopDelayMs > 0,
  })
  registerApiDocs(app, { document, ui: config.docs })
  if (config.ui) {
    const { authIssuer: issuer = '', authPageClientId: clientId = '' } = config
    const scope = config.authPageScope ?? 'openid'
    registerNotesPage(app, clientId === '' ? undefined : { issuer, clientId, scope })
  }
  const inMemory = memoryFileStores({ store, notebooks })
  const staging = uploads ?? inMemory.uploads
  if (directory !== undefined) {
    registerNotebookRoutes(app, {
      directory,
      services,
      uploads: staging,
      ...(now === undefined ? {} : { now }),
    })
    const stop = services.watch(directory)
    app.addHook('onClose', (_instance, done) => {
      stop()
      done()
    })
  }
  registerNoteRoutes(app, services, directory)
  registerArchiveRoutes(app, services, directory)
  const space = files ?? notebooks?.files ?? inMemory.files
  const maxFileBytes = config.maxFileBytes ?? FILE_LIMIT_DEFAULTS.maxFileBytes
  registerFileRoutes(app, { space, directory, maxFileBytes })
  registerUploadRoutes(app, {
    space,
    staging,
    directory,
    limits: {
      maxFileBytes,
      maxNotebookBytes: config.maxFilesBytesPerUser ?? FILE_LIMIT_DEFAULTS.maxNotebookBytes,
      maxBytes: config.maxFilesBytes ?? FILE_LIMIT_DEFAULTS.maxBytes,
    },
    ...(now === undefined ? {} : { now }),
  })
  registerEventRoutes(app, services, directory)
  return app
}
