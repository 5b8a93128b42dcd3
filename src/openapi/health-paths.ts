import { jsonResponse, type Paths, problemResponse } from './parts.js'

const NO_STORE = {
  description: '`no-store`: a probe is never answered from a cache.',
  required: true,
  schema: { type: 'string', const: 'no-store' },
}

/** The OpenAPI paths of the probes (health.ts). */
export function healthPaths(): Paths {
  return {
    '/healthz': {
      get: {
        tags: ['operations'],
        operationId: 'checkLiveness',
        summary: 'Liveness probe',
        description: 'Answers while the process can serve requests at all.',
        responses: {
          '200': withNoStore(jsonResponse('The process is alive.', statusSchema('ok'))),
        },
      },
    },
    '/readyz': {
      get: {
        tags: ['operations'],
        operationId: 'checkReadiness',
        summary: 'Readiness probe',
        description:
          '200 while the service takes traffic; 503 before it is ready, from the moment it starts shutting down, and while the PostgreSQL store cannot reach its database.',
        responses: {
          '200': withNoStore(jsonResponse('Ready for traffic.', statusSchema('ready'))),
          '503': withNoStore(
            problemResponse(
              'Not taking traffic: starting, shutting down, or the database is away (then with `Retry-After`).',
              503,
              'The service is shutting down. Send requests to another instance.',
            ),
          ),
        },
      },
    },
  }
}

function withNoStore<T extends { headers: object }>(answer: T): T {
  return { ...answer, headers: { ...answer.headers, 'Cache-Control': NO_STORE } }
}

function statusSchema(status: string) {
  return {
    type: 'object',
    required: ['status'],
    properties: { status: { const: status } },
    additionalProperties: false,
  }
}
