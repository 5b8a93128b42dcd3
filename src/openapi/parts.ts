import { PROBLEM_CONTENT_TYPE, problem } from '../api/problem.js'

/**
 * The pieces every part's OpenAPI paths are made of. A part of the service that serves routes
 * describes them with these (note-paths.ts, event-paths.ts and the other *-paths.ts here), and
 * buildOpenApiDocument (document.ts) puts the parts together.
 */

/** An operation: what one method of one path answers. */
export interface Operation {
  tags?: string[]
  operationId?: string
  summary?: string
  description?: string
  parameters?: unknown[]
  requestBody?: unknown
  responses: Record<string, unknown>
  security?: Record<string, string[]>[]
}

/** The methods a path item can hold (OpenAPI 3.1 §4.8.9). */
export const PATH_ITEM_METHODS = [
  'get',
  'put',
  'post',
  'delete',
  'options',
  'head',
  'patch',
  'trace',
] as const

export type PathItemMethod = (typeof PATH_ITEM_METHODS)[number]

/** A path item: a description and an operation per method served. */
export type PathItem = { description?: string } & { [method in PathItemMethod]?: Operation }

/** Path templates ('/api/note/{id}') and what each serves. */
export type Paths = Record<string, PathItem>

/** ('schemas', 'Note') -> { $ref: '#/components/schemas/Note' } */
export const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` })
export const schema = (name: string) => ref('schemas', name)
export const response = (name: string) => ref('responses', name)
export const header = (name: string) => ref('headers', name)
export const parameter = (name: string) => ref('parameters', name)

/** The answer of any operation that reaches the store, when the store cannot serve it. */
export const STORE_ERRORS = { '503': response('StoreUnavailable') }

/** The header every answer carries. */
export const requestIdHeader = { 'X-Request-Id': header('RequestId') }

/** A response with a body of `body` as `mediaType`, and X-Request-Id. */
export function jsonResponse(description: string, body: object, mediaType = 'application/json') {
  return { description, headers: requestIdHeader, content: { [mediaType]: { schema: body } } }
}

/** A problem JSON response, with the body the service sends as its example. */
export function problemResponse(
  description: string,
  status: number,
  exampleDetail: string,
  headers: Record<string, unknown> = {},
) {
  return {
    description,
    headers: { ...requestIdHeader, ...headers },
    content: {
      [PROBLEM_CONTENT_TYPE]: {
        schema: schema('Problem'),
        example: problem(status, exampleDetail),
      },
    },
  }
}

/** A 200 of a file that never changes while the process runs: it carries an ETag to revalidate. */
export function fixedFileResponse(
  description: string,
  content: object,
  headers: Record<string, unknown> = {},
) {
  return {
    description,
    headers: {
      ...requestIdHeader,
      ETag: header('ETag'),
      'Cache-Control': header('CacheControl'),
      ...headers,
    },
    content,
  }
}

/** A path parameter named `name`, a string. */
export function pathParameter(name: string, description: string, examples: string[]) {
  return {
    name,
    in: 'path',
    required: true,
    description,
    schema: { type: 'string', examples },
  }
}

/** { data: <data> } and nothing else. */
export function envelope(data: object) {
  return {
    type: 'object',
    required: ['data'],
    properties: { data },
    additionalProperties: false,
  }
}
