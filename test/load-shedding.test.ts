import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../src/app.js'
import { DEFAULT_CONFIG } from '../src/config/config.js'
import { MemoryNoteStore } from '../src/store/memory.js'

/** Keeps the event loop blocked `blockMs` at a time, with short breaks, for `totalMs`. */
async function lag(totalMs: number, blockMs: number): Promise<void> {
  const end = Date.now() + totalMs
  while (Date.now() < end) {
    const until = Date.now() + blockMs
    while (Date.now() < until) {
      // Busy on purpose: this is the lag.
    }
    await sleep(5)
  }
}

function app(maxEventLoopDelayMs: number) {
  return buildApp({
    store: new MemoryNoteStore({ maxNotes: 10, maxBytes: 10_000 }),
    config: { ...DEFAULT_CONFIG, maxEventLoopDelayMs },
  })
}

const OVERLOADED = {
  type: 'about:blank',
  title: 'Service Unavailable',
  status: 503,
  detail: 'The server is overloaded; retry after 1 s.',
}

describe('load shedding on event-loop lag', () => {
  it('answers 503 with Retry-After and problem JSON while the loop lags, then serves again', async () => {
    const server = app(100)
    await server.ready()
    // Two sample seconds of 300 ms blocks: the mean delay is far above 100 ms.
    await lag(2200, 300)
    const shed = await server.inject({ method: 'GET', url: '/api/note' })
    assert.equal(shed.statusCode, 503)
    assert.equal(shed.headers['retry-after'], '1')
    assert.equal(shed.headers['content-type'], 'application/problem+json')
    assert.deepEqual(shed.json(), OVERLOADED)
    await sleep(2200)
    const served = await server.inject({ method: 'GET', url: '/api/note' })
    assert.equal(served.statusCode, 200)
    assert.equal(served.body, '{"data":[]}')
    await server.close()
  })

  it('never sheds when MAX_EVENT_LOOP_DELAY_MS is 0', async () => {
    const server = app(0)
    await server.ready()
    await lag(1200, 300)
    const response = await server.inject({ method: 'GET', url: '/api/note' })
    assert.equal(response.statusCode, 200)
    await server.close()
  })
})
