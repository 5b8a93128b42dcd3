/**
 * The replica's rules for trying again: which failures a resend cannot change (a conflict), which
 * are worth another attempt, the backoff between attempts, and a wait that an abort cuts short.
 */
import { NotesProblem } from '../errors.js'

/** A refusal no resend changes (a 4xx but auth, timeouts, rate limits and 409): a conflict. */
export function refused(err: unknown): err is NotesProblem {
  if (!(err instanceof NotesProblem)) return false
  const status = err.status
  return status >= 400 && status < 500 && ![401, 403, 408, 409, 429].includes(status)
}

/** Worth trying again later: the network, a 5xx, auth, 408, 409, 429. */
export function transient(err: unknown): boolean {
  return !(err instanceof NotesProblem) || !refused(err)
}

/** The wait before the next attempt: 0 failures -> 100-200 ms, doubling up to `maxDelayMs`. */
export function backoff(failures: number, maxDelayMs: number): number {
  const ceiling = Math.min(200 * 2 ** Math.min(failures, 20), maxDelayMs)
  return ceiling / 2 + Math.random() * (ceiling / 2)
}

/** Waits, or rejects when the signal aborts (and then holds no timer). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason)
      return
    }
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
