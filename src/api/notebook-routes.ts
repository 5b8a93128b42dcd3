import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import {
  type Directory,
  type Invite,
  isRefusal,
  type Member,
  type NotebookView,
  type Refusal,
  ROLES,
  type Role,
} from '../store/directory.js'
import { isNotebookName, type MaybePromise } from '../store/types.js'
import type { UploadStaging } from '../store/uploads.js'
import { MY_NOTEBOOK, NO_NOTEBOOK } from './notebook-access.js'
import type { NotebookServices } from './notebook-services.js'
import { sendProblem } from './problem.js'

/** Where the caller's notebooks are listed and made. */
export const NOTEBOOKS_PATH = '/api/notebooks'

const DAY_S = 86_400
/** An invitation's life when the request names none, and the longest one, in seconds. */
export const DEFAULT_INVITE_S = 7 * DAY_S
export const MAX_INVITE_S = 30 * DAY_S
/** Most redemptions one invitation allows. */
export const MAX_INVITE_USES = 10_000
/** Longest notebook name, in characters (code points). */
export const MAX_NAME = 200
/** Longest `sub` a member is added by. */
export const MAX_SUB = 255
/** Invitation redemptions one user may try per minute (guessing tokens is pointless, and slow). */
export const REDEEMS_PER_MINUTE = 20

export const SERVICE_KEY_DETAIL =
  'Notebooks belong to users: send a user token. A service key acts on the shared notebook at /api/note.'

export interface NotebookRoutesOptions {
  directory: Directory
  services: Pick<NotebookServices, 'forget'>
  /** Where unfinished uploads are kept: a removed notebook's go with it. */
  uploads?: Pick<UploadStaging, 'drop'> | undefined
  /** The clock invitations are made and checked by, in ms (Date.now). */
  now?: () => number
}

/**
 * The notebooks, their members and their invitations, for a user token's user: each route reads
 * the request, asks the directory (which checks the caller's role in the same step as the act),
 * and answers what it decided. A notebook the caller is not in is the 404 of one that does not
 * exist, whatever the act.
 */
export function registerNotebookRoutes(app: FastifyInstance, options: NotebookRoutesOptions): void {
  const { directory, services } = options
  const now = options.now ?? Date.now
  const redeems = new RedeemLimit(now)

  /** The caller's `sub` and the notebook id the path names, `me` read as their default. */
  const actorOf = (request: FastifyRequest, reply: FastifyReply): string | undefined => {
    if (request.user !== undefined) return request.user
    sendProblem(reply, 403, SERVICE_KEY_DETAIL)
    return undefined
  }
  const idOf = (actor: string, nb: string): MaybePromise<string> =>
    nb === MY_NOTEBOOK ? directory.defaultOf(actor) : nb

  /** Runs `act` for the caller on the notebook named `nb`, and answers what it decided. */
  const onNotebook = <T>(
    request: FastifyRequest,
    reply: FastifyReply,
    nb: string,
    act: (actor: string, id: string) => MaybePromise<T | Refusal>,
    answer: (result: T) => unknown,
  ): Promise<unknown> | undefined => {
    const actor = actorOf(request, reply)
    if (actor === undefined) return undefined
    return settle(
      settle(idOf(actor, nb), (id) => act(actor, id)),
      (result) => (isRefusal(result) ? refuse(reply, result) : answer(result)),
    ) as Promise<unknown> | undefined
  }

  app.get(NOTEBOOKS_PATH, (request, reply) => {
    const actor = actorOf(request, reply)
    if (actor === undefined) return undefined
    return settle(directory.list(actor), (list) => data(reply, 200, list))
  })

  app.post(NOTEBOOKS_PATH, (request, reply) => {
    const actor = actorOf(request, reply)
    if (actor === undefined) return undefined
    const name = nameOf(request.body)
    if (typeof name !== 'string') return sendProblem(reply, 400, name.problem)
    return settle(directory.create(actor, name), (made) => {
      if (isRefusal(made)) return refuse(reply, made)
      reply.header('location', `${NOTEBOOKS_PATH}/${made.id}`)
      return data(reply, 201, made)
    })
  })

  app.get<{ Params: { nb: string } }>(`${NOTEBOOKS_PATH}/:nb`, (request, reply) =>
    onNotebook(
      request,
      reply,
      request.params.nb,
      async (actor, id) =>
        (await directory.list(actor)).find((notebook) => notebook.id === id) ??
        ({ refused: 'not-found' } as const),
      (view: NotebookView) => data(reply, 200, view),
    ),
  )

  app.patch<{ Params: { nb: string } }>(`${NOTEBOOKS_PATH}/:nb`, (request, reply) => {
    const name = nameOf(request.body)
    if (typeof name !== 'string') return sendProblem(reply, 400, name.problem)
    return onNotebook(
      request,
      reply,
      request.params.nb,
      (actor, id) => directory.rename(actor, id, name),
      (view: NotebookView) => data(reply, 200, view),
    )
  })

  app.delete<{ Params: { nb: string } }>(`${NOTEBOOKS_PATH}/:nb`, (request, reply) =>
    onNotebook(
      request,
      reply,
      request.params.nb,
      (actor, id) => directory.remove(actor, id),
      async ({ store }: { store: string }) => {
        services.forget(store)
        // The notebook is gone whatever happens here: an upload left behind (the database away a
        // moment) can no longer be reached, and goes with the expiry sweep.
        await options.uploads?.drop(store).catch((err: unknown) => {
          request.log.warn({ err }, 'the uploads of a removed notebook were not removed')
        })
        return reply.code(204).send()
      },
    ),
  )

  app.get<{ Params: { nb: string } }>(`${NOTEBOOKS_PATH}/:nb/members`, (request, reply) =>
    onNotebook(
      request,
      reply,
      request.params.nb,
      (actor, id) => directory.members(actor, id),
      (members: readonly Member[]) => data(reply, 200, members),
    ),
  )

  app.put<{ Params: { nb: string; user: string } }>(
    `${NOTEBOOKS_PATH}/:nb/members/:user`,
    (request, reply) => {
      const { user } = request.params
      if (!isSub(user)) return sendProblem(reply, 400, SUB_DETAIL)
      const role = roleOf(request.body)
      if (typeof role !== 'string') return sendProblem(reply, 400, role.problem)
      return onNotebook(
        request,
        reply,
        request.params.nb,
        (actor, id) => directory.setRole(actor, id, user, role),
        (member: Member) => data(reply, 200, member),
      )
    },
  )

  app.delete<{ Params: { nb: string; user: string } }>(
    `${NOTEBOOKS_PATH}/:nb/members/:user`,
    (request, reply) =>
      onNotebook(
        request,
        reply,
        request.params.nb,
        (actor, id) => directory.removeMember(actor, id, request.params.user),
        () => reply.code(204).send(),
      ),
  )

  app.post<{ Params: { nb: string } }>(`${NOTEBOOKS_PATH}/:nb/invites`, (request, reply) => {
    const asked = inviteOf(request.body)
    if ('problem' in asked) return sendProblem(reply, 400, asked.problem)
    const { role, seconds, uses } = asked
    return onNotebook(
      request,
      reply,
      request.params.nb,
      (actor, id) => directory.invite(actor, id, { role, expires: now() + seconds * 1000, uses }),
      (invite: Invite & { token: string }) =>
        data(reply, 201, { ...inviteView(invite), token: invite.token }),
    )
  })

  app.get<{ Params: { nb: string } }>(`${NOTEBOOKS_PATH}/:nb/invites`, (request, reply) =>
    onNotebook(
      request,
      reply,
      request.params.nb,
      (actor, id) => directory.invites(actor, id, now()),
      (invites: readonly Invite[]) => data(reply, 200, invites.map(inviteView)),
    ),
  )

  app.delete<{ Params: { nb: string; id: string } }>(
    `${NOTEBOOKS_PATH}/:nb/invites/:id`,
    (request, reply) =>
      onNotebook(
        request,
        reply,
        request.params.nb,
        (actor, id) => directory.withdraw(actor, id, request.params.id),
        () => reply.code(204).send(),
      ),
  )

  app.post<{ Params: { token: string } }>('/api/invites/:token', (request, reply) => {
    const actor = actorOf(request, reply)
    if (actor === undefined) return undefined
    const wait = redeems.take(actor)
    if (wait > 0) {
      return sendProblem(
        reply,
        429,
        `At most ${REDEEMS_PER_MINUTE} invitations may be tried per minute; retry in ${wait} s.`,
        { 'retry-after': String(wait) },
      )
    }
    return settle(directory.redeem(actor, request.params.token, now()), (joined) => {
      // A notebook at its cap of members is a 507, as on every other way in.
      if (isRefusal(joined) && joined.refused === 'full') return refuse(reply, joined)
      if (isRefusal(joined)) {
        return sendProblem(
          reply,
          404,
          'This invitation is unknown, expired, used up or withdrawn; ask for a new link.',
        )
      }
      return data(reply, 200, joined)
    })
  })
}

/** `{"data": value}` with `status`. */
function data(reply: FastifyReply, status: number, value: unknown): FastifyReply {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .type('application/json')
    .send(JSON.stringify({ data: value }))
}

/** The answer to a refused act: nothing changed. */
function refuse(reply: FastifyReply, refusal: Refusal): FastifyReply {
  switch (refusal.refused) {
    case 'not-found':
      return sendProblem(reply, 404, NO_NOTEBOOK)
    case 'forbidden':
      return sendProblem(reply, 403, `Only an ${refusal.needs} of this notebook may do this.`)
    case 'last-owner':
      return sendProblem(
        reply,
        409,
        'A notebook keeps at least one owner: make another member an owner first.',
      )
    case 'default-notebook':
      return sendProblem(
        reply,
        409,
        "A user's default notebook is theirs for good: it cannot be deleted, and they cannot leave it or lose its ownership.",
      )
    case 'full':
      return sendProblem(reply, 507, refusal.detail)
  }
}

/** An invitation as answered: `expires` as an RFC 3339 time. */
function inviteView(invite: Invite): { id: string; role: Role; expires: string; uses: number } {
  return {
    id: invite.id,
    role: invite.role,
    expires: new Date(invite.expires).toISOString(),
    uses: invite.uses,
  }
}

/** Calls `then` with `value` now, or once it settles. */
function settle<T, U>(value: MaybePromise<T>, then: (settled: T) => U): MaybePromise<Awaited<U>> {
  if (value instanceof Promise) return value.then(then) as Promise<Awaited<U>>
  return then(value) as Awaited<U>
}

type Problem = { problem: string }

/** The body's fields, when it is an object holding none but `allowed`. */
function fieldsOf(body: unknown, allowed: readonly string[]): Record<string, unknown> | Problem {
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {}
  const unknown = Object.keys(fields).filter((field) => !allowed.includes(field))
  if (unknown.length > 0) {
    return {
      problem: `Unknown field ${JSON.stringify(unknown[0])}; the fields are ${allowed.join(', ')}.`,
    }
  }
  return fields
}

function isProblem(value: unknown): value is Problem {
  return typeof value === 'object' && value !== null && 'problem' in value
}

/** {"name": "Trip"} -> 'Trip'; a name must be 1-200 characters of well-formed text. */
function nameOf(body: unknown): string | Problem {
  const fields = fieldsOf(body, ['name'])
  if (isProblem(fields)) return fields
  const { name } = fields
  if (typeof name !== 'string' || name.trim() === '' || [...name].length > MAX_NAME) {
    return { problem: `name must be a string of 1 to ${MAX_NAME} characters, not only spaces.` }
  }
  if (!isNotebookName(name)) {
    return { problem: 'name must be well-formed text (no lone surrogate, no NUL).' }
  }
  return name
}

export const ROLE_DETAIL = `role must be one of ${ROLES.map((role) => JSON.stringify(role)).join(', ')}.`

function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value)
}

/** {"role": "editor"} -> 'editor' */
function roleOf(body: unknown): Role | Problem {
  const fields = fieldsOf(body, ['role'])
  if (isProblem(fields)) return fields
  return isRole(fields.role) ? fields.role : { problem: ROLE_DETAIL }
}

/** {"role": "viewer", "expires_in": 3600, "uses": 5}; `expires_in` and `uses` may be left out. */
function inviteOf(body: unknown): { role: Role; seconds: number; uses: number } | Problem {
  const fields = fieldsOf(body, ['role', 'expires_in', 'uses'])
  if (isProblem(fields)) return fields
  const { role, expires_in: seconds = DEFAULT_INVITE_S, uses = 1 } = fields
  if (!isRole(role)) return { problem: ROLE_DETAIL }
  if (!Number.isInteger(seconds) || (seconds as number) < 1 || (seconds as number) > MAX_INVITE_S) {
    return {
      problem: `expires_in must be a whole number of seconds from 1 to ${MAX_INVITE_S} (30 days); it is 7 days when left out.`,
    }
  }
  if (!Number.isInteger(uses) || (uses as number) < 1 || (uses as number) > MAX_INVITE_USES) {
    return {
      problem: `uses must be a whole number from 1 to ${MAX_INVITE_USES}; it is 1 when left out.`,
    }
  }
  return { role, seconds: seconds as number, uses: uses as number }
}

const SUB_DETAIL = `A member is named by their sub: 1 to ${MAX_SUB} characters of well-formed text.`

function isSub(user: string): boolean {
  return user !== '' && user.length <= MAX_SUB && isNotebookName(user)
}

/**
 * Redemptions tried per user in the current minute: past REDEEMS_PER_MINUTE, how many seconds to
 * wait. Kept on this instance; users are forgotten once their minute is over.
 */
class RedeemLimit {
  readonly #now: () => number
  readonly #windows = new Map<string, { start: number; count: number }>()

  constructor(now: () => number) {
    this.#now = now
  }

  /** Counts one attempt: 0 when it may go ahead, else the seconds until the next minute. */
  take(user: string): number {
    const now = this.#now()
    if (this.#windows.size > 10_000) {
      for (const [key, window] of this.#windows) {
        if (now - window.start >= 60_000) this.#windows.delete(key)
      }
    }
    let window = this.#windows.get(user)
    if (window === undefined || now - window.start >= 60_000) {
      window = { start: now, count: 0 }
      this.#windows.set(user, window)
    }
    window.count++
    if (window.count <= REDEEMS_PER_MINUTE) return 0
    return Math.max(1, Math.ceil((window.start + 60_000 - now) / 1000))
  }
}
