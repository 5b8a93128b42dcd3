/**
 * Why a request's user token is refused, and what the caller should do: 401 for the token, 503
 * when the keys to check it cannot be had now. No detail holds the token or any of its three
 * encoded parts; a value from its header (alg, kid) is shown only when it is short and plain.
 */
export type TokenRefusal =
  | { readonly ok: false; readonly status: 401; readonly detail: string }
  | {
      readonly ok: false
      readonly status: 503
      readonly detail: string
      /** Seconds until the key set may be fetched again. */
      readonly retryAfter: number
    }

/** Longest token accepted, in characters; the header line of one is well under Node's 16 KiB. */
export const MAX_TOKEN_LENGTH = 8192

/** Longest `sub` accepted, in characters, as OpenID Connect bounds it. */
export const MAX_SUBJECT_LENGTH = 255

const refused = (detail: string): TokenRefusal => Object.freeze({ ok: false, status: 401, detail })

export const MISSING = refused('This API needs a user token: send Authorization: Bearer <token>.')
export const DUPLICATE = refused('Send one Authorization header, not several.')
export const MALFORMED = refused(
  'The Authorization header must be Bearer <token>: the word Bearer, a space, and the token.',
)
export const IN_QUERY = refused(
  'A token in the URL (access_token) is refused, because URLs end up in logs: send it as Authorization: Bearer <token>, and get a new one if that one was real.',
)
export const TOO_LONG = refused(
  `The token is longer than ${MAX_TOKEN_LENGTH} characters; send a JWT of at most ${MAX_TOKEN_LENGTH}.`,
)
export const NOT_JWT = refused(
  'The token is not a JWT: it must be three base64url parts joined by dots (header.payload.signature), the header and the payload each a JSON object.',
)
export const BAD_SIGNATURE = refused(
  'The token signature does not match: it was not signed with the key this service trusts, or it was changed after signing. Get a new token.',
)
export const NO_EXPIRY = refused('The token has no expiry time (exp); get a token that expires.')
export const NO_SUBJECT = refused(
  'The token names no user: it has no subject (sub); get a token with one.',
)
export const EMPTY_SUBJECT = refused(
  'The token names no user: its subject (sub) is empty; get a token with one.',
)
export const SUBJECT_NOT_STRING = refused(
  'The token subject (sub) is not a string; get a token whose sub is the user id as a string.',
)
export const LONG_SUBJECT = refused(
  `The token subject (sub) is longer than ${MAX_SUBJECT_LENGTH} characters; get a token with a shorter one.`,
)
export const UNSTORABLE_SUBJECT = refused(
  'The token subject (sub) holds a NUL character or a lone UTF-16 surrogate; get a token whose sub is plain text.',
)
export const UNKNOWN_CRITICAL = refused(
  'The token header lists a critical extension (crit) this service does not support; get a token without one.',
)
export const ID_TOKEN = refused(
  'The token is an ID token, not an access token: it tells an app who signed in (it carries nonce, at_hash, c_hash or s_hash, or typ ID) and grants no access to an API. Send the access token the identity provider issued with it.',
)
export const KEY_UNUSABLE = refused(
  'The token cannot be checked: the key it names cannot be used for its algorithm. Get a new token.',
)

/**
 * With service keys on too, what a request whose Authorization is neither is told: the refusals
 * that cannot tell a key from a token name both, and what each looks like. A wrong key is not a
 * JWT, and 'The token is not a JWT' alone sends its sender hunting for a token they never meant
 * to send. A refusal of something that is a JWT (expired, forged) stays as it is.
 */
const MISSING_KEY_OR_TOKEN = refused(
  'This API needs a service key (one of API_KEYS or API_READ_KEYS) or a user token (a JWT): send Authorization: Bearer <key or token>.',
)
const MALFORMED_KEY_OR_TOKEN = refused(
  'The Authorization header must be Bearer <key or token>: the word Bearer, a space, and a service key or a user token.',
)
const NEITHER_KEY_NOR_TOKEN = refused(
  'The credential is neither a service key nor a valid user token: a service key is one of API_KEYS or API_READ_KEYS exactly as set, a user token a JWT (three base64url parts joined by dots: header.payload.signature). Send one of them as Authorization: Bearer <key or token>.',
)
const WITH_SERVICE_KEYS = new Map<TokenRefusal, TokenRefusal>([
  [MISSING, MISSING_KEY_OR_TOKEN],
  [MALFORMED, MALFORMED_KEY_OR_TOKEN],
  [NOT_JWT, NEITHER_KEY_NOR_TOKEN],
])

/** A refusal as told while service keys are on too: MISSING -> one that names keys and tokens. */
export function withServiceKeys(refusal: TokenRefusal): TokenRefusal {
  return WITH_SERVICE_KEYS.get(refusal) ?? refusal
}

/** 'alg none' -> the algorithm named, with what to do instead. */
export function algorithmRefused(alg: unknown, accepted: readonly string[]): TokenRefusal {
  const name = plain(alg)
  const what =
    name === undefined
      ? 'is missing or not one accepted here'
      : `is ${name}, which is not accepted here`
  return refused(
    `The token algorithm (alg) ${what}; get a token signed with one of: ${accepted.join(', ')}.`,
  )
}

export function unknownKey(kid: unknown): TokenRefusal {
  if (kid === undefined) {
    return refused(
      'The token names no key id (kid) and no key of the identity provider fits it; get a new token from the provider.',
    )
  }
  const name = plain(kid)
  return refused(
    `The token key id (kid)${name === undefined ? '' : ` ${name}`} is not in the identity provider's key set; get a new token from the provider.`,
  )
}

/**
 * A header typ not accepted, with the setting that accepts it: 'JWT', ['at+jwt'] -> '... is JWT,
 * which is not accepted here (accepted: at+jwt) ... AUTH_TOKEN_TYPES=at+jwt,JWT.' `accepted` is
 * as configured, 'none' standing for a header without typ.
 */
export function typeRefused(typ: unknown, accepted: readonly string[]): TokenRefusal {
  const name = plain(typ)
  const what =
    typ === undefined
      ? 'The token has no type (typ), which'
      : name === undefined
        ? 'The token type (typ)'
        : `The token type (typ) is ${name}, which`
  const shown = accepted.map((type) => (type === 'none' ? 'no typ' : type)).join(', ')
  const widen =
    typ === undefined
      ? `If your identity provider's access tokens have no typ, accept them with AUTH_TOKEN_TYPES=${[...accepted, 'none'].join(',')}.`
      : name === undefined
        ? 'If your identity provider types its access tokens otherwise, list its type in AUTH_TOKEN_TYPES.'
        : `If your identity provider types its access tokens ${name}, accept them with AUTH_TOKEN_TYPES=${[...accepted, name].join(',')}.`
  return refused(
    `${what} is not accepted here (accepted: ${shown}): this service takes access tokens (RFC 9068), not ID tokens or other JWTs. ${widen}`,
  )
}

/** exp 1767225600 -> 'The token expired at 2026-01-01T00:00:00Z; ...' */
export function expired(exp: number, leewaySeconds: number): TokenRefusal {
  return refused(
    `The token expired at ${isoTime(exp)} (${leewaySeconds} s of clock difference allowed); get a new token.`,
  )
}

export function notYetValid(nbf: number, leewaySeconds: number): TokenRefusal {
  return refused(
    `The token is not valid before ${isoTime(nbf)} (${leewaySeconds} s of clock difference allowed); use it from then on, or check the clocks.`,
  )
}

/** A time claim that is not a NumericDate: 'exp' -> ... */
export function badTime(claim: string): TokenRefusal {
  return refused(
    `The token ${claim} is not a number of seconds since 1970-01-01 (a NumericDate); get a new token.`,
  )
}

export function wrongIssuer(issuer: string): TokenRefusal {
  return refused(
    `The token was not issued by ${issuer} (its iss is missing or another); get a token from ${issuer}.`,
  )
}

export function wrongAudience(audience: string): TokenRefusal {
  return refused(
    `The token is not meant for this service: its audience (aud) is missing or does not include ${audience}; get a token for ${audience}.`,
  )
}

export function keysUnavailable(retryAfter: number): TokenRefusal {
  return Object.freeze({
    ok: false,
    status: 503,
    detail:
      'The keys to check this token cannot be fetched from the identity provider now; try again later (Retry-After).',
    retryAfter,
  })
}

/**
 * The key set at hand was fetched before the token may have been issued, so its key may be a new
 * one: 503 until the set may be fetched again (`retryAfter` seconds), which brings it if it is.
 */
export function keysRefreshing(kid: unknown, retryAfter: number): TokenRefusal {
  const name = plain(kid)
  const which =
    kid === undefined
      ? 'No key of the identity provider fits the token (it names no key id, kid)'
      : `The token key id (kid)${name === undefined ? '' : ` ${name}`} is not in the identity provider's key set`
  return Object.freeze({
    ok: false,
    status: 503,
    detail: `${which} as last fetched, which may be older than the token: the key set is being refreshed; try again after Retry-After.`,
    retryAfter,
  })
}

/**
 * A value from the token's header as it may be shown: short, and only characters that need no
 * quoting in a header or a log line. 'RS256' -> 'RS256'; 'a"b', 70 characters, 3 -> undefined.
 */
function plain(value: unknown): string | undefined {
  return typeof value === 'string' && /^[A-Za-z0-9._~+/=-]{1,64}$/.test(value) ? value : undefined
}

/** 1767225600 -> '2026-01-01T00:00:00Z'; a time no Date can hold -> the number as sent. */
function isoTime(seconds: number): string {
  const date = new Date(seconds * 1000)
  return Number.isNaN(date.getTime())
    ? `${seconds} (seconds since 1970)`
    : date.toISOString().replace('.000Z', 'Z')
}

/**
 * The headers of a refusal: on 401 the RFC 6750 challenge, whose error_description repeats the
 * detail (its grammar allows no '"' or '\' and nothing outside printable ASCII, so those become
 * "'" and '?'); on 503 Retry-After.
 */
export function tokenRefusalHeaders(refusal: TokenRefusal): Record<string, string> {
  if (refusal.status === 503) return { 'retry-after': String(refusal.retryAfter) }
  const description = refusal.detail.replaceAll('"', "'").replace(/[^\x20-\x7e]|\\/g, '?')
  return {
    'www-authenticate': `Bearer error="invalid_token", error_description="${description}"`,
  }
}
