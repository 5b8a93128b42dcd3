import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../src/app.js'
import { type Config, DEFAULT_CONFIG } from '../src/config.js'
import { MemoryNoteStore } from '../src/store/memory.js'

export interface TestApp {
  app: FastifyInstance
  store: MemoryNoteStore
}

/** A fresh app and store with the shipped defaults, overridable per test. */
export function buildTestApp(
  overrides: Partial<Config> = {},
  storeOptions: { now?: () => number } = {},
): TestApp {
  const config = { ...DEFAULT_CONFIG, ...overrides }
  const store = new MemoryNoteStore({
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    ...storeOptions,
  })
  return { app: buildApp({ store, config }), store }
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
