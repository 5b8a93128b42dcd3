import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { type AppConfig, buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'

export interface Listening {
  app: FastifyInstance
  store: MemoryNoteStore
  port: number
}

/**
 * A fresh app and store listening on 127.0.0.1 and a free port, for the tests that need a real
 * socket (pipelining, broken framing, timeouts). Close it with `app.close()`.
 */
export async function listenApp(
  options: { config?: Partial<AppConfig>; maxNotes?: number; maxBytes?: number } = {},
): Promise<Listening> {
  const store = new MemoryNoteStore({
    maxNotes: options.maxNotes ?? DEFAULT_CONFIG.maxNotes,
    maxBytes: options.maxBytes ?? DEFAULT_CONFIG.maxStoreBytes,
  })
  const app = buildApp({ store, config: { ...DEFAULT_CONFIG, ...options.config } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, store, port: (app.server.address() as AddressInfo).port }
}
