import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { lastResponseOn } from './pipelining.js'

/**
 * When the app starts closing, tells every connection with a response still under way to close
 * after it (`Connection: close`). Fastify does that only for requests that arrive once closing
 * has begun; a request already in flight was answered 'keep-alive', and its client could go on
 * sending requests on that connection, served by a closing server, until the shutdown deadline
 * cut the connection in the middle of one.
 */
export function registerCloseConnections(app: FastifyInstance): void {
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  app.addHook('preClose', (done) => {
    for (const socket of sockets) {
      const response = lastResponseOn(socket)
      if (response !== undefined && !response.headersSent) response.setHeader('connection', 'close')
    }
    done()
  })
}
