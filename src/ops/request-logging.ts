import {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  type FastifyServerOptions,
  LogController,
} from 'fastify'
import pino, { type Bindings, type ChildLoggerOptions, type Level, type Logger } from 'pino'
import { tokenInQuery } from '../api/request-target.js'

type LoggerOption = FastifyServerOptions['logger']

/**
 * Never written to a log, whatever is logged: the access key in an Authorization header (in case
 * a request's headers are ever logged; Fastify's request serializer leaves them out), and the raw
 * bytes of a request Node's parser refused (`err.rawPacket`, which holds its headers).
 */
const REDACTED_PATHS = [
  'req.headers.authorization',
  'request.headers.authorization',
  'headers.authorization',
  'err.rawPacket',
]

export interface Logging {
  /** Spread into Fastify's options. */
  options: Pick<FastifyServerOptions, 'logger' | 'logController' | 'childLoggerFactory'>
  /** Makes `app.log` the service's logger; call right after `Fastify(...)`. */
  attach: (app: FastifyInstance) => void
}

/**
 * How the app logs. With request logging on, Fastify gets the logger as usual. With it off (the
 * default), Fastify's own logger would still cost every request a pino child and two response
 * listeners, about a tenth of a small GET (bench W1, bench/README.md). So Fastify then
 * gets no logger: `app.log` is set to the service's logger, and each request's `request.log` is
 * a stand-in that makes the real child (with its reqId) only when something is logged.
 * `false` means no logging at all, as in the tests.
 */
export function setUpLogging(logger: LoggerOption, logRequests: boolean): Logging {
  if (logger === false || logger === undefined) {
    return { options: { logger: false }, attach: () => {} }
  }
  if (logRequests) {
    return {
      options: {
        logger: withRedaction(logger),
        logController: new LogController({ disableRequestLogging: false }),
      },
      attach: () => {},
    }
  }
  const root = rootLogger(withRedaction(logger))
  return {
    options: {
      logger: false,
      logController: new LogController({ disableRequestLogging: true }),
      childLoggerFactory: (_nullLogger, bindings, options) =>
        new LazyChild(root, bindings, options),
    },
    attach: (app) => {
      app.log = root
    },
  }
}

/** What a JWT looks like: its header, a JSON object in base64url, starts with 'eyJ' ('{"'). */
const JWT_SHAPE = /eyJ[\w-]*\.[\w-]*\.[\w-]*/g

/**
 * A request's target as logged: as sent, but for a query holding a user token (`access_token`,
 * which the service refuses), left out whole, and anything shaped like a JWT elsewhere in it.
 * '/api/note?limit=2' -> itself; '/api/note?access_token=eyJ...' -> '/api/note?[left out: it
 * holds an access_token]'; '/api/note/eyJa.b.c' -> '/api/note/[a JWT, left out]'
 */
function loggedUrl(url: string): string {
  if (tokenInQuery(url))
    return `${url.slice(0, url.indexOf('?'))}?[left out: it holds an access_token]`
  return url.includes('eyJ') ? url.replace(JWT_SHAPE, '[a JWT, left out]') : url
}

/** Fastify's request serializer, with the URL as `loggedUrl` gives it. */
function requestSerializer(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: loggedUrl(request.url),
    version: request.headers['accept-version'],
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  }
}

/** `logger` with REDACTED_PATHS added to its own `redact` paths, and URLs as `loggedUrl` gives them. */
function withRedaction(logger: LoggerOption): NonNullable<LoggerOption> {
  const options = typeof logger === 'object' && logger !== null ? logger : {}
  const own = (options as pino.LoggerOptions).redact
  const paths = Array.isArray(own) ? own : (own?.paths ?? [])
  const redact =
    own === undefined || Array.isArray(own)
      ? [...paths, ...REDACTED_PATHS]
      : { ...own, paths: [...paths, ...REDACTED_PATHS] }
  const serializers = { req: requestSerializer, ...(options as pino.LoggerOptions).serializers }
  return { ...options, redact, serializers } as NonNullable<LoggerOption>
}

/** The logger Fastify would have made from these options (pino; `stream` as Fastify takes it). */
function rootLogger(logger: LoggerOption): Logger {
  const options = typeof logger === 'object' && logger !== null ? logger : {}
  const { stream, ...pinoOptions } = options as pino.LoggerOptions & {
    stream?: pino.DestinationStream
  }
  return pino(
    {
      level: 'info',
      ...pinoOptions,
      serializers: { err: pino.stdSerializers.err, ...pinoOptions.serializers },
    },
    stream,
  )
}

/** A request's logger: the pino child with the request's bindings, made on the first log call. */
class LazyChild implements FastifyBaseLogger {
  readonly #parent: Logger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: Logger | undefined

  constructor(parent: Logger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  get level(): string {
    return (this.#child ?? this.#parent).level
  }

  set level(level: string) {
    this.#real().level = level
  }

  fatal(...args: unknown[]): void {
    this.#log('fatal', args)
  }
  error(...args: unknown[]): void {
    this.#log('error', args)
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args)
  }
  info(...args: unknown[]): void {
    this.#log('info', args)
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args)
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args)
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options)
  }

  #real(): Logger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options)
    return this.#child
  }

  #log(level: Level, args: unknown[]): void {
    // Skip making a child for a line the parent would drop (unless the route sets its own level).
    if (this.#child === undefined && this.#options.level === undefined) {
      if (!this.#parent.isLevelEnabled(level)) return
    }
    const child = this.#real()
    ;(child[level] as (...values: unknown[]) => void).apply(child, args)
  }
}
