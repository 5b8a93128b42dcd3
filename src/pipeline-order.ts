import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http'

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])
const kPending = Symbol('pending unsafe request')
const kQueue = Symbol('requests waiting behind it')

type Waiting = [IncomingMessage, ServerResponse]
interface TrackedSocket {
  [kPending]?: ServerResponse | undefined
  [kQueue]?: Waiting[] | undefined
}

/**
 * Node emits every request of a pipelined batch at once, so a GET sent after a POST on the same
 * connection would run before the POST's body is read, and miss the note. This holds requests
 * back while an unsafe request (POST, PATCH, DELETE, ...) on their connection is unfinished
 * (RFC 9112 9.3.2 allows parallel handling only of safe methods). A connection with nothing
 * pending costs one property read per request.
 */
export function pipelineInOrder(handler: RequestListener): RequestListener {
  const run = (req: IncomingMessage, res: ServerResponse): void => {
    if (!SAFE_METHODS.has(req.method ?? '')) {
      const socket = req.socket as unknown as TrackedSocket
      socket[kPending] = res
      res.once('close', () => release(socket, res))
    }
    handler(req, res)
  }

  const release = (socket: TrackedSocket, res: ServerResponse): void => {
    if (socket[kPending] !== res) return
    socket[kPending] = undefined
    const queue = socket[kQueue]
    while (queue !== undefined && queue.length > 0 && socket[kPending] === undefined) {
      const [req, next] = queue.shift() as Waiting
      run(req, next)
    }
  }

  return (req, res) => {
    const socket = req.socket as unknown as TrackedSocket
    if (socket[kPending] === undefined) {
      run(req, res)
      return
    }
    let queue = socket[kQueue]
    if (queue === undefined) {
      queue = []
      socket[kQueue] = queue
    }
    queue.push([req, res])
  }
}
