import type { Change } from '../store/types.js'

/*
 * The change feed's wire format (the WHATWG event-stream rules): the headers of an
 * event stream, the text of each message (a change, a reset, the opening), and the chunks that
 * the feed writes to every stream's socket.
 */

/** The headers of every event stream, besides those every answer gets (X-Request-Id, CORS...). */
export const EVENT_STREAM_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  // nginx and others buffer answers by default; an event would wait in the proxy.
  'x-accel-buffering': 'no',
})

/** How long a browser's EventSource waits before it reconnects, in ms (its `retry:` field). */
export const RETRY_MS = 2000

const CRLF = Buffer.from('\r\n')

/** What is written for `data`: as it is, and framed as one HTTP/1.1 chunk. */
export interface Payload {
  readonly raw: Buffer
  readonly chunk: Buffer
}

/**
 * Streams are written on their sockets directly, each write one chunk of the chunked response
 * framed here, once for every stream that gets it: ServerResponse.write frames it again for each
 * stream, in four pieces and a corked write released on the next tick, which cost about twice as
 * much CPU per stream and write (bench W9). Node still ends the response ('0\r\n\r\n').
 * 'abc' -> raw 'abc', chunk '3\r\nabc\r\n'
 */
export function payload(data: Buffer | string): Payload {
  const raw = typeof data === 'string' ? Buffer.from(data) : data
  const chunk = Buffer.concat([Buffer.from(`${raw.length.toString(16)}\r\n`), raw, CRLF])
  return { raw, chunk }
}

/** A comment: ignored by every SSE parser, but traffic that keeps proxies and sockets open. */
export const HEARTBEAT = payload(':\n\n')

/**
 * One change as an SSE event. Note JSON never holds a raw line break, so it is
 * one `data:` line.
 * { type: 'created', version: 'e.5', data: '{"id":1}' } -> 'event: created\nid: e.5\ndata: {"id":1}\n\n'
 */
export function eventText(change: Change): string {
  return `event: ${change.type}\nid: ${change.version}\ndata: ${change.data}\n\n`
}

/**
 * The event that tells a client to reload the list: its token is unknown or older than the
 * history kept. ('e.9', 'x.1') -> 'event: reset\nid: e.9\ndata: {"version":"x.1"}\n\n'
 */
export function resetText(current: string, token: string): string {
  return `event: reset\nid: ${current}\ndata: ${JSON.stringify({ version: token })}\n\n`
}

/**
 * The opening of a stream that starts at the next change: the reconnection delay, and the version
 * it starts after as the id of a message with data. The data line is what makes every client
 * record the id: browsers and eventsource 5 record an id even from a block without data, but
 * eventsource 4 (and other parsers that skip such blocks) would reconnect without Last-Event-ID
 * and miss what changed meanwhile. It names no event, so it is a `message` (what `onmessage`
 * sees; the changes are all named events), and a `created` listener never sees it.
 * 'e.5' -> 'retry: 2000\nid: e.5\ndata: {"version":"e.5"}\n\n'
 */
export function startText(version: string): string {
  return `retry: ${RETRY_MS}\nid: ${version}\ndata: ${JSON.stringify({ version })}\n\n`
}

/**
 * What a stream of a member who lost read access gets before it ends.
 * 'n4Q' -> 'event: revoked\ndata: {"notebook":"n4Q"}\n\n'
 */
export function revokedText(notebook: string): string {
  return `event: revoked\ndata: ${JSON.stringify({ notebook })}\n\n`
}
