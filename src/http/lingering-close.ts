import { Socket } from 'node:net'

/**
 * How long and how much a connection is read from after the server has finished writing to it.
 * A refused 20 MB upload on loopback is read to its end well within them; a client that never
 * stops sending holds its socket for 5 s at most, and costs at most 32 MiB of reading.
 */
export const LINGER_LIMITS = Object.freeze({
  /** Closes once the client has sent nothing for this long (Apache's lingering close waits 2 s). */
  idleMs: 2000,
  /** Closes this long after the last response was written, whatever the client does. */
  totalMs: 5000,
  /** Closes once this many bytes have been discarded (more than a 20 MB upload leaves to read). */
  bytes: 32 * 1024 * 1024,
})

/** Connections being closed (kept aside, like the pipelining queue, so sockets keep Node's shape). */
const lingering = new WeakSet<Socket>()

/** True once closeLingering has begun on this connection. */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket)
}

/**
 * Closes a connection without losing the last answer written on it (RFC 9112 §9.6):
 * half-closes (FIN after whatever is queued), then reads and discards what the client still sends
 * until it closes its side, goes quiet, or passes LINGER_LIMITS, and only then closes.
 *
 * Closing at once is what lost refusals: a 413 sent after the headers of a 20 MB upload, then a
 * close with the upload still arriving, makes the kernel answer the next segment with a reset,
 * and a reset can discard the 413 from the client's buffers before the client reads it (1 run in
 * 3 on a busy machine).
 *
 * Whatever arrives from now on is never handed to the HTTP parser: a request sent after a
 * `Connection: close` answer, or behind a body that was refused, is not served.
 */
export function closeLingering(socket: Socket): void {
  if (lingering.has(socket) || socket.destroyed) return
  lingering.add(socket)
  let idle: NodeJS.Timeout | undefined
  let total: NodeJS.Timeout | undefined
  let discarded = 0
  // Node's HTTP server reads through its 'data' listener, or from the handle directly until a
  // 'data' listener is added (its wrapper of socket.on takes the handle back from the parser).
  socket.removeAllListeners('data')
  socket.on('data', (chunk: Buffer) => {
    discarded += chunk.length
    if (discarded > LINGER_LIMITS.bytes) socket.destroy()
    else idle?.refresh()
  })
  // The client has closed its side: nothing more can arrive, so close once our answer is out.
  socket.once('end', () => closeWhenWritten(socket))
  socket.once('close', () => {
    clearTimeout(idle)
    clearTimeout(total)
  })
  const startClock = (): void => {
    if (socket.destroyed) return
    idle = setTimeout(() => socket.destroy(), LINGER_LIMITS.idleMs)
    total = setTimeout(() => socket.destroy(), LINGER_LIMITS.totalMs)
  }
  if (socket.readableEnded) {
    closeWhenWritten(socket)
    return
  }
  socket.resume()
  restartReading(socket)
  if (socket.writable) socket.end()
  // The limits count from when the answer has been handed to the kernel, so a client reading a
  // large last response slowly is not cut off by them (the socket timeout still watches it).
  if (socket.writableFinished) startClock()
  else socket.once('finish', startClock)
}

/** libuv's stream handle, as Node's HTTP server reaches it. */
type SocketWithHandle = Socket & {
  _handle?: { reading?: boolean; readStart?: () => number } | null
}

/**
 * While Node's HTTP parser reads a connection, pausing the socket stops its handle, and the
 * socket's next 'resume' event starts it again through a listener that adding a 'data' listener
 * removes. A body nobody reads fills its request's buffer and pauses the socket that way (a 413
 * sent after the headers of a large upload), so the handle is started here as that listener
 * would; otherwise nothing is read and the client stalls until the idle limit resets it.
 */
function restartReading(socket: Socket): void {
  const handle = (socket as SocketWithHandle)._handle
  if (handle?.reading === false && handle.readStart !== undefined) {
    handle.reading = true
    if (handle.readStart() !== 0) socket.destroy()
  }
}

/** net.Socket's own destroySoon: end, and destroy once everything written has been flushed. */
function closeWhenWritten(socket: Socket): void {
  Socket.prototype.destroySoon.call(socket)
}

/**
 * Makes the close that Node's HTTP server performs after this connection's `Connection: close`
 * response linger. Node closes with `socket.destroySoon()`: end, then destroy as soon as the
 * response is flushed, which resets a client that is still sending. Set only on connections the
 * server decides to close (a refusal, a shutdown): an own property on every socket would give
 * sockets another hidden class, and Node's per-request reads of socket fields are tuned to theirs
 * (see pipelining.ts).
 */
export function lingerOnClose(socket: Socket): void {
  if (socket.destroySoon !== lingeringDestroySoon) socket.destroySoon = lingeringDestroySoon
}

function lingeringDestroySoon(this: Socket): void {
  closeLingering(this)
}
