/**
 * The change feed (`GET /api/events`, or a notebook's `/api/notebooks/:nb/events`) as an async
 * iterator over fetch, so that it can send Authorization (an EventSource cannot). After a drop, a
 * failed connection or a restart of the service it connects again with `Last-Event-ID: <the last
 * id seen>`, after a backoff (or what `Retry-After` asks), so that no change is missed or seen
 * twice; the service answers `reset` when its history no longer reaches back that far. It ends
 * when its signal aborts or its `return()` is called, and then aborts the fetch under it: no
 * socket is left open. It ends too after a `revoked` event (the caller lost the notebook):
 * reconnecting would only be refused.
 */
import { NotesProblem, problemOf } from './errors.js'
import { EventStreamParser } from './event-stream.js'
import { parseJson } from './parse-json.js'
import { anySignal, backoffMs, retryAfterMs, sleep } from './retry-policy.js'
import type { Transport } from './transport.js'
import type { ChangeEvent, Note } from './types.js'

/** Where the feed starts, and what ends it. */
export interface EventsOptions {
  /**
   * The version to start after: a list's `version`, or the `version` of the last event handled.
   * Without it, the feed starts with the next change.
   */
  since?: string | undefined
  /** Ends the feed when it aborts. */
  signal?: AbortSignal | undefined
}

/** The service sends a comment every 15 s: a stream silent for 45 s is dead (a half-open socket). */
const SILENCE_MS = 45_000

/** Statuses that no retry changes: the feed ends with the problem. */
const FINAL_STATUSES = new Set([400, 401, 403, 404, 405])

/**
 * How a stream's messages read as the items a feed yields: (type, id, data) -> an item, or
 * undefined for a message that is none (the opening one); `last(item)`: the stream ends after it.
 */
export interface FeedDecoder<T> {
  item(type: string, id: string, data: string): T | undefined
  last(item: T): boolean
}

/** A notebook's feed (or the default one): changes, reset, and revoked, after which it ends. */
const CHANGES: FeedDecoder<ChangeEvent> = {
  item: changeOf,
  last: (event) => event.type === 'revoked',
}

export class ChangeFeed<T = ChangeEvent> implements AsyncIterableIterator<T> {
  readonly #stop = new AbortController()
  readonly #events: AsyncGenerator<T, undefined, undefined>
  readonly #decoder: FeedDecoder<T>
  #lastId: string

  /**
   * `path`: the stream's, '/api/events', '/api/notebooks/<id>/events' or
   * '/api/events?notebooks=all' (with its own decoder).
   */
  constructor(
    transport: Transport,
    options: EventsOptions = {},
    path = '/api/events',
    decoder: FeedDecoder<T> = CHANGES as unknown as FeedDecoder<T>,
  ) {
    this.#lastId = options.since ?? ''
    this.#decoder = decoder
    const signal = anySignal(this.#stop.signal, transport.signal, options.signal) as AbortSignal
    this.#events = this.#follow(transport, signal, transport.url(path))
  }

  /** The version of the last change (or reset) delivered or skipped over: where a resume starts. */
  get lastEventId(): string {
    return this.#lastId
  }

  next(): Promise<IteratorResult<T, undefined>> {
    return this.#events.next()
  }

  /** Ends the feed at once, aborting the request under it, even while a `next()` waits. */
  return(): Promise<IteratorResult<T, undefined>> {
    this.#stop.abort()
    return this.#events.return(undefined)
  }

  [Symbol.asyncIterator](): this {
    return this
  }

  async *#follow(
    transport: Transport,
    signal: AbortSignal,
    url: string,
  ): AsyncGenerator<T, undefined, undefined> {
    let failures = 0
    while (!signal.aborted) {
      const connection = new AbortController()
      const connectionSignal = AbortSignal.any([signal, connection.signal])
      let wait: number | undefined
      let reader: ReadableStreamDefaultReader<Uint8Array> | undefined
      let watchdog: ReturnType<typeof setInterval> | undefined
      try {
        const headers: Record<string, string> = { accept: 'text/event-stream' }
        const authorization = await transport.authorization()
        if (authorization !== undefined) headers.authorization = authorization
        if (this.#lastId !== '') headers['last-event-id'] = this.#lastId
        const response = await transport.fetch(url, {
          headers,
          signal: connectionSignal,
        })
        const type = response.headers.get('content-type') ?? ''
        if (
          response.status !== 200 ||
          response.body === null ||
          !type.startsWith('text/event-stream')
        ) {
          const text = await response.text()
          if (FINAL_STATUSES.has(response.status)) {
            throw problemOf(response.status, response.headers, parsed(text))
          }
          wait = retryAfterMs(response.headers.get('retry-after'))
          throw new Error(`the feed answered ${response.status}`)
        }
        failures = 0
        reader = response.body.getReader()
        const decoder = new TextDecoder()
        const parser = new EventStreamParser(this.#lastId)
        let heard = Date.now()
        watchdog = setInterval(() => {
          if (Date.now() - heard > SILENCE_MS) connection.abort()
        }, SILENCE_MS / 3)
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          heard = Date.now()
          for (const message of parser.push(decoder.decode(value, { stream: true }))) {
            // Parsed before the id counts: an event that cannot be read is asked for again.
            const event = this.#decoder.item(message.type, message.id, message.data)
            this.#lastId = message.id
            if (event === undefined) continue
            yield event
            // The service ends the stream after it; the finally below closes the request.
            if (this.#decoder.last(event)) return undefined
          }
          // An id whose event had no data moves the resume point too.
          this.#lastId = parser.lastId
        }
      } catch (err) {
        if (signal.aborted) return undefined
        if (err instanceof NotesProblem) throw err
      } finally {
        clearInterval(watchdog)
        // Ends the request under the stream, however the loop was left (return(), a throw).
        connection.abort()
        reader?.cancel().catch(() => {})
      }
      const delay = Math.min(wait ?? backoffMs(failures, transport.maxDelayMs), 60_000)
      failures++
      try {
        await sleep(delay, signal)
      } catch {
        return undefined
      }
    }
    return undefined
  }
}

/** A message of the stream as a change, or undefined for one that is not (the opening one). */
function changeOf(type: string, version: string, data: string): ChangeEvent | undefined {
  switch (type) {
    case 'created':
    case 'updated':
      return { type, version, note: parseJson(data) as Note }
    case 'deleted':
      return { type, version, id: (parseJson(data) as { id: number }).id }
    case 'reset':
      return { type, version }
    case 'revoked':
      return { type, version, notebook: (parseJson(data) as { notebook: string }).notebook }
    default:
      return undefined
  }
}

function parsed(text: string): unknown {
  if (text === '') return undefined
  try {
    return parseJson(text)
  } catch {
    return text
  }
}
