import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { buildApp } from '../src/app.js'
import { DEFAULT_CONFIG } from '../src/config/config.js'
import { MemoryNoteStore } from '../src/store/memory/memory-store.js'
import { FUZZ_LIMITS } from './hostile/fuzz-limits.js'
import { FuzzFailure, runFuzz } from './hostile/fuzz-run.js'

/** The short form of `npm run fuzz`: a fixed seed, a few thousand requests, an in-process server. */
const SEED = 20_240_601
const REQUESTS = 3000

describe('HTTP fuzzing (short form)', () => {
  it(`answers ${REQUESTS} generated requests as the model says, with no 5xx (seed ${SEED})`, async () => {
    const store = new MemoryNoteStore({
      maxNotes: FUZZ_LIMITS.maxNotes,
      maxBytes: FUZZ_LIMITS.maxStoreBytes,
    })
    const app = buildApp({
      store,
      config: {
        ...DEFAULT_CONFIG,
        bodyLimit: FUZZ_LIMITS.bodyLimit,
        maxDepth: FUZZ_LIMITS.maxDepth,
      },
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const { port } = app.server.address() as AddressInfo
      const stats = await runFuzz({
        host: '127.0.0.1',
        port,
        seed: SEED,
        requests: REQUESTS,
        limits: FUZZ_LIMITS,
        // A memory store: its files count toward MAX_STORE_BYTES with its notes.
        filesShareStoreBytes: true,
      }).catch((err: unknown) => {
        if (err instanceof FuzzFailure) {
          err.message += `\nreplay: npm run fuzz -- --seed ${err.seed} --requests ${err.index}`
        }
        throw err
      })
      assert.equal(stats.requests, REQUESTS)
      assert.equal(
        Object.keys(stats.byStatus).some((s) => s.startsWith('5') && s !== '507'),
        false,
      )
      assert.equal(store.stats().notes, stats.notesAtEnd)
    } finally {
      await app.close()
    }
  })
})
