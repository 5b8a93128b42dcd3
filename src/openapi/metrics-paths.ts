import { jsonResponse, type Paths } from './parts.js'

/** The OpenAPI path of `/metrics` (metrics.ts). */
export function metricsPaths(): Paths {
  return {
    '/metrics': {
      get: {
        tags: ['operations'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description:
          'Prometheus text format 0.0.4: `http_requests_total` and `http_request_duration_seconds` by method, route and status code; `notes_stored`, `notes_stored_bytes`, `notes_capacity_remaining`, `notes_capacity_remaining_bytes`; process and Node.js metrics.',
        responses: {
          '200': jsonResponse('The metrics.', { type: 'string' }, 'text/plain'),
        },
      },
    },
  }
}
