import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import { Answer, JSON_CONTENT_TYPE, NOTES_PATH } from '../api/answer.js'
import { writeAnswer } from '../api/answer-head.js'
import { type FailureReporter, problemForError } from '../api/error-handling.js'
import { parseUtf8JsonObject } from '../api/json-body.js'
import { wantsExport } from '../api/note-export.js'
import { parseNoteId } from '../api/note-id.js'
import type { NoteOperations } from '../api/note-operations.js'
import { NOTE_ROUTE } from '../api/note-routes.js'
import { problemAnswer } from '../api/problem.js'
import type { MaybePromise, NoteFields } from '../store/types.js'
import { closeAfterRefusal } from './refusals.js'

export interface FastLaneOptions {
  /**
   * What each operation means and answers for this request (the operations of its caller's
   * notebook, the same instance the Fastify routes call), or undefined when the lane must leave
   * it to Fastify: a caller the keys or tokens refuse, or whose token is not verified yet.
   */
  operationsFor: (request: IncomingMessage) => NoteOperations | undefined
  /**
   * The operations of notebook `nb` (a path's `/api/notebooks/:nb/`) for this request, for a read
   * or a `write`: an Answer when the caller's role there refuses it (404, 403), or undefined when
   * the lane must leave it to Fastify, as operationsFor. Without it, Fastify serves those paths.
   */
  operationsIn?: (
    request: IncomingMessage,
    nb: string,
    write: boolean,
  ) => MaybePromise<NoteOperations | Answer> | undefined
  bodyLimit: number
  maxDepth: number
  /** The same generator Fastify's `genReqId` uses, so ids stay unique across both lanes. */
  requestId: (request: IncomingMessage) => string
  /** True once the app has begun closing: Fastify then answers, with `Connection: close`. */
  closing: () => boolean
  /** Where failed requests are logged: the one the Fastify lane's error handler reports to. */
  failures: FailureReporter
  /** Counts an answered request for the metrics, as the Fastify lane's onResponse hook does. */
  record?: ((method: string, route: string, status: number, seconds: number) => void) | undefined
}

const NOTE_PREFIX = `${NOTES_PATH}/`
const LIST_WITH_QUERY = `${NOTES_PATH}?`
const NOTEBOOKS_PREFIX = '/api/notebooks/'
/** The metrics' route labels of the note routes in a named notebook. */
const NOTEBOOK_NOTES_ROUTE = '/api/notebooks/:nb/note'
const NOTEBOOK_NOTE_ROUTE = '/api/notebooks/:nb/note/:id'
/** A notebook id (or `me`) as the lane takes it: anything else goes to Fastify's router. */
const NOTEBOOK_ID = /^[A-Za-z0-9_-]{1,64}$/

/**
 * Takes the five note operations in their everyday form straight from node:http, and hands
 * every other request to Fastify untouched. It decides only whether it may take a request; what
 * the request means and what it answers come from NoteOperations, the same instance the Fastify
 * routes call, so a header or status added there reaches clients of both lanes.
 *
 * Fastify's per-request machinery (router, Request and Reply objects, hooks, reply pipeline) costs
 * a small GET about a third more CPU than node:http alone (bench W1: 0.76 of the floor through
 * Fastify, 0.90-0.99 through this lane). It shares the body parser, id generator, problem bodies
 * and the writer of answers (answerHead) with the Fastify lane too, and closes a connection after
 * a refused body as its error handler does (closeAfterRefusal); the shared test suites run
 * through both.
 *
 * It takes a request only when nothing about it needs Fastify:
 * - the URL is exactly '/api/note' (a GET may add a query: pages and search) or
 *   '/api/note/<decimal id>' (no query, no trailing slash, no percent-encoding);
 * - GET (but an export, Accept: application/x-ndjson, which streams); POST or PATCH with Content-Type 'application/json' (optionally '; charset=utf-8') and a
 *   Content-Length within the body limit; DELETE with no body;
 * - the app is not closing;
 * - with access keys or user tokens on, its caller is allowed, and known without waiting (a
 *   token verified before): Fastify answers the 401s and 403s, and verifies new tokens.
 * Anything else (HEAD, OPTIONS, 404/405 paths, chunked or oversized bodies, other media types)
 * goes to Fastify, which also serves everything when request logging, CORS, load shedding or
 * rate limiting is on: those live in Fastify hooks (and rate limits must count every request).
 */
export function withFastLane(options: FastLaneOptions, fallback: RequestListener): RequestListener {
  const { operationsFor, bodyLimit, maxDepth, requestId, closing, failures, record } = options

  const hasJsonBody = (request: IncomingMessage): boolean => {
    const { headers } = request
    const type = headers['content-type']
    // Node's parser has already refused a Content-Length that is not all digits, and it reads
    // exactly that many bytes of body, so the number is all there is to check.
    const length = Number(headers['content-length'])
    return (
      (type === 'application/json' || type === JSON_CONTENT_TYPE) &&
      length >= 1 &&
      length <= bodyLimit &&
      headers['transfer-encoding'] === undefined
    )
  }

  const hasNoBody = (request: IncomingMessage): boolean => {
    const { headers } = request
    const length = headers['content-length']
    return (
      headers['content-type'] === undefined &&
      headers['transfer-encoding'] === undefined &&
      (length === undefined || length === '0')
    )
  }

  /** One request taken by the lane: how its Answer is written and counted. */
  class Exchange {
    readonly id: string
    readonly start: number

    constructor(
      readonly request: IncomingMessage,
      readonly response: ServerResponse,
      readonly route: string,
    ) {
      this.id = requestId(request)
      this.start = record === undefined ? 0 : performance.now()
    }

    /**
     * Writes the operation's answer, now or when its promise settles (a rejection fails). Called
     * as a method, so the synchronous path allocates no closure.
     */
    settle(answer: MaybePromise<Answer>): void {
      if (answer instanceof Promise) {
        answer.then(
          (value) => this.send(value),
          (err: unknown) => this.fail(err),
        )
      } else {
        this.send(answer)
      }
    }

    send(answer: Answer): void {
      writeAnswer(this.response, answer, this.id)
      this.#record(answer.status)
    }

    fail(err: unknown): void {
      if (this.response.headersSent) {
        // Failed while sending: nothing sensible can follow on this connection.
        failures.report(err, 500, 'failed while sending the answer', this.id)
        this.response.destroy()
        return
      }
      const error = err instanceof Error ? err : new Error(String(err))
      const { status, detail, headers } = problemForError(error, bodyLimit)
      failures.report(error, status, detail, this.id)
      this.send(problemAnswer(status, detail, headers))
    }

    /** Reads the body (its length is known and within the limit) and parses it as note fields. */
    readFields(next: (fields: NoteFields) => void): void {
      const chunks: Buffer[] = []
      this.request.on('data', (chunk: Buffer) => chunks.push(chunk))
      this.request.on('end', () => {
        const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)
        let fields: NoteFields
        try {
          // hasJsonBody let in only 'application/json', bare or with charset=utf-8.
          fields = parseUtf8JsonObject(body, maxDepth)
        } catch (err) {
          // As Fastify does after any body it could not parse; the close lingers, as every close
          // after an error answer does, so a request pipelined behind this one meets no reset.
          closeAfterRefusal(this.request, (name, value) => this.response.setHeader(name, value))
          this.fail(err)
          return
        }
        next(fields)
      })
    }

    #record(status: number): void {
      if (record === undefined) return
      const method = this.request.method as string
      record(method, this.route, status, (performance.now() - this.start) / 1000)
    }
  }

  /**
   * `/api/notebooks/<nb>/note...` in the same everyday forms as `/api/note...`: true when taken.
   * The notebook's operations may come later (a database's directory), or be a refusal.
   */
  const inNotebook = (request: IncomingMessage, response: ServerResponse, url: string): boolean => {
    const operationsIn = options.operationsIn
    if (operationsIn === undefined || closing()) return false
    const slash = url.indexOf('/', NOTEBOOKS_PREFIX.length)
    if (slash === -1) return false
    const nb = url.slice(NOTEBOOKS_PREFIX.length, slash)
    if (!NOTEBOOK_ID.test(nb)) return false
    const rest = url.slice(slash)
    const { method } = request
    let write: boolean
    let route: string
    let run: (operations: NoteOperations, fields: NoteFields) => MaybePromise<Answer>
    if (rest === '/note' || rest.startsWith('/note?')) {
      route = NOTEBOOK_NOTES_ROUTE
      if (method === 'GET') {
        write = false
        const query = rest.length > 5 ? rest.slice(6) : ''
        run = (operations) => operations.list(query, request.headers)
      } else if (method === 'POST' && rest === '/note' && hasJsonBody(request)) {
        write = true
        run = (operations, fields) => operations.create(fields, request.headers)
      } else {
        return false
      }
    } else if (rest.startsWith('/note/')) {
      const segment = rest.slice(6)
      const id = parseNoteId(segment)
      if (id === undefined) return false
      route = NOTEBOOK_NOTE_ROUTE
      if (method === 'GET') {
        write = false
        run = (operations) => operations.get(id, request.headers)
      } else if (method === 'PATCH' && hasJsonBody(request)) {
        write = true
        run = (operations, fields) => operations.update(id, fields, 'merge', request.headers)
      } else if (method === 'DELETE' && hasNoBody(request)) {
        write = true
        run = (operations) => operations.delete(id, segment, request.headers)
      } else {
        return false
      }
    } else {
      return false
    }
    const found = operationsIn(request, nb, write)
    if (found === undefined) return false
    const exchange = new Exchange(request, response, route)
    const answer = (fields: NoteFields): void => {
      try {
        if (found instanceof Promise) {
          exchange.settle(
            found.then((settled) => (settled instanceof Answer ? settled : run(settled, fields))),
          )
        } else {
          exchange.settle(found instanceof Answer ? found : run(found, fields))
        }
      } catch (err) {
        exchange.fail(err)
      }
    }
    if (method === 'POST' || method === 'PATCH') exchange.readFields(answer)
    else answer({})
    return true
  }

  return (request, response) => {
    const { url: target } = request
    if (target?.startsWith(NOTEBOOKS_PREFIX) === true) {
      if (!inNotebook(request, response, target)) fallback(request, response)
      return
    }
    const operations = operationsFor(request)
    if (operations === undefined) {
      fallback(request, response)
      return
    }
    const { url, method } = request
    // An export (ndjson) streams: Fastify's route sends it, with backpressure.
    if (
      method === 'GET' &&
      request.headers.accept !== undefined &&
      wantsExport(request.headers.accept)
    ) {
      fallback(request, response)
      return
    }
    if (method === 'GET' && url?.startsWith(LIST_WITH_QUERY) === true && !closing()) {
      const exchange = new Exchange(request, response, NOTES_PATH)
      try {
        exchange.settle(operations.list(url.slice(LIST_WITH_QUERY.length), request.headers))
      } catch (err) {
        exchange.fail(err)
      }
      return
    }
    if (url === NOTES_PATH && !closing()) {
      if (method === 'GET') {
        const exchange = new Exchange(request, response, NOTES_PATH)
        try {
          exchange.settle(operations.list('', request.headers))
        } catch (err) {
          exchange.fail(err)
        }
        return
      }
      if (method === 'POST' && hasJsonBody(request)) {
        const exchange = new Exchange(request, response, NOTES_PATH)
        exchange.readFields((fields) => {
          try {
            exchange.settle(operations.create(fields, request.headers))
          } catch (err) {
            exchange.fail(err)
          }
        })
        return
      }
    } else if (url?.startsWith(NOTE_PREFIX) === true && !closing()) {
      const segment = url.slice(NOTE_PREFIX.length)
      const id = parseNoteId(segment)
      if (id !== undefined) {
        if (method === 'GET') {
          const exchange = new Exchange(request, response, NOTE_ROUTE)
          try {
            exchange.settle(operations.get(id, request.headers))
          } catch (err) {
            exchange.fail(err)
          }
          return
        }
        if (method === 'PATCH' && hasJsonBody(request)) {
          const exchange = new Exchange(request, response, NOTE_ROUTE)
          exchange.readFields((fields) => {
            try {
              exchange.settle(operations.update(id, fields, 'merge', request.headers))
            } catch (err) {
              exchange.fail(err)
            }
          })
          return
        }
        if (method === 'DELETE' && hasNoBody(request)) {
          const exchange = new Exchange(request, response, NOTE_ROUTE)
          try {
            exchange.settle(operations.delete(id, segment, request.headers))
          } catch (err) {
            exchange.fail(err)
          }
          return
        }
      }
    }
    fallback(request, response)
  }
}
