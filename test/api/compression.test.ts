import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { after, describe, it } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { send } from '../../bench/http-client.js'
import { type CodingChoice, parseAcceptEncoding } from '../../src/api/compression.js'
import { NoteOperations } from '../../src/api/note-operations.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { describeEachStore } from '../support/each-store.js'
import { buildTestApp, fakeClock, type SuiteContext, TEST_EPOCH } from '../support/helpers.js'
import { openRaw, waitFor } from '../support/socket.js'

const JSON_UTF8 = 'application/json; charset=utf-8'
const GZIP = { 'accept-encoding': 'gzip' }
const BR = { 'accept-encoding': 'br' }

/** Every response header but the ones that change per request or per lane's transport. */
function headersOf(response: LightMyRequestResponse): Record<string, unknown> {
  const { date, 'x-request-id': id, connection, ...rest } = response.headers
  return rest
}

function decode(response: LightMyRequestResponse): string {
  const coding = response.headers['content-encoding']
  const raw = response.rawPayload
  if (coding === 'gzip') return gunzipSync(raw).toString('utf8')
  if (coding === 'br') return brotliDecompressSync(raw).toString('utf8')
  assert.equal(coding, undefined)
  return raw.toString('utf8')
}

/** `count` notes of about 60 bytes each: 20 make a list of about 1.2 KiB. */
async function storeNotes(app: FastifyInstance, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const response = await app.inject({
      method: 'POST',
      url: '/api/note',
      payload: { title: `note ${i}`, body: 'some text of a note' },
    })
    assert.equal(response.statusCode, 200)
  }
}

/** A fresh app holding one note (id 1000) whose GET body is exactly `bytes` long. */
async function appWithNoteOf(suite: SuiteContext, bytes: number): Promise<FastifyInstance> {
  const { app } = suite.buildApp({}, { now: fakeClock(1000) })
  // {"data":{"pad":"","id":1000}} is 29 bytes.
  await app.inject({ method: 'POST', url: '/api/note', payload: { pad: 'x'.repeat(bytes - 29) } })
  const check = await app.inject('/api/note/1000')
  assert.equal(check.rawPayload.length, bytes)
  return app
}

describe('parseAcceptEncoding', () => {
  const cases: [string, CodingChoice | undefined][] = [
    ['gzip', { coding: 'gzip', always: false }],
    ['br', { coding: 'br', always: false }],
    ['gzip, br', { coding: 'br', always: false }],
    ['gzip, deflate, br, zstd', { coding: 'br', always: false }],
    ['br;q=0.5, gzip', { coding: 'gzip', always: false }],
    ['gzip;q=0.8, br;q=0.8', { coding: 'br', always: false }],
    [' br ; q=0.9 , gzip;q=0.95', { coding: 'gzip', always: false }],
    ['GZIP', { coding: 'gzip', always: false }],
    ['x-gzip', { coding: 'gzip', always: false }],
    ['*', { coding: 'br', always: false }],
    ['*;q=0.1, br;q=0', { coding: 'gzip', always: false }],
    ['deflate, *;q=0.5', { coding: 'br', always: false }],
    ['gzip, identity;q=0', { coding: 'gzip', always: true }],
    ['br, *;q=0', { coding: 'br', always: true }],
    ['br, *;q=0, identity', { coding: 'br', always: false }],
    ['gzip;q=0.5, identity', undefined],
    ['gzip;q=0.5, identity;q=0.5', { coding: 'gzip', always: false }],
    ['gzip;q=0, br;q=0', undefined],
    ['gzip;q=0.000', undefined],
    ['gzip;q=1.5', undefined],
    ['gzip;q=0.1234', undefined],
    ['gzip;q=abc, br;q=0.1', { coding: 'br', always: false }],
    ['identity', undefined],
    ['identity;q=0', undefined],
    ['*;q=0', undefined],
    ['deflate', undefined],
    ['', undefined],
    [',,;', undefined],
  ]
  for (const [header, expected] of cases) {
    it(`reads ${JSON.stringify(header)} as ${expected === undefined ? 'no coding' : `${expected.coding}${expected.always ? ', always' : ''}`}`, () => {
      assert.deepEqual(parseAcceptEncoding(header), expected)
    })
  }
})

describeEachStore('compression of GET /api/note', (suite) => {
  it('sends the list as it is without Accept-Encoding, with Vary', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, 20)
    const response = await app.inject('/api/note')
    assert.equal(response.statusCode, 200)
    assert.deepEqual(headersOf(response), {
      'content-type': JSON_UTF8,
      'content-length': '1180',
      etag: `"${TEST_EPOCH}.k"`,
      'notes-version': `${TEST_EPOCH}.k`,
      'x-total-count': '20',
      'cache-control': 'no-cache',
      vary: 'Accept, Accept-Encoding',
    })
    assert.match(
      response.body,
      /^\{"data":\[\{"title":"note 0","body":"some text of a note","id":1000\},/,
    )
  })

  for (const [coding, decompress] of [
    ['gzip', gunzipSync],
    ['br', brotliDecompressSync],
  ] as const) {
    it(`compresses a list over 1 KiB with ${coding}, to exactly the uncompressed bytes`, async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
      await storeNotes(app, 20)
      const identity = await app.inject('/api/note')
      const response = await app.inject({
        url: '/api/note',
        headers: { 'accept-encoding': coding },
      })
      assert.equal(response.statusCode, 200)
      assert.deepEqual(headersOf(response), {
        'content-type': JSON_UTF8,
        'content-length': String(response.rawPayload.length),
        etag: `"${TEST_EPOCH}.k-${coding}"`,
        'notes-version': `${TEST_EPOCH}.k`,
        'x-total-count': '20',
        'cache-control': 'no-cache',
        vary: 'Accept, Accept-Encoding',
        'content-encoding': coding,
      })
      assert.ok(response.rawPayload.length < identity.rawPayload.length / 3)
      assert.deepEqual(decompress(response.rawPayload), identity.rawPayload)
    })
  }

  it('chooses the coding as Accept-Encoding says', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, 20)
    for (const [header, coding] of [
      ['gzip, deflate, br', 'br'],
      ['br;q=0.5, gzip', 'gzip'],
      ['*', 'br'],
      ['*, br;q=0', 'gzip'],
      ['identity', undefined],
      ['deflate', undefined],
      ['gzip;q=0, br;q=0', undefined],
      ['', undefined],
    ] as const) {
      const response = await app.inject({
        url: '/api/note',
        headers: { 'accept-encoding': header },
      })
      assert.equal(response.headers['content-encoding'], coding, header)
      assert.equal(
        response.headers.etag,
        `"${TEST_EPOCH}.k${coding === undefined ? '' : `-${coding}`}"`,
      )
    }
  })

  it('compresses a body over 1 KiB and not one of 1 KiB', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000) })
    // {"data":[{"pad":"","id":1000}]} is 31 bytes.
    await app.inject({ method: 'POST', url: '/api/note', payload: { pad: 'x'.repeat(1024 - 31) } })
    const atLimit = await app.inject({ url: '/api/note', headers: GZIP })
    assert.equal(atLimit.rawPayload.length, 1024)
    assert.equal(atLimit.headers['content-encoding'], undefined)
    assert.equal(atLimit.headers.etag, `"${TEST_EPOCH}.1"`)
    assert.equal(atLimit.headers.vary, 'Accept, Accept-Encoding')
    await app.inject({
      method: 'PATCH',
      url: '/api/note/1000',
      payload: { pad: 'x'.repeat(1025 - 31) },
    })
    const over = await app.inject({ url: '/api/note', headers: GZIP })
    assert.equal(over.headers['content-encoding'], 'gzip')
    assert.equal(over.headers.etag, `"${TEST_EPOCH}.2-gzip"`)
    assert.equal(gunzipSync(over.rawPayload).length, 1025)
  })

  it('compresses even a small list when identity is refused', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000) })
    const response = await app.inject({
      url: '/api/note',
      headers: { 'accept-encoding': 'gzip, identity;q=0' },
    })
    assert.equal(response.headers['content-encoding'], 'gzip')
    assert.equal(response.headers.etag, `"${TEST_EPOCH}.0-gzip"`)
    assert.equal(gunzipSync(response.rawPayload).toString(), '{"data":[]}')
  })

  it('compresses pages, each with its own ETag per coding, and keeps Link', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, 40)
    const identity = await app.inject('/api/note?limit=20&order=desc')
    const response = await app.inject({ url: '/api/note?limit=20&order=desc', headers: BR })
    assert.equal(response.statusCode, 200)
    assert.deepEqual(headersOf(response), {
      ...headersOf(identity),
      'content-length': String(response.rawPayload.length),
      etag: `"${TEST_EPOCH}.14-br"`,
      'content-encoding': 'br',
    })
    assert.equal(identity.headers.etag, `"${TEST_EPOCH}.14"`)
    assert.match(String(identity.headers.link), /rel="next"$/)
    assert.deepEqual(brotliDecompressSync(response.rawPayload), identity.rawPayload)
  })

  it('answers HEAD with the headers of the compressed GET and no body', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, 20)
    const get = await app.inject({ url: '/api/note', headers: GZIP })
    const head = await app.inject({ method: 'HEAD', url: '/api/note', headers: GZIP })
    assert.equal(head.statusCode, 200)
    assert.equal(head.body, '')
    assert.deepEqual(headersOf(head), headersOf(get))
  })

  it('answers 304 to If-None-Match with the ETag of the representation asked for', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, 20)
    const gzipTag = `"${TEST_EPOCH}.k-gzip"`
    const notModified = await app.inject({
      url: '/api/note',
      headers: { ...GZIP, 'if-none-match': gzipTag },
    })
    assert.equal(notModified.statusCode, 304)
    assert.equal(notModified.body, '')
    assert.deepEqual(headersOf(notModified), {
      etag: gzipTag,
      'notes-version': `${TEST_EPOCH}.k`,
      'cache-control': 'no-cache',
      vary: 'Accept, Accept-Encoding',
    })
    // The uncompressed one's ETag names another representation: a gzip client gets it whole.
    const other = await app.inject({
      url: '/api/note',
      headers: { ...GZIP, 'if-none-match': `"${TEST_EPOCH}.k"` },
    })
    assert.equal(other.statusCode, 200)
    assert.equal(other.headers.etag, gzipTag)
    const brClient = await app.inject({
      url: '/api/note',
      headers: { ...BR, 'if-none-match': gzipTag },
    })
    assert.equal(brClient.statusCode, 200)
    assert.equal(brClient.headers['content-encoding'], 'br')
    // Without Accept-Encoding, the uncompressed ETag matches, and the 304 says Vary too.
    const plain = await app.inject({
      url: '/api/note',
      headers: { 'if-none-match': `"${TEST_EPOCH}.k"` },
    })
    assert.equal(plain.statusCode, 304)
    assert.deepEqual(headersOf(plain), {
      etag: `"${TEST_EPOCH}.k"`,
      'notes-version': `${TEST_EPOCH}.k`,
      'cache-control': 'no-cache',
      vary: 'Accept, Accept-Encoding',
    })
    const page = await app.inject({
      url: '/api/note?limit=19',
      headers: { ...GZIP, 'if-none-match': `W/"x", ${gzipTag}` },
    })
    assert.equal(page.statusCode, 304)
    assert.equal(page.headers.etag, gzipTag)
  })

  it('answers 304 with the uncompressed ETag when the list is too small to compress', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, 1)
    const response = await app.inject({
      url: '/api/note',
      headers: { ...GZIP, 'if-none-match': `"${TEST_EPOCH}.1"` },
    })
    assert.equal(response.statusCode, 304)
    assert.equal(response.headers.etag, `"${TEST_EPOCH}.1"`)
    const encodedTag = await app.inject({
      url: '/api/note',
      headers: { ...GZIP, 'if-none-match': `"${TEST_EPOCH}.1-gzip"` },
    })
    assert.equal(encodedTag.statusCode, 200)
    assert.equal(encodedTag.headers['content-encoding'], undefined)
  })
})

describeEachStore('compression of one note', (suite) => {
  it('sends a note of 1 KiB as it is, without Vary', async () => {
    const app = await appWithNoteOf(suite, 1024)
    const response = await app.inject({ url: '/api/note/1000', headers: BR })
    assert.equal(response.statusCode, 200)
    assert.equal(response.headers['content-encoding'], undefined)
    assert.equal(response.headers.vary, undefined)
    assert.equal(response.headers.etag, `"${TEST_EPOCH}.1"`)
  })

  it('compresses a note over 1 KiB, with its own ETag, Last-Modified and Vary', async () => {
    const app = await appWithNoteOf(suite, 1025)
    const identity = await app.inject('/api/note/1000')
    assert.deepEqual(headersOf(identity), {
      'content-type': JSON_UTF8,
      'content-length': '1025',
      etag: `"${TEST_EPOCH}.1"`,
      'last-modified': 'Thu, 01 Jan 1970 00:00:01 GMT',
      'cache-control': 'no-cache',
      vary: 'Accept-Encoding',
    })
    for (const coding of ['gzip', 'br'] as const) {
      const response = await app.inject({
        url: '/api/note/1000',
        headers: { 'accept-encoding': coding },
      })
      assert.deepEqual(headersOf(response), {
        ...headersOf(identity),
        'content-length': String(response.rawPayload.length),
        etag: `"${TEST_EPOCH}.1-${coding}"`,
        'content-encoding': coding,
      })
      assert.equal(decode(response), identity.body)
    }
  })

  it('answers If-None-Match with the compressed ETag 304, with that ETag and Vary', async () => {
    const app = await appWithNoteOf(suite, 2000)
    const response = await app.inject({
      url: '/api/note/1000',
      headers: { ...GZIP, 'if-none-match': `"${TEST_EPOCH}.1-gzip"` },
    })
    assert.equal(response.statusCode, 304)
    assert.equal(response.body, '')
    assert.deepEqual(headersOf(response), {
      etag: `"${TEST_EPOCH}.1-gzip"`,
      'last-modified': 'Thu, 01 Jan 1970 00:00:01 GMT',
      'cache-control': 'no-cache',
      vary: 'Accept-Encoding',
    })
    const uncompressedTag = await app.inject({
      url: '/api/note/1000',
      headers: { ...GZIP, 'if-none-match': `"${TEST_EPOCH}.1"` },
    })
    assert.equal(uncompressedTag.statusCode, 200)
    assert.equal(uncompressedTag.headers['content-encoding'], 'gzip')
  })

  it('takes a compressed ETag in If-Match on PATCH and DELETE', async () => {
    const app = await appWithNoteOf(suite, 2000)
    const patched = await app.inject({
      method: 'PATCH',
      url: '/api/note/1000',
      headers: { 'if-match': `"${TEST_EPOCH}.1-br"` },
      payload: { title: 't' },
    })
    assert.equal(patched.statusCode, 200)
    assert.equal(patched.headers.etag, `"${TEST_EPOCH}.2"`)
    const stale = await app.inject({
      method: 'DELETE',
      url: '/api/note/1000',
      headers: { 'if-match': `"${TEST_EPOCH}.1-gzip"` },
    })
    assert.equal(stale.statusCode, 412)
    assert.equal(stale.headers.etag, `"${TEST_EPOCH}.2"`)
    const deleted = await app.inject({
      method: 'DELETE',
      url: '/api/note/1000',
      headers: { 'if-match': `"${TEST_EPOCH}.2-gzip"` },
    })
    assert.equal(deleted.statusCode, 200)
    assert.equal(deleted.body, '{"data":"1000"}')
  })

  it('compresses the answers of POST and PATCH over 1 KiB, with the ETag a GET gives', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1000) })
    const created = await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: GZIP,
      payload: { pad: 'y'.repeat(2000) },
    })
    assert.equal(created.statusCode, 200)
    assert.equal(created.headers['content-encoding'], 'gzip')
    assert.equal(created.headers.etag, `"${TEST_EPOCH}.1-gzip"`)
    assert.equal(created.headers.vary, 'Accept-Encoding')
    assert.equal(decode(created), `{"data":{"pad":"${'y'.repeat(2000)}","id":1000}}`)
    const read = await app.inject({ url: '/api/note/1000', headers: GZIP })
    assert.equal(read.headers.etag, created.headers.etag)
    const patched = await app.inject({
      method: 'PATCH',
      url: '/api/note/1000',
      headers: BR,
      payload: { more: 1 },
    })
    assert.equal(patched.headers['content-encoding'], 'br')
    assert.equal(patched.headers.etag, `"${TEST_EPOCH}.2-br"`)
    assert.equal(decode(patched), `{"data":{"pad":"${'y'.repeat(2000)}","id":1000,"more":1}}`)
    const small = await app.inject({ method: 'POST', url: '/api/note', headers: GZIP, payload: {} })
    assert.equal(small.headers['content-encoding'], undefined)
    assert.equal(small.headers.vary, undefined)
  })

  it('leaves the empty 404 as it is', async () => {
    const { app } = suite.buildApp()
    const response = await app.inject({ url: '/api/note/1', headers: GZIP })
    assert.equal(response.statusCode, 404)
    assert.equal(response.headers['content-length'], '0')
    assert.equal(response.headers['content-encoding'], undefined)
    assert.equal(response.headers.vary, undefined)
  })
})

// On the memory store only: these count on its synchronous answers to see what is cached.
describe('NoteOperations: the compressed list', () => {
  function operationsWith(notes: number): { store: MemoryNoteStore; operations: NoteOperations } {
    const store = new MemoryNoteStore({ maxNotes: 100_000, maxBytes: 1 << 30, epoch: 'e' })
    for (let i = 0; i < notes; i++) store.create({ title: `note ${i}`, body: 'some text' })
    return { store, operations: new NoteOperations(store) }
  }

  it('is compressed once per version and coding, and reused until a write', async () => {
    const { store, operations } = operationsWith(50)
    const first = await operations.list('', GZIP)
    const again = await operations.list('', GZIP)
    assert.equal(again, first)
    assert.equal(again.body, first.body)
    const page = await operations.list('limit=30', GZIP)
    assert.equal(await operations.list('limit=30', GZIP), page)
    const br = await operations.list('', BR)
    assert.notEqual(br.body, first.body)
    assert.equal(await operations.list('', BR), br)
    store.create({ title: 'one more' })
    const after = await operations.list('', GZIP)
    assert.notEqual(after.body, first.body)
    assert.equal(gunzipSync(after.body as Buffer).toString(), `{"data":${store.list().json}}`)
    assert.notEqual(await operations.list('limit=30', GZIP), page)
  })

  it('compresses a large list on the thread pool once, for every request that waits', async () => {
    // About 90 KiB: over the 64 KiB compressed synchronously.
    const { store, operations } = operationsWith(2000)
    const pending = [operations.list('', BR), operations.list('', BR), operations.list('', BR)]
    assert.ok(pending[0] instanceof Promise)
    const answers = await Promise.all(pending)
    assert.equal(answers[1], answers[0])
    assert.equal(answers[2], answers[0])
    assert.equal(await operations.list('', BR), answers[0])
    assert.equal(
      brotliDecompressSync(answers[0]?.body as Buffer).toString(),
      `{"data":${store.list().json}}`,
    )
  })
})

// On the memory store only: about the transport (a real client, keep-alive), which the store
// does not change, and 2,000 notes would cost seconds to create on PostgreSQL.
describe('compression over a real socket', () => {
  async function listen(notes: number): Promise<number> {
    const { app } = buildTestApp({}, { now: fakeClock(1000, 1) })
    await storeNotes(app, notes)
    await app.listen({ port: 0, host: '127.0.0.1' })
    after(() => app.close())
    return (app.server.address() as AddressInfo).port
  }

  it('is decoded by a real client that sends Accept-Encoding: gzip, br', async () => {
    const port = await listen(2000)
    // node:http rather than fetch: Node 24's bundled undici failed an internal assertion
    // (`assert(!this.paused)` in Parser.finish) on a connection closed after a compressed body.
    const get = (acceptEncoding: string) =>
      send(port, 'GET', '/api/note', { headers: { 'accept-encoding': acceptEncoding } })
    const plain = await get('identity')
    const compressed = await get('gzip, br')
    assert.equal(compressed.status, 200)
    assert.equal(compressed.headers['content-encoding'], 'br')
    assert.equal(compressed.headers.etag, `"${TEST_EPOCH}.1jk-br"`)
    assert.ok(compressed.bytes.length < 10_000)
    assert.equal(Number(compressed.headers['content-length']), compressed.bytes.length)
    assert.equal(plain.headers['content-encoding'], undefined)
    assert.equal(brotliDecompressSync(compressed.bytes).toString(), plain.body)
    const gzip = await get('gzip')
    assert.equal(gzip.headers['content-encoding'], 'gzip')
    assert.equal(gunzipSync(gzip.bytes).toString(), plain.body)
  })

  it('answers 304 on a keep-alive connection and then the next request on it', async () => {
    const port = await listen(20)
    const { socket, received, closed } = await openRaw(port)
    const tag = `"${TEST_EPOCH}.k-gzip"`
    socket.write(
      `GET /api/note HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nIf-None-Match: ${tag}\r\n\r\n`,
    )
    await waitFor(() => received().includes('\r\n\r\n'), 5000, 'the 304')
    const first = received()
    assert.match(first, /^HTTP\/1\.1 304 Not Modified\r\n/)
    assert.match(first, new RegExp(`\r\netag: ${tag}\r\n`, 'i'))
    assert.match(first, /\r\nvary: Accept, Accept-Encoding\r\n/i)
    assert.doesNotMatch(first, /content-length|transfer-encoding/i)
    socket.write('GET /api/note HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n')
    await waitFor(
      () => {
        const second = received().slice(first.length)
        const head = second.indexOf('\r\n\r\n')
        const length = /content-length: (\d+)/i.exec(second)?.[1]
        return head !== -1 && length !== undefined && second.length >= head + 4 + Number(length)
      },
      5000,
      'the second answer',
    )
    const second = received().slice(first.length)
    assert.match(second, /^HTTP\/1\.1 200 OK\r\n/)
    assert.match(second, /\r\ncontent-encoding: gzip\r\n/i)
    const body = Buffer.from(second.slice(second.indexOf('\r\n\r\n') + 4), 'latin1')
    assert.match(gunzipSync(body).toString(), /^\{"data":\[\{"title":"note 0"/)
    socket.end()
    await closed
  })
})
