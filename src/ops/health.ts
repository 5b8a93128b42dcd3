import type { FastifyInstance } from 'fastify'
import { JSON_CONTENT_TYPE } from '../api/note-operations.js'
import { sendProblem } from '../api/problem.js'

const ALIVE = Buffer.from('{"status":"ok"}')
const READY = Buffer.from('{"status":"ready"}')

/**
 * `GET /healthz`: the process answers (liveness). `GET /readyz`: the service takes traffic
 * (readiness): 200 once the app is ready, 503 before that and from the moment `close()` begins,
 * so a load balancer stops sending requests while the ones in flight finish.
 * Both are constant answers, logged at warn and above only, so probes never flood the logs.
 */
export function registerHealthChecks(app: FastifyInstance): void {
  let state: 'starting' | 'ready' | 'stopping' = 'starting'
  app.addHook('onReady', (done) => {
    state = 'ready'
    done()
  })
  app.addHook('preClose', (done) => {
    state = 'stopping'
    done()
  })

  const probe = { logLevel: 'warn' } as const
  app.get('/healthz', probe, (_request, reply) => {
    reply.header('cache-control', 'no-store').header('content-type', JSON_CONTENT_TYPE).send(ALIVE)
  })
  app.get('/readyz', probe, (_request, reply) => {
    reply.header('cache-control', 'no-store')
    if (state === 'ready') {
      reply.header('content-type', JSON_CONTENT_TYPE).send(READY)
    } else {
      const detail =
        state === 'starting' ? 'The service is starting.' : 'The service is shutting down.'
      sendProblem(reply, 503, `${detail} Send requests to another instance.`)
    }
  })
}
