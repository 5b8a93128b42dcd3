import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { fakeClock } from '../support/helpers.js'

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
    store: new MemoryNoteStore({ maxNotes: 100, maxBytes: 100_000, now: fakeClock(1000, 1) }),
    config: { ...DEFAULT_CONFIG, maxEventLoopDelayMs, metrics: true },
  })
}

/** The http_requests_total samples of the app's /metrics: what it answered, by status. */
async function requestsCounted(server: FastifyInstance): Promise<string[]> {
  const metrics = await server.inject('/metrics')
  assert.equal(metrics.statusCode, 200)
  return metrics.body.split('\n').filter((line) => line.startsWith('http_requests_total{'))
}

/** Creates sent through a lag of 2.2 s: ten at a time, at 0, 0.7, 1.4 and 2.1 s. */
async function createsInBatches(server: FastifyInstance): Promise<LightMyRequestResponse[]> {
  const batches = [0, 700, 1400, 2100].map(async (at, batch) => {
    await sleep(at)
    return Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        server.inject({ method: 'POST', url: '/api/note', payload: { n: batch * 10 + i } }),
      ),
    )
  })
  return (await Promise.all(batches)).flat()
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
    // Served again once a sample second without the lag has passed: asked every 100 ms (within
    // 20 s, since test files beside this one can keep its own event loop late) instead of after a
    // fixed wait, every answer until then being the same 503.
    let served = await server.inject({ method: 'GET', url: '/api/note' })
    for (const giveUp = Date.now() + 20_000; served.statusCode === 503 && Date.now() < giveUp; ) {
      assert.deepEqual(served.json(), OVERLOADED)
      await sleep(100)
      served = await server.inject({ method: 'GET', url: '/api/note' })
    }
    assert.equal(served.statusCode, 200)
    assert.equal(served.body, '{"data":[]}')
    await server.close()
  })

  it('never sheds when MAX_EVENT_LOOP_DELAY_MS is 0: all 40 creates sent through a lag that makes a 100 ms limit shed are answered 200, and none is counted as a 503', async () => {
    const off = app(0)
    // The control: the same lag and load, on an app that sheds above 100 ms.
    const shedding = app(100)
    await Promise.all([off.ready(), shedding.ready()])
    const [answers, controlAnswers] = await Promise.all([
      createsInBatches(off),
      createsInBatches(shedding),
      lag(2200, 300),
    ])
    assert.ok(
      controlAnswers.some((answer) => answer.statusCode === 503),
      `the lag was not enough to shed: ${controlAnswers.map((a) => a.statusCode).join(' ')}`,
    )
    assert.equal(answers.length, 40)
    const ids = new Set<number>()
    for (const [index, answer] of answers.entries()) {
      assert.equal(answer.statusCode, 200, `create ${index}: ${answer.body}`)
      assert.equal(answer.headers['content-type'], 'application/json; charset=utf-8')
      const { data } = answer.json<{ data: { n: number; id: number } }>()
      assert.deepEqual(data, { n: index, id: data.id })
      ids.add(data.id)
    }
    assert.equal(ids.size, 40)
    const list = await off.inject('/api/note')
    assert.equal(list.statusCode, 200)
    assert.equal(list.json<{ data: unknown[] }>().data.length, 40)
    assert.deepEqual(await requestsCounted(off), [
      'http_requests_total{method="POST",route="/api/note",status_code="200"} 40',
      'http_requests_total{method="GET",route="/api/note",status_code="200"} 1',
    ])
    await Promise.all([off.close(), shedding.close()])
  })
})
