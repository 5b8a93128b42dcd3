import type { OutgoingHttpHeaders } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Directory } from '../store/directory.js'
import { parsePosition } from './all-notebooks-stream.js'
import { EVENT_STREAM_HEADERS } from './event-framing.js'
import { resumeAt } from './membership-resume.js'
import { isRefused, type Refused, type Target, targetOf } from './notebook-access.js'
import type { NotebookServices } from './notebook-services.js'
import { sendProblem } from './problem.js'
import { queryOf } from './request-target.js'

/** The change feed's path, also the `route` label of its metrics. */
const EVENTS_ROUTE = '/api/events'

/** What a version token looks like: opaque, but made of these characters only. */
const TOKEN = /^[A-Za-z0-9._~-]{1,256}$/

/** Seconds a client refused for the cap is told to wait before it tries again. */
const CAP_RETRY_AFTER_S = 10

/** Where a stream starts: after a token, from now (undefined), or a 400's detail. */
type Start = { since: string | undefined } | { problem: string }

/**
 * The token a stream starts after: the Last-Event-ID header (what a browser's EventSource sends
 * when it reconnects) wins over the `since` query parameter. An empty Last-Event-ID counts as
 * none. 'since=e.5' -> { since: 'e.5' }; nothing -> { since: undefined }; 'since=a b' -> problem.
 */
function startOf(request: FastifyRequest): Start {
  const header = request.headers['last-event-id']
  if (typeof header === 'string' && header !== '') {
    return TOKEN.test(header)
      ? { since: header }
      : { problem: `Last-Event-ID must be an event id this feed sent (${TOKEN_TEXT}).` }
  }
  const query = queryOf(request.url)
  if (query === '') return { since: undefined }
  const values = new URLSearchParams(query).getAll('since')
  if (values.length === 0) return { since: undefined }
  const since = values[0] as string
  if (values.length > 1 || !TOKEN.test(since)) {
    return {
      problem: `since must be one version token, as Notes-Version or an event id gives it (${TOKEN_TEXT}).`,
    }
  }
  return { since }
}

const TOKEN_TEXT = '1 to 256 characters of A-Z a-z 0-9 . _ ~ -'

/** A notebook's feed at a path of its own. */
const NOTEBOOK_EVENTS_ROUTE = '/api/notebooks/:nb/events'

/**
 * The stream of `store`'s changes, answered to `request`, for `member` when they can lose access:
 * the request is checked and the response handed to the feed, which writes everything after the
 * head. HEAD answers the head alone. Past the cap, or while shutting down, 503 with Retry-After.
 * A member's stream resumed at a token from before their membership began (they left and came
 * back), or where that cannot be told, starts with a reset: some changes after the token may be
 * of a time they were not a member.
 */
function serveStream(
  request: FastifyRequest,
  reply: FastifyReply,
  services: NotebookServices,
  store: string,
  member?: { id: string; user: string; since: string | undefined },
): FastifyReply {
  const start = startOf(request)
  if ('problem' in start) return sendProblem(reply, 400, start.problem)
  const reset =
    member !== undefined &&
    start.since !== undefined &&
    resumeAt(start.since, member.since) !== 'token'
  const feed = services.feed(store)
  if (request.method !== 'HEAD' && services.closing) {
    return sendProblem(reply, 503, 'The service is shutting down. Reconnect in a moment.', {
      'retry-after': '1',
    })
  }
  if (request.method !== 'HEAD' && !feed.hasRoom()) {
    return sendProblem(
      reply,
      503,
      `A notebook may follow at most ${feed.ownCap} event streams at once; close one, or retry after ${CAP_RETRY_AFTER_S} s.`,
      { 'retry-after': String(CAP_RETRY_AFTER_S) },
    )
  }
  if (request.method !== 'HEAD' && !feed.admits()) {
    return sendProblem(
      reply,
      503,
      `The service serves at most ${feed.maxStreams} event streams at once; retry after ${CAP_RETRY_AFTER_S} s.`,
      { 'retry-after': String(CAP_RETRY_AFTER_S) },
    )
  }
  // From here on the feed writes the response: Fastify's reply would end it. The head carries
  // what the hooks set on the reply (X-Request-Id, CORS, RateLimit-*).
  reply.hijack()
  reply.raw.writeHead(200, {
    ...(reply.getHeaders() as OutgoingHttpHeaders),
    ...EVENT_STREAM_HEADERS,
  })
  // HEAD: the head a GET would get (no Content-Length: a stream has none), and no stream.
  if (request.method === 'HEAD') {
    reply.raw.end()
  } else {
    // The feed sends the head with the stream's opening, then writes on the socket itself.
    services.openStream(store, reply.raw, start.since, member, reset)
  }
  return reply
}

/**
 * GET /api/events?notebooks=all: every notebook the caller's user can read, over one stream that
 * counts as one toward the caps. Resumed from Last-Event-ID (or `since`), which must be an id this
 * stream gave.
 */
function serveAll(
  request: FastifyRequest,
  reply: FastifyReply,
  services: NotebookServices,
  directory: Directory | undefined,
): FastifyReply {
  const { user } = request
  if (user === undefined || directory === undefined) {
    return sendProblem(
      reply,
      400,
      'notebooks=all follows the notebooks of a user: send a user token. A service key follows the shared notebook at /api/events.',
    )
  }
  const header = request.headers['last-event-id']
  const since =
    typeof header === 'string' && header !== ''
      ? header
      : (new URLSearchParams(queryOf(request.url)).get('since') ?? undefined)
  const position = since === undefined ? undefined : parsePosition(since)
  if (since !== undefined && position === undefined) {
    return sendProblem(reply, 400, 'Last-Event-ID must be an event id this stream sent.')
  }
  if (request.method !== 'HEAD' && !services.admitsAll(user)) {
    return sendProblem(
      reply,
      503,
      `The service serves no more event streams for you now; close one, or retry after ${CAP_RETRY_AFTER_S} s.`,
      { 'retry-after': String(CAP_RETRY_AFTER_S) },
    )
  }
  reply.hijack()
  reply.raw.writeHead(200, {
    ...(reply.getHeaders() as OutgoingHttpHeaders),
    ...EVENT_STREAM_HEADERS,
  })
  if (request.method === 'HEAD') reply.raw.end()
  else services.openAll(reply.raw, user, position, directory)
  return reply
}

/**
 * GET /api/events: the change feed as Server-Sent Events. The route only checks the request and
 * hands the response to the feed, which writes everything after the head. HEAD answers the head
 * alone. Past the cap, or while shutting down, it answers 503 with Retry-After.
 */
export function registerEventRoutes(
  app: FastifyInstance,
  services: NotebookServices,
  directory?: Directory,
): void {
  // The feed of the caller's default notebook: it sees no change of any other; or, with
  // ?notebooks=all, of every notebook the caller can read.
  app.get(EVENTS_ROUTE, (request, reply) => {
    const notebooks = new URLSearchParams(queryOf(request.url)).getAll('notebooks')
    if (notebooks.length === 0) return serveStream(request, reply, services, request.notebook)
    if (notebooks.length > 1 || notebooks[0] !== 'all') {
      return sendProblem(
        reply,
        400,
        'notebooks takes one value: all (every notebook you can read).',
      )
    }
    return serveAll(request, reply, services, directory)
  })
  // The feed of the notebook the path names, for any member: one who loses read access to it
  // gets `revoked`, and the stream ends.
  app.get<{ Params: { nb: string } }>(NOTEBOOK_EVENTS_ROUTE, (request, reply) => {
    const { nb } = request.params
    const streamOn = (target: Target | Refused) => {
      if (isRefused(target)) return sendProblem(reply, target.status, target.detail)
      const { guardedFor, since } = target
      return serveStream(
        request,
        reply,
        services,
        target.store,
        guardedFor === undefined ? undefined : { id: nb, user: guardedFor, since },
      )
    }
    const target = targetOf(request, nb, directory, false)
    return target instanceof Promise ? target.then(streamOn) : streamOn(target)
  })
  app.addHook('preClose', (done) => {
    services.close()
    done()
  })
}
