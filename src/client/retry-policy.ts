/**
 * When the client tries again, and how long it waits first: a request or the change feed waits
 * what the service's `Retry-After` asks (seconds or an HTTP date), else an exponential backoff
 * with jitter, both capped by `maxDelayMs`; the replica's send and read loops wait that backoff
 * too, between the transport's own tries. The waits end early when aborted; and which failures
 * the replica tries again at all.
 */
import { NotesProblem } from './errors.js'

/** How many times a request is tried again, and the longest wait before one. */
export interface RetryOptions {
  /** Tries after the first (default 3; 0 turns retries off). */
  limit?: number
  /** The longest wait before a retry, in ms (default 10,000); a longer Retry-After is not waited. */
  maxDelayMs?: number
}

export const DEFAULT_RETRY_LIMIT = 3
export const DEFAULT_MAX_DELAY_MS = 10_000
/** The first backoff without Retry-After; it doubles with each try. */
const FIRST_BACKOFF_MS = 200

/**
 * The wait a `Retry-After` value asks for, in ms, or undefined when it says nothing usable:
 * '3' -> 3000; 'Thu, 26 Nov 2026 23:00:05 GMT' at 23:00:00 -> 5000; a past date -> 0; 'soon' ->
 * undefined.
 */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  // An HTTP date names its month ('Thu, 26 Nov 2026 ...'); Date.parse alone reads '-1' as a year.
  const date = /[a-z]/i.test(text) ? Date.parse(text) : Number.NaN
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/**
 * The backoff before retry number `attempt` (0 for the first retry): 200 ms doubling, capped,
 * then a random share of it between a half and the whole ("equal jitter"), so that clients cut
 * off together do not come back together.
 */
export function backoffMs(attempt: number, maxDelayMs: number, random = Math.random): number {
  const ceiling = Math.min(maxDelayMs, FIRST_BACKOFF_MS * 2 ** Math.min(attempt, 30))
  return Math.round(ceiling / 2 + (random() * ceiling) / 2)
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const done = () => {
      signal?.removeEventListener('abort', aborted)
      resolve()
    }
    const timer = setTimeout(done, ms)
    const aborted = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', aborted, { once: true })
  })
}

/** One signal that aborts when any of `signals` does; undefined when none is given. */
export function anySignal(...signals: (AbortSignal | undefined)[]): AbortSignal | undefined {
  const given = signals.filter((signal): signal is AbortSignal => signal !== undefined)
  if (given.length <= 1) return given[0]
  return AbortSignal.any(given)
}

/**
 * A refusal that no resend changes (a 4xx but auth, timeouts, rate limits and 409): the replica
 * keeps the write as a conflict instead of sending it again.
 */
export function refused(err: unknown): err is NotesProblem {
  if (!(err instanceof NotesProblem)) return false
  const status = err.status
  return status >= 400 && status < 500 && ![401, 403, 408, 409, 429].includes(status)
}

/** Worth the replica's trying again later: the network, a 5xx, auth, 408, 409, 429. */
export function transient(err: unknown): boolean {
  return !refused(err)
}
