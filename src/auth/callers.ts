import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { sendProblem } from '../api/problem.js'
import { authorizationsOf, bearerToken, requestPath, tokenInQuery } from '../api/request-target.js'
import { SHARED_NOTEBOOK } from '../store/types.js'
import { type AccessKeys, needsAccessKey, READ_METHODS } from './access-keys.js'
import { tokenRefusalHeaders, withServiceKeys } from './user-token-refusals.js'
import { LEEWAY_SECONDS, type UserTokens } from './user-tokens.js'

/** 'alice' -> 'user:alice' */
const userNotebook = (sub: string): string => `user:${sub}`

/**
 * What a request may do, and on which notebook. `key` names what it is counted under by the
 * rate limits ('API_KEYS#1', 'user:alice'), never a key or a token.
 */
export type Decision =
  | {
      readonly allowed: true
      readonly notebook: string
      readonly key: string | undefined
      /** The user token's `sub`; undefined for a service key, or with user tokens off. */
      readonly user?: string | undefined
    }
  | {
      readonly allowed: false
      readonly status: 401 | 403 | 503
      readonly detail: string
      readonly headers: Readonly<Record<string, string>>
      readonly key: string | undefined
    }

export interface CallersOptions {
  /** Service keys (API_KEYS, API_READ_KEYS), when set. */
  accessKeys?: AccessKeys | undefined
  /** User tokens (AUTH_JWT_SECRET or AUTH_JWKS_URL), when on. */
  userTokens?: UserTokens | undefined
  /** The clock a remembered token's expiry is checked against, in ms (default Date.now). */
  now?: () => number
  /** Tokens whose verdict is remembered at most (default 10,000). */
  rememberedTokens?: number
}

/** Longest token whose verdict is remembered: a typical one is 300-900 characters. */
const REMEMBERED_TOKEN_LENGTH = 2048

const OPEN: Decision = Object.freeze({ allowed: true, notebook: SHARED_NOTEBOOK, key: undefined })
const METRICS_NEED_KEY: Decision = Object.freeze({
  allowed: false,
  status: 401,
  detail:
    'With user tokens on, /metrics needs a service key (one of API_KEYS): its figures cover every notebook.',
  headers: Object.freeze({ 'www-authenticate': 'Bearer' }),
  key: undefined,
})

/** A token verified before: whose it is, and until when (ms since 1970) it may be used. */
interface Remembered {
  readonly decision: Decision
  readonly until: number
  /** The refusal of a write, for a token whose scope lets it only read. */
  readonly readOnly: Decision | undefined
}

/** The 403 of a write with a token that may only read (its scope lacks `scope`). */
function readOnlyRefusal(key: string, scope: string): Decision {
  return Object.freeze({
    allowed: false,
    status: 403,
    detail: `This token may only read (GET, HEAD): its scope lacks ${scope}, which writing needs. Ask the provider for a token with that scope to change notes.`,
    headers: Object.freeze({
      'www-authenticate': `Bearer error="insufficient_scope", scope="${scope}"`,
    }),
    key,
  })
}

/**
 * Who a request is and which notebook it acts on: the one decision, which
 * the Fastify hook and the fast lane both ask for.
 *
 * Without user tokens, every request acts on the shared notebook and service keys (when set)
 * decide what it may do, as before. With them, every request under /api/ (but the OpenAPI
 * document) needs `Authorization: Bearer` with a service key (the shared notebook) or a user
 * token (that user's notebook); /metrics needs a service key. A user token is verified once, then
 * its verdict is remembered until the token expires (bounded in count; the oldest is forgotten
 * first), so that a request carrying it can be decided without waiting, and taken by the fast
 * lane: verifying costs 30-170 µs, a request about 30.
 */
export class Callers {
  readonly #keys: AccessKeys | undefined
  readonly #tokens: UserTokens | undefined
  readonly #now: () => number
  readonly #capacity: number
  readonly #remembered = new Map<string, Remembered>()
  readonly #decided = new WeakMap<IncomingMessage, Decision>()

  constructor({
    accessKeys,
    userTokens,
    now = Date.now,
    rememberedTokens = 10_000,
  }: CallersOptions) {
    this.#keys = accessKeys
    this.#tokens = userTokens
    this.#now = now
    this.#capacity = rememberedTokens
  }

  /** Whether any request may be refused: false when neither keys nor tokens are on. */
  get guarding(): boolean {
    return this.#keys !== undefined || this.#tokens !== undefined
  }

  /**
   * The decision if it can be made without waiting: always without user tokens; with them,
   * unless the request carries a token not verified before. `route` is the pattern the router
   * matched, when it did (what is served decides, however the URL spelled it).
   */
  decideNow(request: IncomingMessage, route?: string): Decision | undefined {
    const decided = this.#decided.get(request)
    if (decided !== undefined) return decided
    const decision = this.#decideNow(request, route)
    if (decision !== undefined) this.#decided.set(request, decision)
    return decision
  }

  /** The decision, verifying the request's user token when it must. */
  decide(request: IncomingMessage, route?: string): Decision | Promise<Decision> {
    const now = this.decideNow(request, route)
    if (now !== undefined) return now
    const tokens = this.#tokens as UserTokens
    return tokens.verifyRequest(request).then((verdict) => {
      let decision: Decision
      if (verdict.ok) {
        const notebook = userNotebook(verdict.user)
        const allowed = Object.freeze({
          allowed: true,
          notebook,
          key: notebook,
          user: verdict.user,
        })
        const readOnly = verdict.readOnly
          ? readOnlyRefusal(notebook, tokens.writeScope as string)
          : undefined
        this.#remember(bearerOf(request) as string, allowed, verdict.exp, readOnly)
        decision =
          readOnly !== undefined && !READ_METHODS.has(request.method ?? 'GET') ? readOnly : allowed
      } else {
        const refusal = this.#keys === undefined ? verdict : withServiceKeys(verdict)
        decision = Object.freeze({
          allowed: false,
          status: refusal.status,
          detail: refusal.detail,
          headers: tokenRefusalHeaders(refusal),
          key: undefined,
        })
      }
      this.#decided.set(request, decision)
      return decision
    })
  }

  #decideNow(request: IncomingMessage, route: string | undefined): Decision | undefined {
    const keys = this.#keys
    if (this.#tokens === undefined) {
      if (keys === undefined) return OPEN
      return fromAccess(keys.decideFor(request, route))
    }
    const method = request.method ?? 'GET'
    const path = route ?? requestPath(request.url ?? '/')
    if (method === 'OPTIONS' || !needsAccessKey(path)) return OPEN
    const authorizations = authorizationsOf(request)
    if (!path.startsWith('/api')) {
      // /metrics: its figures cover every notebook, so a service key alone reads them.
      if (keys === undefined) return METRICS_NEED_KEY
      const access = keys.decide(method, path, authorizations)
      return access.allowed || access.status === 403 ? fromAccess(access) : METRICS_NEED_KEY
    }
    if (authorizations.length === 1) {
      const token = bearerToken(authorizations[0] as string)
      if (token !== undefined) {
        if (keys !== undefined) {
          const access = keys.decide(method, path, authorizations)
          // A service key: the shared notebook. Anything else is tried as a user token.
          if (access.allowed || access.status === 403) return fromAccess(access)
        }
        // A token in the URL is refused even when the header's is known (UserTokens says why).
        if (tokenInQuery(request.url ?? '/')) return undefined
        const remembered = this.#remembered.get(token)
        if (remembered !== undefined) {
          if (this.#now() < remembered.until) {
            return remembered.readOnly !== undefined && !READ_METHODS.has(method)
              ? remembered.readOnly
              : remembered.decision
          }
          this.#remembered.delete(token)
        }
      }
    }
    // Verified (or refused, with the reason) by the token's check.
    return undefined
  }

  #remember(token: string, decision: Decision, exp: number, readOnly: Decision | undefined): void {
    if (token.length > REMEMBERED_TOKEN_LENGTH || this.#capacity === 0) return
    if (this.#remembered.size >= this.#capacity) {
      const oldest = this.#remembered.keys().next().value as string
      this.#remembered.delete(oldest)
    }
    this.#remembered.set(token, { decision, until: (exp + LEEWAY_SECONDS) * 1000, readOnly })
  }
}

function fromAccess(access: ReturnType<AccessKeys['decide']>): Decision {
  if (access.allowed) {
    return access.key === undefined
      ? OPEN
      : { allowed: true, notebook: SHARED_NOTEBOOK, key: access.key }
  }
  return {
    allowed: false,
    status: access.status,
    detail: access.detail,
    headers: access.status === 401 ? { 'www-authenticate': 'Bearer' } : {},
    key: access.key,
  }
}

/** The token of a request's one Authorization header. */
function bearerOf(request: IncomingMessage): string | undefined {
  const value = request.headers.authorization
  return value === undefined ? undefined : bearerToken(value)
}

/**
 * Refuses, before anything else is done with it, every request the callers' decision does not
 * allow (401, 403, or 503 when a provider's keys cannot be had), with problem JSON, and tells
 * the routes which notebook the others act on (`request.notebook`).
 */
export function registerCallers(app: FastifyInstance, callers: Callers): void {
  app.decorateRequest('notebook', SHARED_NOTEBOOK)
  app.decorateRequest('user', undefined)
  if (!callers.guarding) return
  app.addHook('onRequest', async (request, reply) => {
    const decision = await callers.decide(request.raw, request.routeOptions.url)
    if (decision.allowed) {
      request.notebook = decision.notebook
      request.user = decision.user
      return
    }
    return sendProblem(reply, decision.status, decision.detail, decision.headers)
  })
}

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The notebook `/api/note` means for the caller: SHARED_NOTEBOOK unless user tokens are on,
     * else the user's default notebook.
     */
    notebook: string
    /** The user token's `sub`; undefined for a service key, or with user tokens off. */
    user: string | undefined
  }
}
