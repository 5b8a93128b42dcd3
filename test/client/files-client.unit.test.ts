import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { NotesClient, NotesProblem } from '../../src/client/index.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryFiles } from '../../src/store/memory/memory-files.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { bytesOf } from '../support/files.contract.js'

async function serving(maxFileBytes = 1 << 20) {
  const app = buildApp({
    store: new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 }),
    files: new MemoryFiles({ maxFileBytes }),
    config: { ...DEFAULT_CONFIG, maxFileBytes },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  return { app, client: new NotesClient({ baseUrl: `http://127.0.0.1:${port}` }) }
}

describe('the client library: files', () => {
  it('uploads a Blob or bytes, lists, downloads whole or a range, and deletes', async () => {
    const { app, client } = await serving()
    try {
      const bytes = bytesOf(300_000, 11)
      const photo = await client.files.upload(new Blob([bytes], { type: 'image/jpeg' }))
      assert.equal(photo.id, createHash('sha256').update(bytes).digest('hex'))
      assert.equal(photo.size, bytes.length)
      assert.equal(photo.type, 'image/jpeg')
      const text = await client.files.upload(new TextEncoder().encode('hello'), {
        type: 'text/plain',
      })
      assert.equal(text.type, 'text/plain')

      const whole = await client.files.download(photo.id)
      assert.equal(whole.status, 200)
      assert.ok(Buffer.from(await whole.arrayBuffer()).equals(bytes))
      const part = await client.files.download(photo.id, { range: { start: 1000, end: 2000 } })
      assert.equal(part.status, 206)
      assert.ok(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(1000, 2000)))

      const first = await client.files.list({ limit: 1 })
      assert.equal(first.total, 2)
      assert.deepEqual(
        first.files.map((file) => file.id),
        [photo.id],
      )
      assert.ok(first.next !== undefined)
      const second = await client.files.list({ next: first.next })
      assert.deepEqual(
        second.files.map((file) => file.id),
        [text.id],
      )
      assert.equal(second.next, undefined)

      assert.equal(await client.files.delete(photo.id), true)
      assert.equal(await client.files.delete(photo.id), false)
      await assert.rejects(
        client.files.download(photo.id),
        (error: unknown) => error instanceof NotesProblem && error.status === 404,
      )
    } finally {
      await app.close()
    }
  })

  it('throws the 413 of a file past the limit as a problem', async () => {
    const { app, client } = await serving(1000)
    try {
      await assert.rejects(
        client.files.upload(new Uint8Array(1001)),
        (error: unknown) =>
          error instanceof NotesProblem &&
          error.status === 413 &&
          error.detail === 'A file may hold at most 1000 bytes. Send a smaller file.',
      )
    } finally {
      await app.close()
    }
  })
})
