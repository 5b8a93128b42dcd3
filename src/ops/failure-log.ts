import type { FastifyBaseLogger } from 'fastify'

/** How long the repeats of an expected condition are counted before one line reports them. */
export const CONDITION_INTERVAL_MS = 60_000

/** One condition's current interval: how many repeats were not logged, and its timer. */
interface Interval {
  readonly status: number
  suppressed: number
  /** Date.now() when the interval began. */
  began: number
  readonly timer: NodeJS.Timeout
}

/**
 * How both lanes log a request that failed, by the status it is answered with:
 * - 500 is a bug: `error`, with the error, its stack and the request's id, every time.
 * - Anything else is an expected condition, logged without a stack: 507 (store full) and any
 *   other 5xx at `warn`, since an operator can act on them; a 4xx at `info`, since it is the
 *   client's to fix. Not once per request: the first of a condition (its status and error code)
 *   is logged with its request id and detail, its repeats are only counted, and at the end of
 *   each interval one line says how many there were. A store that stays full under load writes
 *   one line per interval, however many 507s it answers.
 *
 * Conditions are keyed by status and error code (or name), never by text from the request, so
 * their number stays bounded whatever clients send.
 */
export class FailureLog {
  readonly #logger: () => FastifyBaseLogger
  readonly #intervalMs: number
  readonly #intervals = new Map<string, Interval>()

  /**
   * @param logger the logger to write to, read at each report (`app.log` is set after the app
   *   is made)
   */
  constructor(logger: () => FastifyBaseLogger, intervalMs = CONDITION_INTERVAL_MS) {
    this.#logger = logger
    this.#intervalMs = intervalMs
  }

  /** Logs a failed request answered `status` with `detail`, by the rule above. */
  report(error: unknown, status: number, detail: string, requestId: string): void {
    if (status === 500) {
      this.#logger().error({ reqId: requestId, err: error }, 'request failed')
      return
    }
    const condition = `${status} ${conditionOf(error)}`
    const interval = this.#intervals.get(condition)
    if (interval !== undefined) {
      interval.suppressed++
      return
    }
    // A cause (a StoreUnavailableError's: 'connection refused at 127.0.0.1:5499') is for the
    // operator only: the answer's detail never reveals it.
    const cause = causeOf(error)
    this.#log(
      status,
      cause === undefined
        ? { reqId: requestId, statusCode: status, condition }
        : { reqId: requestId, statusCode: status, condition, cause },
      cause === undefined
        ? `request answered ${status}: ${detail}`
        : `request answered ${status}: ${detail} Cause: ${cause}`,
    )
    const timer = this.#endOfInterval(condition)
    this.#intervals.set(condition, { status, suppressed: 0, began: Date.now(), timer })
  }

  /** Reports the repeats counted so far and stops the timers (the app is closing). */
  flush(): void {
    for (const [condition, interval] of this.#intervals) {
      clearTimeout(interval.timer)
      this.#summarize(condition, interval)
    }
    this.#intervals.clear()
  }

  #endOfInterval(condition: string): NodeJS.Timeout {
    const timer = setTimeout(() => {
      const interval = this.#intervals.get(condition)
      if (interval === undefined) return
      if (interval.suppressed === 0) {
        // Quiet for a whole interval: the next one is logged at once again.
        this.#intervals.delete(condition)
        return
      }
      this.#summarize(condition, interval)
      interval.suppressed = 0
      interval.began = Date.now()
      timer.refresh()
    }, this.#intervalMs)
    // A pending report must not keep the process alive; flush() writes it on close.
    timer.unref()
    return timer
  }

  /** '507 StoreFullError', 3 repeats -> '3 more requests answered 507 StoreFullError in 60.0 s' */
  #summarize(condition: string, { status, suppressed, began }: Interval): void {
    if (suppressed === 0) return
    const overMs = Date.now() - began
    this.#log(
      status,
      { statusCode: status, condition, suppressed, overMs },
      `${suppressed} more ${suppressed === 1 ? 'request' : 'requests'} answered ${condition} in ${(overMs / 1000).toFixed(1)} s`,
    )
  }

  #log(status: number, fields: Record<string, unknown>, message: string): void {
    const logger = this.#logger()
    if (status >= 500) logger.warn(fields, message)
    else logger.info(fields, message)
  }
}

/** StoreFullError -> 'StoreFullError'; a Fastify error -> its code, 'FST_ERR_CTP_BODY_TOO_LARGE' */
function conditionOf(error: unknown): string {
  if (typeof error !== 'object' || error === null) return typeof error
  const { code, name } = error as { code?: unknown; name?: unknown }
  if (typeof code === 'string') return code
  return typeof name === 'string' ? name : 'Error'
}

/** The text an error gives as its `cause`, if any. */
function causeOf(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined
  return typeof error.cause === 'string' ? error.cause : undefined
}
