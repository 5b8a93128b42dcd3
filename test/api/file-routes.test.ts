import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryFiles } from '../../src/store/memory/memory-files.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { describeEachNotebooks } from '../support/each-notebooks.js'
import { bytesOf } from '../support/files.contract.js'
import { assertProblem, notebookApp, team } from '../support/notebook-requests.js'

const NO_NOTEBOOK = 'No notebook has this id, or you are not one of its members.'
const NO_FILE = 'This notebook holds no file with this id.'
const EDITOR_NEEDED = 'This needs the editor role in this notebook; you are a viewer.'

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

function openApp(maxFileBytes = DEFAULT_CONFIG.maxFileBytes) {
  return buildApp({
    store: new MemoryNoteStore({ maxNotes: 1000, maxBytes: 1 << 20 }),
    files: new MemoryFiles({ maxFileBytes, maxNotebookBytes: 1 << 22, maxBytes: 1 << 23 }),
    config: { ...DEFAULT_CONFIG, maxFileBytes },
  })
}

const upload = (app: FastifyInstance, bytes: Buffer, type?: string, base = '/api') =>
  app.inject({
    method: 'POST',
    url: `${base}/files`,
    headers: type === undefined ? {} : { 'content-type': type },
    payload: bytes,
  })

function dataOf(response: LightMyRequestResponse): Record<string, unknown> {
  assert.ok([200, 201].includes(response.statusCode), response.body)
  return (JSON.parse(response.body) as { data: Record<string, unknown> }).data
}

describe('files over HTTP', () => {
  it('stores the bytes of an upload under their SHA-256 and answers them exactly, guarded', async () => {
    const app = openApp()
    const bytes = bytesOf(200_000)
    const posted = await upload(app, bytes, 'image/PNG')
    assert.equal(posted.statusCode, 201)
    const file = dataOf(posted)
    assert.deepEqual(Object.keys(file), ['id', 'size', 'type', 'created'])
    assert.equal(file.id, sha256(bytes))
    assert.equal(file.size, bytes.length)
    assert.equal(file.type, 'image/png')
    assert.match(String(file.created), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.equal(posted.headers.location, `/api/files/${file.id}`)

    const got = await app.inject({ method: 'GET', url: `/api/files/${file.id}` })
    assert.equal(got.statusCode, 200)
    assert.ok(got.rawPayload.equals(bytes))
    assert.equal(got.headers['content-type'], 'image/png')
    assert.equal(got.headers['content-length'], String(bytes.length))
    assert.equal(got.headers.etag, `"${file.id}"`)
    assert.equal(got.headers['cache-control'], 'private, max-age=31536000, immutable')
    assert.equal(got.headers['accept-ranges'], 'bytes')
    assert.equal(got.headers['x-content-type-options'], 'nosniff')
    assert.equal(got.headers['content-security-policy'], "sandbox; default-src 'none'")
    assert.equal(got.headers['content-disposition'], undefined)

    const head = await app.inject({ method: 'HEAD', url: `/api/files/${file.id}` })
    assert.equal(head.statusCode, 200)
    assert.equal(head.headers['content-length'], String(bytes.length))
    assert.equal(head.headers.etag, `"${file.id}"`)
    assert.equal(head.rawPayload.length, 0)

    const again = await app.inject({
      method: 'GET',
      url: `/api/files/${file.id}`,
      headers: { 'if-none-match': `W/"x", "${file.id}"` },
    })
    assert.equal(again.statusCode, 304)
    assert.equal(again.rawPayload.length, 0)
    assert.equal(again.headers.etag, `"${file.id}"`)
    await app.close()
  })

  it("answers a refusal of a file's route with the guards and nothing of the file's own headers, never cached", async () => {
    // A store whose reads fail (a disk or a database that went away) or whose file is gone by
    // the time it is read: the answer must not carry the file's ETag or a year of caching.
    let reads: 'fail' | 'gone' = 'fail'
    const files = new MemoryFiles({ maxFileBytes: 1 << 20 })
    const failing: typeof files = Object.create(files)
    failing.files = (notebook) => {
      const inner = files.files(notebook)
      return Object.assign(Object.create(inner), {
        read: () => {
          if (reads === 'gone') return undefined
          throw new Error('the disk went away')
        },
      })
    }
    const app = buildApp({
      store: new MemoryNoteStore({ maxNotes: 1000, maxBytes: 1 << 20 }),
      files: failing,
      config: { ...DEFAULT_CONFIG, maxFileBytes: 1 << 20 },
    })
    const id = String(dataOf(await upload(app, bytesOf(1000), 'text/html')).id)
    const guarded = (response: LightMyRequestResponse, status: number) => {
      assert.equal(response.statusCode, status, response.body)
      assert.equal(response.headers['content-type'], 'application/problem+json')
      assert.equal(response.headers['x-content-type-options'], 'nosniff')
      assert.equal(response.headers['content-security-policy'], "sandbox; default-src 'none'")
      assert.equal(response.headers['cache-control'], 'no-store')
      for (const name of ['etag', 'accept-ranges', 'content-disposition']) {
        assert.equal(response.headers[name], undefined, `${status} ${name}`)
      }
    }
    guarded(await app.inject({ method: 'GET', url: `/api/files/${id}` }), 500)
    reads = 'gone'
    guarded(await app.inject({ method: 'GET', url: `/api/files/${id}` }), 404)
    guarded(await app.inject({ method: 'GET', url: `/api/files/${'0'.repeat(64)}` }), 404)
    guarded(await app.inject({ method: 'GET', url: '/api/files/not-an-id' }), 404)
    // The file's own answers keep theirs, a 416 (about its bytes) too.
    const outside = await app.inject({
      method: 'GET',
      url: `/api/files/${id}`,
      headers: { range: 'bytes=5000-' },
    })
    assert.equal(outside.statusCode, 416)
    assert.equal(outside.headers['content-range'], 'bytes */1000')
    assert.equal(outside.headers.etag, `"${id}"`)
    assert.equal(outside.headers['x-content-type-options'], 'nosniff')
    const head = await app.inject({ method: 'HEAD', url: `/api/files/${id}` })
    assert.equal(head.headers.etag, `"${id}"`)
    assert.equal(head.headers['content-disposition'], 'attachment')
    assert.equal(head.headers['x-content-type-options'], 'nosniff')
    await app.close()
  })

  it('sends anything a browser could run as an attachment, never sniffed', async () => {
    const app = openApp()
    for (const [type, attachment] of [
      ['text/html', true],
      ['image/svg+xml', true],
      ['application/xml', true],
      ['text/javascript', true],
      ['application/pdf', true],
      ['application/octet-stream', true],
      ['application/x-made-up', true],
      ['image/jpeg', false],
      ['text/plain; charset=utf-8', false],
      ['video/mp4', false],
    ] as const) {
      const file = dataOf(await upload(app, Buffer.from(`<script>alert(1)</script> ${type}`), type))
      const got = await app.inject({ method: 'GET', url: `/api/files/${file.id}` })
      assert.equal(got.headers['content-type'], type, type)
      assert.equal(got.headers['content-disposition'], attachment ? 'attachment' : undefined, type)
      assert.equal(got.headers['x-content-type-options'], 'nosniff')
      assert.equal(got.headers['content-security-policy'], "sandbox; default-src 'none'")
    }
    // Without a type, the bytes are application/octet-stream; a header that is not a type is refused.
    const bare = dataOf(await upload(app, Buffer.from('<html>')))
    assert.equal(bare.type, 'application/octet-stream')
    assertProblem(
      await upload(app, Buffer.from('x'), 'png'),
      400,
      'Content-Type must be a media type such as image/png (at most 200 characters).',
    )
    await app.close()
  })

  it('keeps a JSON upload as its bytes, malformed or not', async () => {
    const app = openApp()
    const bytes = Buffer.from('{"not": json')
    const file = dataOf(await upload(app, bytes, 'application/json'))
    const got = await app.inject({ method: 'GET', url: `/api/files/${file.id}` })
    assert.ok(got.rawPayload.equals(bytes))
    await app.close()
  })

  it('answers a Range with its bytes (206), one it cannot meet with 416, and the rest whole', async () => {
    const app = openApp()
    const bytes = bytesOf(1000, 7)
    const { id } = dataOf(await upload(app, bytes, 'video/mp4'))
    const ranged = (range: string, ifRange?: string) =>
      app.inject({
        method: 'GET',
        url: `/api/files/${id}`,
        headers: { range, ...(ifRange === undefined ? {} : { 'if-range': ifRange }) },
      })
    for (const [range, start, end] of [
      ['bytes=0-0', 0, 1],
      ['bytes=10-19', 10, 20],
      ['bytes=990-', 990, 1000],
      ['bytes=-5', 995, 1000],
      ['bytes=-5000', 0, 1000],
      ['bytes=500-99999', 500, 1000],
      // The unit in any case, leading zeros, and numbers past any size.
      ['Bytes=10-19', 10, 20],
      ['bytes=00000000000000000010-0000000000000000000019', 10, 20],
      ['bytes=5-99999999999999999999999', 5, 1000],
      ['bytes=-99999999999999999999999', 0, 1000],
    ] as const) {
      const got = await ranged(range)
      assert.equal(got.statusCode, 206, range)
      assert.equal(got.headers['content-range'], `bytes ${start}-${end - 1}/1000`, range)
      assert.equal(got.headers['content-length'], String(end - start), range)
      assert.ok(got.rawPayload.equals(bytes.subarray(start, end)), range)
      assert.equal(got.headers.etag, `"${id}"`)
    }
    for (const range of [
      'bytes=1000-',
      'bytes=5000-6000',
      'bytes=-0',
      'bytes=99999999999999999999-',
    ]) {
      const got = await ranged(range)
      assert.equal(got.statusCode, 416, range)
      assert.equal(got.headers['content-range'], 'bytes */1000')
      assert.equal(got.headers['content-type'], 'application/problem+json')
    }
    for (const range of ['bytes=0-1,5-6', 'items=0-1', 'bytes=9-3', 'nonsense']) {
      const got = await ranged(range)
      assert.equal(got.statusCode, 200, range)
      assert.ok(got.rawPayload.equals(bytes), range)
    }
    // If-Range with another validator: the whole file, since the client's copy is not this one.
    assert.equal((await ranged('bytes=0-1', '"other"')).statusCode, 200)
    assert.equal((await ranged('bytes=0-1', `"${id}"`)).statusCode, 206)
    await app.close()
  })

  it('lists the files oldest first in pages with a Link and a count, and deletes one', async () => {
    const app = openApp()
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push(String(dataOf(await upload(app, Buffer.from(`file ${i}`), 'text/plain')).id))
    }
    const seen: string[] = []
    let url: string | undefined = '/api/files?limit=2'
    while (url !== undefined) {
      const page: LightMyRequestResponse = await app.inject({ method: 'GET', url })
      assert.equal(page.statusCode, 200)
      assert.equal(page.headers['x-total-count'], '5')
      const data = JSON.parse(page.body).data as { id: string }[]
      seen.push(...data.map((file) => file.id))
      const link = page.headers.link as string | undefined
      url = link === undefined ? undefined : /<([^>]+)>; rel="next"/.exec(link)?.[1]
    }
    assert.deepEqual(seen, ids)
    assertProblem(
      await app.inject({ method: 'GET', url: '/api/files?limit=0' }),
      400,
      'limit must be a whole number from 1 to 1000; got "0".',
    )
    assert.equal(
      (await app.inject({ method: 'DELETE', url: `/api/files/${ids[0]}` })).statusCode,
      204,
    )
    assertProblem(await app.inject({ method: 'GET', url: `/api/files/${ids[0]}` }), 404, NO_FILE)
    assertProblem(await app.inject({ method: 'DELETE', url: `/api/files/${ids[0]}` }), 404, NO_FILE)
    assertProblem(await app.inject({ method: 'GET', url: '/api/files/nothex' }), 404, NO_FILE)
    assert.equal(JSON.parse((await app.inject('/api/files')).body).data.length, 4)
    await app.close()
  })

  it('refuses a file past MAX_FILE_BYTES with a readable 413, declared or chunked, keeping nothing', async () => {
    const app = openApp(64 * 1024)
    assertProblem(
      await upload(app, bytesOf(64 * 1024 + 1), 'text/plain'),
      413,
      'A file may hold at most 65536 bytes. Send a smaller file.',
    )
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as AddressInfo
    // Chunked, with no length to refuse at once: refused as it passes the limit, and still read.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/files',
          headers: { 'content-type': 'text/plain' },
        },
        (response) => {
          let body = ''
          response.setEncoding('utf8')
          response.on('data', (chunk: string) => {
            body += chunk
          })
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
        },
      )
      request.on('error', reject)
      const chunk = Buffer.alloc(16 * 1024, 0x61)
      let sent = 0
      const more = (): void => {
        while (sent < 4 * 1024 * 1024) {
          sent += chunk.length
          if (!request.write(chunk)) {
            request.once('drain', more)
            return
          }
        }
        request.end()
      }
      more()
    })
    assert.equal(answer.status, 413)
    assert.equal(
      JSON.parse(answer.body).detail,
      'A file may hold at most 65536 bytes. Send a smaller file.',
    )
    assert.equal(JSON.parse((await app.inject('/api/files')).body).data.length, 0)
    await app.close()
  })
})

describeEachNotebooks('files by notebook and role', (context) => {
  it("keeps each notebook's files its own, serves members by role, and nothing to others", async () => {
    const { app } = notebookApp(context)
    const { ann, bob, cat, eve, base } = await team(app)
    const bytes = bytesOf(3000, 5)
    const post = (who: typeof ann, url: string, body: Buffer) =>
      app.inject({
        method: 'POST',
        url,
        headers: { ...who.authorization, 'content-type': 'image/png' },
        payload: body,
      })
    const shared = dataOf(await post(bob, `${base}/files`, bytes))
    const fileUrl = `${base}/files/${shared.id}`
    const got = await app.inject({ method: 'GET', url: fileUrl, headers: cat.authorization })
    assert.equal(got.statusCode, 200)
    assert.ok(got.rawPayload.equals(bytes))
    assertProblem(await post(cat, `${base}/files`, bytes), 403, EDITOR_NEEDED)
    assertProblem(await cat.request('DELETE', fileUrl), 403, EDITOR_NEEDED)
    // Someone who is not a member learns nothing, whatever they ask for.
    for (const [method, url] of [
      ['GET', fileUrl],
      ['GET', `${base}/files`],
      ['DELETE', fileUrl],
    ] as const) {
      assertProblem(await eve.request(method, url), 404, NO_NOTEBOOK)
    }
    assertProblem(await post(eve, `${base}/files`, bytes), 404, NO_NOTEBOOK)
    // Nor does anyone's own notebook hold it, the same bytes included.
    assertProblem(await eve.request('GET', `/api/files/${shared.id}`), 404, NO_FILE)
    assertProblem(await ann.request('GET', `/api/files/${shared.id}`), 404, NO_FILE)
    const own = dataOf(await post(eve, '/api/files', bytes))
    assert.equal(own.id, shared.id)
    assert.equal((await eve.request('DELETE', `/api/files/${own.id}`)).statusCode, 204)
    const still = await app.inject({ method: 'GET', url: fileUrl, headers: ann.authorization })
    assert.ok(still.rawPayload.equals(bytes))
    // A member removed reads nothing more; the notebook's removal takes its files.
    await ann.request('DELETE', `${base}/members/cat`)
    assertProblem(await cat.request('GET', fileUrl), 404, NO_NOTEBOOK)
    assert.equal((await ann.request('DELETE', base)).statusCode, 204)
    assertProblem(await bob.request('GET', fileUrl), 404, NO_NOTEBOOK)
  })
})
