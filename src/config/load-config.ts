import {
  type Config,
  ConfigError,
  DEFAULT_CONFIG,
  OPTIONS,
  type Option,
  type Setting,
} from './config.js'
import { isRejection } from './value-parsers.js'

/** '--port' -> false (the next flag), '4000' -> true, undefined -> false */
function isValue(arg: string | undefined): boolean {
  return arg !== undefined && !arg.startsWith('--')
}

/**
 * Reads the configuration from environment variables and command-line flags (flags win):
 * `PORT=4000` or `--port 4000` or `--port=4000`.
 * @throws ConfigError naming the variable or flag when a value is invalid or a flag is unknown.
 */
export function loadConfig(env: NodeJS.ProcessEnv, argv: readonly string[]): Config {
  const given = new Set<Setting>()
  const config: Record<string, unknown> = { ...DEFAULT_CONFIG, given }
  const apply = (option: Option<Setting>, raw: string, source: string): void => {
    const value = option.parse(raw.trim())
    if (isRejection(value)) {
      const shown = option.secret === true ? '(value not shown)' : JSON.stringify(raw)
      throw new ConfigError(`Invalid ${source} ${shown}: expected ${value.expected}.`)
    }
    config[option.key] = value
    given.add(option.key)
  }
  for (const option of OPTIONS) {
    const raw = env[option.env]
    if (raw !== undefined && raw !== '') apply(option, raw, option.env)
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const eq = arg.indexOf('=')
    const flag = eq === -1 ? arg : arg.slice(0, eq)
    const option = OPTIONS.find((o) => o.flag === flag)
    if (option === undefined) throw new ConfigError(`Unknown option ${flag}; see --help.`)
    let raw: string | undefined
    if (eq !== -1) raw = arg.slice(eq + 1)
    else if (typeof option.default === 'boolean' && !isValue(argv[i + 1])) raw = 'true'
    else raw = argv[++i]
    if (raw === undefined) throw new ConfigError(`Missing value for ${flag}.`)
    apply(option, raw, flag)
  }
  const result = config as unknown as Config
  if (result.headersTimeoutMs > result.requestTimeoutMs) {
    throw new ConfigError(
      `Invalid HEADERS_TIMEOUT_MS ${result.headersTimeoutMs}: it must not exceed REQUEST_TIMEOUT_MS (${result.requestTimeoutMs}).`,
    )
  }
  if (result.apiReadKeys.some((key) => result.apiKeys.includes(key))) {
    throw new ConfigError(
      'Invalid API_READ_KEYS: a key in it is also in API_KEYS; list each key in one of them.',
    )
  }
  if (result.authJwksUrl !== '' && result.authJwtSecret !== '') {
    throw new ConfigError(
      'AUTH_JWKS_URL and AUTH_JWT_SECRET are both set: user tokens come from one of them; unset the other.',
    )
  }
  if (result.authJwksUrl !== '' && (result.authIssuer === '' || result.authAudience === '')) {
    throw new ConfigError(
      "AUTH_JWKS_URL needs AUTH_ISSUER and AUTH_AUDIENCE: the provider's issuer and this service's audience, which every token must carry.",
    )
  }
  if (result.authPageClientId !== '' && !signInIssuer(result)) {
    throw new ConfigError(
      'AUTH_PAGE_CLIENT_ID needs AUTH_JWKS_URL and an AUTH_ISSUER that is an https: URL (http: only on 127.0.0.1, ::1 or localhost): the page discovers the provider from it.',
    )
  }
  if (result.dataFile !== '' && result.databaseUrl !== '') {
    throw new ConfigError(
      'DATA_FILE and DATABASE_URL are both set: the notes live in one of them; unset the other.',
    )
  }
  return result
}

/** Whether the configuration turns user tokens on. */
export function userTokensOn(config: Pick<Config, 'authJwtSecret' | 'authJwksUrl'>): boolean {
  return config.authJwtSecret !== '' || config.authJwksUrl !== ''
}

/**
 * Whether the page may sign people in at AUTH_ISSUER: tokens from a key set, and an issuer the
 * page can discover over https: (http: on this machine alone, for trying it out).
 * 'https://idp.example' -> true, 'http://127.0.0.1:8080' -> true, 'http://idp.example' -> false.
 */
function signInIssuer(config: Pick<Config, 'authJwksUrl' | 'authIssuer'>): boolean {
  if (config.authJwksUrl === '') return false
  const url = URL.parse(config.authIssuer)
  if (url === null || url.hostname === '') return false
  if (url.protocol === 'https:') return true
  return url.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname)
}
