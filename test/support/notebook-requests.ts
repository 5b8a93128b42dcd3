import assert from 'node:assert/strict'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import type { Notebooks } from '../../src/store/types.js'
import type { NotebooksSuite } from './each-notebooks.js'
import { signed } from './jwks-server.js'

/** Problem answers are checked alike everywhere (helpers.ts, which unit tests can import). */
export { assertProblem } from './helpers.js'

/** Apps with user tokens and notebooks, and the requests of their users, for the notebook suites. */

export const SECRET = 'a-secret-of-32-bytes-or-more-000'
export const SERVICE_KEY = 'service-key-1'
/** The clock of these tests, in seconds: 2027-01-15T08:00:00Z. */
export const T = 1_800_000_000

/**
 * An app on fresh notebooks of the suite's kind; `wrap` changes the notebooks the app is given
 * (`notebooks` stays the ones made).
 */
export function notebookApp(
  context: NotebooksSuite,
  overrides: Partial<Config> = {},
  wrap: (notebooks: Notebooks) => Notebooks = (notebooks) => notebooks,
) {
  let now = T * 1000
  const clock = (): number => now
  const config: Config = { ...DEFAULT_CONFIG, apiKeys: [SERVICE_KEY], ...overrides }
  const notebooks = context.make({
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    maxNotesPerNotebook: config.maxNotesPerUser,
    maxBytesPerNotebook: config.maxBytesPerUser,
    historyLimit: config.changeHistory,
    maxNotebooksPerUser: 3,
    maxMembers: 3,
  })
  const app = buildApp({
    notebooks: wrap(notebooks),
    userTokens: new UserTokens({ secret: SECRET, now: clock }),
    now: clock,
    config,
  })
  return {
    app: context.inLane(app),
    notebooks,
    advance: (ms: number) => {
      now += ms
    },
  }
}

export type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'

/** The requests of one user (or of a service key: `key`). */
export async function as(app: FastifyInstance, sub: string, key?: string) {
  const token =
    key ?? (await signed(Buffer.from(SECRET), { alg: 'HS256' }, { sub, iat: T, exp: T + 3600 }))
  const authorization = { authorization: `Bearer ${token}` }
  const request = (method: Method, url: string, body?: unknown): Promise<LightMyRequestResponse> =>
    app.inject({
      method,
      url,
      headers: {
        ...authorization,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    })
  return {
    authorization,
    request,
    /** The `data` of a 200 or 201 answer. */
    data: async (method: Method, url: string, body?: unknown) => {
      const response = await request(method, url, body)
      assert.ok([200, 201].includes(response.statusCode), `${method} ${url}: ${response.body}`)
      return (JSON.parse(response.body) as { data: Record<string, unknown> }).data
    },
  }
}

/**
 * The team of the notebook suites: ann owns a notebook `name` in which bob is an editor and cat a
 * viewer; eve is in none of it.
 */
export async function team(app: FastifyInstance, name = 'Team') {
  const ann = await as(app, 'ann')
  const bob = await as(app, 'bob')
  const cat = await as(app, 'cat')
  const eve = await as(app, 'eve')
  const { id } = (await ann.data('POST', '/api/notebooks', { name })) as { id: string }
  const base = `/api/notebooks/${id}`
  await ann.data('PUT', `${base}/members/bob`, { role: 'editor' })
  await ann.data('PUT', `${base}/members/cat`, { role: 'viewer' })
  return { ann, bob, cat, eve, id, base }
}
