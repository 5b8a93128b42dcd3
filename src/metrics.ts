import type { FastifyInstance } from 'fastify'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { NoteStore, StoreStats } from './store/types.js'

export interface MetricsOptions {
  /** Read at each scrape for the stored and remaining capacity gauges. */
  store: NoteStore
}

/** Upper bounds in seconds: the service answers in well under a millisecond, so start at 100 µs. */
const LATENCY_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
]

/** The route label of a request no route matched (404 and 405 answers). */
const UNMATCHED = 'unmatched'

/**
 * Prometheus metrics at `GET /metrics`: requests and latency by route, method and status, the
 * store's contents and room left, and the process (CPU, memory, event loop, GC).
 * Per request this costs one onResponse hook, after the response has been sent; everything
 * else is computed when Prometheus scrapes. Each app has its own registry.
 */
export function registerMetrics(app: FastifyInstance, { store }: MetricsOptions): void {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const registers = [registry]
  const labelNames = ['method', 'route', 'status_code'] as const

  const requests = new Counter({
    name: 'http_requests_total',
    help: 'Requests answered, by method, route pattern and status code.',
    labelNames,
    registers,
  })
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from receiving a request to sending the last byte of its response.',
    labelNames,
    buckets: LATENCY_BUCKETS,
    registers,
  })

  // One snapshot of the store per scrape, shared by the four gauges.
  let snapshot: Promise<StoreStats> | undefined
  const stats = (): Promise<StoreStats> => {
    snapshot ??= Promise.resolve(store.stats()).finally(() => {
      snapshot = undefined
    })
    return snapshot
  }
  const storeGauge = (name: string, help: string, value: (s: StoreStats) => number): void => {
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        this.set(value(await stats()))
      },
    })
  }
  storeGauge('notes_stored', 'Notes stored.', (s) => s.notes)
  storeGauge('notes_stored_bytes', 'UTF-8 bytes of note JSON stored.', (s) => s.bytes)
  storeGauge(
    'notes_capacity_remaining',
    'Notes that can still be created before the store answers 507 (MAX_NOTES).',
    (s) => s.maxNotes - s.notes,
  )
  storeGauge(
    'notes_capacity_remaining_bytes',
    'Bytes of note JSON that can still be stored before the store answers 507 (MAX_STORE_BYTES).',
    (s) => s.maxBytes - s.bytes,
  )

  app.addHook('onResponse', (request, reply, done) => {
    const labels = {
      method: request.method,
      route: request.routeOptions.url ?? UNMATCHED,
      status_code: reply.statusCode,
    }
    requests.inc(labels)
    duration.observe(labels, reply.elapsedTime / 1000)
    done()
  })

  app.get('/metrics', { logLevel: 'warn' }, async (_request, reply) => {
    const text = await registry.metrics()
    reply.header('content-type', registry.contentType).header('cache-control', 'no-store')
    return text
  })
}
