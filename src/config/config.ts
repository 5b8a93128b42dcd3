import {
  boolean,
  databaseUrl,
  decimal,
  host,
  integer,
  jwksUrl,
  jwtSecret,
  keys,
  type LogLevel,
  logLevel,
  origins,
  type Rejection,
  text,
  tokenTypes,
} from './value-parsers.js'

/*
 * The settings table (OPTIONS: each setting's variable, flag, default and parser, value-parsers.ts)
 * and loadConfig, which reads the whole configuration from it and checks the settings together.
 */

const KIB = 1024
const MIB = 1024 * KIB
const GIB = 1024 * MIB

/** Everything the service can be told at start-up. */
export interface Config {
  /** TCP port to listen on; 0 picks a free one. */
  port: number
  /** Address to listen on. */
  host: string
  /** Largest request body accepted, in bytes (413 above it). */
  bodyLimit: number
  /**
   * How many levels of objects and arrays a note field's value may nest (400 above it); the body
   * object itself is not counted: {"a":[[1]]} nests 2, {"a":1} nests 0.
   */
  maxDepth: number
  /** Most notes stored at once (507 above it). */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON stored at once (507 above it). */
  maxStoreBytes: number
  logLevel: LogLevel
  /** Log one line per request and response, at info. */
  logRequests: boolean
  /** Time a client has to send the request headers, in ms (408 after it). */
  headersTimeoutMs: number
  /** Time a client has to send the whole request, in ms (408 after it). */
  requestTimeoutMs: number
  /** How long an idle keep-alive connection stays open, in ms. */
  keepAliveTimeoutMs: number
  /** A connection with no traffic either way for this long is closed, in ms. */
  socketTimeoutMs: number
  /** Longest a graceful shutdown waits for in-flight requests before closing them, in ms. */
  shutdownTimeoutMs: number
  /** Browser origins allowed to call the API (CORS); empty turns CORS off, `['*']` allows any. */
  corsOrigin: readonly string[]
  /** Serve Prometheus metrics at /metrics and measure every request for them. */
  metrics: boolean
  /** Serve the API reference page at /docs. */
  docs: boolean
  /** Serve the notes page at / (and its files under /ui/). */
  ui: boolean
  /** Mean event-loop delay over a second above which requests get 503 + Retry-After, in ms; 0 is off. */
  maxEventLoopDelayMs: number
  /**
   * Access keys that may read and write. With any key here or in `apiReadKeys`, every request
   * under /api/ and /metrics needs `Authorization: Bearer <key>` (401 without, 403 for a write
   * with a read key); empty (the default) leaves the API open.
   */
  apiKeys: readonly string[]
  /** Access keys that may only read: GET and HEAD. */
  apiReadKeys: readonly string[]
  /** Requests per `rateLimitWindowMs` per access key, or per client address without keys (429 above it); 0 is off. */
  rateLimit: number
  /** The window `rateLimit` counts in, in ms. */
  rateLimitWindowMs: number
  /** Changes the store keeps for the change feed to replay (an older `since` gets a reset). */
  changeHistory: number
  /** Change-feed streams open at once (503 above it). */
  maxEventStreams: number
  /** Revisions one note keeps, its current state included; 0 keeps its current state alone. */
  noteHistory: number
  /** Days a revision is kept (fractions allowed). */
  historyDays: number
  /** UTF-8 bytes of past revisions kept over the whole service; the oldest go first. */
  maxHistoryBytes: number
  /** Days a deleted note stays in the trash, counted toward the caps (fractions allowed); 0 turns it off. */
  trashDays: number
  /** Largest file one upload stores, in bytes (413 above it). */
  maxFileBytes: number
  /** Most bytes of files one notebook holds (507 above it). */
  maxFilesBytesPerUser: number
  /** Most bytes of files the service holds (507 above it). */
  maxFilesBytes: number
  /** Hours a file no note refers to is kept after its upload or its last reference (fractions allowed). */
  fileGraceHours: number
  /**
   * `postgres://user:password@host:port/database`: keep the notes in PostgreSQL, shared by every
   * instance given the same URL; empty (the default) keeps them in memory.
   */
  databaseUrl: string
  /**
   * The secret user tokens are signed with (HS256, at least 32 UTF-8 bytes): with it, every
   * request under /api/ needs a user token or a service key, and each user has a notebook of
   * their own. Empty (the default) leaves user tokens off.
   */
  authJwtSecret: string
  /** An identity provider's key set (its jwks_uri): user tokens signed by its keys. */
  authJwksUrl: string
  /** The `iss` every user token must carry (required with `authJwksUrl`). */
  authIssuer: string
  /** A value the `aud` of every user token must hold (required with `authJwksUrl`). */
  authAudience: string
  /**
   * The notes page's client id at the provider (a public client: authorization code with PKCE);
   * set, the page signs people in at AUTH_ISSUER rather than asking for a token.
   */
  authPageClientId: string
  /** The scope the page asks the provider for ('openid' unless set). */
  authPageScope: string
  /**
   * Header typ values user tokens may carry besides at+jwt ('none': no typ), for providers that
   * type their access tokens JWT. Empty (the default): at+jwt alone with `authJwksUrl`; at+jwt,
   * JWT or no typ with `authJwtSecret`. ID tokens are refused whatever it lists.
   */
  authTokenTypes: readonly string[]
  /** The scope a user token needs to write ('': every token may); without it, only reads. */
  authWriteScope: string
  /** Most notes one user's notebook holds (507 above it). */
  maxNotesPerUser: number
  /** Most UTF-8 bytes of note JSON one user's notebook holds (507 above it). */
  maxBytesPerUser: number
  /** Most notebooks one user owns, their default one included (507 above it). */
  maxNotebooksPerUser: number
  /** Most members one notebook has, its owners included (507 above it). */
  maxMembers: number
  /** Connections each instance opens to PostgreSQL at most. */
  databasePoolSize: number
  /** Longest a database statement may run, in ms; past it the request gets 503. */
  databaseStatementTimeoutMs: number
  /** How long start-up waits for an unreachable database before giving up, in ms (0: try once). */
  databaseConnectTimeoutMs: number
  /** Time between two attempts to reach the database at start-up, in ms. */
  databaseConnectRetryMs: number
  /**
   * A file to keep the notes in: memory, with every write appended to this journal and fsynced
   * before it is answered; empty (the default) keeps them in memory only.
   */
  dataFile: string
  /**
   * The settings that an environment variable or a flag gave, so that a message names a setting
   * only when the user chose it (a default they never set tells them nothing).
   */
  given: ReadonlySet<Setting>
}

/** A setting's key: everything in Config but `given`. */
export type Setting = Exclude<keyof Config, 'given'>

/** One row of `OPTIONS`: a setting, its variable and flag, its default and its parser. */
export interface Option<K extends Setting> {
  key: K
  env: string
  flag: string
  description: string
  default: Config[K]
  /** Returns the value, or a message saying what was expected. */
  parse: (raw: string) => Config[K] | Rejection
  /** Its value is a secret: an error message never shows it. */
  secret?: true
}

const TEN_MINUTES = 600_000
const ONE_DAY = 86_400_000

/** Every option, in the order `--help` lists them. */
export const OPTIONS: readonly Option<Setting>[] = [
  opt('port', 'PORT', 'TCP port to listen on (0 picks a free port)', 3000, integer(0, 65535)),
  opt('host', 'HOST', 'address to listen on (0.0.0.0 for all interfaces)', '127.0.0.1', host),
  opt('bodyLimit', 'BODY_LIMIT', 'largest request body, in bytes', 1 * MIB, integer(2, 64 * MIB)),
  opt(
    'maxDepth',
    'MAX_DEPTH',
    'levels of objects and arrays a field may nest, the body object not counted ({"a":[[1]]} nests 2)',
    128,
    integer(1, 512),
  ),
  opt('maxNotes', 'MAX_NOTES', 'most notes stored at once', 1_000_000, integer(1, 5_000_000)),
  opt(
    'maxStoreBytes',
    'MAX_STORE_BYTES',
    'most bytes of note JSON stored at once (on the memory store, with its files)',
    256 * MIB,
    integer(1 * KIB, 448 * MIB),
  ),
  opt('logLevel', 'LOG_LEVEL', 'log level', 'info', logLevel),
  opt('logRequests', 'LOG_REQUESTS', 'log every request and response at info', false, boolean),
  opt(
    'headersTimeoutMs',
    'HEADERS_TIMEOUT_MS',
    'time to receive request headers, in ms',
    10_000,
    integer(1, TEN_MINUTES),
  ),
  opt(
    'requestTimeoutMs',
    'REQUEST_TIMEOUT_MS',
    'time to receive a whole request, in ms',
    30_000,
    integer(1, TEN_MINUTES),
  ),
  opt(
    'keepAliveTimeoutMs',
    'KEEP_ALIVE_TIMEOUT_MS',
    'idle keep-alive connection lifetime, in ms',
    5_000,
    integer(1, TEN_MINUTES),
  ),
  opt(
    'socketTimeoutMs',
    'SOCKET_TIMEOUT_MS',
    'close a connection silent this long, in ms',
    60_000,
    integer(1, TEN_MINUTES),
  ),
  opt(
    'shutdownTimeoutMs',
    'SHUTDOWN_TIMEOUT_MS',
    'longest graceful shutdown, in ms',
    10_000,
    integer(1, TEN_MINUTES),
  ),
  opt(
    'corsOrigin',
    'CORS_ORIGIN',
    'browser origins allowed to call the API (CORS); none turns CORS off',
    Object.freeze([]),
    origins,
  ),
  opt('metrics', 'METRICS', 'serve Prometheus metrics at /metrics', false, boolean),
  opt('docs', 'DOCS', 'serve the API reference page (Swagger UI) at /docs', false, boolean),
  opt('ui', 'UI', 'serve the notes page for people at / (false turns it off)', true, boolean),
  opt(
    'maxEventLoopDelayMs',
    'MAX_EVENT_LOOP_DELAY_MS',
    'event-loop delay that sheds load with 503, in ms (0 off)',
    0,
    integer(0, 60_000),
  ),
  secret(
    opt(
      'apiKeys',
      'API_KEYS',
      'access keys that may read and write under /api/ and /metrics (Authorization: Bearer <key>); none leaves the API open; prefer the variable, as flags show in ps',
      Object.freeze([]),
      keys,
    ),
  ),
  secret(
    opt(
      'apiReadKeys',
      'API_READ_KEYS',
      'access keys that may only read (GET, HEAD); also turns keys on',
      Object.freeze([]),
      keys,
    ),
  ),
  opt(
    'rateLimit',
    'RATE_LIMIT',
    'requests per window per access key, or per client address without keys; 429 above it (0 off)',
    0,
    integer(0, 1_000_000_000),
  ),
  opt(
    'rateLimitWindowMs',
    'RATE_LIMIT_WINDOW_MS',
    'the window RATE_LIMIT counts in, in ms',
    60_000,
    integer(1, ONE_DAY),
  ),
  opt(
    'changeHistory',
    'CHANGE_HISTORY',
    'changes kept for the change feed to replay; an older Last-Event-ID gets a reset',
    10_000,
    integer(0, 1_000_000),
  ),
  opt(
    'maxEventStreams',
    'MAX_EVENT_STREAMS',
    'change-feed streams (GET /api/events) open at once; 503 above it',
    1_000,
    integer(0, 100_000),
  ),
  opt(
    'noteHistory',
    'NOTE_HISTORY',
    'revisions one note keeps, its current state included (0 keeps no past state)',
    100,
    integer(0, 10_000),
  ),
  opt(
    'historyDays',
    'HISTORY_DAYS',
    'days a revision is kept (fractions allowed)',
    90,
    decimal(0, 36_500),
  ),
  opt(
    'maxHistoryBytes',
    'MAX_HISTORY_BYTES',
    'bytes of past revisions kept over the whole service, beside the note caps; the oldest go first',
    GIB,
    integer(0, 64 * GIB),
  ),
  opt(
    'trashDays',
    'TRASH_DAYS',
    'days a deleted note stays in the trash, counted toward the caps (fractions allowed; 0 turns the trash off)',
    30,
    decimal(0, 36_500),
  ),
  opt(
    'maxFileBytes',
    'MAX_FILE_BYTES',
    'largest file one upload stores, in bytes (413 above it)',
    100 * MIB,
    integer(0, 1024 * GIB),
  ),
  opt(
    'maxFilesBytesPerUser',
    'MAX_FILES_BYTES_PER_USER',
    'most bytes of files one notebook holds (507 above it)',
    GIB,
    integer(0, 1024 * 1024 * GIB),
  ),
  opt(
    'maxFilesBytes',
    'MAX_FILES_BYTES',
    'most bytes of files the service holds (507 above it)',
    16 * GIB,
    integer(0, 1024 * 1024 * GIB),
  ),
  opt(
    'fileGraceHours',
    'FILE_GRACE_HOURS',
    'hours a file no note refers to is kept after its upload or its last reference went away (fractions allowed)',
    24,
    decimal(0, 876_000),
  ),
  secret(
    opt(
      'authJwtSecret',
      'AUTH_JWT_SECRET',
      'turns user tokens on: the secret they are signed with (HS256, at least 32 bytes); each user then has a notebook of their own',
      '',
      jwtSecret,
    ),
  ),
  opt(
    'authJwksUrl',
    'AUTH_JWKS_URL',
    "turns user tokens on: an identity provider's key set (its jwks_uri, http: or https:)",
    '',
    jwksUrl,
  ),
  opt('authIssuer', 'AUTH_ISSUER', 'the iss every user token must carry', '', text),
  opt('authAudience', 'AUTH_AUDIENCE', 'a value the aud of every user token must hold', '', text),
  opt(
    'authPageClientId',
    'AUTH_PAGE_CLIENT_ID',
    "the notes page's public client id at the provider: the page signs people in at AUTH_ISSUER (OpenID Connect, code with PKCE); needs AUTH_JWKS_URL",
    '',
    text,
  ),
  opt(
    'authPageScope',
    'AUTH_PAGE_SCOPE',
    'the scope the page asks the provider for',
    'openid',
    text,
  ),
  opt(
    'authTokenTypes',
    'AUTH_TOKEN_TYPES',
    'header typ values user tokens may carry besides at+jwt (at+jwt,JWT for a provider that types its access tokens JWT; none: no typ); unset, at+jwt alone with AUTH_JWKS_URL, at+jwt, JWT or none with AUTH_JWT_SECRET; ID tokens are refused whatever it lists',
    Object.freeze([]),
    tokenTypes,
  ),
  opt(
    'authWriteScope',
    'AUTH_WRITE_SCOPE',
    'the scope a user token needs to write (in its space-separated scope, or its scp list); a token without it may only read (GET, HEAD); unset, every token may write',
    '',
    text,
  ),
  opt(
    'maxNotesPerUser',
    'MAX_NOTES_PER_USER',
    "most notes in one user's notebook",
    10_000,
    integer(1, 5_000_000),
  ),
  opt(
    'maxBytesPerUser',
    'MAX_BYTES_PER_USER',
    "most bytes of note JSON in one user's notebook",
    16 * MIB,
    integer(1 * KIB, 448 * MIB),
  ),
  opt(
    'maxNotebooksPerUser',
    'MAX_NOTEBOOKS_PER_USER',
    'most notebooks one user owns, their default one included',
    100,
    integer(1, 100_000),
  ),
  opt(
    'maxMembers',
    'MAX_MEMBERS',
    'most members of one notebook, its owners included',
    100,
    integer(1, 100_000),
  ),
  secret(
    opt(
      'databaseUrl',
      'DATABASE_URL',
      'keep the notes in PostgreSQL at this URL (postgres://user:password@host:5432/database), shared by every instance; none keeps them in memory',
      '',
      databaseUrl,
    ),
  ),
  opt(
    'databasePoolSize',
    'DATABASE_POOL_SIZE',
    'pooled connections each instance opens to PostgreSQL at most, for writes and list reads (point reads use 2 more, the change feed 1)',
    10,
    integer(1, 1000),
  ),
  opt(
    'databaseStatementTimeoutMs',
    'DATABASE_STATEMENT_TIMEOUT_MS',
    'longest a database statement may run, in ms (503 past it)',
    5000,
    integer(1, TEN_MINUTES),
  ),
  opt(
    'databaseConnectTimeoutMs',
    'DATABASE_CONNECT_TIMEOUT_MS',
    'how long start-up waits for an unreachable database, in ms (0 tries once)',
    30_000,
    integer(0, ONE_DAY),
  ),
  opt(
    'databaseConnectRetryMs',
    'DATABASE_CONNECT_RETRY_MS',
    'time between attempts to reach the database at start-up, in ms',
    500,
    integer(10, TEN_MINUTES),
  ),
  opt(
    'dataFile',
    'DATA_FILE',
    'keep the notes in memory and in a journal at this path, each write on disk before it is answered; one process per file',
    '',
    text,
  ),
]

function secret(option: Option<Setting>): Option<Setting> {
  return { ...option, secret: true }
}

function opt<K extends Setting>(
  key: K,
  env: string,
  description: string,
  defaultValue: Config[K],
  parse: Option<K>['parse'],
): Option<Setting> {
  const flag = `--${env.toLowerCase().replaceAll('_', '-')}`
  return { key, env, flag, description, default: defaultValue, parse } as unknown as Option<Setting>
}

/** A configuration value that cannot be used; the message is one line naming the variable. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

export const DEFAULT_CONFIG: Readonly<Config> = Object.freeze({
  ...(Object.fromEntries(OPTIONS.map((o) => [o.key, o.default])) as unknown as Config),
  given: new Set<Setting>(),
})
