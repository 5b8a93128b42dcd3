import type { RequestListener, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

type NodeSocket = Socket & {
  /**
   * Node's own: the response now attached to the connection (being produced or flushed), null
   * once it has finished. Private, but the same in Node 20 and 24;
   * test/http/pipelining.unit.test.ts checks it directly, so a Node that changes it fails there
   * rather than in a graceful close.
   */
  _httpMessage?: ServerResponse | null
}

// The queue is kept beside Node's objects, not on them. A property added to only some sockets
// (those that ever had a request queued, as every bench preload does) gave sockets more hidden
// classes than Node's code is tuned for: its per-request reads of socket fields
// (parserOnIncoming, IncomingMessage, the stream state) went megamorphic in the service and
// stayed polymorphic in the floor.

/** connection -> the response to its last queued request */
const lastQueued = new WeakMap<Socket, ServerResponse>()
/** queued response -> the response to the request before it on its connection */
const previousOf = new WeakMap<ServerResponse, ServerResponse>()

/**
 * Wraps the server's request listener so that pipelined requests on one connection run one after
 * another, as HTTP/1.1 requires (RFC 9112 §9.3.2). Node parses every pipelined request at once
 * and emits each as soon as its headers are read, so without this 'PATCH /api/note/7' +
 * 'DELETE /api/note/7' sent in one write deleted first and answered the PATCH 404, and a GET
 * after a POST listed the store as it was before the POST.
 *
 * Node itself attaches a response to its connection only once every earlier response on it has
 * finished, and queues the others until then ('socket' is emitted when it attaches one). So a
 * request whose response is attached already has nothing ahead of it and runs at once: without
 * pipelining, that is every request, at the cost of two property reads. A queued one runs when
 * its response is attached, and is remembered (in the WeakMaps above) for lastResponseOn and
 * afterResponsesOn.
 */
export function inOrder(listener: RequestListener): RequestListener {
  return (request, response) => {
    const attached = response.socket
    if (attached !== null) {
      // The connection's last answer has been written and it is closing (Connection: close, a
      // refusal): Node still parses the rest of what it has read, so a request sent behind that
      // answer arrives here. It must not be served (RFC 9112 §9.6); its body is drained so that
      // the closing connection's reading does not stall behind it.
      if (attached.writableEnded) {
        request.resume()
        return
      }
      listener(request, response)
      return
    }
    const socket = request.socket
    const previous = lastResponseOn(socket)
    lastQueued.set(socket, response)
    if (previous !== undefined) previousOf.set(response, previous)
    // Cut the chain behind the first closed response, or a connection that always has a request
    // pipelined would keep every response it ever sent.
    for (let at = previous; at !== undefined; ) {
      const before = previousOf.get(at)
      if (before?.closed === true) {
        previousOf.delete(at)
        break
      }
      at = before
    }
    response.once('socket', () => listener(request, response))
  }
}

/** The response to the last request that began on this connection, while it is under way. */
export function lastResponseOn(socket: Socket): ServerResponse | undefined {
  const queued = lastQueued.get(socket)
  // The last queued response is the newest until it has ended; from then on, the attached one
  // is (the same one while it is still being flushed, or one attached directly after it).
  if (queued !== undefined && !queued.writableEnded) return queued
  return (socket as NodeSocket)._httpMessage ?? undefined
}

/**
 * Calls `next` once the responses to every request received whole on this connection have
 * finished (at once when there are none), so that refusing a later pipelined request never cuts
 * off the answer to an earlier one that the store has already applied. The request being refused
 * may have a response started already (its headers parsed, its body broken); that one is not
 * waited for.
 */
export function afterResponsesOn(socket: Socket, next: () => void): void {
  let last = lastResponseOn(socket)
  while (last !== undefined && !last.req.complete) last = previousOf.get(last)
  if (last === undefined || last.closed) next()
  else last.once('close', next)
}
