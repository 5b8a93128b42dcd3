import { isIP, isIPv6 } from 'node:net'

/**
 * The parsers of the settings' values (OPTIONS, config.ts): each takes the raw text of a variable
 * or flag and returns the value, or a Rejection saying what it expected:
 * integer(1, 10)('7') -> 7; integer(1, 10)('0') -> { expected: 'an integer from 1 to 10' }.
 */

/** pino's levels, as LOG_LEVEL takes them. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/** A parser's answer to a value it cannot use. */
export interface Rejection {
  expected: string
}

export function isRejection(value: unknown): value is Rejection {
  return typeof value === 'object' && value !== null && 'expected' in value
}

export function integer(min: number, max: number): (raw: string) => number | { expected: string } {
  return (raw) => {
    const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN
    return Number.isSafeInteger(value) && value >= min && value <= max
      ? value
      : { expected: `an integer from ${min} to ${max}` }
  }
}

/** A decimal number, fractions allowed ('0.5', '30'), from min to max. */
export function decimal(min: number, max: number): (raw: string) => number | { expected: string } {
  return (raw) => {
    const value = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : Number.NaN
    return value >= min && value <= max ? value : { expected: `a number from ${min} to ${max}` }
  }
}

export function boolean(raw: string): boolean | { expected: string } {
  if (/^(true|1|yes|on)$/i.test(raw)) return true
  if (/^(false|0|no|off)$/i.test(raw)) return false
  return { expected: 'true/false, 1/0, yes/no or on/off, in any case' }
}

/** A host name label (RFC 1123): letters, digits and inner hyphens, 1 to 63 of them. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i

/**
 * An IP address or a host name of valid syntax; whether a name resolves is learnt at listen time.
 * '0.0.0.0', '::1', '[::1]' (-> '::1'), 'localhost', 'api.example.com.' pass;
 * 'a b', 'host_1', '-a.example', '1.2.3', '300.1.1.1', 'http://a' do not.
 */
export function host(raw: string): string | { expected: string } {
  const bracketed = /^\[(.*)\]$/.exec(raw)?.[1]
  if (bracketed !== undefined) {
    if (isIPv6(bracketed)) return bracketed
  } else if (isIP(raw) !== 0) {
    return raw
  } else {
    const name = raw.endsWith('.') ? raw.slice(0, -1) : raw
    const labels = name.split('.')
    // A last label of digits only would be a malformed IPv4 address, not a name.
    if (
      name.length <= 253 &&
      labels.every((l) => LABEL.test(l)) &&
      !/^\d+$/.test(labels.at(-1) as string)
    ) {
      return raw
    }
  }
  return {
    expected:
      'an IP address (127.0.0.1, ::1, 0.0.0.0 for every interface) or a host name (localhost)',
  }
}

export function logLevel(raw: string): LogLevel | { expected: string } {
  const level = LOG_LEVELS.find((l) => l === raw.toLowerCase())
  return level ?? { expected: `one of ${LOG_LEVELS.join(', ')}` }
}

/**
 * 'https://app.example.com, http://localhost:5173' -> ['https://app.example.com', 'http://localhost:5173'];
 * '*' -> ['*']. An origin is a scheme, a host and an optional port, as browsers send it.
 */
export function origins(raw: string): readonly string[] | { expected: string } {
  const list = raw.split(',').map((origin) => origin.trim().toLowerCase())
  const valid =
    (list.length === 1 && list[0] === '*') ||
    list.every((origin) => /^https?:\/\/(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/.test(origin))
  return valid
    ? Object.freeze(list)
    : { expected: 'a comma-separated list of origins such as https://app.example.com, or *' }
}

/**
 * 'k1,k2' -> ['k1', 'k2']; ' k1 , k2 ' -> ['k1', 'k2']. A key is 1 or more visible ASCII
 * characters (no spaces, and no commas, which separate keys); 'k1,,k2', 'k1,' and 'a b' are refused.
 */
export function keys(raw: string): readonly string[] | Rejection {
  const list = raw.split(',').map((key) => key.trim())
  return list.every((key) => /^[!-~]+$/.test(key))
    ? Object.freeze(list)
    : {
        expected:
          'a comma-separated list of keys, each 1 or more visible ASCII characters without spaces',
      }
}

/**
 * 'postgres://u:p@db.example:5432/notes' and 'postgresql://localhost/notes' pass; 'mysql://x',
 * 'postgres://' and 'db.example' do not.
 */
export function databaseUrl(raw: string): string | Rejection {
  try {
    const url = new URL(raw)
    if (/^postgres(ql)?:$/.test(url.protocol) && url.hostname !== '') return raw
  } catch {
    // Not a URL: refused below.
  }
  return { expected: 'a PostgreSQL URL: postgres://user:password@host:5432/database' }
}

/** A secret of at least 32 UTF-8 bytes, as HS256 needs. */
export function jwtSecret(raw: string): string | Rejection {
  return Buffer.byteLength(raw, 'utf8') >= 32
    ? raw
    : { expected: 'at least 32 bytes (UTF-8); make one with: openssl rand -base64 32' }
}

/** 'https://id.example/.well-known/jwks.json' passes; 'id.example/jwks', 'ftp://x' do not. */
export function jwksUrl(raw: string): string | Rejection {
  try {
    const url = new URL(raw)
    if (/^https?:$/.test(url.protocol) && url.hostname !== '') return raw
  } catch {
    // Not a URL: refused below.
  }
  return { expected: 'an http: or https: URL of a JSON Web Key Set' }
}

/** Any text but control characters. */
export function text(raw: string): string | Rejection {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  return /[\x00-\x1f\x7f]/.test(raw) ? { expected: 'text without control characters' } : raw
}

/**
 * Token types (the typ of a JWT header): 'at+jwt,JWT' -> ['at+jwt', 'JWT']; ' JWT , none ' ->
 * ['JWT', 'none'] (none: a header without typ); 'application/at+jwt' passes; 'JWT,,x', 'a b' and
 * 'a/b/c' are refused.
 */
export function tokenTypes(raw: string): readonly string[] | Rejection {
  const list = raw.split(',').map((type) => type.trim())
  return list.every((type) => /^([A-Za-z0-9][\w.+-]{0,63}\/)?[A-Za-z0-9][\w.+-]{0,63}$/.test(type))
    ? Object.freeze(list)
    : {
        expected:
          'a comma-separated list of token types (the typ of a JWT header) such as at+jwt,JWT; none stands for a header without typ',
      }
}
