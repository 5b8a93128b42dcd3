import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { FailureLog } from '../../src/ops/failure-log.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { type NoteRecord, StoreFullError } from '../../src/store/types.js'
import { describeEachLane, JSON_HEADERS, type SuiteContext } from '../support/helpers.js'
import { waitFor } from '../support/socket.js'

interface LogLine {
  level: number
  msg: string
  reqId?: string
  statusCode?: number
  condition?: string
  suppressed?: number
  err?: { type: string; message: string; stack: string }
}

/** A store whose creates fail with a bug (a plain Error), as a broken backend would. */
class BrokenStore extends MemoryNoteStore {
  override create(): NoteRecord {
    throw new Error('the disk is on fire')
  }
}

/** An app in the current lane, logging pino's JSON lines at info into an array. */
function appWithLog(suite: SuiteContext, store: MemoryNoteStore) {
  const lines: LogLine[] = []
  const stream = { write: (line: string) => void lines.push(parseLine(line)) }
  const app = suite.inLane(
    buildApp({ store, config: DEFAULT_CONFIG, logger: { level: 'info', stream } }),
  )
  return { app, lines }
}

/** A pino line without the fields every line has (time, pid, hostname). */
function parseLine(line: string): LogLine {
  const {
    time: _time,
    pid: _pid,
    hostname: _hostname,
    ...rest
  } = JSON.parse(line) as LogLine & {
    time: number
    pid: number
    hostname: string
  }
  return rest
}

/** [level, count] pairs of the lines, in level order: [[40, 1]]. */
function countByLevel(lines: readonly LogLine[]): [number, number][] {
  const counts = new Map<number, number>()
  for (const line of lines) counts.set(line.level, (counts.get(line.level) ?? 0) + 1)
  return [...counts].sort(([a], [b]) => a - b)
}

const FLOOD = 500

describeEachLane('logging failed requests', (suite) => {
  it(`logs ${FLOOD} 507s from a full store as one warn line, without a stack, and one summary on close`, async () => {
    const { app, lines } = appWithLog(suite, new MemoryNoteStore({ maxNotes: 1, maxBytes: 10_000 }))
    const post = (i: number) =>
      app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { ...JSON_HEADERS, 'x-request-id': `flood-${i}` },
        payload: '{"a":1}',
      })
    assert.equal((await post(0)).statusCode, 200)
    for (let i = 1; i <= FLOOD; i++) assert.equal((await post(i)).statusCode, 507)

    assert.deepEqual(lines, [
      {
        level: 40,
        reqId: 'flood-1',
        statusCode: 507,
        condition: '507 StoreFullError',
        msg: 'request answered 507: The store holds its maximum of 1 notes. Delete notes to make room.',
      },
    ])
    await app.close()
    assert.deepEqual(countByLevel(lines), [[40, 2]])
    const summary = lines[1] as LogLine & { overMs: number }
    assert.equal(summary.condition, '507 StoreFullError')
    assert.equal(summary.suppressed, FLOOD - 1)
    assert.equal(
      summary.msg,
      `${FLOOD - 1} more requests answered 507 StoreFullError in ${(summary.overMs / 1000).toFixed(1)} s`,
    )
    assert.equal(summary.err, undefined)
  })

  it('logs a flood of 400s as one info line, without a stack, and one summary on close', async () => {
    const { app, lines } = appWithLog(
      suite,
      new MemoryNoteStore({ maxNotes: 10, maxBytes: 10_000 }),
    )
    for (let i = 0; i < 100; i++) {
      const response = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: JSON_HEADERS,
        payload: '[1]',
      })
      assert.equal(response.statusCode, 400)
    }
    await app.close()
    assert.deepEqual(
      lines.map((l) => [l.level, l.condition, l.suppressed, l.err]),
      [
        [30, '400 HttpProblem', undefined, undefined],
        [30, '400 HttpProblem', 99, undefined],
      ],
    )
    assert.equal(
      lines[0]?.msg,
      'request answered 400: The request body must be a JSON object, not an array.',
    )
  })

  it('logs every 500 as an error, with its stack and the request id', async () => {
    const { app, lines } = appWithLog(suite, new BrokenStore({ maxNotes: 10, maxBytes: 10_000 }))
    for (const id of ['bug-1', 'bug-2']) {
      const response = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { ...JSON_HEADERS, 'x-request-id': id },
        payload: '{"a":1}',
      })
      assert.equal(response.statusCode, 500)
      assert.equal(response.headers['x-request-id'], id)
      assert.equal(
        response.body,
        '{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"The server failed to answer this request; it has been logged."}',
      )
    }
    await app.close()
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.reqId, l.err?.type, l.err?.message]),
      [
        [50, 'request failed', 'bug-1', 'Error', 'the disk is on fire'],
        [50, 'request failed', 'bug-2', 'Error', 'the disk is on fire'],
      ],
    )
    for (const line of lines) {
      assert.match(
        line.err?.stack ?? '',
        /^Error: the disk is on fire\n {4}at BrokenStore\.create /,
      )
    }
  })
})

describe('FailureLog', () => {
  function logInto(lines: LogLine[]): FastifyBaseLogger {
    return pino({ level: 'info' }, { write: (line: string) => void lines.push(parseLine(line)) })
  }

  it('sums the repeats up at the end of each interval, and logs at once again after a quiet one', async () => {
    const lines: LogLine[] = []
    const logger = logInto(lines)
    const log = new FailureLog(() => logger, 50)
    const full = new StoreFullError('The store is full.')
    log.report(full, 507, 'full', 'r1')
    log.report(full, 507, 'full', 'r2')
    log.report(full, 507, 'full', 'r3')
    assert.deepEqual(
      lines.map((l) => [l.level, l.reqId, l.suppressed]),
      [[40, 'r1', undefined]],
    )
    await waitFor(() => lines.length === 2, 5000, 'the summary')
    assert.deepEqual(
      [lines[1]?.level, lines[1]?.condition, lines[1]?.suppressed],
      [40, '507 StoreFullError', 2],
    )
    log.report(full, 507, 'full', 'r4')
    await waitFor(() => lines.length === 3, 5000, 'the next summary')
    assert.equal(lines[2]?.suppressed, 1)
    // A whole interval with no repeat ends the condition: the next one is logged with its id.
    await sleep(200)
    log.report(full, 507, 'full', 'r5')
    assert.deepEqual(
      lines.slice(3).map((l) => [l.level, l.reqId, l.suppressed]),
      [[40, 'r5', undefined]],
    )
    log.flush()
    assert.equal(lines.length, 4)
  })

  it('keeps conditions apart by status and code', () => {
    const lines: LogLine[] = []
    const logger = logInto(lines)
    const log = new FailureLog(() => logger)
    const tooLarge = Object.assign(new Error('too large'), { code: 'FST_ERR_CTP_BODY_TOO_LARGE' })
    log.report(tooLarge, 413, 'too large', 'a')
    log.report(new StoreFullError('full'), 507, 'full', 'b')
    log.report(tooLarge, 413, 'too large', 'c')
    log.flush()
    assert.deepEqual(
      lines.map((l) => [l.level, l.condition, l.reqId, l.suppressed]),
      [
        [30, '413 FST_ERR_CTP_BODY_TOO_LARGE', 'a', undefined],
        [40, '507 StoreFullError', 'b', undefined],
        [30, '413 FST_ERR_CTP_BODY_TOO_LARGE', undefined, 1],
      ],
    )
  })
})
