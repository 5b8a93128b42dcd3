import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import * as tus from 'tus-js-client'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { JournaledNotebooks } from '../../src/store/journal/journaled-notebooks.js'
import { UploadFolder } from '../../src/store/journal/upload-folder.js'
import { MemoryFiles } from '../../src/store/memory/memory-files.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { MemoryUploads } from '../../src/store/memory/memory-uploads.js'
import { SHARED_NOTEBOOK } from '../../src/store/types.js'
import { Relay } from '../support/client-relay.js'
import { bytesOf } from '../support/files.contract.js'
import { signed } from '../support/jwks-server.js'

const TUS = { 'tus-resumable': '1.0.0' }
const PART = { ...TUS, 'content-type': 'application/offset+octet-stream' }
const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** `errors`, when given, gets every line the app logs at level error or above. */
function memoryApp(maxFileBytes = 16 << 20, errors?: string[]) {
  return buildApp({
    store: new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 }),
    files: new MemoryFiles({ maxFileBytes }),
    uploads: new MemoryUploads(),
    config: { ...DEFAULT_CONFIG, maxFileBytes },
    logger:
      errors === undefined
        ? false
        : { level: 'error', stream: { write: (line: string) => errors.push(line) } },
  })
}

async function listening(app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as AddressInfo).port
}

describe('resumable uploads (tus 1.0)', () => {
  it('tells what it speaks, and refuses another version', async () => {
    const app = memoryApp()
    const options = await app.inject({ method: 'OPTIONS', url: '/api/uploads' })
    assert.equal(options.statusCode, 204)
    assert.equal(options.headers['tus-resumable'], '1.0.0')
    assert.equal(options.headers['tus-version'], '1.0.0')
    assert.equal(
      options.headers['tus-extension'],
      'creation,creation-with-upload,termination,expiration',
    )
    assert.equal(options.headers['tus-max-size'], String(16 << 20))
    const old = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: { 'tus-resumable': '0.2.2', 'upload-length': '5' },
    })
    assert.equal(old.statusCode, 412)
    assert.equal(old.headers['tus-version'], '1.0.0')
    await app.close()
  })

  it('creates, takes parts at the offset it holds, and makes the file of the last byte', async () => {
    const app = memoryApp()
    const bytes = bytesOf(10_000, 3)
    const created = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: {
        ...TUS,
        'upload-length': '10000',
        'upload-metadata': `filename ${Buffer.from('a.png').toString('base64')},filetype ${Buffer.from('image/png').toString('base64')}`,
      },
    })
    assert.equal(created.statusCode, 201, created.body)
    const url = created.headers.location as string
    assert.match(url, /^\/api\/uploads\/[A-Za-z0-9_-]{22}$/)
    assert.equal(created.headers['upload-offset'], '0')
    assert.ok(created.headers['upload-expires'])
    const patch = (offset: number, body: Buffer) =>
      app.inject({
        method: 'PATCH',
        url,
        headers: { ...PART, 'upload-offset': String(offset) },
        payload: body,
      })
    const first = await patch(0, bytes.subarray(0, 4000))
    assert.equal(first.statusCode, 204)
    assert.equal(first.headers['upload-offset'], '4000')
    // A part sent at another offset is refused, and changes nothing.
    assert.equal((await patch(3000, bytes.subarray(3000, 5000))).statusCode, 409)
    const head = await app.inject({ method: 'HEAD', url, headers: TUS })
    assert.equal(head.statusCode, 200)
    assert.equal(head.headers['upload-offset'], '4000')
    assert.equal(head.headers['upload-length'], '10000')
    assert.equal(head.headers['cache-control'], 'no-store')
    assert.equal((await app.inject({ method: 'GET', url })).statusCode, 409)
    const wrongType = await app.inject({
      method: 'PATCH',
      url,
      headers: { ...TUS, 'content-type': 'text/plain', 'upload-offset': '4000' },
      payload: 'x',
    })
    assert.equal(wrongType.statusCode, 415)
    assert.equal((await patch(4000, bytes.subarray(4000))).statusCode, 204)
    const done = await app.inject({ method: 'GET', url })
    assert.equal(done.statusCode, 200)
    const file = JSON.parse(done.body).data as { id: string; size: number; type: string }
    assert.deepEqual(
      { id: file.id, size: file.size, type: file.type },
      { id: sha256(bytes), size: 10_000, type: 'image/png' },
    )
    const got = await app.inject({ method: 'GET', url: `/api/files/${file.id}` })
    assert.ok(got.rawPayload.equals(bytes))
    // Terminated, the upload is gone (the file stays).
    assert.equal((await app.inject({ method: 'DELETE', url, headers: TUS })).statusCode, 204)
    assert.equal((await app.inject({ method: 'HEAD', url, headers: TUS })).statusCode, 404)
    assert.equal((await app.inject(`/api/files/${file.id}`)).statusCode, 200)
    await app.close()
  })

  it('takes the first bytes with the creation, and refuses a length past the limit', async () => {
    const app = memoryApp(1000)
    const created = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: { ...PART, 'upload-length': '600' },
      payload: bytesOf(250),
    })
    assert.equal(created.statusCode, 201)
    assert.equal(created.headers['upload-offset'], '250')
    const big = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: { ...TUS, 'upload-length': '1001' },
    })
    assert.equal(big.statusCode, 413)
    const unknown = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: { ...TUS, 'upload-defer-length': '1' },
    })
    assert.equal(unknown.statusCode, 400)
    await app.close()
  })

  it('keeps nothing of a creation whose first bytes are refused: its Location was never sent', async () => {
    const uploads = new MemoryUploads()
    const app = buildApp({
      store: new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 }),
      files: new MemoryFiles({ maxFileBytes: 1000 }),
      uploads,
      config: { ...DEFAULT_CONFIG, maxFileBytes: 1000 },
    })
    const refused = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: { ...PART, 'upload-length': '600' },
      payload: bytesOf(700),
    })
    assert.equal(refused.statusCode, 400)
    assert.equal(refused.headers.location, undefined)
    assert.deepEqual(await uploads.list(), [])
    await app.close()
  })

  it('keeps the bytes of a PATCH cut in the middle, and logs no error of its own for it', async () => {
    const errors: string[] = []
    const app = memoryApp(1 << 20, errors)
    const port = await listening(app)
    try {
      const created = await app.inject({
        method: 'POST',
        url: '/api/uploads',
        headers: { ...TUS, 'upload-length': '700' },
      })
      const url = String(created.headers.location)
      // 350 of the 700 bytes the request says it carries, then the connection is gone.
      const part = request({
        port,
        host: '127.0.0.1',
        path: url,
        method: 'PATCH',
        headers: { ...PART, 'upload-offset': '0', 'content-length': '700' },
      })
      part.on('error', () => {})
      part.write(bytesOf(350))
      const until = Date.now() + 5_000
      let offset = '0'
      while (offset !== '350' && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        offset = String(
          (await app.inject({ method: 'HEAD', url, headers: TUS })).headers['upload-offset'],
        )
        if (offset === '350') part.destroy()
      }
      assert.equal(offset, '350')
      await new Promise((resolve) => setTimeout(resolve, 200))
      const head = await app.inject({ method: 'HEAD', url, headers: TUS })
      assert.equal(head.headers['upload-offset'], '350')
      assert.deepEqual(errors, [])
    } finally {
      await app.close()
    }
  })

  it('tus-js-client uploads through a connection cut in the middle, unchanged', async () => {
    const app = memoryApp(32 << 20)
    const port = await listening(app)
    const relay = await Relay.start(port)
    try {
      const bytes = bytesOf(6 << 20, 9)
      let cut = false
      const url = await new Promise<string>((resolve, reject) => {
        const upload = new tus.Upload(bytes, {
          endpoint: `${relay.url}/api/uploads`,
          chunkSize: 512 * 1024,
          retryDelays: [0, 100, 200, 400],
          metadata: { filename: 'scan.pdf', filetype: 'application/pdf' },
          onProgress: (sent) => {
            if (!cut && sent > 2 << 20) {
              cut = true
              relay.cutAll()
            }
          },
          onError: reject,
          onSuccess: () => resolve(upload.url ?? ''),
        })
        upload.start()
      })
      assert.ok(cut, 'the connection was cut during the upload')
      const done = await app.inject({ method: 'GET', url: new URL(url).pathname })
      const file = JSON.parse(done.body).data as { id: string; type: string }
      assert.equal(file.id, sha256(bytes))
      assert.equal(file.type, 'application/pdf')
      const got = await app.inject({ method: 'GET', url: `/api/files/${file.id}` })
      assert.ok(got.rawPayload.equals(bytes))
    } finally {
      await relay.close()
      await app.close()
    }
  })

  it('on DATA_FILE, keeps every acknowledged byte across a restart, and resumes', async () => {
    const root = mkdtempSync(join(tmpdir(), 'notes-uploads-'))
    const path = join(root, 'notes.journal')
    const open = () => {
      const journal = new JournaledNotebooks({ maxNotes: 100, maxBytes: 1 << 20, path })
      const app = buildApp({
        store: journal.notebook(SHARED_NOTEBOOK),
        files: journal.files,
        uploads: new UploadFolder(`${path}.uploads`),
        config: DEFAULT_CONFIG,
      })
      return { journal, app }
    }
    try {
      const bytes = bytesOf(300_000, 4)
      const first = open()
      const created = await first.app.inject({
        method: 'POST',
        url: '/api/uploads',
        headers: { ...PART, 'upload-length': '300000' },
        payload: bytes.subarray(0, 120_000),
      })
      assert.equal(created.headers['upload-offset'], '120000')
      const url = created.headers.location as string
      await first.app.close()
      await first.journal.close()

      const second = open()
      const head = await second.app.inject({ method: 'HEAD', url, headers: TUS })
      assert.equal(head.statusCode, 200)
      assert.equal(head.headers['upload-offset'], '120000')
      const rest = await second.app.inject({
        method: 'PATCH',
        url,
        headers: { ...PART, 'upload-offset': '120000' },
        payload: bytes.subarray(120_000),
      })
      assert.equal(rest.statusCode, 204)
      const file = JSON.parse((await second.app.inject(url)).body).data as { id: string }
      const got = await second.app.inject(`/api/files/${file.id}`)
      assert.ok(got.rawPayload.equals(bytes))
      await second.app.close()
      await second.journal.close()
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })

  it('removes the unfinished uploads of a notebook removed', async () => {
    const secret = 'a-secret-of-32-bytes-or-more-000'
    const uploads = new MemoryUploads()
    const app = buildApp({
      notebooks: new MemoryNotebooks({ maxNotes: 100, maxBytes: 1 << 20 }),
      uploads,
      userTokens: new UserTokens({ secret }),
      config: DEFAULT_CONFIG,
    })
    const now = Math.floor(Date.now() / 1000)
    const token = await signed(
      Buffer.from(secret),
      { alg: 'HS256' },
      { sub: 'ann', exp: now + 600 },
    )
    const authorization = { authorization: `Bearer ${token}` }
    const made = await app.inject({
      method: 'POST',
      url: '/api/notebooks',
      headers: { ...authorization, 'content-type': 'application/json' },
      payload: '{"name":"Photos"}',
    })
    const nb = JSON.parse(made.body).data.id as string
    const start = (url: string) =>
      app.inject({
        method: 'POST',
        url,
        headers: { ...PART, ...authorization, 'upload-length': '100' },
        payload: bytesOf(40),
      })
    const inNotebook = await start(`/api/notebooks/${nb}/uploads`)
    const inDefault = await start('/api/uploads')
    assert.equal(inNotebook.statusCode, 201)
    assert.equal(inDefault.statusCode, 201)
    const removed = await app.inject({
      method: 'DELETE',
      url: `/api/notebooks/${nb}`,
      headers: authorization,
    })
    assert.equal(removed.statusCode, 204)
    const left = await uploads.list()
    assert.deepEqual(
      left.map((state) => `${state.id} ${state.offset}`),
      [`${(inDefault.headers.location as string).split('/').pop()} 40`],
    )
    await app.close()
  })
})
