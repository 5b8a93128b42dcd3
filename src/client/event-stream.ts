/**
 * A text/event-stream parser (the HTML standard's rules, §9.2.6), fed decoded text in chunks
 * split anywhere. Lines end with CRLF, LF or CR (a CRLF split between two chunks is one line
 * end); 'field: value' drops one space after the colon; a line starting with ':' is a comment;
 * data lines join with '\n'; an empty line dispatches the event when it has data; an id with a
 * NUL is ignored; an id counts once its event's blank line
 * has arrived. Linear time: each character is looked at once, and a line cut across many
 * chunks is joined once, when it ends.
 *
 * 'event: created\r\nid: e.7\r\ndata: {"id":1}\r\n\r\n' -> [{ type: 'created', id: 'e.7', data: '{"id":1}' }]
 */

/** One dispatched event. */
export interface StreamEvent {
  /** The `event:` field, or 'message' when it named none. */
  type: string
  /** The last event id seen in the stream so far (what Last-Event-ID resumes from). */
  id: string
  data: string
}

export class EventStreamParser {
  /** The parts of a line not ended yet. */
  #partial: string[] = []
  /** The previous chunk ended with CR: a LF that starts this one ends nothing. */
  #afterCr = false
  #type = ''
  #data: string[] = []
  /** The id of the event being read: it becomes the last id only once the event is complete. */
  #idBuffer: string
  #lastId: string

  constructor(lastId = '') {
    this.#lastId = lastId
    this.#idBuffer = lastId
  }

  get lastId(): string {
    return this.#lastId
  }

  /** Feeds a chunk; returns the events it completed, in order. */
  push(chunk: string): StreamEvent[] {
    const events: StreamEvent[] = []
    let start = this.#afterCr && chunk.charCodeAt(0) === 10 ? 1 : 0
    this.#afterCr = false
    for (let i = start; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i)
      if (c !== 10 && c !== 13) continue
      let line = chunk.slice(start, i)
      if (this.#partial.length > 0) {
        this.#partial.push(line)
        line = this.#partial.join('')
        this.#partial = []
      }
      this.#line(line, events)
      if (c === 13) {
        if (i + 1 === chunk.length) this.#afterCr = true
        else if (chunk.charCodeAt(i + 1) === 10) i++
      }
      start = i + 1
    }
    if (start < chunk.length) this.#partial.push(chunk.slice(start))
    return events
  }

  #line(line: string, events: StreamEvent[]): void {
    if (line === '') {
      // A stream cut before this blank line must resume before this event, not after it.
      this.#lastId = this.#idBuffer
      if (this.#data.length > 0) {
        events.push({
          type: this.#type === '' ? 'message' : this.#type,
          id: this.#lastId,
          data: this.#data.join('\n'),
        })
      }
      this.#type = ''
      this.#data = []
      return
    }
    if (line.charCodeAt(0) === 58) return // ':' a comment (the service's heartbeat)
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.charCodeAt(0) === 32) value = value.slice(1)
    if (field === 'event') this.#type = value
    else if (field === 'data') this.#data.push(value)
    else if (field === 'id' && !value.includes('\0')) this.#idBuffer = value
  }
}
