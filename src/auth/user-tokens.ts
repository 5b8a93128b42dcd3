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
import { JwksKeys, KeysRefreshing, KeysUnavailable } from './jwks-keys.js'
import {
  algorithmRefused,
  BAD_SIGNATURE,
  badTime,
  DUPLICATE,
  EMPTY_SUBJECT,
  expired,
  ID_TOKEN,
  IN_QUERY,
  KEY_UNUSABLE,
  keysRefreshing,
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
  typeRefused,
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

/**
 * The header typ of an access token (RFC 9068), accepted whatever AUTH_TOKEN_TYPES lists. A token
 * of a key set must carry it unless AUTH_TOKEN_TYPES accepts others: an ID token of the same
 * provider is signed by the same keys, and its aud is a client id, which may be the audience.
 */
const ACCESS_TOKEN_TYPE = 'at+jwt'

/**
 * What a shared secret's tokens may be typed when AUTH_TOKEN_TYPES is not set: at+jwt, which
 * `notes-service token` writes, and what apps signed before (JWT, which the command wrote, and
 * jsonwebtoken writes; none, as jose's SignJWT leaves it).
 */
const SECRET_TOKEN_TYPES: readonly string[] = Object.freeze([ACCESS_TOKEN_TYPE, 'JWT', 'none'])

/** The word of AUTH_TOKEN_TYPES for a header without typ. */
const NO_TYPE = 'none'

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
  /**
   * The header typ values accepted besides at+jwt (AUTH_TOKEN_TYPES), in any case, 'application/'
   * optional, 'none' for a header without typ. Empty or unset: at+jwt alone with a key set; at+jwt,
   * JWT or none with a secret.
   */
  tokenTypes?: readonly string[]
  /**
   * The scope a token must hold to write (AUTH_WRITE_SCOPE): a token whose `scope` (RFC 9068's
   * space-separated string, or an `scp` list as some providers send) lacks it may only read.
   * Unset or empty: every token may write.
   */
  writeScope?: string
}

/**
 * A request's user: the token's `sub`, its `exp` (seconds since 1970), and whether its scope lets
 * it only read.
 */
export type TokenVerdict =
  | { readonly ok: true; readonly user: string; readonly exp: number; readonly readOnly: boolean }
  | TokenRefusal

const DEFAULT_JWKS_TIMEOUT_MS = 2_000
const DEFAULT_JWKS_COOLDOWN_MS = 30_000
const DEFAULT_JWKS_MAX_AGE_MS = 600_000

/**
 * Who a request is, by its user token (a JWT in `Authorization: Bearer <token>`): the one
 * decision, for the Fastify hook and the fast lane alike. The signature, `exp` (which every token
 * must have), `nbf`, and `iss` and `aud` when configured are checked with 30 s of leeway; the
 * algorithm must be one of a fixed list, never 'none', and never HS256 with keys from a JWKS; the
 * header typ must be at+jwt or one of `tokenTypes`, and an ID token is refused by its claims.
 * Every refusal says what was wrong; the token is never kept in a refusal, an error or a log line.
 */
export class UserTokens {
  readonly #key: JWTVerifyGetKey
  readonly #algorithms: ReadonlySet<string>
  readonly #accepted: readonly string[]
  /** The accepted typ values as configured, for refusals; and as compared (typeKey). */
  readonly #types: readonly string[]
  readonly #typeKeys: ReadonlySet<string | undefined>
  readonly #options: JWTVerifyOptions
  readonly #issuer: string | undefined
  readonly #audience: string | undefined
  readonly #now: (() => number) | undefined
  readonly #writeScope: string | undefined

  /** The scope writing needs (AUTH_WRITE_SCOPE), when set. */
  get writeScope(): string | undefined {
    return this.#writeScope
  }

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
        leewayMs: LEEWAY_SECONDS * 1000,
      }).find
      this.#accepted = JWKS_ALGORITHMS
    }
    this.#algorithms = new Set(this.#accepted)
    const listed = options.tokenTypes ?? []
    this.#types =
      listed.length > 0
        ? [ACCESS_TOKEN_TYPE, ...listed.filter((type) => typeKey(type) !== ACCESS_TOKEN_TYPE)]
        : 'secret' in options
          ? SECRET_TOKEN_TYPES
          : [ACCESS_TOKEN_TYPE]
    this.#typeKeys = new Set(
      this.#types.map((type) => (type.toLowerCase() === NO_TYPE ? undefined : typeKey(type))),
    )
    this.#issuer = options.issuer
    this.#audience = options.audience
    this.#now = options.now
    const writeScope = options.writeScope === '' ? undefined : options.writeScope
    // A scope-token of RFC 6749 §3.3: it goes into WWW-Authenticate's quoted scope as it is.
    if (writeScope !== undefined && !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(writeScope)) {
      throw new RangeError(
        'The write scope must be one scope token: printable ASCII without spaces, quotes or backslashes.',
      )
    }
    this.#writeScope = writeScope
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
    const claims = jsonObjectOf(parts[1] as string)
    if (claims === undefined) return NOT_JWT
    // Both read before the signature is checked, like alg: a refusal that costs no key fetch, and
    // tells a forger nothing the token does not say.
    if (isIdToken(claims)) return ID_TOKEN
    if (!this.#typeKeys.has(headerType(header.typ))) return typeRefused(header.typ, this.#types)
    let payload: JWTPayload
    try {
      payload = await this.#verified(token)
    } catch (error) {
      return this.#refusalFor(error, header)
    }
    const user = userOf(payload)
    if (!user.ok || this.#writeScope === undefined) return user
    return { ...user, readOnly: !scopesOf(payload).includes(this.#writeScope) }
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
    if (error instanceof KeysRefreshing) return keysRefreshing(header.kid, error.retryAfter)
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
  return { ok: true, user: sub, exp: payload.exp as number, readOnly: false }
}

/** The token's scopes: `scope` split at spaces (RFC 9068), or `scp` (a list, or one string). */
function scopesOf(payload: JWTPayload): readonly string[] {
  const { scope, scp } = payload as { scope?: unknown; scp?: unknown }
  if (typeof scope === 'string') return scope.split(' ')
  if (Array.isArray(scp)) return scp.filter((value): value is string => typeof value === 'string')
  if (typeof scp === 'string') return scp.split(' ')
  return []
}

/**
 * Whether a token is an OpenID Connect ID token by its claims, whatever its header says (an ID
 * token typed JWT, or untyped, passes AUTH_TOKEN_TYPES=at+jwt,JWT,none): it carries at_hash,
 * c_hash or s_hash (hashes of the access token, code or state issued with it, which only an ID
 * token binds), or nonce, or its typ claim is ID (Keycloak's ID tokens). Keycloak's access tokens,
 * whose typ claim is Bearer, carried the nonce too until 2024 (keycloak#26893): theirs does not
 * count. An ID token with none of these (nonce and at_hash are optional in the code flow) is
 * refused by its header alone: untyped, or typed JWT.
 */
function isIdToken(claims: Record<string, unknown>): boolean {
  const kind = typeof claims.typ === 'string' ? claims.typ.toLowerCase() : undefined
  if (kind === 'id') return true
  if ('at_hash' in claims || 'c_hash' in claims || 's_hash' in claims) return true
  return 'nonce' in claims && kind !== 'bearer'
}

/**
 * A typ as compared, in any case and with 'application/' implied (RFC 7515 4.1.9, RFC 8725 3.11):
 * 'application/AT+JWT' -> 'at+jwt'.
 */
function typeKey(typ: string): string {
  return typ.toLowerCase().replace(/^application\//, '')
}

/** A header's typ as compared: 'JWT' -> 'jwt'; none -> undefined; 42 -> '' (never accepted). */
function headerType(typ: unknown): string | undefined {
  if (typ === undefined) return undefined
  return typeof typ === 'string' ? typeKey(typ) : ''
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
