import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { inOrder, lastResponseOn } from '../../src/http/pipelining.js'
import { type Listening, listenApp } from '../hostile/listen.js'
import { CLOSED, WireConnection, type WireResponse } from '../hostile/wire.js'
import { PromisedNoteStore } from '../support/promised-store.js'

const JSON_HEADERS = 'Host: t\r\nContent-Type: application/json\r\n'
const BAD_REQUEST =
  '{"type":"about:blank","title":"Bad Request","status":400,"detail":"The request could not be parsed as HTTP/1.1."}'

function post(body: string, extraHeaders = ''): string {
  return `POST /api/note HTTP/1.1\r\n${JSON_HEADERS}${extraHeaders}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

async function read(
  conn: WireConnection,
  method: string,
): Promise<{ status: number; body: string } | typeof CLOSED> {
  const response: WireResponse | typeof CLOSED = await conn.readResponse(method, 5000)
  return response === CLOSED ? CLOSED : { status: response.status, body: response.body.toString() }
}

/**
 * Sends POSTs of `{"n":N}` for each of `ns`, then a malformed request, all in one write, and
 * checks that every POST is answered 200 with its own note, in order, before the 400 and the close.
 */
async function postsThenGarbage(conn: WireConnection, ns: number[]): Promise<void> {
  conn.write(`${ns.map((n) => post(`{"n":${n}}`)).join('')}GARBAGE\r\n\r\n`)
  for (const n of ns) {
    const created = await read(conn, 'POST')
    assert.notEqual(created, CLOSED, `POST ${n}`)
    if (created === CLOSED) return
    assert.equal(created.status, 200)
    assert.equal((JSON.parse(created.body) as { data: { n: number } }).data.n, n)
  }
  assert.deepEqual(await read(conn, 'GET'), { status: 400, body: BAD_REQUEST })
  await conn.waitForClose(5000)
}

describe('lastResponseOn, over plain node:http', () => {
  it("finds the response under way through Node's socket._httpMessage, and none once it has closed", async () => {
    // Graceful close and the refusal of a malformed pipelined request rely on this private field
    // of Node's (checked on Node 20 and 24); if a Node drops it, this fails first.
    const seen: [boolean, ServerResponse | undefined][] = []
    const plain = createServer(
      inOrder((request, response) => {
        const during = lastResponseOn(request.socket) === response
        response.once('close', () => seen.push([during, lastResponseOn(request.socket)]))
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 })
        response.end('{}')
      }),
    )
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve))
    const conn = await WireConnection.open('127.0.0.1', (plain.address() as AddressInfo).port)
    try {
      for (let i = 0; i < 2; i++) {
        conn.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n')
        assert.deepEqual(await read(conn, 'GET'), { status: 200, body: '{}' })
      }
      await new Promise((resolve) => setImmediate(resolve))
      assert.deepEqual(seen, [
        [true, undefined],
        [true, undefined],
      ])
    } finally {
      conn.destroy()
      plain.closeAllConnections()
      await new Promise((resolve) => plain.close(resolve))
    }
  })
})

describe('pipelined requests', () => {
  let server: Listening
  let conn: WireConnection

  beforeEach(async () => {
    server = await listenApp({ config: {} })
    server.store.create({ a: 1 })
    conn = await WireConnection.open('127.0.0.1', server.port)
  })
  afterEach(async () => {
    conn.destroy()
    await server.app.close()
  })

  it('runs them in the order sent: a DELETE after a PATCH of the same note waits for it', async () => {
    const id = (JSON.parse(server.store.list().json) as { id: number }[])[0]?.id as number
    conn.write(
      `PATCH /api/note/${id} HTTP/1.1\r\n${JSON_HEADERS}Content-Length: 7\r\n\r\n{"b":2}` +
        `DELETE /api/note/${id} HTTP/1.1\r\nHost: t\r\n\r\n` +
        'GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n',
    )
    assert.deepEqual(await read(conn, 'PATCH'), {
      status: 200,
      body: `{"data":{"a":1,"id":${id},"b":2}}`,
    })
    assert.deepEqual(await read(conn, 'DELETE'), { status: 200, body: `{"data":"${id}"}` })
    assert.deepEqual(await read(conn, 'GET'), { status: 200, body: '{"data":[]}' })
  })

  it('lists a note created by a POST pipelined before the GET', async () => {
    conn.write(`${post('{"n":2}')}GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n`)
    const created = await read(conn, 'POST')
    assert.notEqual(created, CLOSED)
    if (created === CLOSED) return
    assert.equal(created.status, 200)
    assert.deepEqual(await read(conn, 'GET'), {
      status: 200,
      body: `{"data":${server.store.list().json}}`,
    })
    assert.equal(server.store.stats().notes, 2)
  })

  it('answers a POST before refusing the malformed request pipelined after it', async () => {
    conn.write(`${post('{"n":2}')}GARBAGE\r\n\r\n`)
    const created = await read(conn, 'POST')
    assert.notEqual(created, CLOSED)
    if (created === CLOSED) return
    assert.equal(created.status, 200)
    assert.equal(
      created.body,
      `{"data":${JSON.stringify((JSON.parse(server.store.list().json) as unknown[])[1])}}`,
    )
    assert.deepEqual(await read(conn, 'GET'), { status: 400, body: BAD_REQUEST })
    await conn.waitForClose(5000)
    assert.equal(server.store.stats().notes, 2)
  })

  it('answers every POST queued before a malformed request, in order, before refusing it', async () => {
    await postsThenGarbage(conn, [2, 3, 4])
    assert.equal(server.store.stats().notes, 4)
  })

  it('answers a POST that says Connection: close and ignores the bytes sent after it', async () => {
    conn.write(
      `${post('{"n":2}', 'Connection: close\r\n')}GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n`,
    )
    const created = await read(conn, 'POST')
    assert.notEqual(created, CLOSED)
    if (created === CLOSED) return
    assert.equal(created.status, 200)
    assert.equal(await read(conn, 'GET'), CLOSED)
    assert.equal(server.store.stats().notes, 2)
  })

  it('leaves the connection and its responses with exactly the properties plain node:http gives them', async () => {
    // The queue of pipelined responses is kept beside Node's objects: a property added to some
    // sockets gave them more hidden classes, and Node's per-request reads of socket fields went
    // megamorphic (slower for every request, pipelined or not).
    const plain = createServer((request, response) => {
      request.resume()
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 })
        response.end('{}')
      })
    })
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve))
    const keysAfterPipelining = async (target: Server, port: number): Promise<string[][]> => {
      const sockets: Socket[] = []
      const responses: ServerResponse[] = []
      const onConnection = (socket: Socket): void => {
        sockets.push(socket)
      }
      const onRequest = (_request: IncomingMessage, response: ServerResponse): void => {
        responses.push(response)
      }
      target.on('connection', onConnection)
      target.on('request', onRequest)
      const pipelined = await WireConnection.open('127.0.0.1', port)
      try {
        pipelined.write(
          `${post('{"n":2}')}${post('{"n":3}')}GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n`,
        )
        for (const method of ['POST', 'POST', 'GET']) {
          const answer = await read(pipelined, method)
          assert.ok(answer !== CLOSED && answer.status === 200, `${method} answered`)
        }
        await new Promise((resolve) => setImmediate(resolve))
        return [...sockets, ...responses].map((o) => Reflect.ownKeys(o).map(String).sort())
      } finally {
        pipelined.destroy()
        target.off('connection', onConnection)
        target.off('request', onRequest)
      }
    }
    try {
      const expected = await keysAfterPipelining(plain, (plain.address() as AddressInfo).port)
      assert.equal(expected.length, 4)
      assert.deepEqual(await keysAfterPipelining(server.app.server, server.port), expected)
    } finally {
      plain.closeAllConnections()
      await new Promise((resolve) => plain.close(resolve))
    }
  })

  it('still refuses at once a request whose own body is malformed', async () => {
    conn.write(
      'POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
    )
    assert.deepEqual(await read(conn, 'POST'), { status: 400, body: BAD_REQUEST })
    await conn.waitForClose(5000)
    assert.equal(server.store.stats().notes, 1)
  })
})

describe('pipelined requests, with a store that takes its time', () => {
  it('answers every POST queued before a malformed request before refusing it', async () => {
    // Each create settles 20 ms later, so later requests are still queued, or still waiting for
    // the store, when the malformed one is refused.
    const store = new PromisedNoteStore({ maxNotes: 100, maxBytes: 1_000_000, createDelayMs: 20 })
    const app = buildApp({ store, config: DEFAULT_CONFIG })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const conn = await WireConnection.open('127.0.0.1', (app.server.address() as AddressInfo).port)
    try {
      await postsThenGarbage(conn, [1, 2, 3])
      assert.equal((await store.stats()).notes, 3)
    } finally {
      conn.destroy()
      await app.close()
    }
  })
})
