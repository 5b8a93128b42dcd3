import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Change, NoteStore } from '../store/types.js'
import {
  eventText,
  HEARTBEAT,
  type Payload,
  payload,
  RETRY_MS,
  resetText,
  startText,
} from './event-framing.js'
import { type FeedTuning, StreamCount } from './feed-tuning.js'

/**
 * History is written in pieces of at most this many bytes: a write counts as sent only once
 * whole, so pieces are what lets a client that reads a long text slowly show that it reads.
 */
const SEND_PIECE_BYTES = 16 * 1024

/** A stream cut off for its backlog, or ended at shutdown, with more unsent than this is destroyed. */
const CLOSE_SLACK_BYTES = 64 * 1024

/** One client's stream and where it stands in the store's sequence of changes. */
class EventStream {
  /** The version token of the last change sent (or the one the stream starts after). */
  token: string
  /** The sequence of `token`, once known; a stream whose token came from a client learns it. */
  last: number | undefined = undefined
  /** Changes received while catching up: sent after the history, from `last` on. */
  held: Change[] = []
  heldBytes = 0
  /** More was held than the bound allows: what was held is dropped and read from history again. */
  overflow = false
  /** A read of the history is under way. */
  reading = false
  /** The head and the opening (retry, and the id it starts after) are sent. */
  opened = false
  closed = false

  constructor(
    readonly response: ServerResponse,
    token: string,
    /** The member who opened it, when they can lose access to the notebook (revoke). */
    readonly member: string | undefined,
    /** Its token is not to be read from: it starts with a reset. */
    public reset: boolean,
  ) {
    this.token = token
  }
}

/**
 * The change feed of one app: subscribes once to the store and writes every change
 * to every open stream, exactly once and in order, whatever point each stream started from.
 *
 * A stream starts *catching up*: it is first registered to hold the changes that arrive live,
 * then reads the store's history after its token (page by page), then sends what it held beyond
 * the last change the history gave, and only then goes *live*. Registering before reading is what
 * makes it exact: a change is either in the history read or arrives afterwards (and is held),
 * and sequences say which were already sent. A store may deliver live changes late (PostgreSQL
 * notifies asynchronously), so nothing here assumes they come before a read that includes them.
 *
 * Live streams share the work: each change is formatted once, and at most every `flushMs` the
 * changes since the last flush are joined into one buffer written to every live stream. A stream
 * that joined in the middle of a batch gets the part of it that it lacks; a stream that would
 * see a gap (a store that skipped sequences) catches up from its history again.
 */
export class ChangeFeed {
  readonly #store: NoteStore
  readonly #tuning: FeedTuning
  readonly #onError: (err: unknown) => void
  readonly #closeConnection: (socket: Socket) => void
  readonly #count: StreamCount
  readonly #ownCap: number | undefined
  #unsubscribe: (() => void) | undefined
  readonly #live = new Set<EventStream>()
  readonly #catchingUp = new Set<EventStream>()
  /** Texts of the changes received since the last flush; the first has sequence #pendingFirst. */
  #pending: string[] = []
  #pendingFirst = 0
  /** The last change received live. */
  #lastSequence: number | undefined
  #lastVersion: string | undefined
  #lastFlush = 0
  #flushTimer: NodeJS.Timeout | undefined
  #heartbeat: NodeJS.Timeout | undefined
  #closing = false

  /**
   * `onError` hears of a store that failed a stream's read (the stream is then closed);
   * `closeConnection` closes an ended stream's connection (the server's lingering close);
   * `count` holds the streams open on every feed that shares the cap (this one alone by default);
   * `ownCap` caps this feed's own streams, so that one notebook cannot hold them all.
   */
  constructor(
    store: NoteStore,
    tuning: FeedTuning,
    onError: (err: unknown) => void,
    closeConnection: (socket: Socket) => void,
    count = new StreamCount(),
    ownCap?: number,
  ) {
    this.#store = store
    this.#tuning = tuning
    this.#onError = onError
    this.#closeConnection = closeConnection
    this.#count = count
    this.#ownCap = ownCap
  }

  /** Streams open now. */
  get size(): number {
    return this.#live.size + this.#catchingUp.size
  }

  get maxStreams(): number {
    return this.#tuning.maxStreams
  }

  /** True once close() has been called: no stream may open. */
  get closing(): boolean {
    return this.#closing
  }

  /** Whether one more stream may open now. */
  admits(): boolean {
    return !this.#closing && this.#count.open < this.#tuning.maxStreams && this.hasRoom()
  }

  /** Whether this feed is below its own cap (a user's share of MAX_EVENT_STREAMS), if it has one. */
  hasRoom(): boolean {
    return this.#ownCap === undefined || this.size < this.#ownCap
  }

  /** Streams this feed may hold at most, of the ones every feed shares; undefined: all of them. */
  get ownCap(): number | undefined {
    return this.#ownCap
  }

  /**
   * Takes over a response whose head (status 200 and EVENT_STREAM_HEADERS) is set but not sent, and
   * streams the changes after the version token `since` to it, or those after now when it is
   * undefined (`reset`: it starts with a reset instead). The head goes out with the opening, once
   * the stream's start is fixed: a client that has the head and then writes gets its own change,
   * however late the store answers (PostgreSQL).
   */
  open(response: ServerResponse, since: string | undefined, member?: string, reset = false): void {
    this.#start()
    const stream = new EventStream(response, since ?? '', member, reset && since !== undefined)
    this.#count.open++
    // Registered before anything is read: from here on every change is held for it.
    this.#catchingUp.add(stream)
    response.once('close', () => this.#drop(stream))
    void this.#begin(stream, since).catch((err: unknown) => this.#fail(stream, err))
  }

  /**
   * Sends `text` (the `revoked` event) to every stream `member` opened, and ends them: they lost
   * read access. What they had not been sent yet is not sent.
   */
  revoke(member: string, text: string): void {
    for (const stream of [...this.#live, ...this.#catchingUp]) {
      if (stream.member !== member) continue
      if (!stream.opened) {
        stream.response.flushHeaders()
        stream.opened = true
      }
      this.#put(stream, text)
      this.#end(stream)
    }
  }

  /** Ends every stream at once and stops; a shutdown is not held up by open streams. */
  close(): void {
    this.#closing = true
    this.#unsubscribe?.()
    this.#unsubscribe = undefined
    clearTimeout(this.#flushTimer)
    clearInterval(this.#heartbeat)
    for (const stream of [...this.#live, ...this.#catchingUp]) this.#end(stream)
  }

  #start(): void {
    if (this.#unsubscribe !== undefined) return
    this.#unsubscribe = this.#store.subscribe((change) => this.#receive(change))
    this.#heartbeat = setInterval(() => this.#beat(), this.#tuning.heartbeatMs)
    this.#heartbeat.unref()
  }

  async #begin(stream: EventStream, since: string | undefined): Promise<void> {
    // A change that arrives meanwhile is held, and must not start a read from a token not known.
    stream.reading = true
    let opening = `retry: ${RETRY_MS}\n\n`
    if (since === undefined) {
      // From the next change: the stream starts after the current version, which it is told
      // as its id, so that a client that reconnects before any event resumes from there.
      stream.token = await this.#store.version()
      if (stream.closed) return
      opening = startText(stream.token)
    }
    if (stream.token === this.#lastVersion) stream.last = this.#lastSequence
    stream.response.flushHeaders()
    stream.opened = true
    if (!this.#write(stream, opening)) return
    await this.#catchUp(stream)
  }

  /** A change from the store: formatted once, held by the streams catching up, flushed soon. */
  #receive(change: Change): void {
    if (this.size === 0) {
      // Nobody to tell: only where the store stands is kept (a batch must stay consecutive).
      this.#pending = []
      this.#lastSequence = change.sequence
      this.#lastVersion = change.version
      return
    }
    const last = this.#lastSequence
    if (last !== undefined) {
      if (change.sequence <= last) return
      // A batch holds consecutive changes only, so that a stream's place in it is arithmetic.
      if (change.sequence !== last + 1) this.#flush()
    }
    if (this.#pending.length === 0) {
      this.#pendingFirst = change.sequence
      this.#scheduleFlush()
    }
    this.#pending.push(eventText(change))
    this.#lastSequence = change.sequence
    this.#lastVersion = change.version
    for (const stream of this.#catchingUp) {
      if (!stream.overflow) {
        stream.held.push(change)
        stream.heldBytes += change.data.length
        if (stream.heldBytes > this.#tuning.maxBacklogBytes) {
          stream.overflow = true
          stream.held = []
          stream.heldBytes = 0
        }
      }
      // A stream waiting to learn where its token lies reads the history again.
      if (!stream.reading)
        void this.#catchUp(stream).catch((err: unknown) => this.#fail(stream, err))
    }
  }

  #scheduleFlush(): void {
    if (this.#flushTimer !== undefined) return
    const wait = this.#lastFlush + this.#tuning.flushMs - performance.now()
    this.#flushTimer = setTimeout(() => this.#flush(), Math.max(0, wait))
    this.#flushTimer.unref()
  }

  /** Writes the pending changes to every live stream: one buffer, built once, for all of them. */
  #flush(): void {
    clearTimeout(this.#flushTimer)
    this.#flushTimer = undefined
    const texts = this.#pending
    if (texts.length === 0) return
    this.#pending = []
    this.#lastFlush = performance.now()
    const first = this.#pendingFirst
    const last = first + texts.length - 1
    const version = this.#lastVersion as string
    let all: Payload | undefined
    for (const stream of this.#live) {
      const at = stream.last as number
      let chunk: Payload | string
      if (at === first - 1) {
        all ??= payload(texts.join(''))
        chunk = all
      } else if (at >= last) {
        continue
      } else if (at >= first) {
        // It went live in the middle of this batch, with the first part sent from what it held.
        chunk = texts.slice(at - first + 1).join('')
      } else {
        // A gap between what it has and this batch: the history has what lies between.
        this.#live.delete(stream)
        this.#catchUpAgain(stream)
        continue
      }
      stream.last = last
      stream.token = version
      this.#write(stream, chunk)
    }
  }

  #catchUpAgain(stream: EventStream): void {
    stream.held = []
    stream.heldBytes = 0
    stream.overflow = false
    this.#catchingUp.add(stream)
    if (!stream.reading) void this.#catchUp(stream).catch((err: unknown) => this.#fail(stream, err))
  }

  /**
   * Sends the history after the stream's token, then what it held, then makes it live. Returns
   * early, with the stream still catching up, when it cannot yet tell where its token lies: the
   * next change that arrives calls it again.
   */
  async #catchUp(stream: EventStream): Promise<void> {
    stream.reading = true
    try {
      let resets = 0
      for (;;) {
        const page = stream.reset
          ? undefined
          : await this.#store.changesSince(stream.token, this.#tuning.historyPage)
        stream.reset = false
        if (stream.closed) return
        if (page === undefined) {
          // Unknown, or older than the history kept: the client must reload the list. Twice in
          // a row would mean the store does not know its own current version.
          if (++resets > 2) throw new Error('the store does not know its current version')
          const current = await this.#store.version()
          if (stream.closed || !this.#write(stream, resetText(current, stream.token))) return
          stream.token = current
          stream.last = current === this.#lastVersion ? this.#lastSequence : undefined
          continue
        }
        const newest = page.at(-1)
        if (newest !== undefined) {
          // Paced by the client rather than cut off: the history is sent as fast as it reads,
          // at most half the bound at a time, and a client that reads nothing is let go.
          const after = stream.last
          let text = ''
          for (const change of page) {
            if (after !== undefined && change.sequence <= after) continue
            text += eventText(change)
            if (text.length > this.#tuning.maxBacklogBytes / 2) {
              await this.#send(stream, text)
              if (stream.closed) return
              text = ''
            }
          }
          stream.last = newest.sequence
          stream.token = newest.version
          if (text !== '') await this.#send(stream, text)
          if (stream.closed) return
          if (page.length === this.#tuning.historyPage) continue
        }
        if (stream.overflow) {
          stream.overflow = false
          continue
        }
        const held = stream.held
        let from = 0
        if (stream.last === undefined) {
          const at = held.findIndex((change) => change.version === stream.token)
          if (at === -1) {
            // Whatever was held is in the store by now: read again, it will tell.
            stream.held = []
            stream.heldBytes = 0
            if (held.length > 0) continue
            return
          }
          stream.last = (held[at] as Change).sequence
          from = at + 1
        }
        const last = stream.last
        while (from < held.length && (held[from] as Change).sequence <= last) from++
        const next = held[from]
        if (next !== undefined && next.sequence !== last + 1) {
          stream.held = []
          stream.heldBytes = 0
          continue
        }
        const newestHeld = held.at(-1)
        stream.held = []
        stream.heldBytes = 0
        if (newestHeld !== undefined && from < held.length) {
          let text = ''
          for (let i = from; i < held.length; i++) text += eventText(held[i] as Change)
          stream.last = newestHeld.sequence
          stream.token = newestHeld.version
          // A client slow to read this: what arrives meanwhile is held, or read from history.
          if (stream.response.writableLength + text.length > this.#tuning.maxBacklogBytes / 2) {
            await this.#send(stream, text)
            if (stream.closed) return
            continue
          }
          this.#put(stream, text)
        }
        this.#catchingUp.delete(stream)
        this.#live.add(stream)
        return
      }
    } finally {
      stream.reading = false
    }
  }

  /** Writes, then waits while the backlog is over half the bound (or until the stream closes). */
  #send(stream: EventStream, text: string): Promise<void> {
    const bytes = Buffer.from(text)
    for (let at = 0; at < bytes.length; at += SEND_PIECE_BYTES) {
      this.#put(stream, payload(bytes.subarray(at, at + SEND_PIECE_BYTES)))
    }
    return this.#drained(stream)
  }

  /**
   * Resolves once the stream's backlog is below half the bound, or it has closed. A client that
   * reads nothing for `stallMs` is cut off, as a live stream is once its backlog passes the bound:
   * it resumes from the last event it received, and nothing waits on it meanwhile. An interval in
   * which this process itself was held up (its check came late by half of it or more) proves
   * nothing of the client, which had no chance to be read from: it starts the count again.
   */
  #drained(stream: EventStream): Promise<void> {
    const { response } = stream
    const socket = response.socket
    const half = this.#tuning.maxBacklogBytes / 2
    if (stream.closed || socket === null || response.writableLength <= half) {
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      let before = response.writableLength
      let checkedAt = performance.now()
      const done = (): void => {
        clearInterval(watch)
        // The socket's: the response never says 'drain' for writes it did not make.
        socket.off('drain', done)
        response.off('close', done)
        resolve()
      }
      const watch = setInterval(() => {
        const now = response.writableLength
        if (stream.closed || now <= half) return done()
        const tickAt = performance.now()
        const late = tickAt - checkedAt - this.#tuning.stallMs
        checkedAt = tickAt
        if (now < before || late >= this.#tuning.stallMs / 2) {
          before = now
          return
        }
        this.#drop(stream)
        response.destroy()
        done()
      }, this.#tuning.stallMs)
      watch.unref()
      socket.on('drain', done)
      response.on('close', done)
    })
  }

  /** Writes to a stream; false when its backlog passed the bound and it was cut off. */
  #write(stream: EventStream, data: Payload | string): boolean {
    this.#put(stream, data)
    if (stream.closed) return false
    if (stream.response.writableLength <= this.#tuning.maxBacklogBytes) return true
    // The client does not read: close rather than hold ever more for it. It resumes from the
    // last event it received (Last-Event-ID) without losing any.
    this.#drop(stream)
    stream.response.destroy()
    return false
  }

  /** Writes to a stream's socket, as a chunk unless the response is not chunked (HTTP/1.0). */
  #put(stream: EventStream, data: Payload | string): void {
    const { response } = stream
    const socket = response.socket
    if (stream.closed || socket === null) return
    const written = typeof data === 'string' ? payload(data) : data
    socket.write(response.chunkedEncoding ? written.chunk : written.raw)
  }

  #beat(): void {
    for (const stream of this.#live) this.#write(stream, HEARTBEAT)
    // Paced by #send, not cut off; none before the head and the opening.
    for (const stream of this.#catchingUp) if (stream.opened) this.#put(stream, HEARTBEAT)
  }

  /** Ends a stream's response and its connection, without waiting for a client that does not read. */
  #end(stream: EventStream): void {
    this.#drop(stream)
    const { response } = stream
    response.end()
    const socket = response.socket
    if (response.writableLength > CLOSE_SLACK_BYTES || socket === null) response.destroy()
    else this.#closeConnection(socket)
  }

  /** A read of the store failed: the client reconnects and resumes from its last id. */
  #fail(stream: EventStream, err: unknown): void {
    this.#onError(err)
    this.#drop(stream)
    stream.response.destroy()
  }

  #drop(stream: EventStream): void {
    if (stream.closed) return
    stream.closed = true
    this.#count.open--
    stream.held = []
    this.#live.delete(stream)
    this.#catchingUp.delete(stream)
  }
}
