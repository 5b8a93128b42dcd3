import { authorizationHeaders } from './api.js'
import { type SseEvent, SseParser } from './sse.js'

export type FeedState =
  | { state: 'connecting' }
  | { state: 'live' }
  | { state: 'retrying'; inMs: number }
  | { state: 'unavailable'; why: string }

export interface FeedHandlers {
  /** Every event, in order (created, updated, deleted, reset). */
  onEvent(event: SseEvent): void
  onState(state: FeedState): void
  /** The feed answered 401: the feed waits until start() is called again. */
  onUnauthorized(): void
}

/** Reconnection waits: 0.5 s, doubling to 5 s. */
const FIRST_RETRY_MS = 500
const LONGEST_RETRY_MS = 5_000
/** The server sends a comment every 15 s: a stream silent for 40 s is dead (a half-open socket). */
const SILENCE_MS = 40_000

/**
 * Follows `GET /api/events` with fetch() (an EventSource cannot send Authorization) and parses
 * the stream itself. After a drop, an error or a server restart it reconnects with
 * `Last-Event-ID: <the last id seen>`, so no change is missed or seen twice; the server answers
 * `reset` when it cannot resume from there, and the page reloads its list.
 */
export class ChangeFeed {
  readonly #handlers: FeedHandlers
  #controller: AbortController | undefined
  #lastEventId = ''
  #run = 0

  constructor(handlers: FeedHandlers) {
    this.#handlers = handlers
  }

  /** Follows the changes after `since` (a version token; '' for the next change on). */
  start(since: string): void {
    this.stop()
    this.#lastEventId = since
    const run = ++this.#run
    void this.#follow(run)
  }

  stop(): void {
    this.#run++
    this.#controller?.abort()
    this.#controller = undefined
  }

  async #follow(run: number): Promise<void> {
    let wait = FIRST_RETRY_MS
    while (run === this.#run) {
      this.#handlers.onState({ state: 'connecting' })
      const outcome = await this.#connect(run)
      if (run !== this.#run) return
      if (outcome.kind === 'stop') return
      if (outcome.kind === 'streamed') wait = FIRST_RETRY_MS
      const inMs = outcome.kind === 'busy' ? Math.max(outcome.retryMs, wait) : wait
      this.#handlers.onState({ state: 'retrying', inMs })
      await new Promise((resolve) => setTimeout(resolve, inMs))
      wait = Math.min(wait * 2, LONGEST_RETRY_MS)
    }
  }

  /** One connection, until it ends. */
  async #connect(
    run: number,
  ): Promise<{ kind: 'stop' | 'failed' | 'streamed' } | { kind: 'busy'; retryMs: number }> {
    const controller = new AbortController()
    this.#controller = controller
    const headers: Record<string, string> = {
      accept: 'text/event-stream',
      ...authorizationHeaders(),
    }
    if (this.#lastEventId !== '') headers['last-event-id'] = this.#lastEventId
    let response: Response
    try {
      response = await fetch('/api/events', {
        headers,
        cache: 'no-store',
        credentials: 'omit',
        signal: controller.signal,
      })
    } catch {
      return { kind: 'failed' }
    }
    if (run !== this.#run) return { kind: 'stop' }
    if (response.status === 401) {
      this.#handlers.onUnauthorized()
      return { kind: 'stop' }
    }
    if (response.status === 404) {
      this.#handlers.onState({
        state: 'unavailable',
        why: 'This service has no change feed: reload the page to see changes made elsewhere.',
      })
      return { kind: 'stop' }
    }
    const type = response.headers.get('content-type') ?? ''
    if (!response.ok || response.body === null || !type.startsWith('text/event-stream')) {
      const retryAfter = Number(response.headers.get('retry-after'))
      await response.body?.cancel()
      return Number.isFinite(retryAfter) && retryAfter > 0
        ? { kind: 'busy', retryMs: retryAfter * 1000 }
        : { kind: 'failed' }
    }
    this.#handlers.onState({ state: 'live' })
    const parser = new SseParser(this.#lastEventId)
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    let heard = Date.now()
    const watchdog = setInterval(() => {
      if (Date.now() - heard > SILENCE_MS) controller.abort()
    }, SILENCE_MS / 4)
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done || run !== this.#run) break
        heard = Date.now()
        for (const event of parser.push(value)) {
          if (run !== this.#run) break
          this.#lastEventId = event.lastEventId
          this.#handlers.onEvent(event)
        }
      }
    } catch {
      // The connection dropped or was aborted: reconnect from the last id.
    } finally {
      clearInterval(watchdog)
      reader.cancel().catch(() => {})
    }
    return { kind: 'streamed' }
  }
}
