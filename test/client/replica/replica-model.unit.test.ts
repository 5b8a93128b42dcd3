import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { it } from 'node:test'
import { buildApp } from '../../../src/app.js'
import { DEFAULT_CONFIG } from '../../../src/config/config.js'
import { MemoryNoteStore } from '../../../src/store/memory/memory-store.js'
import { runReplicaFuzz } from '../../hostile/replica-run.js'
import { TEST_EPOCH } from '../../support/helpers.js'

/**
 * The short form of the replica's model-based sync run (test/hostile/replica-run.ts): a few seeds
 * against a service on the memory store with a short change history (so that replicas offline
 * for long meet resets). The long form: npm run fuzz -- --replicas N [--seed S] [--runs R].
 */
const SEEDS = [1, 2, 3]

for (const seed of SEEDS) {
  it(`replicas converge with the service, each write once (seed ${seed})`, async () => {
    const config = { ...DEFAULT_CONFIG, changeHistory: 40, ui: false }
    const store = new MemoryNoteStore({ maxNotes: 10_000, maxBytes: 1 << 24, epoch: TEST_EPOCH })
    const app = buildApp({ store, config })
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const port = (app.server.address() as AddressInfo).port
      const stats = await runReplicaFuzz({ port, seed, replicas: 2 + (seed % 3), steps: 80 })
      assert.equal(stats.steps, 80)
      assert.ok(stats.changesLogged > 0)
    } finally {
      const closing = app.close()
      app.server.closeAllConnections()
      await closing
    }
  })
}
