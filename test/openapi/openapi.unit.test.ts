import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { readPackageInfo } from '../../src/config/package-info.js'
import type { OpenApiDocument } from '../../src/openapi/document.js'
import type { Operation } from '../../src/openapi/parts.js'
import { describeService } from '../../src/openapi/service-document.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { buildOpsApp } from '../support/ops-app.js'

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

const TOKEN_SECRET = 'a-secret-of-32-bytes-or-more-000'

const FEATURE_SETS: Partial<Config>[] = [
  { metrics: false, docs: false },
  { metrics: true, docs: false },
  { metrics: false, docs: true },
  { metrics: true, docs: true, corsOrigin: ['https://app.example'] },
  { metrics: true, docs: true, apiKeys: ['k1'], rateLimit: 10 },
  { metrics: false, docs: false, apiReadKeys: ['r1'] },
  { metrics: true, docs: false, rateLimit: 10 },
  { metrics: false, docs: false, ui: false },
  { metrics: false, docs: true, ui: false, apiKeys: ['k1'] },
  { metrics: false, docs: false, maxEventLoopDelayMs: 1000 },
  { metrics: true, docs: false, authJwtSecret: TOKEN_SECRET },
  { metrics: true, docs: true, authJwtSecret: TOKEN_SECRET, apiKeys: ['k1'], rateLimit: 10 },
]

function documentFor(features: Partial<Config>): OpenApiDocument {
  return describeService({
    version: readPackageInfo().version,
    metrics: features.metrics ?? false,
    docs: features.docs ?? false,
    ui: features.ui ?? true,
    accessKeys: (features.apiKeys?.length ?? 0) + (features.apiReadKeys?.length ?? 0) > 0,
    userTokens: (features.authJwtSecret ?? '') !== '',
    rateLimits: (features.rateLimit ?? 0) > 0,
    cors: (features.corsOrigin?.length ?? 0) > 0,
    loadShedding: (features.maxEventLoopDelayMs ?? 0) > 0,
  })
}

/**
 * The app `features` describe, as the server builds it: with `authJwtSecret`, user tokens on a
 * notebook per user (and so the notebooks' own routes).
 */
function appFor(features: Partial<Config>): FastifyInstance {
  const secret = features.authJwtSecret ?? ''
  if (secret === '') return buildOpsApp(features).app
  return buildApp({
    notebooks: new MemoryNotebooks({ maxNotes: 10, maxBytes: 10_000 }),
    userTokens: new UserTokens({ secret }),
    config: { ...DEFAULT_CONFIG, ...features },
  })
}

/** The operation of `method` ('get') on `path`, if the document has one. */
function operationOf(
  document: OpenApiDocument,
  path: string,
  method: string,
): Operation | undefined {
  const item = document.paths[path] as Record<string, Operation | string | undefined> | undefined
  const operation = item?.[method]
  return typeof operation === 'object' ? operation : undefined
}

/** An operation the document adds for a method the path does not accept: it answers 405. */
function answersNotAllowed(operation: Operation): boolean {
  return '405' in operation.responses
}

/**
 * 'GET /api/note/{id}' for every operation of the document that a route serves: not HEAD
 * (Fastify answers it for every GET), OPTIONS and the 405s (the not-found handler answers them),
 * but an OPTIONS a path describes as its own.
 */
function documentedOperations(document: OpenApiDocument): string[] {
  return Object.keys(document.paths).flatMap((path) =>
    HTTP_METHODS.filter((method) => {
      const operation = operationOf(document, path, method)
      return (
        operation !== undefined &&
        method !== 'head' &&
        // The OPTIONS the not-found handler answers; a path's own (tus discovery) is a route.
        (method !== 'options' || operation.summary !== 'The methods this path accepts') &&
        !answersNotAllowed(operation)
      )
    }).map((method) => `${method.toUpperCase()} ${path}`),
  )
}

/**
 * 'GET /api/note/{id}' for every route the app serves, read from Fastify's route tree, leaving
 * out what no API description lists: HEAD (Fastify adds one per GET) and
 * CORS's catch-all OPTIONS route.
 */
async function servedOperations(app: FastifyInstance): Promise<string[]> {
  await app.ready()
  const tree = app.printRoutes({ commonPrefix: false })
  const parents: string[] = []
  const operations: string[] = []
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(\S+) \(([^)]+)\)$/.exec(line)
    if (match === null) continue
    const [, indent = '', segment = '', methods = ''] = match
    const depth = indent.length / 4
    const path = (parents[depth - 1] ?? '') + segment
    parents[depth] = path
    if (path === '*') continue
    for (const method of methods.split(', ')) {
      if (method !== 'HEAD') operations.push(`${method} ${path.replace(/:(\w+)/g, '{$1}')}`)
    }
  }
  return operations
}

/** Every `$ref` in `value`, e.g. '#/components/schemas/Note'. */
function refsIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(refsIn)
  if (typeof value !== 'object' || value === null) return []
  return Object.entries(value).flatMap(([key, inner]) =>
    key === '$ref' && typeof inner === 'string' ? [inner] : refsIn(inner),
  )
}

describe('the OpenAPI document', () => {
  for (const features of FEATURE_SETS) {
    const label = JSON.stringify(features)

    it(`is a valid OpenAPI 3.1 document with ${label}`, async () => {
      const document = documentFor(features)
      const validator = new Validator()
      const result = await validator.validate(document as unknown as Record<string, unknown>)
      assert.deepEqual(result, { valid: true })
      assert.equal(validator.version, '3.1')
      for (const ref of refsIn(document)) {
        const target = ref
          .slice(2)
          .split('/')
          .reduce<unknown>(
            (node, key) => (node as Record<string, unknown> | undefined)?.[key],
            document,
          )
        assert.notEqual(target, undefined, `${ref} points nowhere`)
      }
    })

    it(`describes every route the app serves, and nothing else, with ${label}`, async () => {
      const app = appFor(features)
      assert.deepEqual(
        (await servedOperations(app)).sort(),
        documentedOperations(documentFor(features)).sort(),
      )
    })
  }

  it('lists the six note operations with their envelopes, conditions and errors', () => {
    const document = documentFor({})
    const statuses = (path: string, method: string) =>
      Object.keys(operationOf(document, path, method)?.responses ?? {})
    assert.deepEqual(statuses('/api/note', 'get'), ['200', '304', '400', '503'])
    assert.deepEqual(statuses('/api/note', 'post'), [
      '200',
      '400',
      '413',
      '415',
      '422',
      '503',
      '507',
    ])
    assert.deepEqual(statuses('/api/note/{id}', 'get'), ['200', '304', '400', '404', '503'])
    assert.deepEqual(statuses('/api/note/{id}', 'patch'), [
      '200',
      '400',
      '404',
      '412',
      '413',
      '415',
      '503',
      '507',
    ])
    assert.deepEqual(statuses('/api/note/{id}', 'put'), [
      '200',
      '400',
      '404',
      '412',
      '413',
      '415',
      '503',
      '507',
    ])
    assert.deepEqual(statuses('/api/note/{id}', 'delete'), [
      '200',
      '400',
      '404',
      '412',
      '413',
      '415',
      '503',
    ])
    const names = (path: string, method: string) =>
      ((operationOf(document, path, method)?.parameters ?? []) as object[]).map((parameter) =>
        '$ref' in parameter
          ? String(parameter.$ref).replace('#/components/parameters/', '')
          : `${String((parameter as { in: string }).in)} ${String((parameter as { name: string }).name)}`,
      )
    assert.deepEqual(names('/api/note', 'get'), [
      'Limit',
      'After',
      'Order',
      'Sort',
      'Q',
      'IfNoneMatch',
      'Accept',
      'RequestId',
    ])
    assert.deepEqual(names('/api/note', 'post'), ['RequestId', 'IdempotencyKey'])
    assert.deepEqual(names('/api/note/{id}', 'patch'), [
      'path id',
      'RequestId',
      'IfMatch',
      'IfUnmodifiedSince',
    ])
    assert.deepEqual(names('/api/note/{id}', 'put'), [
      'path id',
      'RequestId',
      'IfMatch',
      'IfUnmodifiedSince',
    ])
    assert.deepEqual(document.components.responses?.NoteNotFound, {
      description: 'No note has this id. The body is empty: Content-Length 0, no Content-Type.',
      headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } },
    })
  })

  it('has an operation for every method on every path: HEAD with GET, OPTIONS, the rest 405', () => {
    const document = documentFor({ metrics: true, docs: true })
    const table = Object.keys(document.paths).map((path) => [
      path,
      HTTP_METHODS.map((method) => {
        const operation = operationOf(document, path, method)
        if (operation === undefined) return `${method} missing`
        if (answersNotAllowed(operation)) {
          assert.deepEqual(operation.responses, {
            '405': { $ref: '#/components/responses/MethodNotAllowed' },
          })
          return `${method} 405`
        }
        return method
      }).join(' '),
    ])
    const gets = 'get put 405 post 405 delete 405 options head patch 405 trace 405'
    assert.deepEqual(table, [
      ['/api/note', 'get put 405 post delete 405 options head patch 405 trace 405'],
      ['/api/note/{id}', 'get put post 405 delete options head patch trace 405'],
      ['/api/batch', 'get 405 put 405 post delete 405 options head 405 patch 405 trace 405'],
      ['/api/note/{id}/revisions', gets],
      ['/api/note/{id}/revisions/{version}', gets],
      [
        '/api/note/{id}/restore',
        'get 405 put 405 post delete 405 options head 405 patch 405 trace 405',
      ],
      ['/api/trash', 'get put 405 post 405 delete options head patch 405 trace 405'],
      ['/api/trash/{id}', 'get 405 put 405 post 405 delete options head 405 patch 405 trace 405'],
      [
        '/api/trash/{id}/restore',
        'get 405 put 405 post delete 405 options head 405 patch 405 trace 405',
      ],
      ['/api/files', 'get put 405 post delete 405 options head patch 405 trace 405'],
      ['/api/files/{id}', 'get put 405 post 405 delete options head patch 405 trace 405'],
      ['/api/uploads', 'get 405 put 405 post delete 405 options head 405 patch 405 trace 405'],
      ['/api/uploads/{id}', 'get put 405 post 405 delete options head patch trace 405'],
      ['/api/events', gets],
      ['/api/notebooks/{nb}/note', 'get put 405 post delete 405 options head patch 405 trace 405'],
      ['/api/notebooks/{nb}/note/{id}', 'get put post 405 delete options head patch trace 405'],
      [
        '/api/notebooks/{nb}/batch',
        'get 405 put 405 post delete 405 options head 405 patch 405 trace 405',
      ],
      ['/api/notebooks/{nb}/note/{id}/revisions', gets],
      ['/api/notebooks/{nb}/note/{id}/revisions/{version}', gets],
      [
        '/api/notebooks/{nb}/note/{id}/restore',
        'get 405 put 405 post delete 405 options head 405 patch 405 trace 405',
      ],
      ['/api/notebooks/{nb}/trash', 'get put 405 post 405 delete options head patch 405 trace 405'],
      [
        '/api/notebooks/{nb}/trash/{id}',
        'get 405 put 405 post 405 delete options head 405 patch 405 trace 405',
      ],
      [
        '/api/notebooks/{nb}/trash/{id}/restore',
        'get 405 put 405 post delete 405 options head 405 patch 405 trace 405',
      ],
      ['/api/notebooks/{nb}/files', 'get put 405 post delete 405 options head patch 405 trace 405'],
      [
        '/api/notebooks/{nb}/files/{id}',
        'get put 405 post 405 delete options head patch 405 trace 405',
      ],
      [
        '/api/notebooks/{nb}/uploads',
        'get 405 put 405 post delete 405 options head 405 patch 405 trace 405',
      ],
      [
        '/api/notebooks/{nb}/uploads/{id}',
        'get put 405 post 405 delete options head patch trace 405',
      ],
      ['/api/notebooks/{nb}/events', gets],
      ['/healthz', gets],
      ['/readyz', gets],
      ['/api/openapi.json', gets],
      ['/docs', gets],
      ['/docs/static/{file}', gets],
      ['/metrics', gets],
      ['/', gets],
      ['/ui/{file}', gets],
      ['/ui/client/{file}', gets],
      ['/ui/client/replica/{file}', gets],
      ['/ui/vendor/{file}', gets],
      ['/ui/sign-in.json', gets],
    ])
    // HEAD answers what GET answers, without the body; OPTIONS 204 with Allow. Not so for an
    // upload (tus): its HEAD is its offset, its GET the file it became, its OPTIONS tus's discovery.
    for (const path of Object.keys(document.paths)) {
      if (path.includes('/uploads')) continue
      const get = operationOf(document, path, 'get')
      const head = operationOf(document, path, 'head')
      assert.deepEqual(head?.responses, get?.responses, path)
      assert.deepEqual(head?.parameters, get?.parameters, path)
      assert.deepEqual(operationOf(document, path, 'options')?.responses, {
        '204': { $ref: '#/components/responses/Options' },
      })
    }
  })

  it('uses every component it defines, and describes both stores', () => {
    for (const features of FEATURE_SETS) {
      const document = documentFor(features)
      const used = new Set(refsIn({ ...document, components: {} }))
      // A component used only by another component counts once that one is used.
      for (let size = 0; size !== used.size; ) {
        size = used.size
        for (const [kind, entries] of Object.entries(document.components)) {
          for (const [name, value] of Object.entries(entries)) {
            if (used.has(`#/components/${kind}/${name}`)) for (const r of refsIn(value)) used.add(r)
          }
        }
      }
      for (const [kind, entries] of Object.entries(document.components)) {
        if (kind === 'securitySchemes') continue
        for (const name of Object.keys(entries)) {
          assert.ok(used.has(`#/components/${kind}/${name}`), `${kind}/${name} is unused`)
        }
      }
      const description = String(document.info.description)
      assert.match(
        description,
        /^A notes store: in memory by default \(empty at start, lost at exit\), in PostgreSQL when `DATABASE_URL` names a database\./,
      )
      // No citation of a numbered design decision, which readers of the document cannot look up
      // (the pattern is spelled so that a search of the code for such citations finds none here).
      assert.doesNotMatch(description, /DECI[S]ION/i)
    }
  })

  it('is served at /api/openapi.json as built, and nowhere else', async () => {
    const { app } = buildOpsApp({ docs: true })
    const served = await app.inject({ method: 'GET', url: '/api/openapi.json' })
    assert.equal(served.statusCode, 200)
    assert.equal(served.headers['content-type'], 'application/json; charset=utf-8')
    assert.deepEqual(served.json(), documentFor({ docs: true }))
    // The copies that @fastify/swagger-ui served beside the page are gone.
    for (const url of ['/docs/json', '/docs/yaml']) {
      const copy = await app.inject({ method: 'GET', url })
      assert.equal(copy.statusCode, 404, url)
      assert.deepEqual(copy.json(), {
        type: 'about:blank',
        title: 'Not Found',
        status: 404,
        detail: 'Nothing is served at this path; the notes are at /api/note.',
      })
    }
  })

  it('declares every parameter on its operations, each path template variable among them', () => {
    // Swagger UI 5 renders path-level parameters of a 3.1 document as nameless inputs and then
    // sends '/api/note/{id}' as it is; it reads the parameters of each operation.
    const document = documentFor({ metrics: true, docs: true })
    const parameters = document.components.parameters as Record<
      string,
      { name: string; in: string }
    >
    for (const [path, item] of Object.entries(document.paths)) {
      assert.equal('parameters' in item, false, `${path} has path-level parameters`)
      const variables = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1])
      for (const method of HTTP_METHODS) {
        const declared = (
          (operationOf(document, path, method)?.parameters ?? []) as (
            | { $ref: string }
            | { name: string; in: string }
          )[]
        ).map((parameter) =>
          '$ref' in parameter ? parameters[parameter.$ref.split('/').pop() ?? ''] : parameter,
        )
        assert.deepEqual(
          declared
            .filter((parameter) => parameter?.in === 'path')
            .map((parameter) => parameter?.name),
          variables,
          `${method.toUpperCase()} ${path}`,
        )
        if (path.startsWith('/api/note')) {
          assert.ok(
            declared.some((parameter) => parameter?.name === 'X-Request-Id'),
            `${method.toUpperCase()} ${path} without X-Request-Id`,
          )
        }
      }
    }
  })

  it('gives as examples the problem bodies the service really sends', async () => {
    const { app } = buildOpsApp()
    const responses = documentFor({}).components.responses as Record<
      string,
      { content: Record<string, { example: unknown }> }
    >
    const example = (name: string) => responses[name]?.content['application/problem+json']?.example
    const json = { 'content-type': 'application/json' }
    const cases = [
      ['BadRequest', { method: 'POST', url: '/api/note', payload: '[]', headers: json }],
      ['BadUrl', { method: 'GET', url: '/api/note/%zz' }],
      ['MethodNotAllowed', { method: 'PUT', url: '/api/note' }],
      [
        'PayloadTooLarge',
        { method: 'POST', url: '/api/note', payload: `"${'x'.repeat(1 << 20)}"`, headers: json },
      ],
      [
        'UnsupportedMediaType',
        {
          method: 'POST',
          url: '/api/note',
          payload: 'x',
          headers: { 'content-type': 'text/plain' },
        },
      ],
      [
        'IdempotencyKeyReused',
        {
          method: 'POST',
          url: '/api/note',
          payload: '{"b":2}',
          headers: { ...json, 'idempotency-key': 'once' },
        },
      ],
    ] as const
    await app.inject({
      method: 'POST',
      url: '/api/note',
      payload: '{"a":1}',
      headers: { ...json, 'idempotency-key': 'once' },
    })
    for (const [name, request] of cases) {
      const response = await app.inject(request)
      assert.deepEqual(response.json(), example(name), name)
    }
  })

  it("gives as examples the problem bodies the files' operations really send", async () => {
    const { app } = buildOpsApp()
    const document = documentFor({})
    const example = (path: string, method: string, status: string) =>
      (
        operationOf(document, path, method)?.responses[status] as
          | { content: Record<string, { example: unknown }> }
          | undefined
      )?.content['application/problem+json']?.example
    const upload = (headers: Record<string, string>, payload: string | Buffer = 'x') =>
      app.inject({ method: 'POST', url: '/api/files', headers, payload })
    const bytes = Buffer.alloc(2 * 1024 * 1024)
    const { id } = (await upload({ 'content-type': 'image/png' }, bytes)).json().data
    const cases = [
      ['/api/files', 'post', '400', await upload({ 'content-type': 'png' })],
      [
        '/api/files',
        'post',
        '413',
        await upload({ 'content-type': 'text/plain', 'content-length': '104857601' }),
      ],
      ['/api/files', 'get', '400', await app.inject('/api/files?limit=0')],
      ['/api/files/{id}', 'get', '404', await app.inject(`/api/files/${'0'.repeat(64)}`)],
      [
        '/api/files/{id}',
        'get',
        '416',
        await app.inject({ url: `/api/files/${id}`, headers: { range: 'bytes=9999999-' } }),
      ],
      [
        '/api/files/{id}',
        'delete',
        '404',
        await app.inject({ method: 'DELETE', url: '/api/files/x' }),
      ],
    ] as const
    for (const [path, method, status, answer] of cases) {
      assert.equal(String(answer.statusCode), status, `${method} ${path}`)
      assert.deepEqual(answer.json(), example(path, method, status), `${method} ${path} ${status}`)
    }
  })

  it('says which operations need a key, and what they answer without one', () => {
    const document = documentFor({ apiKeys: ['k1'], metrics: true, docs: true, rateLimit: 10 })
    assert.deepEqual(document.security, [{ accessKey: [] }])
    assert.deepEqual(document.components.securitySchemes, {
      accessKey: {
        type: 'http',
        scheme: 'bearer',
        description:
          'An access key from API_KEYS (may read and write) or API_READ_KEYS (may only GET and HEAD).',
      },
    })
    const added = (operation: Operation | undefined) =>
      Object.keys(operation?.responses ?? {}).filter((s) => ['401', '403', '429'].includes(s))
    const table = documentedOperations(document).map((name) => {
      const [method = '', path = ''] = name.split(' ')
      const operation = operationOf(document, path, method.toLowerCase())
      return [name, added(operation), operation?.security]
    })
    assert.deepEqual(table, [
      ['GET /api/note', ['401', '429'], undefined],
      ['POST /api/note', ['401', '403', '429'], undefined],
      ['GET /api/note/{id}', ['401', '429'], undefined],
      ['PUT /api/note/{id}', ['401', '403', '429'], undefined],
      ['DELETE /api/note/{id}', ['401', '403', '429'], undefined],
      ['PATCH /api/note/{id}', ['401', '403', '429'], undefined],
      ['POST /api/batch', ['401', '403', '429'], undefined],
      ['GET /api/note/{id}/revisions', ['401', '429'], undefined],
      ['GET /api/note/{id}/revisions/{version}', ['401', '429'], undefined],
      ['POST /api/note/{id}/restore', ['401', '403', '429'], undefined],
      ['GET /api/trash', ['401', '429'], undefined],
      ['DELETE /api/trash', ['401', '403', '429'], undefined],
      ['DELETE /api/trash/{id}', ['401', '403', '429'], undefined],
      ['POST /api/trash/{id}/restore', ['401', '403', '429'], undefined],
      ['GET /api/files', ['401', '429'], undefined],
      ['POST /api/files', ['401', '403', '429'], undefined],
      ['GET /api/files/{id}', ['401', '429'], undefined],
      ['DELETE /api/files/{id}', ['401', '403', '429'], undefined],
      ['POST /api/uploads', ['401', '403', '429'], undefined],
      ['OPTIONS /api/uploads', ['429'], []],
      ['GET /api/uploads/{id}', ['401', '429'], undefined],
      ['DELETE /api/uploads/{id}', ['401', '403', '429'], undefined],
      ['PATCH /api/uploads/{id}', ['401', '403', '429'], undefined],
      ['GET /api/events', ['401', '429'], undefined],
      ['GET /api/notebooks/{nb}/note', ['401', '429'], undefined],
      ['POST /api/notebooks/{nb}/note', ['401', '403', '429'], undefined],
      ['GET /api/notebooks/{nb}/note/{id}', ['401', '429'], undefined],
      ['PUT /api/notebooks/{nb}/note/{id}', ['401', '403', '429'], undefined],
      ['DELETE /api/notebooks/{nb}/note/{id}', ['401', '403', '429'], undefined],
      ['PATCH /api/notebooks/{nb}/note/{id}', ['401', '403', '429'], undefined],
      ['POST /api/notebooks/{nb}/batch', ['401', '403', '429'], undefined],
      ['GET /api/notebooks/{nb}/note/{id}/revisions', ['401', '429'], undefined],
      ['GET /api/notebooks/{nb}/note/{id}/revisions/{version}', ['401', '429'], undefined],
      ['POST /api/notebooks/{nb}/note/{id}/restore', ['401', '403', '429'], undefined],
      ['GET /api/notebooks/{nb}/trash', ['401', '429'], undefined],
      ['DELETE /api/notebooks/{nb}/trash', ['401', '403', '429'], undefined],
      ['DELETE /api/notebooks/{nb}/trash/{id}', ['401', '403', '429'], undefined],
      ['POST /api/notebooks/{nb}/trash/{id}/restore', ['401', '403', '429'], undefined],
      ['GET /api/notebooks/{nb}/files', ['401', '429'], undefined],
      ['POST /api/notebooks/{nb}/files', ['401', '403', '429'], undefined],
      ['GET /api/notebooks/{nb}/files/{id}', ['401', '429'], undefined],
      ['DELETE /api/notebooks/{nb}/files/{id}', ['401', '403', '429'], undefined],
      ['POST /api/notebooks/{nb}/uploads', ['401', '403', '429'], undefined],
      ['OPTIONS /api/notebooks/{nb}/uploads', ['429'], []],
      ['GET /api/notebooks/{nb}/uploads/{id}', ['401', '429'], undefined],
      ['DELETE /api/notebooks/{nb}/uploads/{id}', ['401', '403', '429'], undefined],
      ['PATCH /api/notebooks/{nb}/uploads/{id}', ['401', '403', '429'], undefined],
      ['GET /api/notebooks/{nb}/events', ['401', '429'], undefined],
      ['GET /healthz', [], []],
      ['GET /readyz', [], []],
      ['GET /api/openapi.json', ['429'], []],
      ['GET /docs', ['429'], []],
      ['GET /docs/static/{file}', ['429'], []],
      ['GET /metrics', ['401', '429'], undefined],
      ['GET /', ['429'], []],
      ['GET /ui/{file}', ['429'], []],
      ['GET /ui/client/{file}', ['429'], []],
      ['GET /ui/client/replica/{file}', ['429'], []],
      ['GET /ui/vendor/{file}', ['429'], []],
      ['GET /ui/sign-in.json', ['429'], []],
    ])
    // HEAD as GET; OPTIONS open (a preflight carries no key); a 405 still needs a key first.
    for (const path of Object.keys(document.paths)) {
      const get = operationOf(document, path, 'get')
      assert.deepEqual(added(operationOf(document, path, 'head')), added(get), path)
      const options = operationOf(document, path, 'options')
      const limited = path === '/healthz' || path === '/readyz' ? [] : ['429']
      assert.deepEqual([added(options), options?.security], [limited, []], path)
      const put = operationOf(document, path, 'put')
      const guarded = path.startsWith('/api/') && path !== '/api/openapi.json'
      assert.deepEqual(
        added(put),
        guarded || path === '/metrics' ? ['401', '403', ...limited] : limited,
        path,
      )
    }
    // Without keys and limits, none of it.
    const plain = documentFor({ metrics: true, docs: true })
    assert.equal(plain.security, undefined)
    assert.equal(plain.components.securitySchemes, undefined)
    assert.equal(JSON.stringify(plain).match(/"40[13]"|"429"/), null)
  })

  it('describes user tokens beside service keys, and the challenge a refused token gets', async () => {
    const document = documentFor({ authJwtSecret: TOKEN_SECRET, apiKeys: ['k1'], metrics: true })
    assert.deepEqual(document.security, [{ userToken: [] }, { accessKey: [] }])
    const schemes = document.components.securitySchemes as Record<string, Record<string, string>>
    assert.deepEqual(Object.keys(schemes), ['userToken', 'accessKey'])
    assert.equal(schemes.userToken?.bearerFormat, 'JWT')
    assert.equal(operationOf(document, '/api/note', 'get')?.responses['401'] !== undefined, true)
    assert.equal(operationOf(document, '/healthz', 'get')?.security?.length, 0)
    // Tokens alone: no read keys, so no 403.
    const alone = documentFor({ authJwtSecret: TOKEN_SECRET })
    assert.deepEqual(alone.security, [{ userToken: [] }])
    assert.equal(operationOf(alone, '/api/note', 'post')?.responses['403'], undefined)
    // The header a real refusal carries matches the documented pattern.
    const headers = document.components.headers as Record<string, { schema: { pattern: string } }>
    const pattern = new RegExp(headers.WwwAuthenticate?.schema.pattern ?? '^$')
    const app = buildApp({
      notebooks: new MemoryNotebooks({ maxNotes: 10, maxBytes: 10_000 }),
      userTokens: new UserTokens({ secret: TOKEN_SECRET }),
      config: { ...DEFAULT_CONFIG, apiKeys: ['k1'] },
    })
    for (const authorization of [undefined, 'Bearer not.a.jwt', 'Bearer a"b\\c.d.e']) {
      const refused = await app.inject({
        method: 'GET',
        url: '/api/note',
        headers: authorization === undefined ? {} : { authorization },
      })
      assert.equal(refused.statusCode, 401)
      assert.match(String(refused.headers['www-authenticate']), pattern)
    }
  })

  it('gives as examples the 401 and 403 bodies the service really sends', async () => {
    const features = { apiKeys: ['k1'], apiReadKeys: ['r1'] }
    const { app } = buildOpsApp(features)
    const responses = documentFor(features).components.responses as Record<
      string,
      { content: Record<string, { example: unknown }> }
    >
    const example = (name: string) => responses[name]?.content['application/problem+json']?.example
    const unauthorized = await app.inject({ method: 'GET', url: '/api/note' })
    assert.deepEqual(unauthorized.json(), example('Unauthorized'))
    const forbidden = await app.inject({
      method: 'DELETE',
      url: '/api/note/1',
      headers: { authorization: 'Bearer r1' },
    })
    assert.deepEqual(forbidden.json(), example('Forbidden'))
  })
})
