import type { StaticDocumentSpec } from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import { JSON_CONTENT_TYPE } from '../api/note-operations.js'
import type { OpenApiDocument } from '../api/openapi.js'

export interface ApiDocsOptions {
  /** The OpenAPI document served at /api/openapi.json. */
  document: OpenApiDocument
  /** Also serve the Swagger UI page at /docs, with its assets from the npm package. */
  ui: boolean
}

/**
 * `GET /api/openapi.json` serves the document as built once; `/docs` renders it with Swagger UI,
 * whose scripts and styles come from `swagger-ui-dist` in node_modules (no CDN).
 * None of these requests is logged below warn.
 *
 * The Swagger UI plugins (and what they load: yaml, @fastify/static...) are imported only when
 * the page is on, which saves their memory and start-up time. (W1 once measured 15-25% slower
 * with them loaded; that was Node's nextTick going megamorphic after GCs, which loading more made
 * likelier, and which src/http/tick-shapes.ts now prevents: DOCS=true measured 1.04 of DOCS=false.)
 */
export function registerApiDocs(app: FastifyInstance, { document, ui }: ApiDocsOptions): void {
  const body = Buffer.from(JSON.stringify(document))
  app.get('/api/openapi.json', { logLevel: 'warn' }, (_request, reply) => {
    reply.header('content-type', JSON_CONTENT_TYPE).send(body)
  })
  if (!ui) return
  app.register(async (docs) => {
    const [{ default: swagger }, { default: swaggerUi }] = await Promise.all([
      import('@fastify/swagger'),
      import('@fastify/swagger-ui'),
    ])
    docs.addHook('onRoute', (route) => {
      route.logLevel = 'warn'
    })
    // @fastify/swagger-ui reads the document from @fastify/swagger, here in static mode:
    // the hand-written document, not one generated from route schemas.
    await docs.register(swagger, {
      mode: 'static',
      // Its types stop at OpenAPI 3.0; the document is 3.1.
      specification: { document: document as unknown as StaticDocumentSpec['document'] },
    })
    await docs.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: { deepLinking: true, defaultModelsExpandDepth: 1 },
      theme: { title: 'notes-service API' },
    })
  })
}
