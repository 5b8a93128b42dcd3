import assert from 'node:assert/strict'
import { once } from 'node:events'
import { connect, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { LINGER_LIMITS } from '../../src/http/lingering-close.js'
import { type Listening, listenApp } from '../hostile/listen.js'

const TOO_LARGE =
  '{"type":"about:blank","title":"Payload Too Large","status":413,"detail":"The request body is larger than the limit of 1024 bytes."}'
const BAD_REQUEST =
  '{"type":"about:blank","title":"Bad Request","status":400,"detail":"The request could not be parsed as HTTP/1.1."}'
/** Room for a loaded machine on top of a limit; the bound is what is asserted. */
const SLACK_MS = 2500

/**
 * A raw client that keeps its side open after the server closes its own (allowHalfOpen), so it
 * can go on sending as an uploading client does, and records what happened to it.
 */
class Client {
  readonly socket: Socket
  received = ''
  /** When the server's FIN arrived, and the first error (a reset), if any. */
  endedAt: number | undefined
  error: string | undefined
  readonly closed: Promise<void>

  constructor(port: number) {
    this.socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true })
    this.socket.setEncoding('latin1')
    this.socket.on('data', (chunk: string) => {
      this.received += chunk
    })
    this.socket.on('end', () => {
      this.endedAt = Date.now()
    })
    this.socket.on('error', (err: NodeJS.ErrnoException) => {
      this.error ??= err.code ?? err.message
    })
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()))
  }

  /** Writes `bytes` of filler as fast as the socket takes it, unless the connection goes. */
  async send(bytes: number): Promise<void> {
    const chunk = Buffer.alloc(64 * 1024, 'x')
    for (let sent = 0; sent < bytes && this.socket.writable; sent += chunk.length) {
      if (!this.socket.write(chunk.subarray(0, Math.min(chunk.length, bytes - sent)))) {
        // Not once(): it rejects on the socket's error, and a reset is an outcome here.
        await Promise.race([
          new Promise((resolve) => this.socket.once('drain', resolve)),
          this.closed,
        ])
      }
    }
  }

  /** The status line and body of the one response received, once the server has ended. */
  response(): { status: string; connection: string | undefined; body: string } {
    const head = this.received.slice(0, this.received.indexOf('\r\n\r\n'))
    return {
      status: head.slice(0, head.indexOf('\r\n')),
      connection: /\r\nconnection: ([^\r]*)/i.exec(head)?.[1],
      body: this.received.slice(head.length + 4),
    }
  }
}

const upload = (length: number): string =>
  `POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`

/** The server's side of the next connection it accepts, and when it closes. */
function nextConnection(server: Listening): Promise<{ socket: Socket; closed: Promise<number> }> {
  return new Promise((resolve) =>
    server.app.server.once('connection', (socket: Socket) =>
      resolve({ socket, closed: once(socket, 'close').then(() => Date.now()) }),
    ),
  )
}

describe('closing a connection after an early answer (lingering close)', () => {
  let server: Listening
  before(async () => {
    server = await listenApp({ config: { bodyLimit: 1024 } })
  })
  after(() => server.app.close())

  it('keeps reading after a 413 until the client has sent all it meant to, then closes without a reset', async () => {
    const serverSide = nextConnection(server)
    const client = new Client(server.port)
    client.socket.write(upload(4_000_000))
    await client.send(4_000_000)
    client.socket.end()
    await client.closed
    assert.equal(client.error, undefined)
    assert.deepEqual(client.response(), {
      status: 'HTTP/1.1 413 Payload Too Large',
      connection: 'close',
      body: TOO_LARGE,
    })
    const { socket, closed } = await serverSide
    await closed
    // Everything the client sent was read (the headers, then the whole body) before the close.
    assert.equal(socket.bytesRead, upload(4_000_000).length + 4_000_000)
    assert.equal(server.store.list().json, '[]')
  })

  it('does not serve a request sent behind a refused body', async () => {
    const client = new Client(server.port)
    const note = '{"n":1}'
    client.socket.write(
      `${upload(2048)}${'x'.repeat(2048)}POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${note.length}\r\n\r\n${note}`,
    )
    await once(client.socket, 'end')
    client.socket.end()
    await client.closed
    assert.equal(client.response().status, 'HTTP/1.1 413 Payload Too Large')
    assert.equal(client.response().body, TOO_LARGE)
    assert.equal(server.store.list().json, '[]')
  })

  it('reads a 400 for a malformed chunk, not a reset, while the client goes on sending', async () => {
    const client = new Client(server.port)
    client.socket.write(
      'POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\n',
    )
    await client.send(4_000_000)
    client.socket.end()
    await client.closed
    assert.equal(client.error, undefined)
    assert.deepEqual(client.response(), {
      status: 'HTTP/1.1 400 Bad Request',
      connection: 'close',
      body: BAD_REQUEST,
    })
  })

  it(`stops reading a client that keeps sending after ${LINGER_LIMITS.bytes} bytes`, {
    timeout: 30_000,
  }, async () => {
    const serverSide = nextConnection(server)
    const client = new Client(server.port)
    client.socket.write(upload(1_000_000_000))
    await client.send(1_000_000_000)
    await client.closed
    assert.equal(client.response().body, TOO_LARGE)
    const { socket, closed } = await serverSide
    await closed
    // Reads are up to 64 KiB each, and some of the body was read before the 413 went out.
    assert.ok(socket.bytesRead > LINGER_LIMITS.bytes, `read ${socket.bytesRead}`)
    assert.ok(socket.bytesRead < LINGER_LIMITS.bytes + 4 * 1024 * 1024, `read ${socket.bytesRead}`)
  })

  it(`closes a client that trickles its body ${LINGER_LIMITS.totalMs} ms after the answer`, {
    timeout: 30_000,
  }, async () => {
    const serverSide = nextConnection(server)
    const client = new Client(server.port)
    client.socket.write(upload(1_000_000))
    await once(client.socket, 'end')
    const answeredAt = client.endedAt ?? Date.now()
    const { closed } = await serverSide
    let closedAt: number | undefined
    void closed.then((at) => {
      closedAt = at
    })
    while (closedAt === undefined) {
      client.socket.write('x'.repeat(100))
      await sleep(100)
    }
    client.socket.destroy()
    const elapsed = closedAt - answeredAt
    assert.equal(client.response().body, TOO_LARGE)
    assert.ok(elapsed >= LINGER_LIMITS.totalMs - 200, `closed after ${elapsed} ms`)
    assert.ok(elapsed <= LINGER_LIMITS.totalMs + SLACK_MS, `closed after ${elapsed} ms`)
  })

  it(`closes a client that goes quiet without closing ${LINGER_LIMITS.idleMs} ms after its last byte`, {
    timeout: 30_000,
  }, async () => {
    const serverSide = nextConnection(server)
    const client = new Client(server.port)
    client.socket.write(`${upload(1_000_000)}{"a":`)
    await once(client.socket, 'end')
    const answeredAt = client.endedAt ?? Date.now()
    const elapsed = (await (await serverSide).closed) - answeredAt
    client.socket.destroy()
    assert.equal(client.response().body, TOO_LARGE)
    assert.ok(elapsed >= LINGER_LIMITS.idleMs - 200, `closed after ${elapsed} ms`)
    assert.ok(elapsed <= LINGER_LIMITS.idleMs + SLACK_MS, `closed after ${elapsed} ms`)
  })
})
