import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { parseJson } from '../client/parse-json.js'
import type { NoteFields } from '../store/types.js'
import { BATCH_BODY_DEPTH, BATCH_PATH } from './batch.js'
import { exceedsDepth } from './json-depth.js'
import { HttpProblem } from './problem.js'

// 'application/json' is registered by name; this catches 'application/problem+json',
// 'application/merge-patch+json' and the like. Fastify lowercases the media type first.
const STRUCTURED_JSON = /^application\/[\w!#$&^.-]+\+json(?:;|$)/
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i

export interface JsonBodyOptions {
  /**
   * How many levels of objects and arrays a field's value may nest; the body object is not
   * counted: {"a":[[1]]} nests 2.
   */
  maxDepth: number
}

/**
 * Replaces Fastify's body parsers with one for JSON objects: UTF-8 only, depth-limited,
 * `__proto__` and `constructor` kept as plain data. Other media types get Fastify's 415.
 */
export function registerJsonBodyParser(app: FastifyInstance, options: JsonBodyOptions): void {
  // A batch holds note bodies a few levels down: each may nest as deep as it could alone.
  const parse = (request: FastifyRequest, body: Buffer): NoteFields =>
    parseJsonObject(
      body,
      request.headers['content-type'],
      request.routeOptions.url === BATCH_PATH
        ? options.maxDepth + BATCH_BODY_DEPTH
        : options.maxDepth,
    )
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseSync(parse))
  app.addContentTypeParser(STRUCTURED_JSON, { parseAs: 'buffer' }, parseSync(parse))
}

function parseSync(
  parse: (request: FastifyRequest, body: Buffer) => NoteFields,
): (
  request: FastifyRequest,
  body: Buffer,
  done: (err: Error | null, body?: unknown) => void,
) => void {
  return (request, body, done) => {
    let value: NoteFields
    try {
      value = parse(request, body)
    } catch (err) {
      done(err as Error)
      return
    }
    done(null, value)
  }
}

/**
 * '{"a":1}' -> { a: 1 }; '' -> {} (no body at all means no fields).
 * Throws HttpProblem 415 for a charset other than UTF-8, 400 for anything that is not a JSON object.
 */
function parseJsonObject(
  body: Buffer,
  contentType: string | undefined,
  maxDepth: number,
): NoteFields {
  const charset = contentType === undefined ? undefined : CHARSET.exec(contentType)?.[1]
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    throw new HttpProblem(415, `Charset "${charset}" is not supported; send the body as UTF-8.`)
  }
  return parseUtf8JsonObject(body, maxDepth)
}

/**
 * parseJsonObject for a body whose media type says UTF-8 or names no charset: the same answers,
 * without reading the Content-Type again.
 */
export function parseUtf8JsonObject(body: Buffer, maxDepth: number): NoteFields {
  if (body.length === 0) return {}
  if (!isUtf8(body)) throw new HttpProblem(400, 'The request body is not valid UTF-8.')
  const text = body.toString('utf8')
  let value: unknown
  try {
    // '__proto__' is kept as an own data property, so it cannot pollute prototypes.
    value = parseJson(text)
  } catch (err) {
    throw new HttpProblem(400, `The request body is not valid JSON: ${(err as Error).message}`)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpProblem(
      400,
      `The request body must be a JSON object, not ${describeJsonValue(value)}.`,
    )
  }
  // The body object is the one level more that exceedsDepth counts: {"a":[[1]]} has depth 3.
  if (exceedsDepth(text, maxDepth + 1)) {
    throw new HttpProblem(
      400,
      `A field of the request body nests objects and arrays deeper than the limit of ${maxDepth} levels.`,
    )
  }
  return value as NoteFields
}

/** [] -> 'an array', null -> 'null', 3 -> 'a number' */
function describeJsonValue(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return `a ${typeof value}`
}
