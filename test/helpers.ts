import type { RequestListener } from 'node:http'
import { after, before, describe } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import inject, { type InjectOptions } from 'light-my-request'
import { buildApp } from '../src/app.js'
import { type Config, DEFAULT_CONFIG } from '../src/config/config.js'
import { MemoryNoteStore, type MemoryStoreOptions } from '../src/store/memory.js'

export interface TestApp {
  app: FastifyInstance
  store: MemoryNoteStore
}

/** The version epoch of test stores: ETags read '"e.1"', '"e.2"', ... */
export const TEST_EPOCH = 'e'

/** A fresh app and store with the shipped defaults, overridable per test. */
export function buildTestApp(
  overrides: Partial<Config> = {},
  storeOptions: Partial<MemoryStoreOptions> = {},
): TestApp {
  const config = { ...DEFAULT_CONFIG, ...overrides }
  const store = new MemoryNoteStore({
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    historyLimit: config.changeHistory,
    epoch: TEST_EPOCH,
    ...storeOptions,
  })
  return { app: inLane(buildApp({ store, config })), store }
}

/**
 * How tests reach an app: 'fastify' is `app.inject` as Fastify provides it (its router, hooks and
 * handlers); 'server' goes through the listening server's request listener instead (pipelining
 * order, then the fast lane for everyday note requests, then Fastify for the rest).
 */
export const LANES = ['fastify', 'server'] as const
export type Lane = (typeof LANES)[number]

let currentLane: Lane = 'fastify'

/** Defines `suite` once per lane; apps made by buildTestApp or inLane inside use that lane. */
export function describeEachLane(name: string, suite: () => void): void {
  for (const lane of LANES) {
    describe(`${name} (through ${lane})`, () => {
      before(() => {
        currentLane = lane
      })
      after(() => {
        currentLane = 'fastify'
      })
      suite()
    })
  }
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
