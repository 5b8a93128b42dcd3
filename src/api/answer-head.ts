import type { ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'
import { type Answer, REQUEST_ID_HEADER } from './answer.js'

/**
 * The one writer of an Answer's head, for both lanes: its status goes as it is, and its headers
 * are this list, in this order, byte for byte the same whichever lane writes them:
 * - X-Request-Id first (Fastify's request-id hook sets it first too);
 * - with a body: Content-Type and Content-Length;
 * - without one, the contract's empty 404 (and any other bodiless answer): `Content-Length: 0`
 *   and no Content-Type;
 * - a 304: neither (it stands for a body it does not carry, RFC 9110 §15.4.5);
 * - then the answer's own headers (validators, Vary, Link...).
 * A flat [name, value, ...] list, since Node walks an object's headers with for-in (243d243).
 * (200 '{"data":1}' ['etag', '"v.1"'], 'r-1') ->
 * ['x-request-id', 'r-1', 'content-type', 'application/json; charset=utf-8', 'content-length', 10,
 *  'etag', '"v.1"']
 */
export function answerHead(answer: Answer, requestId: string): (string | number)[] {
  const { status, contentType, body, headers } = answer
  const head: (string | number)[] =
    contentType === undefined
      ? status === 304
        ? [REQUEST_ID_HEADER, requestId]
        : [REQUEST_ID_HEADER, requestId, 'content-length', 0]
      : [
          REQUEST_ID_HEADER,
          requestId,
          'content-type',
          contentType,
          'content-length',
          body === undefined ? 0 : Buffer.byteLength(body),
        ]
  if (headers.length !== 0) for (const header of headers) head.push(header)
  return head
}

/** Writes `answer` on a node:http response (the fast lane). */
export function writeAnswer(response: ServerResponse, answer: Answer, requestId: string): void {
  response.writeHead(answer.status, answerHead(answer, requestId) as string[])
  response.end(answer.body)
}

/**
 * Sends `answer` through Fastify's reply (the routes), with the same head: Fastify keeps a
 * Content-Length that matches the body and adds none to a 304. A Vary that a hook set already
 * (CORS: 'Vary: Origin') is extended, not replaced.
 */
export function sendAnswer(reply: FastifyReply, answer: Answer): void {
  const head = answerHead(answer, reply.request.id)
  reply.code(answer.status)
  for (let i = 0; i + 1 < head.length; i += 2) {
    const name = head[i] as string
    const value = head[i + 1] as string | number
    const prior = name === 'vary' ? reply.getHeader('vary') : undefined
    reply.header(name, prior === undefined ? value : `${String(prior)}, ${value}`)
  }
  reply.send(answer.body)
}
