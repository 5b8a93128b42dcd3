import type { RequestListener, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

const kLastResponse = Symbol('notes.lastResponse')
const kPrevious = Symbol('notes.previousResponse')

type TrackedResponse = ServerResponse & { [kPrevious]?: TrackedResponse | undefined }
type TrackedSocket = Socket & { [kLastResponse]?: TrackedResponse | undefined }

/**
 * Wraps the server's request listener so that pipelined requests on one connection run one after
 * another, as HTTP/1.1 requires (RFC 9112 §9.3.2). Node parses every pipelined request at once
 * and emits each as soon as its headers are read, so without this 'PATCH /api/note/7' +
 * 'DELETE /api/note/7' sent in one write deleted first and answered the PATCH 404, and a GET
 * after a POST listed the store as it was before the POST.
 * A request waits only when an earlier response on its connection has not closed, which never
 * happens without pipelining; otherwise this costs one property write per request.
 */
export function inOrder(listener: RequestListener): RequestListener {
  return (request, response: TrackedResponse) => {
    const socket = request.socket as TrackedSocket
    const previous = socket[kLastResponse]
    socket[kLastResponse] = response
    // Responses on a connection close in order, so 'closed' on the last one says whether this
    // request has to wait; no listener is added unless it does.
    if (previous === undefined || previous.closed) {
      listener(request, response)
      return
    }
    response[kPrevious] = previous
    // Cut the chain behind the first closed response, or a connection that always has a request
    // pipelined would keep every response it ever sent.
    for (let at = previous; at[kPrevious] !== undefined; at = at[kPrevious] as TrackedResponse) {
      if ((at[kPrevious] as TrackedResponse).closed) {
        at[kPrevious] = undefined
        break
      }
    }
    previous.once('close', () => listener(request, response))
  }
}

/** The response to the last request that began on this connection, while it is under way. */
export function lastResponseOn(socket: Socket): ServerResponse | undefined {
  return (socket as TrackedSocket)[kLastResponse]
}

/**
 * Calls `next` once the responses to every request received whole on this connection have
 * finished (at once when there are none), so that refusing a later pipelined request never cuts
 * off the answer to an earlier one that the store has already applied. The request being refused
 * may have a response started already (its headers parsed, its body broken); that one is not
 * waited for.
 */
export function afterResponsesOn(socket: Socket, next: () => void): void {
  let last = (socket as TrackedSocket)[kLastResponse]
  while (last !== undefined && !last.req.complete) last = last[kPrevious]
  if (last === undefined || last.closed) next()
  else last.once('close', next)
}
