import { type IncomingHttpHeaders, type IncomingMessage, request } from 'node:http'

/** One dispatched SSE message, as a browser's EventSource would see it (fields as sent). */
export interface SseMessage {
  event: string | undefined
  id: string | undefined
  data: string | undefined
  retry: string | undefined
}

/**
 * A change-feed client over a real socket: the head, every byte of the body as received, and
 * the messages parsed from it (a block of lines ended by a blank line; comments kept apart).
 */
export class SseClient {
  readonly response: IncomingMessage
  /** What has arrived and is not yet a whole message (all of it is in `text`). */
  #unparsed = ''
  /** Every chunk received, joined when asked for: parsing never copies what came before. */
  #chunks: string[] = []
  readonly messages: SseMessage[] = []
  comments = 0
  /** True once the response ended cleanly (the terminating chunk); 'aborted' if it was cut. */
  ended: false | true | 'aborted' = false
  readonly #waiters = new Set<() => void>()

  private constructor(response: IncomingMessage, paused: boolean) {
    this.response = response
    response.setEncoding('utf8')
    response.on('data', (chunk: string) => {
      this.#chunks.push(chunk)
      this.#parse(chunk)
    })
    response.on('end', () => {
      if (this.ended === false) this.ended = true
      this.#wake()
    })
    response.on('aborted', () => {
      this.ended = 'aborted'
      this.#wake()
    })
    response.on('error', () => {
      this.ended = 'aborted'
      this.#wake()
    })
    response.on('close', () => {
      if (this.ended === false) this.ended = 'aborted'
      this.#wake()
    })
    // Before the first read of the body: a pause made later, once the caller has the client,
    // comes after a burst of reads (libuv reads up to 32 buffers at a time, and a response that
    // is flowing takes them all), so how much a "stopped" client took would depend on timing.
    if (paused) response.pause()
  }

  /** Every byte received so far, as text. */
  get text(): string {
    if (this.#chunks.length > 1) this.#chunks = [this.#chunks.join('')]
    return this.#chunks[0] ?? ''
  }

  get status(): number {
    return this.response.statusCode ?? 0
  }

  get headers(): IncomingHttpHeaders {
    return this.response.headers
  }

  /**
   * Opens GET `path` (or another method) on 127.0.0.1:port and resolves once the head is in;
   * `paused`, it reads nothing of the body until `response.resume()`.
   */
  static open(
    port: number,
    path = '/api/events',
    headers: Record<string, string> = {},
    method = 'GET',
    { paused = false }: { paused?: boolean } = {},
  ): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path, method, headers, agent: false },
        (response) => resolve(new SseClient(response, paused)),
      )
      req.on('error', reject)
      req.end()
    })
  }

  /**
   * Resolves once `done()` holds, checked after every chunk; rejects after `timeoutMs`: a bound on
   * waiting, not a speed check. 30 s, since a resumed stream of 20 MB of history once took over
   * 10 s on a 2-core machine running other test files beside it.
   */
  until(done: (client: SseClient) => boolean, timeoutMs = 30_000): Promise<void> {
    if (done(this)) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!done(this)) return
        clearTimeout(timer)
        this.#waiters.delete(check)
        resolve()
      }
      const timer = setTimeout(() => {
        this.#waiters.delete(check)
        reject(new Error(`timed out; received so far:\n${this.text.slice(-2000)}`))
      }, timeoutMs)
      this.#waiters.add(check)
    })
  }

  /** Resolves once `count` messages with an `event` field have arrived. */
  events(count: number, timeoutMs?: number): Promise<SseMessage[]> {
    const events = (): SseMessage[] => this.messages.filter((m) => m.event !== undefined)
    return this.until(() => events().length >= count, timeoutMs).then(events)
  }

  /** Resolves once the response has ended (cleanly or not). */
  closed(timeoutMs?: number): Promise<void> {
    return this.until((client) => client.ended !== false, timeoutMs)
  }

  close(): void {
    this.response.destroy()
  }

  #parse(chunk: string): void {
    // Only the new chunk (and the line break before it) can end a message.
    let from = Math.max(0, this.#unparsed.length - 1)
    this.#unparsed += chunk
    for (;;) {
      const end = this.#unparsed.indexOf('\n\n', from)
      if (end === -1) break
      const block = this.#unparsed.slice(0, end)
      this.#unparsed = this.#unparsed.slice(end + 2)
      from = 0
      const message: SseMessage = {
        event: undefined,
        id: undefined,
        data: undefined,
        retry: undefined,
      }
      let comment = true
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue
        comment = false
        const colon = line.indexOf(': ')
        const name = line.slice(0, colon)
        const value = line.slice(colon + 2)
        if (name === 'event' || name === 'id' || name === 'data' || name === 'retry') {
          message[name] = value
        } else {
          throw new Error(`unexpected line ${JSON.stringify(line)}`)
        }
      }
      if (comment) this.comments++
      else this.messages.push(message)
    }
    this.#wake()
  }

  #wake(): void {
    for (const waiter of [...this.#waiters]) waiter()
  }
}
