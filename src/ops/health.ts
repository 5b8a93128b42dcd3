import type { FastifyInstance } from 'fastify'
import { JSON_CONTENT_TYPE } from '../api/answer.js'
import { sendProblem } from '../api/problem.js'
import type { StoreGauges } from '../store/types.js'

const ALIVE = Buffer.from('{"status":"ok"}')
const READY = Buffer.from('{"status":"ready"}')

/**
 * `GET /healthz`: the process answers (liveness). `GET /readyz`: the service takes traffic
 * (readiness): 200 once the app is ready, 503 before that and from the moment `close()` begins,
 * so a load balancer stops sending requests while the ones in flight finish, and 503 while the
 * store's database cannot be reached (`/healthz` stays 200: the process is fine).
 * Both are constant answers, logged at warn and above only, so probes never flood the logs.
 */
export function registerHealthChecks(app: FastifyInstance, store?: StoreGauges): void {
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
  app.get('/readyz', probe, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    if (state === 'ready' && store?.available !== undefined && !(await store.available())) {
      return sendProblem(
        reply,
        503,
        'The database cannot be reached. Send requests to another instance.',
        { 'retry-after': '1' },
      )
    }
    if (state === 'ready') return reply.header('content-type', JSON_CONTENT_TYPE).send(READY)
    const detail =
      state === 'starting' ? 'The service is starting.' : 'The service is shutting down.'
    return sendProblem(reply, 503, `${detail} Send requests to another instance.`)
  })
}
