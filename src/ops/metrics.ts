import type { FastifyInstance } from 'fastify'
import type { Metric, Registry } from 'prom-client'
import type { StoreGauges, StoreStats } from '../store/types.js'
import { RequestRecorder } from './request-recorder.js'

export interface MetricsOptions {
  /** Read at each scrape for the stored and remaining capacity gauges. */
  store: StoreGauges
  /** Where requests are counted; the fast lane records into it too. */
  recorder: RequestRecorder
}

/** A recorder with the service's latency buckets. */
export function createRequestRecorder(): RequestRecorder {
  return new RequestRecorder(LATENCY_BUCKETS)
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
 * Per request this costs a RequestRecorder entry (from an onResponse hook, or from the fast lane
 * after it has answered); everything else is computed when Prometheus scrapes.
 * Each app has its own registry.
 */
export function registerMetrics(app: FastifyInstance, { store, recorder }: MetricsOptions): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? UNMATCHED
    recorder.record(request.method, route, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
  // prom-client is loaded, and its registry built, at the first scrape rather than while the app
  // boots. Loaded during boot, it left Node's process.nextTick unoptimized, with the object-literal
  // sites of its tick objects megamorphic, in 4 to 6 processes of 10: 300 ns a call instead of
  // 60, about six calls a request, so every request slower (bench W1 0.79 of the service in one
  // run). Loaded at the first scrape, 0 of 36 processes showed it. (The cause was GCs freeing
  // the tick objects' maps, which src/http/tick-shapes.ts now prevents in every process; loading late
  // stays, since it costs nothing until someone scrapes.)
  let registry: Promise<Registry> | undefined
  const registryOnce = (): Promise<Registry> => {
    registry ??= buildRegistry(store, recorder).catch((err: unknown) => {
      registry = undefined
      throw err
    })
    return registry
  }
  app.register(async (scope) => {
    scope.get('/metrics', { logLevel: 'warn' }, async (_request, reply) => {
      const metrics = await registryOnce()
      const text = await metrics.metrics()
      reply.header('content-type', metrics.contentType).header('cache-control', 'no-store')
      return text
    })
  })
}

/** The registry: the request metrics, four store gauges and prom-client's process metrics. */
async function buildRegistry(store: StoreGauges, recorder: RequestRecorder): Promise<Registry> {
  const { collectDefaultMetrics, Gauge, Registry } = await import('prom-client')
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const registers = [registry]
  const requestMetrics = [
    recorder.counter(
      'http_requests_total',
      'Requests answered, by method, route pattern and status code.',
    ),
    recorder.histogram(
      'http_request_duration_seconds',
      'Time from receiving a request to sending the last byte of its response.',
    ),
  ]
  for (const metric of requestMetrics) registry.registerMetric(metric as unknown as Metric)

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
  return registry
}
