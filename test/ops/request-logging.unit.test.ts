import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'

interface LogLine {
  level: number
  msg: string
  reqId?: string
  err?: { message: string }
}

/** An app logging JSON lines into an array, with a route that fails with a 500. */
async function appWithLog(logRequests: boolean) {
  const lines: LogLine[] = []
  const stream = { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) }
  const app = buildApp({
    store: new MemoryNoteStore({ maxNotes: 10, maxBytes: 10_000 }),
    config: { ...DEFAULT_CONFIG, logRequests },
    logger: { level: 'info', stream },
  })
  app.get('/boom', () => {
    throw new Error('kaboom')
  })
  app.get('/hello', (request, reply) => {
    request.log.warn('from a handler')
    request.log.debug('below the level')
    reply.send('ok')
  })
  await app.ready()
  return { app, lines }
}

describe('request logging', () => {
  it('logs nothing per request by default, but logs a 5xx with its reqId', async () => {
    const { app, lines } = await appWithLog(false)
    const ok = await app.inject({ method: 'GET', url: '/api/note' })
    assert.equal(ok.statusCode, 200)
    assert.equal(lines.length, 0)
    const failed = await app.inject({
      method: 'GET',
      url: '/boom',
      headers: { 'x-request-id': 'req-2' },
    })
    assert.equal(failed.statusCode, 500)
    assert.equal(lines.length, 1)
    const [line] = lines
    assert.equal(line?.level, 50)
    assert.equal(line?.msg, 'request failed')
    assert.equal(line?.reqId, 'req-2')
    assert.equal(line?.err?.message, 'kaboom')
    await app.close()
  })

  it('gives app.log the service logger when request logging is off', async () => {
    const { app, lines } = await appWithLog(false)
    app.log.info('hello')
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.reqId]),
      [[30, 'hello', undefined]],
    )
    await app.close()
  })

  it('logs each request and response with LOG_REQUESTS on', async () => {
    const { app, lines } = await appWithLog(true)
    await app.inject({ method: 'GET', url: '/api/note', headers: { 'x-request-id': 'req-1' } })
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.reqId]),
      [
        [30, 'incoming request', 'req-1'],
        [30, 'request completed', 'req-1'],
      ],
    )
    await app.close()
  })

  it('binds the reqId to request.log lines from handlers', async () => {
    const { app, lines } = await appWithLog(false)
    await app.inject({ method: 'GET', url: '/hello', headers: { 'x-request-id': 'req-1' } })
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.reqId]),
      [[40, 'from a handler', 'req-1']],
    )
    await app.close()
  })
})
