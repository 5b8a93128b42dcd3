import type { IncomingMessage } from 'node:http'
import {
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  jwtVerify,
} from 'jose'
import { authorizationsOf, bearerToken, tokenInQuery } from '../api/request-target.js'
import { isNotebookName } from '../store/types.js'
import { JwksKeys, KeysUnavailable } from './jwks-keys.js'
import {
  algorithmRefused,
  BAD_SIGNATURE,
  badTime,
  DUPLICATE,
  EMPTY_SUBJECT,
  expired,
  IN_QUERY,
  KEY_UNUSABLE,
  keysUnavailable,
  LONG_SUBJECT,
  MALFORMED,
  MAX_SUBJECT_LENGTH,
  MAX_TOKEN_LENGTH,
  MISSING,
  NO_EXPIRY,
  NO_SUBJECT,
  NOT_JWT,
  notYetValid,
  SUBJECT_NOT_STRING,
  TOO_LONG,
  type TokenRefusal,
  UNKNOWN_CRITICAL,
  UNSTORABLE_SUBJECT,
  unknownKey,
  wrongAudience,
  wrongIssuer,
} from './user-token-refusals.js'

/** The one algorithm of a shared secret. */
const SECRET_ALGORITHMS: readonly string[] = Object.freeze(['HS256'])

/**
 * The algorithms of keys from a JWKS: asymmetric only. HS256 would let anyone holding the public
 * key (it is public) sign tokens with its bytes as the secret, and 'none' signs nothing.
 */
const JWKS_ALGORITHMS: readonly string[] = Object.freeze([
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
])

/** Fewest UTF-8 bytes of a shared secret: HS256's key is as strong as 32 random bytes at most. */
export const MIN_SECRET_BYTES = 32

/** Clock difference allowed on exp and nbf, in seconds. */
export const LEEWAY_SECONDS = 30

/** Tokens an app signs itself with a shared secret (HS256). */
interface SecretSource {
  /** The secret, used as the UTF-8 bytes of this string: at least 32 of them. */
  secret: string
  /** The `iss` every token must carry, when set. */
  issuer?: string
  /** A value the `aud` of every token must hold, when set. */
  audience?: string
}

/** Tokens of an OpenID provider, checked with the keys it publishes. */
interface JwksSource {
  /** The provider's key set (its `jwks_uri`), http: or https:. */
  jwksUrl: URL
  /** The `iss` every token must carry: the provider's issuer identifier. */
  issuer: string
  /** A value the `aud` of every token must hold: this service's name at the provider. */
  audience: string
  /** Longest a fetch of the key set may take, in ms (default 2,000): a request waits no longer. */
  jwksTimeoutMs?: number
  /** Least time between two fetches of the key set, in ms (default 30,000). */
  jwksCooldownMs?: number
  /** Age at which the key set is fetched again in the background, in ms (default 600,000). */
  jwksMaxAgeMs?: number
}

export type UserTokensOptions = (SecretSource | JwksSource) & {
  /** The clock exp and nbf are checked against, in ms since 1970 (default Date.now). */
  now?: () => number
}

/** A request's user: the token's `sub`, and its `exp` (seconds since 1970). */
export type TokenVerdict =
  | { readonly ok: true; readonly user: string; readonly exp: number }
  | TokenRefusal

const DEFAULT_JWKS_TIMEOUT_MS = 2_000
const DEFAULT_JWKS_COOLDOWN_MS = 30_000
const DEFAULT_JWKS_MAX_AGE_MS = 600_000

/**
 * Who a request is, by its user token (a JWT in `Authorization: Bearer <token>`): the one
 * decision, for the Fastify hook and the fast lane alike. The signature, `exp` (which every token
 * must have), `nbf`, and `iss` and `aud` when configured are checked with 30 s of leeway; the
 * algorithm must be one of a fixed list, never 'none', and never HS256 with keys from a JWKS.
 * Every refusal says what was wrong; the token is never kept in a refusal, an error or a log line.
 */
export class UserTokens {
  readonly #key: JWTVerifyGetKey
  readonly #algorithms: ReadonlySet<string>
  readonly #accepted: readonly string[]
  readonly #options: JWTVerifyOptions
  readonly #issuer: string | undefined
  readonly #audience: string | undefined
  readonly #now: (() => number) | undefined

  /** @throws RangeError or TypeError, naming the option, for a source that cannot be used. */
  constructor(options: UserTokensOptions) {
    if ('secret' in options) {
      const secret = Buffer.from(options.secret, 'utf8')
      if (secret.length < MIN_SECRET_BYTES) {
        throw new RangeError(
          `The token secret must be at least ${MIN_SECRET_BYTES} bytes (UTF-8); it has ${secret.length}. Make one with: openssl rand -base64 32`,
        )
      }
      const key = crypto.subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, [
        'verify',
      ])
      this.#key = () => key
      this.#accepted = SECRET_ALGORITHMS
    } else {
      const { jwksUrl, issuer, audience } = options
      if (!(jwksUrl instanceof URL) || !/^https?:$/.test(jwksUrl.protocol)) {
        throw new TypeError('The JWKS address must be an http: or https: URL.')
      }
      if (issuer === '' || audience === '') {
        throw new TypeError('Tokens from a JWKS need an issuer and an audience to check.')
      }
      this.#key = new JwksKeys({
        url: jwksUrl,
        timeoutMs: positive(options.jwksTimeoutMs ?? DEFAULT_JWKS_TIMEOUT_MS, 'jwksTimeoutMs'),
        cooldownMs: positive(options.jwksCooldownMs ?? DEFAULT_JWKS_COOLDOWN_MS, 'jwksCooldownMs'),
        maxAgeMs: positive(options.jwksMaxAgeMs ?? DEFAULT_JWKS_MAX_AGE_MS, 'jwksMaxAgeMs'),
      }).find
      this.#accepted = JWKS_ALGORITHMS
    }
    this.#algorithms = new Set(this.#accepted)
    this.#issuer = options.issuer
    this.#audience = options.audience
    this.#now = options.now
    this.#options = {
      algorithms: [...this.#accepted],
      clockTolerance: LEEWAY_SECONDS,
      requiredClaims: ['exp'],
      ...(options.issuer === undefined ? {} : { issuer: options.issuer }),
      ...(options.audience === undefined ? {} : { audience: options.audience }),
    }
  }

  /** `verify` for a request as node:http hands it over: every Authorization header, and its URL. */
  verifyRequest(request: IncomingMessage): Promise<TokenVerdict> {
    return this.verify(authorizationsOf(request), request.url ?? '/')
  }

  /**
   * The verdict on a request's token. `authorization` is every Authorization header sent (none,
   * one, or several, which is refused: which one would count is ambiguous); `url` the request
   * target, whose query must not carry a token. 'Bearer <a good token>' -> { ok: true, user: its
   * sub }; no header -> 401; a good token while the provider's keys cannot be had -> 503.
   */
  async verify(
    authorization: string | readonly string[] | undefined,
    url: string,
  ): Promise<TokenVerdict> {
    if (tokenInQuery(url)) return IN_QUERY
    const values = typeof authorization === 'string' ? [authorization] : (authorization ?? [])
    if (values.length === 0) return MISSING
    if (values.length > 1) return DUPLICATE
    const token = bearerToken(values[0] as string)
    if (token === undefined) return MALFORMED
    if (token.length > MAX_TOKEN_LENGTH) return TOO_LONG
    const parts = token.split('.')
    const header = parts.length === 3 ? jsonObjectOf(parts[0] as string) : undefined
    if (header === undefined) return NOT_JWT
    if (typeof header.alg !== 'string' || !this.#algorithms.has(header.alg)) {
      return algorithmRefused(header.alg, this.#accepted)
    }
    if (jsonObjectOf(parts[1] as string) === undefined) return NOT_JWT
    let payload: JWTPayload
    try {
      payload = await this.#verified(token)
    } catch (error) {
      return this.#refusalFor(error, header)
    }
    return userOf(payload)
  }

  async #verified(token: string): Promise<JWTPayload> {
    const options =
      this.#now === undefined
        ? this.#options
        : { ...this.#options, currentDate: new Date(this.#now()) }
    try {
      return (await jwtVerify(token, this.#key, options)).payload
    } catch (error) {
      if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error
      // No kid, and several keys of its type in the set: the token is good if one of them signed it.
      for await (const key of error) {
        try {
          return (await jwtVerify(token, key, options)).payload
        } catch (inner) {
          if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner
        }
      }
      throw new errors.JWSSignatureVerificationFailed()
    }
  }

  /** What a failed check means for the caller; jose's messages are never shown. */
  #refusalFor(error: unknown, header: Record<string, unknown>): TokenRefusal {
    if (error instanceof KeysUnavailable) return keysUnavailable(error.retryAfter)
    if (error instanceof errors.JWSSignatureVerificationFailed) return BAD_SIGNATURE
    if (error instanceof errors.JWKSNoMatchingKey) return unknownKey(header.kid)
    if (error instanceof errors.JWTExpired || error instanceof errors.JWTClaimValidationFailed) {
      const { claim, reason } = error
      if (claim === 'exp' && reason === 'missing') return NO_EXPIRY
      // jose checks iss and aud only when they are configured.
      if (claim === 'iss') return wrongIssuer(this.#issuer ?? '')
      if (claim === 'aud') return wrongAudience(this.#audience ?? '')
      const value = error.payload[claim]
      if (reason === 'invalid' || typeof value !== 'number') return badTime(claim)
      return claim === 'nbf' ? notYetValid(value, LEEWAY_SECONDS) : expired(value, LEEWAY_SECONDS)
    }
    if (error instanceof errors.JOSEAlgNotAllowed) {
      return algorithmRefused(header.alg, this.#accepted)
    }
    if (error instanceof errors.JOSENotSupported && header.crit !== undefined) {
      return UNKNOWN_CRITICAL
    }
    if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return NOT_JWT
    // A key in the provider's set that cannot serve the algorithm (an RSA key under 2048 bits,
    // a private key, a malformed JWK): jose throws TypeErrors and JOSEErrors for those.
    return KEY_UNUSABLE
  }
}

/**
 * The user of a verified token: its `sub`, a non-empty string of at most 255 characters, with no
 * NUL and no lone surrogate.
 */
function userOf(payload: JWTPayload): TokenVerdict {
  const { sub } = payload
  if (sub === undefined) return NO_SUBJECT
  if (typeof sub !== 'string') return SUBJECT_NOT_STRING
  if (sub === '') return EMPTY_SUBJECT
  if (sub.length > MAX_SUBJECT_LENGTH) return LONG_SUBJECT
  // Two such subs could be one notebook once stored (a lone surrogate becomes U+FFFD in UTF-8).
  if (!isNotebookName(sub)) return UNSTORABLE_SUBJECT
  return { ok: true, user: sub, exp: payload.exp as number }
}

const BASE64URL = /^[A-Za-z0-9_-]+$/

/** A base64url part of a JWT as the JSON object it encodes: 'eyJhIjoxfQ' -> { a: 1 }; else undefined. */
function jsonObjectOf(part: string): Record<string, unknown> | undefined {
  if (!BASE64URL.test(part)) return undefined
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined
}

function positive(value: number, name: string): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw new RangeError(`${name} must be a positive whole number of ms.`)
  }
  return value
}
