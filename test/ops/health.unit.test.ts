import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { describe, it } from 'node:test'
import { ALL_ON, buildOpsApp, logCollector } from '../support/ops-app.js'

describe('GET /healthz and /readyz', () => {
  it('answers /healthz 200 {"status":"ok"}, uncached', async () => {
    const { app } = buildOpsApp()
    const response = await app.inject({ method: 'GET', url: '/healthz' })
    assert.equal(response.statusCode, 200)
    assert.equal(response.body, '{"status":"ok"}')
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
    assert.equal(response.headers['cache-control'], 'no-store')
  })

  it('answers /readyz 200 {"status":"ready"} once the app is ready', async () => {
    const { app } = buildOpsApp()
    const response = await app.inject({ method: 'GET', url: '/readyz' })
    assert.equal(response.statusCode, 200)
    assert.equal(response.body, '{"status":"ready"}')
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
    assert.equal(response.headers['cache-control'], 'no-store')
  })

  it('answers HEAD like GET, without a body', async () => {
    const { app } = buildOpsApp()
    const response = await app.inject({ method: 'HEAD', url: '/healthz' })
    assert.equal(response.statusCode, 200)
    assert.equal(response.body, '')
  })

  it('answers /readyz 503 once a shutdown has begun', async () => {
    const { app } = buildOpsApp()
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const socket = connect(port, '127.0.0.1')
    let received = ''
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1')
    })
    const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()))
    // Half a request keeps the connection busy, so the shutdown does not close it as idle;
    // the rest arrives once the shutdown has begun, like a probe on a kept-alive connection.
    await new Promise<void>((resolve) =>
      socket.write('GET /readyz HTTP/1.1\r\nHost: t\r\n', () => resolve()),
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    const closing = app.close()
    await new Promise((resolve) => setTimeout(resolve, 50))
    socket.write('\r\n')
    await ended
    await closing
    assert.match(received, /^HTTP\/1\.1 503 /)
    assert.match(received, /\r\nconnection: close\r\n/i)
  })
})

describe('request logging of operational paths', () => {
  it('logs /api/note at info but never the probes, metrics, the OpenAPI document or /docs', async () => {
    const log = logCollector()
    const { app } = buildOpsApp(
      { ...ALL_ON, logRequests: true },
      { level: 'info', stream: log.stream },
    )
    const quiet = [
      '/healthz',
      '/readyz',
      '/metrics',
      '/api/openapi.json',
      '/docs',
      '/docs/',
      '/docs/static/swagger-ui.css',
      '/docs/static/swagger-initializer.js',
    ]
    for (const url of quiet) {
      const response = await app.inject({ method: 'GET', url })
      assert.equal(response.statusCode, 200, url)
    }
    assert.deepEqual([...log.lines], [])
    await app.inject({ method: 'GET', url: '/api/note' })
    assert.deepEqual(
      log.lines.map((line) => line.msg),
      ['incoming request', 'request completed'],
    )
  })
})
