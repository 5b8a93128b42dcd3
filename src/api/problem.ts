import { STATUS_CODES } from 'node:http'
import type { FastifyReply } from 'fastify'
import { Answer } from './answer.js'

/** RFC 9457 problem details, the body of every error response we own except the spec's empty 404. */
export interface Problem {
  type: string
  title: string
  status: number
  detail: string
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json'

/** 415 -> { type: 'about:blank', title: 'Unsupported Media Type', status: 415, detail } */
export function problem(status: number, detail: string): Problem {
  return { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, detail }
}

/** The encoded body of `problem(status, detail)`. */
function problemBody(status: number, detail: string): Buffer {
  return Buffer.from(JSON.stringify(problem(status, detail)))
}

/** The problem as an operation's Answer, for the lanes that write Answers. */
export function problemAnswer(
  status: number,
  detail: string,
  headers?: Record<string, string>,
): Answer {
  const list = headers === undefined ? undefined : Object.entries(headers).flat()
  return new Answer(status, PROBLEM_CONTENT_TYPE, problemBody(status, detail), list)
}

export function sendProblem(
  reply: FastifyReply,
  status: number,
  detail: string,
  headers?: Record<string, string>,
): FastifyReply {
  if (headers !== undefined) reply.headers(headers)
  return (
    reply
      .code(status)
      .header('content-type', PROBLEM_CONTENT_TYPE)
      // A Buffer, because Fastify would append '; charset=utf-8' to a string's media type.
      .send(problemBody(status, detail))
  )
}

/** An error whose status and message are safe to show to the caller as a problem. */
export class HttpProblem extends Error {
  readonly statusCode: number

  constructor(statusCode: number, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'HttpProblem'
    this.statusCode = statusCode
  }
}
