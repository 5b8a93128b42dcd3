import assert from 'node:assert/strict'
import net, { type AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { Answer, JSON_CONTENT_TYPE, NOT_FOUND } from '../../src/api/answer.js'
import { answerHead } from '../../src/api/answer-head.js'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { fakeClock, MEMORY } from '../support/helpers.js'

describe('answerHead', () => {
  const cases: [string, Answer, (string | number)[]][] = [
    [
      'a body: its type and length, then its own headers',
      new Answer(200, JSON_CONTENT_TYPE, '{"data":1}', ['etag', '"e.1"']),
      [
        'x-request-id',
        'r-1',
        'content-type',
        JSON_CONTENT_TYPE,
        'content-length',
        10,
        'etag',
        '"e.1"',
      ],
    ],
    [
      'the length of a body in bytes, not characters',
      new Answer(200, JSON_CONTENT_TYPE, '"é"'),
      ['x-request-id', 'r-1', 'content-type', JSON_CONTENT_TYPE, 'content-length', 4],
    ],
    [
      "the contract's 404: Content-Length 0 and no Content-Type",
      NOT_FOUND,
      ['x-request-id', 'r-1', 'content-length', 0],
    ],
    [
      'a 304: neither Content-Type nor Content-Length',
      new Answer(304, undefined, undefined, ['etag', '"e.1"', 'vary', 'Accept-Encoding']),
      ['x-request-id', 'r-1', 'etag', '"e.1"', 'vary', 'Accept-Encoding'],
    ],
  ]
  for (const [name, answer, head] of cases) {
    it(name, () => assert.deepEqual(answerHead(answer, 'r-1'), head))
  }
})

/** One request as raw bytes, its connection closed after the answer. */
function request(method: string, url: string, headers: Record<string, string>, body = ''): string {
  const lines = [`${method} ${url} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close']
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  if (body !== '') lines.push(`Content-Length: ${Buffer.byteLength(body)}`)
  return `${lines.join('\r\n')}\r\n\r\n${body}`
}

/** The whole response to `raw`, as it came off the wire, with its Date line taken out. */
function exchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('end', () => {
      socket.destroy()
      resolve(
        Buffer.concat(chunks)
          .toString('latin1')
          .replace(/\r\nDate: [^\r]*/, ''),
      )
    })
    socket.end(raw)
  })
}

/** An app on a fresh memory store, listening, counting the requests that reach Fastify. */
async function listening(): Promise<{ app: FastifyInstance; port: number; fastify: () => number }> {
  const store = MEMORY.buildStore({ maxNotes: 10, maxBytes: 100_000, now: fakeClock(1000, 1) })
  const app = buildApp({ store, config: DEFAULT_CONFIG })
  let reached = 0
  app.addHook('onRequest', (_request, _reply, done) => {
    reached++
    done()
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, port: (app.server.address() as AddressInfo).port, fastify: () => reached }
}

const ID = { 'X-Request-Id': 'heads-1' }
const JSON_BODY = { ...ID, 'Content-Type': 'application/json' }
// The lane takes 'application/json; charset=utf-8' only as written; Fastify parses this one.
const JSON_BODY_FOR_FASTIFY = { ...ID, 'Content-Type': 'application/json; charset=UTF-8' }
const BIG = JSON.stringify({ text: 'x'.repeat(3000) })

/**
 * Each request twice, to two apps on identical stores: as the fast lane takes it, and in a form
 * that only Fastify takes but that means the same (a trailing slash, a charset in capitals).
 */
const PAIRS: [string, string, string][] = [
  [
    '200 create',
    request('POST', '/api/note', JSON_BODY, '{"a":1}'),
    request('POST', '/api/note/', JSON_BODY_FOR_FASTIFY, '{"a":1}'),
  ],
  [
    '200 create, large',
    request('POST', '/api/note', JSON_BODY, BIG),
    request('POST', '/api/note/', JSON_BODY_FOR_FASTIFY, BIG),
  ],
  ['200 read', request('GET', '/api/note/1000', ID), request('GET', '/api/note/1000/', ID)],
  [
    '200 read, compressed',
    request('GET', '/api/note/1001', { ...ID, 'Accept-Encoding': 'gzip' }),
    request('GET', '/api/note/1001/', { ...ID, 'Accept-Encoding': 'gzip' }),
  ],
  [
    '304 read',
    request('GET', '/api/note/1000', { ...ID, 'If-None-Match': '"e.1"' }),
    request('GET', '/api/note/1000/', { ...ID, 'If-None-Match': '"e.1"' }),
  ],
  ['404 read', request('GET', '/api/note/7', ID), request('GET', '/api/note/7/', ID)],
  ['200 list', request('GET', '/api/note', ID), request('GET', '/api/note/', ID)],
  ['200 page', request('GET', '/api/note?limit=1', ID), request('GET', '/api/note/?limit=1', ID)],
  [
    '304 list',
    request('GET', '/api/note', { ...ID, 'If-None-Match': '"e.2"' }),
    request('GET', '/api/note/', { ...ID, 'If-None-Match': '"e.2"' }),
  ],
  ['400 page', request('GET', '/api/note?limit=0', ID), request('GET', '/api/note/?limit=0', ID)],
  [
    '412 update',
    request('PATCH', '/api/note/1000', { ...JSON_BODY, 'If-Match': '"e.9"' }, '{"b":2}'),
    request(
      'PATCH',
      '/api/note/1000/',
      { ...JSON_BODY_FOR_FASTIFY, 'If-Match': '"e.9"' },
      '{"b":2}',
    ),
  ],
  [
    '200 update',
    request('PATCH', '/api/note/1000', JSON_BODY, '{"b":2}'),
    request('PATCH', '/api/note/1000/', JSON_BODY_FOR_FASTIFY, '{"b":2}'),
  ],
  [
    '404 update',
    request('PATCH', '/api/note/7', JSON_BODY, '{"b":2}'),
    request('PATCH', '/api/note/7/', JSON_BODY_FOR_FASTIFY, '{"b":2}'),
  ],
  ['200 delete', request('DELETE', '/api/note/1000', ID), request('DELETE', '/api/note/1000/', ID)],
  ['404 delete', request('DELETE', '/api/note/1000', ID), request('DELETE', '/api/note/1000/', ID)],
]

describe('one writer of an Answer for both lanes', () => {
  let lane: Awaited<ReturnType<typeof listening>>
  let fastify: Awaited<ReturnType<typeof listening>>
  before(async () => {
    lane = await listening()
    fastify = await listening()
  })
  after(async () => {
    await lane.app.close()
    await fastify.app.close()
  })

  it('writes byte-identical responses, head and body, through the fast lane and Fastify', async () => {
    for (const [name, viaLane, viaFastify] of PAIRS) {
      const before = { lane: lane.fastify(), fastify: fastify.fastify() }
      const expected = await exchange(fastify.port, viaFastify)
      const actual = await exchange(lane.port, viaLane)
      assert.equal(lane.fastify(), before.lane, `${name}: the fast lane took it`)
      assert.equal(fastify.fastify(), before.fastify + 1, `${name}: Fastify took the twin`)
      assert.equal(actual, expected, name)
    }
  })

  it('frames the 304 and the 404 as the contract says', async () => {
    const notModified = await exchange(
      lane.port,
      request('GET', '/api/note/1001', { ...ID, 'If-None-Match': '*' }),
    )
    assert.match(notModified, /^HTTP\/1\.1 304 Not Modified\r\n/)
    assert.doesNotMatch(notModified, /content-(length|type)/i)
    const missing = await exchange(lane.port, request('GET', '/api/note/7', ID))
    assert.equal(
      missing,
      'HTTP/1.1 404 Not Found\r\nx-request-id: heads-1\r\ncontent-length: 0\r\nConnection: close\r\n\r\n',
    )
  })
})
