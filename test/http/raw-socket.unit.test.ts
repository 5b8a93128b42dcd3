import assert from 'node:assert/strict'
import { once } from 'node:events'
import type { Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Listening, listenApp } from '../hostile/listen.js'
import { CLOSED, WireConnection, type WireResponse } from '../hostile/wire.js'

/**
 * Broken, slow and stuck clients on real sockets, against an app with short timeouts. Each test
 * also checks that a well-behaved client is served normally while the abuse goes on.
 */
const TIMEOUTS = {
  headersTimeoutMs: 500,
  requestTimeoutMs: 1000,
  keepAliveTimeoutMs: 500,
  // Above the request timeout: a socket timeout at the same moment closes a stalled request
  // silently before the 408 is written (the shipped defaults are both 30 s; see the README).
  socketTimeoutMs: 2000,
}
/** Node checks headers and request timeouts every min(1000, headersTimeoutMs) ms. */
const CHECK_INTERVAL_MS = 500
/** Room for a loaded CI machine on top of a timeout; the bound is what is asserted. */
const SLACK_MS = 2500

function problemBody(status: number, title: string, detail: string): string {
  return JSON.stringify({ type: 'about:blank', title, status, detail })
}
const BAD_REQUEST = problemBody(400, 'Bad Request', 'The request could not be parsed as HTTP/1.1.')
const TIMED_OUT = problemBody(
  408,
  'Request Timeout',
  'The request was not received in time; send it again, faster.',
)
const TOO_LARGE = problemBody(
  431,
  'Request Header Fields Too Large',
  'The request line and headers are larger than the server accepts.',
)

function summary(
  response: WireResponse | typeof CLOSED,
): { status: number; body: string } | typeof CLOSED {
  return response === CLOSED ? CLOSED : { status: response.status, body: response.body.toString() }
}

describe('raw-socket abuse', () => {
  let server: Listening
  const open = (): Promise<WireConnection> => WireConnection.open('127.0.0.1', server.port)

  /**
   * A well-behaved client: `count` GETs on one keep-alive connection, `pauseMs` apart, each must
   * be a 200.
   */
  async function servedNormally(count: number, pauseMs = 20): Promise<void> {
    const conn = await open()
    try {
      for (let i = 0; i < count; i++) {
        conn.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n')
        const response = await conn.readResponse('GET', 5000)
        assert.notEqual(response, CLOSED)
        if (response !== CLOSED) assert.equal(response.status, 200)
        await sleep(pauseMs)
      }
    } finally {
      conn.destroy()
    }
  }

  before(async () => {
    server = await listenApp({ config: TIMEOUTS })
    server.store.create({ seed: true })
  })
  after(async () => {
    await server.app.close()
  })

  it('answers a garbage request line with 400 problem JSON and closes', async () => {
    const conn = await open()
    conn.write('\u0000\u0001 NOT HTTP AT ALL\r\n\r\n')
    assert.deepEqual(summary(await conn.readResponse('GET', 5000)), {
      status: 400,
      body: BAD_REQUEST,
    })
    await conn.waitForClose(5000)
  })

  it('answers a header block over the limit with 431 and closes', async () => {
    const conn = await open()
    conn.write(`GET /api/note HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
    assert.deepEqual(summary(await conn.readResponse('GET', 5000)), {
      status: 431,
      body: TOO_LARGE,
    })
    await conn.waitForClose(5000)
  })

  it('answers 50 pipelined requests in order on one connection', async () => {
    const conn = await open()
    let batch = ''
    for (let i = 0; i < 50; i++) {
      batch +=
        i % 2 === 0
          ? `GET /api/note/${i} HTTP/1.1\r\nHost: t\r\n\r\n`
          : 'OPTIONS /api/note HTTP/1.1\r\nHost: t\r\n\r\n'
    }
    conn.write(batch)
    for (let i = 0; i < 50; i++) {
      const response = await conn.readResponse(i % 2 === 0 ? 'GET' : 'OPTIONS', 5000)
      assert.notEqual(response, CLOSED)
      if (response !== CLOSED) assert.equal(response.status, i % 2 === 0 ? 404 : 204)
    }
    conn.destroy()
  })

  it('answers 408 to a body that stops half way, within the request timeout, and stores nothing', async () => {
    const before = server.store.list().json
    const conn = await open()
    const started = Date.now()
    conn.write(
      'POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":',
    )
    const [response] = await Promise.all([conn.readResponse('POST', 10_000), servedNormally(10)])
    const elapsed = Date.now() - started
    assert.deepEqual(summary(response), { status: 408, body: TIMED_OUT })
    await conn.waitForClose(5000)
    assert.ok(
      elapsed <= TIMEOUTS.requestTimeoutMs + CHECK_INTERVAL_MS + SLACK_MS,
      `408 after ${elapsed} ms`,
    )
    assert.equal(server.store.list().json, before)
  })

  it('answers 400 to a body cut off by the client closing its side, and stores nothing', async () => {
    const before = server.store.list().json
    const conn = await open()
    conn.write(
      'POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":',
    )
    conn.end()
    assert.deepEqual(summary(await conn.readResponse('POST', 5000)), {
      status: 400,
      body: BAD_REQUEST,
    })
    await conn.waitForClose(5000)
    assert.equal(server.store.list().json, before)
  })

  it('closes slowloris connections trickling headers with 408 while serving others', async () => {
    const started = Date.now()
    const lorises = await Promise.all(Array.from({ length: 20 }, () => open()))
    let trickling = true
    const trickle = (async () => {
      for (const loris of lorises) loris.write('GET /api/note HTTP/1.1\r\nHost: t\r\n')
      for (let i = 0; trickling; i++) {
        for (const loris of lorises) loris.write(`X-${i}: a\r\n`)
        await sleep(100)
      }
    })()
    const [responses] = await Promise.all([
      Promise.all(lorises.map((loris) => loris.readResponse('GET', 10_000))),
      servedNormally(10),
    ])
    trickling = false
    await trickle
    const elapsed = Date.now() - started
    for (const response of responses)
      assert.deepEqual(summary(response), { status: 408, body: TIMED_OUT })
    await Promise.all(lorises.map((loris) => loris.waitForClose(5000)))
    assert.ok(
      elapsed <= TIMEOUTS.headersTimeoutMs + CHECK_INTERVAL_MS + SLACK_MS,
      `408s after ${elapsed} ms`,
    )
  })

  it('answers 408 to a connection that never sends a byte, within the headers timeout', async () => {
    const conn = await open()
    const started = Date.now()
    const [response] = await Promise.all([conn.readResponse('GET', 10_000), servedNormally(5)])
    assert.deepEqual(summary(response), { status: 408, body: TIMED_OUT })
    await conn.waitForClose(5000)
    const elapsed = Date.now() - started
    assert.ok(
      elapsed <= TIMEOUTS.headersTimeoutMs + CHECK_INTERVAL_MS + SLACK_MS,
      `408 after ${elapsed} ms`,
    )
  })

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    const conn = await open()
    conn.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n')
    const response = await conn.readResponse('GET', 5000)
    assert.notEqual(response, CLOSED)
    if (response !== CLOSED) assert.equal(response.status, 200)
    assert.equal(await conn.readResponse('GET', TIMEOUTS.keepAliveTimeoutMs + SLACK_MS), CLOSED)
  })

  it('keeps a connection that goes on talking past the socket timeout', async () => {
    // A request every 300 ms (under the keep-alive timeout) for 1.5 socket timeouts.
    await servedNormally(Math.ceil((TIMEOUTS.socketTimeoutMs * 1.5) / 300), 300)
  })

  it('drops a client that never reads its responses once the socket timeout passes', {
    timeout: 20_000,
  }, async () => {
    // About 1 MiB of notes, so that a few unread lists fill every buffer on the way.
    for (let i = 0; i < 100; i++) server.store.create({ filler: 'x'.repeat(10_000) })
    // A paused client socket never sees the close, so watch the server's side of it.
    const serverSide = new Promise<Socket>((resolve) =>
      server.app.server.once('connection', resolve),
    )
    const stuck = await open()
    stuck.socket.pause()
    const closed = serverSide.then((socket) => once(socket, 'close'))
    const sent = Date.now()
    stuck.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n'.repeat(200))
    await servedNormally(10)
    await closed
    // The server answers for a while after `sent`, so silence begins after it.
    const elapsed = Date.now() - sent
    assert.ok(elapsed >= TIMEOUTS.socketTimeoutMs, `closed after ${elapsed} ms`)
    assert.ok(elapsed <= TIMEOUTS.socketTimeoutMs + 1000 + SLACK_MS, `closed after ${elapsed} ms`)
    stuck.destroy()
  })

  it('keeps a client that reads a large response slowly past the socket timeout', {
    timeout: 30_000,
  }, async () => {
    // About 40 MB of list, read at 12 MB/s: more than the kernel's buffers hold, for longer than
    // the socket timeout, so the server's write queue drains steadily all that time.
    const filler = 'y'.repeat(100_000)
    for (let i = 0; i < 400; i++) server.store.create({ filler })
    const expected = Buffer.byteLength(`{"data":${server.store.list().json}}`)
    const conn = await open()
    const socket = conn.socket
    socket.removeAllListeners('data')
    let received = 0
    let head = ''
    const done = new Promise<void>((resolve, reject) => {
      socket.on('data', (chunk: Buffer) => {
        if (head.length < 1000) head += chunk.toString('latin1', 0, Math.min(chunk.length, 1000))
        received += chunk.length
        const bodyStart = head.indexOf('\r\n\r\n') + 4
        if (bodyStart >= 4 && received - bodyStart >= expected) resolve()
        socket.pause()
        setTimeout(() => socket.resume(), chunk.length / 12_000)
      })
      socket.once('close', () => reject(new Error(`closed after ${received} of ${expected} bytes`)))
    })
    const started = Date.now()
    socket.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n')
    await done
    assert.match(head, /^HTTP\/1\.1 200 /)
    assert.ok(
      Date.now() - started > TIMEOUTS.socketTimeoutMs,
      'the download should outlast the socket timeout',
    )
    conn.destroy()
  })
})
