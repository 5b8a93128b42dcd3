import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'

/** A fresh app on a fresh store, with the shipped defaults overridden by `overrides`. */
export function buildOpsApp(
  overrides: Partial<Config> = {},
  logger?: { level: string; stream: Writable },
  now?: () => number,
): { app: FastifyInstance; store: MemoryNoteStore } {
  const config = { ...DEFAULT_CONFIG, ...overrides }
  const store = new MemoryNoteStore({
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    epoch: 'e',
    ...(now === undefined ? {} : { now }),
  })
  return { app: buildApp({ store, config, ...(logger ? { logger } : {}) }), store }
}

/** A pino destination that keeps every log line, parsed. */
export function logCollector(): { stream: Writable; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>)
      }
      done()
    },
  })
  return { stream, lines }
}

/** Every config with every optional feature on: metrics, docs and CORS. */
export const ALL_ON: Partial<Config> = {
  metrics: true,
  docs: true,
  corsOrigin: ['https://app.example'],
}
