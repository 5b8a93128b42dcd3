import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import type { RequestListener } from 'node:http'
import { describe } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import inject, { type InjectOptions } from 'light-my-request'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { archiveLimits } from '../../src/open-stores.js'
import {
  MemoryNotebooks,
  type MemoryNotebooksOptions,
} from '../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import type { MemoryStoreOptions } from '../../src/store/memory/options.js'
import type { Notebooks, NoteStore } from '../../src/store/types.js'

export interface TestApp {
  app: FastifyInstance
  store: NoteStore
}

/** The version epoch of test stores: ETags read '"e.1"', '"e.2"', ... */
export const TEST_EPOCH = 'e'

/** The options both stores take, as a test may set them. */
export type TestStoreOptions = Partial<
  Pick<
    MemoryStoreOptions,
    | 'maxNotes'
    | 'maxBytes'
    | 'now'
    | 'historyLimit'
    | 'maxIdempotencyKeys'
    | 'idempotencyTtlMs'
    | 'archive'
  >
>

/** A fresh app and store with the shipped defaults, overridable per test, on the memory store. */
export function buildTestApp(
  overrides: Partial<Config> = {},
  storeOptions: TestStoreOptions = {},
): TestApp {
  return MEMORY.buildApp(overrides, storeOptions)
}

/** Where the apps of a suite keep their notes. */
const STORES = ['memory', 'postgres'] as const
export type StoreKind = (typeof STORES)[number]

/**
 * How tests reach an app: 'fastify' is `app.inject` as Fastify provides it (its router, hooks and
 * handlers); 'server' goes through the listening server's request listener instead (pipelining
 * order, then the fast lane for everyday note requests, then Fastify for the rest).
 */
export const LANES = ['fastify', 'server'] as const
export type Lane = (typeof LANES)[number]

/** The secret of the apps whose requests act in a user's notebook (describeEachStore). */
const NOTEBOOK_SECRET = 'test-notebook-secret-of-32-bytes-or-more'

/**
 * What a suite defined by describeEachStore or describeEachLane runs on, handed to it: its cases
 * build their apps and stores through it, so each knows its store and lane from its own suite.
 */
export interface SuiteContext {
  /** Where the apps and stores made here keep their notes. */
  readonly store: StoreKind
  /** How the apps made here (or passed to inLane) are reached. */
  readonly lane: Lane
  /** A fresh app and store of this suite's kind, in its lane, with the shipped defaults. */
  buildApp(overrides?: Partial<Config>, storeOptions?: TestStoreOptions): TestApp
  /** A fresh store of this suite's kind, with the test epoch unless `options` gives one. */
  buildStore(options: MemoryStoreOptions): NoteStore
  /** The app, with `inject` going through the server's request listener in the 'server' lane. */
  inLane(app: FastifyInstance): FastifyInstance
  /** Who a 507 says is full: 'The store', or 'This notebook' for the apps of a user's notebook. */
  readonly full: string
}

/** The notebooks of a suite's apps that act in a user's notebook, on the suite's kind of store. */
type MakeNotebooks = (options: MemoryNotebooksOptions) => Notebooks

export function suiteContext(
  store: StoreKind,
  lane: Lane,
  makeStore: (options: MemoryStoreOptions) => NoteStore,
  makeNotebooks?: MakeNotebooks,
): SuiteContext {
  const inNotebook = makeNotebooks !== undefined
  const buildStore = (options: MemoryStoreOptions): NoteStore =>
    makeStore({ epoch: TEST_EPOCH, ...options })
  return {
    store,
    lane,
    full: inNotebook ? 'This notebook' : 'The store',
    buildStore,
    inLane: (app) => inLane(app, lane),
    buildApp(overrides = {}, storeOptions = {}) {
      const config = { ...DEFAULT_CONFIG, ...overrides }
      // A suite about keys keeps its keys: with user tokens they would reach another notebook.
      if (inNotebook && config.apiKeys.length + config.apiReadKeys.length === 0) {
        return notebookApp(makeNotebooks, config, storeOptions, lane)
      }
      const store = buildStore({
        maxNotes: config.maxNotes,
        maxBytes: config.maxStoreBytes,
        historyLimit: config.changeHistory,
        archive: archiveLimits(config),
        ...storeOptions,
      })
      return { app: inLane(buildApp({ store, config }), lane), store }
    },
  }
}

export const memoryStore = (options: MemoryStoreOptions): NoteStore => new MemoryNoteStore(options)
export const memoryNotebooks = (options: MemoryNotebooksOptions): Notebooks =>
  new MemoryNotebooks(options)

/**
 * An app with user tokens on whose every request (unless it sends its own Authorization) acts in
 * the notebook of user 'alice', and that notebook as the store: all a suite checks of one store
 * must hold inside a notebook, through the token's check (Fastify) and its remembered verdict
 * (the fast lane).
 */
function notebookApp(
  makeNotebooks: MakeNotebooks,
  config: Config,
  storeOptions: TestStoreOptions,
  lane: Lane,
): TestApp {
  const notebooks = makeNotebooks({
    ...storeOptions,
    maxNotes: storeOptions.maxNotes ?? config.maxNotes,
    maxBytes: storeOptions.maxBytes ?? config.maxStoreBytes,
    historyLimit: storeOptions.historyLimit ?? config.changeHistory,
    archive: storeOptions.archive ?? archiveLimits(config),
    epochOf: (notebook) => (notebook === 'user:alice' ? TEST_EPOCH : undefined),
  })
  const app = inLane(
    buildApp({ notebooks, userTokens: new UserTokens({ secret: NOTEBOOK_SECRET }), config }),
    lane,
  )
  const token = signedSync(NOTEBOOK_SECRET, 'alice')
  const inject = app.inject.bind(app)
  app.inject = ((options: InjectOptions | string) => {
    const given = typeof options === 'string' ? { url: options } : options
    const headers = (given.headers ?? {}) as Record<string, string>
    const has = Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')
    return inject({
      ...given,
      headers: has ? headers : { ...headers, authorization: `Bearer ${token}` },
    })
  }) as typeof app.inject
  return { app, store: notebooks.notebook('user:alice') }
}

/** An HS256 JWT for `sub`, valid for a day, made synchronously (node:crypto's HMAC). */
function signedSync(secret: string, sub: string): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  const body = `${part({ alg: 'HS256' })}.${part({ sub, exp: Math.floor(Date.now() / 1000) + 86_400 })}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

/**
 * The memory store through Fastify: what buildTestApp makes, and the context that helpers shared
 * with suites take outside describeEachStore and describeEachLane.
 */
export const MEMORY: SuiteContext = suiteContext('memory', 'fastify', memoryStore)

/**
 * Defines `suite` once per lane, on the memory store, handing it the context of that lane.
 * describeEachStore (each-store.ts) runs a suite on PostgreSQL too.
 */
export function describeEachLane(name: string, suite: (context: SuiteContext) => void): void {
  for (const lane of LANES) {
    describe(`${name} (through ${lane})`, () => suite(suiteContext('memory', lane, memoryStore)))
  }
}

/** The app, with `inject` going through the server's request listener in the 'server' lane. */
export function inLane(app: FastifyInstance, lane: Lane): FastifyInstance {
  if (lane === 'server') app.inject = injectThroughServer(app) as typeof app.inject
  return app
}

/** An `inject` that sends requests to the request listener of `app.server`. */
export function injectThroughServer(
  app: FastifyInstance,
): (options: InjectOptions | string) => Promise<LightMyRequestResponse> {
  return async (options) => {
    await app.ready()
    const listener = app.server.listeners('request')[0] as RequestListener
    return inject(listener, options)
  }
}

/** A clock that returns `start`, `start + 1`, ... or a fixed value when `step` is 0. */
export function fakeClock(start: number, step = 0): () => number {
  let t = start - step
  return () => {
    t += step
    return t
  }
}

export async function postNote(
  app: FastifyInstance,
  body: unknown,
): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url: '/api/note', payload: body as object })
}

/** The `data` of a successful response, after checking status and content type. */
export function dataOf(response: LightMyRequestResponse): unknown {
  if (response.statusCode !== 200) {
    throw new Error(`expected 200, got ${response.statusCode}: ${response.body}`)
  }
  if (response.headers['content-type'] !== 'application/json; charset=utf-8') {
    throw new Error(`unexpected content-type ${String(response.headers['content-type'])}`)
  }
  return (JSON.parse(response.body) as { data: unknown }).data
}

export const JSON_HEADERS = { 'content-type': 'application/json' }

/** Asserts a problem answer: this status, problem JSON, and exactly this detail. */
export function assertProblem(
  response: LightMyRequestResponse,
  status: number,
  detail: string,
): void {
  assert.equal(response.statusCode, status, response.body)
  assert.equal(response.headers['content-type'], 'application/problem+json')
  assert.deepEqual(JSON.parse(response.body), {
    type: 'about:blank',
    title: (JSON.parse(response.body) as { title: string }).title,
    status,
    detail,
  })
}
