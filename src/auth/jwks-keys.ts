import {
  type CryptoKey,
  createLocalJWKSet,
  createRemoteJWKSet,
  errors,
  type FlattenedJWSInput,
  type JWSHeaderParameters,
  type RemoteJWKSet,
} from 'jose'

/** How an identity provider's key set is fetched and kept. */
export interface JwksKeysOptions {
  /** The key set's address (an OpenID provider's `jwks_uri`), http: or https:. */
  url: URL
  /** Longest a fetch of the set may take, in ms; a request waiting for it gets 503 after it. */
  timeoutMs: number
  /** Least time between two fetches, in ms, whether the last one worked or not. */
  cooldownMs: number
  /** Age after which the set is fetched again in the background, in ms (keys dropped from it stop working). */
  maxAgeMs: number
  /** Clock difference allowed between the provider and this service, in ms (on a token's iat). */
  leewayMs: number
}

/** No key can be had: nothing cached fits and the set cannot be fetched now. */
export class KeysUnavailable extends Error {
  /** Seconds until the set may be fetched again. */
  readonly retryAfter: number

  constructor(retryAfter: number) {
    super('the identity provider key set cannot be fetched')
    this.name = 'KeysUnavailable'
    this.retryAfter = retryAfter
  }
}

/**
 * A key the set may be about to bring: the set at hand may be older than the token. Until the set
 * may be fetched again, in `retryAfter` seconds.
 */
export class KeysRefreshing extends Error {
  readonly retryAfter: number

  constructor(retryAfter: number) {
    super('the identity provider key set may be older than the token')
    this.name = 'KeysRefreshing'
    this.retryAfter = retryAfter
  }
}

interface FetchedSet {
  /** When its fetch started (Date.now() ms): the set is as the provider had it then or later. */
  startedAt: number
  /** When its fetch ended. */
  at: number
  find: ReturnType<typeof createLocalJWKSet>
}

/**
 * The keys of an identity provider, fetched from its JWKS address and kept in memory, so that key
 * rotation needs no restart. jose's remote set does the fetching (timeout, one fetch at a time,
 * the set's validation, redirects refused); when to fetch is decided here, because jose's own
 * policy would make a request wait for a set past its age and then fail, even with the key cached,
 * when the endpoint is down, and would try the endpoint again on every unknown key id after one
 * failure. Here:
 * - a token whose key is in the set is verified with it, whatever the state of the endpoint;
 * - a key id is unknown (JWKSNoMatchingKey, 401) only when a set fetched after the token was issued
 *   lacks it: its fetch started at least the leeway (30 s) after the token's iat, read unverified
 *   (a token without iat counts as old). A provider publishes a key before it signs with it, so
 *   that set would have it. iat 12:00:00, set fetched 12:00:31 without the kid -> 401 at once;
 * - otherwise the key may be a new one: the set is fetched again, at most once per cooldown (30 s
 *   by default) counted from the last fetch, successful or not, and one fetch at a time; a burst
 *   of made-up key ids costs the provider one fetch, and holds back no genuine token past the
 *   next fetch, which any token may start once the cooldown is over;
 * - a key still missing from a set that may predate the token gets `KeysRefreshing` (503, retry
 *   when the next fetch may start); `KeysUnavailable` (503) when the last fetch failed, or when
 *   no set was ever had;
 * - a set older than its age is fetched again in the background, the request meanwhile served
 *   from the set it has.
 */
export class JwksKeys {
  readonly #remote: RemoteJWKSet
  readonly #cooldownMs: number
  readonly #maxAgeMs: number
  readonly #leewayMs: number
  #fetched: FetchedSet | undefined
  #pending: Promise<void> | undefined
  /** No fetch starts before this time (Date.now() ms). */
  #nextFetchAt = 0
  #lastFetchFailed = false

  constructor({ url, timeoutMs, cooldownMs, maxAgeMs, leewayMs }: JwksKeysOptions) {
    // cacheMaxAge: Infinity, because reload() is the only way in: jose never fetches on its own.
    this.#remote = createRemoteJWKSet(url, {
      timeoutDuration: timeoutMs,
      cooldownDuration: cooldownMs,
      cacheMaxAge: Number.POSITIVE_INFINITY,
    })
    this.#cooldownMs = cooldownMs
    this.#maxAgeMs = maxAgeMs
    this.#leewayMs = leewayMs
  }

  /** A jose key resolver: the key for a token's header, from the set as it is or fetched again. */
  readonly find = async (
    header: JWSHeaderParameters,
    token: FlattenedJWSInput,
  ): Promise<CryptoKey> => {
    const known = this.#fetched
    if (known !== undefined) {
      if (Date.now() - known.at >= this.#maxAgeMs) void this.#fetch()
      try {
        return await known.find(header, token)
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey)) throw error
      }
    }
    const issuedAt = issuedAtOf(token)
    const newer = (set: FetchedSet): boolean => set.startedAt >= issuedAt + this.#leewayMs
    if (known !== undefined && newer(known)) throw new errors.JWKSNoMatchingKey()
    await this.#fetch()
    const current = this.#fetched
    if (current !== undefined && current !== known) {
      try {
        return await current.find(header, token)
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey) || newer(current)) throw error
      }
    }
    const retryAfter = Math.max(1, Math.ceil((this.#nextFetchAt - Date.now()) / 1000))
    if (current === undefined || this.#lastFetchFailed) throw new KeysUnavailable(retryAfter)
    throw new KeysRefreshing(retryAfter)
  }

  /** Fetches the set unless a fetch is under way (then waits for it) or the cooldown forbids it. */
  #fetch(): Promise<void> {
    if (this.#pending !== undefined) return this.#pending
    const started = Date.now()
    if (started < this.#nextFetchAt) return Promise.resolve()
    this.#nextFetchAt = started + this.#cooldownMs
    const pending = this.#remote.reload().then(
      () => {
        const jwks = this.#remote.jwks()
        if (jwks !== undefined) {
          this.#fetched = { startedAt: started, at: Date.now(), find: createLocalJWKSet(jwks) }
        }
        this.#lastFetchFailed = false
      },
      () => {
        // Down, slow, or not a key set: the keys fetched before stay in use.
        this.#lastFetchFailed = true
      },
    )
    this.#pending = pending.finally(() => {
      this.#pending = undefined
    })
    return this.#pending
  }
}

/**
 * A token's iat in ms, read before its signature is checked (it decides only how a missing key is
 * told): '{"iat":1800000000}' -> 1800000000000; no iat, or not a number -> -Infinity (old).
 */
function issuedAtOf(token: FlattenedJWSInput): number {
  if (typeof token.payload !== 'string') return Number.NEGATIVE_INFINITY
  try {
    const { iat } = JSON.parse(Buffer.from(token.payload, 'base64url').toString('utf8')) ?? {}
    return typeof iat === 'number' && Number.isFinite(iat) ? iat * 1000 : Number.NEGATIVE_INFINITY
  } catch {
    return Number.NEGATIVE_INFINITY
  }
}
