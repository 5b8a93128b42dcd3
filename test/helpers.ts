import type { RequestListener } from 'node:http'
import { after, afterEach, before, describe } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import inject, { type InjectOptions } from 'light-my-request'
import { buildApp } from '../src/app.js'
import { type Config, DEFAULT_CONFIG } from '../src/config/config.js'
import { MemoryNoteStore, type MemoryStoreOptions } from '../src/store/memory.js'
import { PostgresNoteStore } from '../src/store/postgres/store.js'
import type { NoteStore } from '../src/store/types.js'
import { PostgresCluster, postgresAvailable } from './postgres-cluster.js'

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
    'maxNotes' | 'maxBytes' | 'now' | 'historyLimit' | 'maxIdempotencyKeys' | 'idempotencyTtlMs'
  >
>

/**
 * A fresh app and store with the shipped defaults, overridable per test: a memory store, or inside
 * describeEachStore's PostgreSQL half, a PostgreSQL store in a schema of its own.
 */
export function buildTestApp(
  overrides: Partial<Config> = {},
  storeOptions: TestStoreOptions = {},
): TestApp {
  const config = { ...DEFAULT_CONFIG, ...overrides }
  const store = buildTestStore({
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    historyLimit: config.changeHistory,
    ...storeOptions,
  })
  return { app: inLane(buildApp({ store, config })), store }
}

/**
 * A fresh store of the current kind (memory, or PostgreSQL inside describeEachStore's PostgreSQL
 * half), with the test epoch unless `options` gives one.
 */
export function buildTestStore(options: MemoryStoreOptions): NoteStore {
  const withEpoch = { epoch: TEST_EPOCH, ...options }
  return currentStore === 'postgres' ? postgresStore(withEpoch) : new MemoryNoteStore(withEpoch)
}

/** Where the apps of a suite keep their notes. */
export const STORES = ['memory', 'postgres'] as const
export type StoreKind = (typeof STORES)[number]

let currentStore: StoreKind = 'memory'

/**
 * The kind of store buildTestApp makes now, and while describeEachStore defines a suite's cases
 * (for the few cases that differ by store).
 */
export function storeKind(): StoreKind {
  return currentStore
}

/**
 * One PostgreSQL cluster per test file, started by the first PostgreSQL suite that runs and
 * destroyed after the last one defined; every app gets a fresh schema in its one database. Not
 * durable: these suites prove behaviour, not what survives a crash (postgres-faults does).
 */
const postgres = {
  cluster: undefined as Promise<{ cluster: PostgresCluster; url: string }> | undefined,
  /** The cluster once started, until destroyed. */
  running: undefined as PostgresCluster | undefined,
  url: '',
  suites: 0,
  schemas: 0,
  stores: [] as PostgresNoteStore[],
  available: undefined as boolean | undefined,
}

function postgresStore(options: MemoryStoreOptions): NoteStore {
  if (postgres.url === '') throw new Error('a PostgreSQL test app outside describeEachStore')
  const store = new PostgresNoteStore({
    ...options,
    url: postgres.url,
    schema: `app_${++postgres.schemas}`,
    poolSize: 2,
  })
  postgres.stores.push(store)
  return store
}

/** Starts the cluster, if it is not starting already; usePostgres waits for it. */
function startPostgres(): void {
  if (postgres.cluster !== undefined) return
  postgres.cluster = (async () => {
    const cluster = await PostgresCluster.start({ durable: false })
    postgres.running = cluster
    return { cluster, url: await cluster.createDatabase() }
  })()
  // A failed start is reported by the first suite that waits for it.
  postgres.cluster.catch(() => {})
}

async function usePostgres(): Promise<void> {
  startPostgres()
  postgres.url = (await (postgres.cluster as Promise<{ url: string }>)).url
}

/** Closes the stores made so far: each holds connections (and a LISTEN one while subscribed). */
async function closeStores(): Promise<void> {
  const stores = postgres.stores.splice(0)
  await Promise.all(stores.map((store) => store.close()))
}

async function leavePostgres(): Promise<void> {
  await closeStores()
  if (--postgres.suites > 0 || postgres.cluster === undefined) return
  const { cluster } = await postgres.cluster
  postgres.cluster = undefined
  postgres.running = undefined
  postgres.url = ''
  await cluster.destroy()
}

/**
 * Defines `suite` once per store and lane: "name (through fastify, on memory)", ... "name
 * (through server, on postgres)"; with `lanes: false` (a suite on real sockets, where the lane is
 * the server's) once per store: "name (on memory)", "name (on postgres)". buildTestApp and
 * buildTestStore inside make that store. Without PostgreSQL's binaries the PostgreSQL half is
 * skipped, loudly (postgresAvailable); under CI=true that is a failure.
 */
export function describeEachStore(
  name: string,
  suite: () => void,
  { lanes = true }: { lanes?: boolean } = {},
): void {
  const variants = (store: StoreKind): [string, Lane][] =>
    lanes
      ? LANES.map((lane) => [`${name} (through ${lane}, on ${store})`, lane])
      : [[`${name} (on ${store})`, 'fastify']]
  for (const [title, lane] of variants('memory')) describeOn(title, lane, suite)
  postgres.available ??= postgresAvailable('the HTTP suites on PostgreSQL in this file')
  if (!postgres.available) {
    describe(`${name} (on postgres)`, { skip: 'PostgreSQL is not installed' }, () => {})
    return
  }
  if (postgres.suites === 0) {
    // initdb and the server's start (a few seconds) overlap the memory half's cases.
    startPostgres()
    process.once('exit', () => postgres.running?.destroySync())
  }
  for (const [title, lane] of variants('postgres')) {
    postgres.suites++
    describe(title, () => {
      before(async () => {
        currentLane = lane
        currentStore = 'postgres'
        await usePostgres()
      })
      // After the case's own after hooks (an app closed there is closed before its store).
      afterEach(closeStores)
      after(async () => {
        currentLane = 'fastify'
        currentStore = 'memory'
        await leavePostgres()
      })
      // storeKind() says 'postgres' while the suite's cases are defined too.
      currentStore = 'postgres'
      try {
        suite()
      } finally {
        currentStore = 'memory'
      }
    })
  }
}

/**
 * How tests reach an app: 'fastify' is `app.inject` as Fastify provides it (its router, hooks and
 * handlers); 'server' goes through the listening server's request listener instead (pipelining
 * order, then the fast lane for everyday note requests, then Fastify for the rest).
 */
export const LANES = ['fastify', 'server'] as const
export type Lane = (typeof LANES)[number]

let currentLane: Lane = 'fastify'

/**
 * Defines `suite` once per lane, on the memory store; apps made by buildTestApp or inLane inside
 * use that lane. describeEachStore runs a suite on PostgreSQL too.
 */
export function describeEachLane(name: string, suite: () => void): void {
  for (const lane of LANES) describeOn(`${name} (through ${lane})`, lane, suite)
}

function describeOn(title: string, lane: Lane, suite: () => void): void {
  describe(title, () => {
    before(() => {
      currentLane = lane
    })
    after(() => {
      currentLane = 'fastify'
    })
    suite()
  })
}

/** The app, with `inject` going through the server's request listener in the 'server' lane. */
export function inLane(app: FastifyInstance, lane: Lane = currentLane): FastifyInstance {
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
