import { SignJWT } from 'jose'
import { MAX_SUBJECT_LENGTH } from '../auth/user-token-refusals.js'
import { MIN_SECRET_BYTES } from '../auth/user-tokens.js'
import { asksForHelp } from '../config/help.js'

/**
 * `notes-service token --sub NAME [--ttl 1h]`: prints a user token signed with AUTH_JWT_SECRET,
 * for trying user tokens out and for scripts.
 */

const TOKEN_USAGE = 'notes-service token --sub NAME [--ttl 1h]'

/** What `notes-service token --help` prints. */
export const TOKEN_HELP = `Usage: ${TOKEN_USAGE}

Prints a user token (a JWT signed with HS256) for the user NAME, which a service started with the
same AUTH_JWT_SECRET accepts as Authorization: Bearer <token>: for trying user notebooks out and
for scripts.

  --sub NAME, --sub=NAME
      the user the token is for (its sub), 1 to ${MAX_SUBJECT_LENGTH} characters
  --ttl 1h, --ttl=1h
      how long it is valid: a whole number of s, m, h or d (30s, 15m, 1h, 7d), at most 365d;
      default 1h
  --help, -h
      print this help and exit

Reads AUTH_JWT_SECRET from the environment: the service's secret, at least ${MIN_SECRET_BYTES} bytes
(make one with: openssl rand -base64 32). Exit codes: 0 printed, 2 a usage error or no secret.
`

const DEFAULT_TTL = '1h'
const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86_400 }
const MAX_TTL_SECONDS = 365 * 86_400

/** A request the command cannot carry out; the message is one line saying what to change. */
class TokenCommandError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'TokenCommandError'
  }
}

/** What to sign. */
export interface TokenRequest {
  /** The secret's UTF-8 bytes. */
  secret: Buffer
  sub: string
  ttlSeconds: number
}

/**
 * A token lifetime: '30s' -> 30, '15m' -> 900, '1h' -> 3600, '7d' -> 604800; '0s', '1.5h', '1w',
 * 'h', ' 1h', '366d' -> undefined.
 */
export function ttlSeconds(text: string): number | undefined {
  const match = /^([0-9]{1,9})([smhd])$/.exec(text)
  if (match === null) return undefined
  const seconds = Number(match[1]) * (UNIT_SECONDS[match[2] as string] as number)
  return seconds > 0 && seconds <= MAX_TTL_SECONDS ? seconds : undefined
}

/**
 * The command's arguments and environment, checked: `--sub NAME` or `--sub=NAME` (required, not
 * empty), `--ttl 1h` (optional), AUTH_JWT_SECRET of at least 32 bytes. The secret is trimmed, as
 * the service's configuration trims every value, so that both key with the same bytes.
 * @throws TokenCommandError with a one-line message; it never holds the secret.
 */
function tokenRequest(args: readonly string[], env: NodeJS.ProcessEnv): TokenRequest {
  let sub: string | undefined
  let ttl = DEFAULT_TTL
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    const eq = arg.indexOf('=')
    const flag = eq === -1 ? arg : arg.slice(0, eq)
    if (flag !== '--sub' && flag !== '--ttl') {
      throw new TokenCommandError(`Unknown argument ${JSON.stringify(flag)}; usage: ${TOKEN_USAGE}`)
    }
    const next = args[i + 1]
    let value: string | undefined
    if (eq !== -1) value = arg.slice(eq + 1)
    else if (next !== undefined && !next.startsWith('--')) value = args[++i]
    if (value === undefined) {
      throw new TokenCommandError(`Missing value for ${flag}; usage: ${TOKEN_USAGE}`)
    }
    if (flag === '--sub') sub = value
    else ttl = value
  }
  if (sub === undefined) {
    throw new TokenCommandError(`Missing --sub, the user the token is for; usage: ${TOKEN_USAGE}`)
  }
  if (sub === '') {
    throw new TokenCommandError('Empty --sub: give the user the token is for, as --sub alice.')
  }
  if (sub.length > MAX_SUBJECT_LENGTH) {
    throw new TokenCommandError(`--sub is longer than ${MAX_SUBJECT_LENGTH} characters.`)
  }
  const seconds = ttlSeconds(ttl)
  if (seconds === undefined) {
    throw new TokenCommandError(
      `Invalid --ttl ${JSON.stringify(ttl)}: expected a whole number of s, m, h or d (30s, 15m, 1h, 7d), at most 365d.`,
    )
  }
  const text = env.AUTH_JWT_SECRET?.trim() ?? ''
  if (text === '') {
    throw new TokenCommandError(
      `AUTH_JWT_SECRET is not set: set it to the secret the service checks tokens with (at least ${MIN_SECRET_BYTES} bytes).`,
    )
  }
  const secret = Buffer.from(text, 'utf8')
  if (secret.length < MIN_SECRET_BYTES) {
    throw new TokenCommandError(
      `AUTH_JWT_SECRET has ${secret.length} bytes; it needs at least ${MIN_SECRET_BYTES} (UTF-8). Make one with: openssl rand -base64 32`,
    )
  }
  return { secret, sub, ttlSeconds: seconds }
}

/**
 * A token for `sub`: HS256 with `sub`, `iat` (now) and `exp` (now + ttl), in seconds since 1970,
 * typed at+jwt (an access token, RFC 9068), which the service accepts whatever AUTH_TOKEN_TYPES says.
 */
export function signUserToken(
  { secret, sub, ttlSeconds }: TokenRequest,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' })
    .setSubject(sub)
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + ttlSeconds)
    .sign(secret)
}

interface Output {
  write(text: string): unknown
}

/**
 * Runs the command: the token and a newline on `stdout` and 0, or one line on `stderr` and 2;
 * with --help or -h, the help on `stdout` and 0.
 */
export async function runTokenCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  stdout: Output,
  stderr: Output,
): Promise<number> {
  if (asksForHelp(args)) {
    stdout.write(TOKEN_HELP)
    return 0
  }
  let request: TokenRequest
  try {
    request = tokenRequest(args, env)
  } catch (error) {
    if (!(error instanceof TokenCommandError)) throw error
    stderr.write(`notes-service token: ${error.message}\n`)
    return 2
  }
  stdout.write(`${await signUserToken(request)}\n`)
  return 0
}
