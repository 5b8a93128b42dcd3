/**
 * The autocannon load generator, in its own process so it can be pinned to its own core.
 * Takes its options as one JSON argument, prints one LoadResult as JSON.
 */
import autocannon, { type Request } from 'autocannon'
import type { LoadResult } from './load.js'

interface Input {
  url: string
  method: NonNullable<Request['method']>
  body?: string
  headers?: Record<string, string>
  connections: number
  durationS: number
}

const input = JSON.parse(process.argv[2] ?? '{}') as Input
const result = await autocannon({
  url: input.url,
  method: input.method,
  connections: input.connections,
  duration: input.durationS,
  timeout: 5,
  headers: {
    ...input.headers,
    ...(input.body === undefined ? {} : { 'content-type': 'application/json' }),
  },
  ...(input.body === undefined ? {} : { body: input.body }),
})
const total = result.requests.total
const output: LoadResult = {
  requests: total,
  durationS: result.duration,
  rps: total / result.duration,
  p50Ms: result.latency.p50,
  p99Ms: result.latency.p99,
  errors: result.errors + result.timeouts,
  non2xx: result.non2xx,
}
process.stdout.write(JSON.stringify(output))
