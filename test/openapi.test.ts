import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import type { FastifyInstance } from 'fastify'
import { buildOpenApiDocument, type OpenApiDocument } from '../src/api/openapi.js'
import type { Config } from '../src/config/config.js'
import { readPackageInfo } from '../src/config/package-info.js'
import { buildOpsApp } from './ops-app.js'

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

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
]

function documentFor(features: Partial<Config>): OpenApiDocument {
  return buildOpenApiDocument({
    version: readPackageInfo().version,
    metrics: features.metrics ?? false,
    docs: features.docs ?? false,
    ui: features.ui ?? true,
    accessKeys: (features.apiKeys?.length ?? 0) + (features.apiReadKeys?.length ?? 0) > 0,
    rateLimits: (features.rateLimit ?? 0) > 0,
  })
}

/** 'GET /api/note/{id}' for every operation of the document. */
function documentedOperations(document: OpenApiDocument): string[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((key) => HTTP_METHODS.includes(key))
      .map((method) => `${method.toUpperCase()} ${path}`),
  )
}

/**
 * 'GET /api/note/{id}' for every route the app serves, read from Fastify's route tree, leaving
 * out what no API description lists: HEAD (Fastify adds one per GET, as DECISIONS.md says) and
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
      const { app } = buildOpsApp(features)
      assert.deepEqual(
        (await servedOperations(app)).sort(),
        documentedOperations(documentFor(features)).sort(),
      )
    })
  }

  it('lists the five note operations with their envelopes, conditions and errors', () => {
    const document = documentFor({})
    const statuses = (path: string, method: string) =>
      Object.keys(
        (document.paths[path]?.[method] as { responses: object } | undefined)?.responses ?? {},
      )
    assert.deepEqual(statuses('/api/note', 'get'), ['200', '304', '400'])
    assert.deepEqual(statuses('/api/note', 'post'), ['200', '400', '413', '415', '422', '507'])
    assert.deepEqual(statuses('/api/note/{id}', 'get'), ['200', '304', '400', '404'])
    assert.deepEqual(statuses('/api/note/{id}', 'patch'), [
      '200',
      '400',
      '404',
      '412',
      '413',
      '415',
      '507',
    ])
    assert.deepEqual(statuses('/api/note/{id}', 'delete'), ['200', '400', '404', '412'])
    const names = (path: string, method: string) =>
      (
        (document.paths[path]?.[method] as { parameters?: { $ref: string }[] } | undefined)
          ?.parameters ?? []
      ).map((parameter) => parameter.$ref.replace('#/components/parameters/', ''))
    assert.deepEqual(names('/api/note', 'get'), [
      'Limit',
      'After',
      'Order',
      'Q',
      'IfNoneMatch',
      'RequestId',
    ])
    assert.deepEqual(names('/api/note', 'post'), ['RequestId', 'IdempotencyKey'])
    assert.deepEqual(names('/api/note/{id}', 'patch'), [
      'NoteId',
      'RequestId',
      'IfMatch',
      'IfUnmodifiedSince',
    ])
    assert.deepEqual(document.components.responses?.NoteNotFound, {
      description: 'No note has this id. The body is empty: Content-Length 0, no Content-Type.',
      headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } },
    })
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
      assert.equal(item.parameters, undefined, `${path} has path-level parameters`)
      const variables = [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1])
      for (const method of Object.keys(item).filter((key) => HTTP_METHODS.includes(key))) {
        const declared = (
          (item[method] as { parameters?: ({ $ref: string } | { name: string; in: string })[] })
            .parameters ?? []
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
    ] as const
    for (const [name, request] of cases) {
      const response = await app.inject(request)
      assert.deepEqual(response.json(), example(name), name)
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
    const operation = (path: string, method: string) =>
      document.paths[path]?.[method] as { responses: object; security?: unknown }
    const table = documentedOperations(document).map((name) => {
      const [method = '', path = ''] = name.split(' ')
      const { responses, security } = operation(path, method.toLowerCase())
      const added = Object.keys(responses).filter((s) => ['401', '403', '429'].includes(s))
      return [name, added, security]
    })
    assert.deepEqual(table, [
      ['GET /api/note', ['401', '429'], undefined],
      ['POST /api/note', ['401', '403', '429'], undefined],
      ['GET /api/note/{id}', ['401', '429'], undefined],
      ['PATCH /api/note/{id}', ['401', '403', '429'], undefined],
      ['DELETE /api/note/{id}', ['401', '403', '429'], undefined],
      ['GET /api/events', ['401', '429'], undefined],
      ['GET /healthz', [], []],
      ['GET /readyz', [], []],
      ['GET /api/openapi.json', ['429'], []],
      ['GET /metrics', ['401', '429'], undefined],
      ['GET /docs', ['429'], []],
      ['GET /docs/static/{file}', ['429'], []],
      ['GET /', ['429'], []],
      ['GET /ui/{file}', ['429'], []],
    ])
    // Without keys and limits, none of it.
    const plain = documentFor({ metrics: true, docs: true })
    assert.equal(plain.security, undefined)
    assert.equal(plain.components.securitySchemes, undefined)
    assert.equal(JSON.stringify(plain).match(/"40[13]"|"429"/), null)
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
