/** One event of a text/event-stream, as dispatched (the HTML standard's "dispatch the event"). */
export interface SseEvent {
  /** 'message' when the event named none. */
  type: string
  /** The last event id seen so far in the stream, as EventSource's lastEventId. */
  lastEventId: string
  data: string
}

/**
 * A text/event-stream parser, fed text as it arrives in chunks of any size. It follows the
 * HTML standard's parsing rules (§9.2.6): lines end with CRLF, LF or CR; 'field: value' drops
 * one space after the colon; a line starting with ':' is a comment; an empty line dispatches
 * the event when it has data; an id containing NUL is ignored.
 *
 * 'event: created\nid: 7\ndata: {"id":1}\n\n' -> [{ type: 'created', lastEventId: '7', data: '{"id":1}' }]
 */
export class SseParser {
  #pending = ''
  /** The previous chunk ended with CR: a LF starting this one belongs to that line end. */
  #afterCr = false
  #type = ''
  #data: string[] = []
  #lastEventId: string

  constructor(lastEventId = '') {
    this.#lastEventId = lastEventId
  }

  get lastEventId(): string {
    return this.#lastEventId
  }

  /** Feeds a chunk; returns the events it completed, in order. */
  push(chunk: string): SseEvent[] {
    if (chunk === '') return []
    let text = chunk
    if (this.#afterCr && text.startsWith('\n')) text = text.slice(1)
    this.#afterCr = text.endsWith('\r')
    text = this.#pending + text
    const events: SseEvent[] = []
    let start = 0
    for (;;) {
      const end = lineEnd(text, start)
      if (end === -1) break
      this.#line(text.slice(start, end), events)
      start = end + (text[end] === '\r' && text[end + 1] === '\n' ? 2 : 1)
    }
    this.#pending = text.slice(start)
    return events
  }

  #line(line: string, events: SseEvent[]): void {
    if (line === '') {
      if (this.#data.length > 0) {
        events.push({
          type: this.#type === '' ? 'message' : this.#type,
          lastEventId: this.#lastEventId,
          data: this.#data.join('\n'),
        })
      }
      this.#type = ''
      this.#data = []
      return
    }
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'event') this.#type = value
    else if (field === 'data') this.#data.push(value)
    else if (field === 'id' && !value.includes('\0')) this.#lastEventId = value
  }
}

/** The index of the first CR or LF at or after `from`, or -1. */
function lineEnd(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i)
    // A CR at the very end may be half of a CRLF: the line ends there anyway, and push()
    // drops the LF that starts the next chunk.
    if (c === 10 || c === 13) return i
  }
  return -1
}
