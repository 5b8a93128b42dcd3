/**
 * One HTTP exchange with the service, with the client's retries: it sends the token, tries again
 * on a network failure (only when the request is safe to repeat) and on 503 and 429 (which the
 * service answers before applying anything), waiting what `Retry-After` asks or a jittered
 * backoff, and reads the answer's body as JSON. It knows nothing of notes.
 */
import { NotesNetworkError } from './errors.js'
import { parseJson } from './parse-json.js'
import {
  anySignal,
  backoffMs,
  DEFAULT_MAX_DELAY_MS,
  DEFAULT_RETRY_LIMIT,
  type RetryOptions,
  retryAfterMs,
  sleep,
} from './retry-policy.js'

/** A service key or user token, or a function giving one (called before every request). */
export type TokenSource = string | (() => string | Promise<string>)

export interface TransportOptions {
  baseUrl: string | URL
  token?: TokenSource | undefined
  fetch?: typeof fetch | undefined
  retries?: RetryOptions | undefined
  signal?: AbortSignal | undefined
}

/** One request to send. */
export interface Call {
  method: string
  /** A path on the service ('/api/note?limit=5'), or an absolute URL. */
  path: string
  headers?: Record<string, string>
  /** The body, already serialized (or a file's bytes): it is sent again as it is on a retry. */
  body?: string | Blob | Uint8Array<ArrayBuffer>
  /**
   * Whether a request whose answer was lost may be sent again: true for reads, creates and
   * batches with an Idempotency-Key, and writes with If-Match (a repeat is then refused, not
   * applied twice). A 503 or 429 is retried whatever this says: nothing was applied.
   */
  repeatable: boolean
  signal?: AbortSignal | undefined
}

/** What the service answered. */
export interface Reply {
  status: number
  headers: Headers
  /** The body parsed as JSON; undefined when empty; the text itself when it is not JSON. */
  body: unknown
  /**
   * Whether an earlier try's answer was lost (a network failure after it may have been sent):
   * the service may have applied it already.
   */
  lostAnswer: boolean
}

export class Transport {
  readonly baseUrl: string
  readonly #token: TokenSource | undefined
  /** The Authorization header of a token given as a string. */
  readonly #bearer: string | undefined
  /** The fetch the client was given (or the global one), called unbound. */
  readonly fetch: typeof fetch
  readonly #limit: number
  readonly maxDelayMs: number
  readonly signal: AbortSignal | undefined

  constructor(options: TransportOptions) {
    // 'http://h:1/prefix/' -> 'http://h:1/prefix': paths are appended to it.
    this.baseUrl = String(options.baseUrl).replace(/\/+$/, '')
    this.#token = options.token
    this.#bearer =
      typeof options.token === 'string' && options.token !== ''
        ? `Bearer ${options.token}`
        : undefined
    // Called unbound: a browser's fetch throws "Illegal invocation" with another `this`.
    const given = options.fetch ?? globalThis.fetch
    this.fetch = (input, init) => given(input, init)
    this.#limit = Math.max(0, options.retries?.limit ?? DEFAULT_RETRY_LIMIT)
    this.maxDelayMs = Math.max(0, options.retries?.maxDelayMs ?? DEFAULT_MAX_DELAY_MS)
    this.signal = options.signal
  }

  /** The URL of a path on the service: '/api/note' -> 'http://h:1/prefix/api/note'. */
  url(path: string): string {
    return path.charCodeAt(0) === 47 || !/^[a-z][a-z0-9+.-]*:/i.test(path)
      ? this.baseUrl + path
      : path
  }

  /** The Authorization header's value, when a token is set. */
  async authorization(): Promise<string | undefined> {
    const token = this.#token
    if (token === undefined) return undefined
    const value = typeof token === 'string' ? token : await token()
    return value === '' ? undefined : `Bearer ${value}`
  }

  /** Sends `call`, retrying as the class comment says; throws NotesNetworkError or the abort. */
  async send(call: Call): Promise<Reply> {
    const signal = anySignal(this.signal, call.signal)
    const url = this.url(call.path)
    let lostAnswer = false
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { accept: 'application/json', ...call.headers }
      // A token given as a string costs no await: its header is made once.
      const authorization =
        typeof this.#token === 'function' ? await this.authorization() : this.#bearer
      if (authorization !== undefined) headers.authorization = authorization
      const init: RequestInit = { method: call.method, headers }
      if (call.body !== undefined) init.body = call.body
      if (signal !== undefined) init.signal = signal
      let status: number
      let answerHeaders: Headers
      let body: unknown
      try {
        const response = await this.fetch(url, init)
        status = response.status
        answerHeaders = response.headers
        if (attempt < this.#limit && mayRetryStatus(status, call)) {
          const wait =
            retryAfterMs(answerHeaders.get('retry-after')) ?? backoffMs(attempt, this.maxDelayMs)
          // A longer wait than allowed is the caller's to decide: the problem is thrown now.
          if (wait <= this.maxDelayMs) {
            await response.body?.cancel()
            await sleep(wait, signal)
            continue
          }
        }
        const text = await response.text()
        body = text === '' ? undefined : bodyOf(text)
      } catch (err) {
        if (signal?.aborted) throw signal.reason
        if (!call.repeatable || attempt >= this.#limit) {
          throw new NotesNetworkError(
            `${call.method} ${url} failed${attempt > 0 ? ` after ${attempt + 1} tries` : ''}: ${describe(err)}`,
            { cause: err },
          )
        }
        lostAnswer = true
        await sleep(backoffMs(attempt, this.maxDelayMs), signal)
        continue
      }
      return { status, headers: answerHeaders, body, lostAnswer }
    }
  }
}

/**
 * 503 and 429 are answered before anything is applied; a 409 with Retry-After is an
 * Idempotency-Key whose first request is still being applied, and the repeat will answer its
 * outcome.
 */
function mayRetryStatus(status: number, call: Call): boolean {
  if (status === 503 || status === 429) return true
  return status === 409 && call.headers?.['idempotency-key'] !== undefined
}

/** The body as JSON, or the text itself when it is not JSON (an HTML page from a proxy). */
function bodyOf(text: string): unknown {
  try {
    return parseJson(text)
  } catch {
    return text
  }
}

/** 'fetch failed' alone says little: its cause ('ECONNRESET', 'other side closed') says more. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err)
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : ''
  return `${err.message}${cause}`
}
