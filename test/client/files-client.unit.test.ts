import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { NotesClient, NotesProblem } from '../../src/client/index.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryFiles } from '../../src/store/memory/memory-files.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { Relay } from '../support/client-relay.js'
import { bytesOf } from '../support/files.contract.js'

async function serving(maxFileBytes = 1 << 20, fetcher?: typeof fetch) {
  const app = buildApp({
    // Room for the uploads' bytes: on a memory store they count toward its cap.
    store: new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 26 }),
    files: new MemoryFiles({ maxFileBytes }),
    config: { ...DEFAULT_CONFIG, maxFileBytes },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  return {
    app,
    port,
    client: new NotesClient({ baseUrl: `http://127.0.0.1:${port}`, fetch: fetcher }),
  }
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex')

/** A fetch that records each request's method and path before it sends it. */
function recording(): { fetch: typeof fetch; sent: string[] } {
  const sent: string[] = []
  return {
    sent,
    fetch: (input, init) => {
      sent.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`)
      return fetch(input, init)
    },
  }
}

/** The bytes as a stream of chunks of uneven sizes. */
function streamOf(bytes: Uint8Array, chunk = 70_001): ReadableStream<Uint8Array> {
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) {
        controller.close()
        return
      }
      controller.enqueue(bytes.slice(at, at + chunk))
      at += chunk
    },
  })
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

  it('uploads a file larger than a part resumably, in parts, with progress', async () => {
    const { fetch, sent } = recording()
    const { app, client } = await serving(8 << 20, fetch)
    try {
      const bytes = bytesOf(3_000_000, 5)
      const progress: [number, number][] = []
      const file = await client.files.upload(new Blob([bytes], { type: 'application/pdf' }), {
        partSize: 1 << 20,
        onProgress: (held, total) => progress.push([held, total]),
      })
      assert.equal(file.id, sha256(bytes))
      assert.equal(file.type, 'application/pdf')
      assert.deepEqual(progress, [
        [0, 3_000_000],
        [1 << 20, 3_000_000],
        [2 << 20, 3_000_000],
        [3_000_000, 3_000_000],
      ])
      assert.deepEqual(
        sent.map((line) => line.replace(/uploads\/[\w-]+/, 'uploads/ID')),
        [
          'POST /api/uploads',
          'PATCH /api/uploads/ID',
          'PATCH /api/uploads/ID',
          'PATCH /api/uploads/ID',
          'GET /api/uploads/ID',
        ],
      )
      const back = await client.files.download(file.id)
      assert.ok(Buffer.from(await back.arrayBuffer()).equals(bytes))

      // Up to a part, one POST /api/files, its progress at 0 and at the end.
      sent.length = 0
      progress.length = 0
      const small = await client.files.upload(new Uint8Array(bytes.subarray(0, 1000)), {
        onProgress: (held, total) => progress.push([held, total]),
      })
      assert.equal(small.size, 1000)
      assert.deepEqual(sent, ['POST /api/files'])
      assert.deepEqual(progress, [
        [0, 1000],
        [1000, 1000],
      ])

      // An empty stream: one upload of no bytes, its progress once, at 0 of 0.
      sent.length = 0
      progress.length = 0
      const empty = await client.files.upload(streamOf(new Uint8Array(0)), {
        size: 0,
        onProgress: (held, total) => progress.push([held, total]),
      })
      assert.equal(empty.size, 0)
      assert.deepEqual(progress, [[0, 0]])
    } finally {
      await app.close()
    }
  })

  it('resumes from the offset the service holds after the connection is cut', async () => {
    const { app, port } = await serving(16 << 20)
    const relay = await Relay.start(port)
    const { fetch, sent } = recording()
    const client = new NotesClient({ baseUrl: relay.url, fetch, retries: { maxDelayMs: 50 } })
    try {
      const bytes = bytesOf(6 << 20, 8)
      let cuts = 0
      const file = await client.files.upload(new Uint8Array(bytes), {
        partSize: 2 << 20,
        onProgress: (held) => {
          // While the next part is on its way: its PATCH is cut in the middle.
          if (held === 2 << 20 && cuts++ === 0) setTimeout(() => relay.cutAll(), 5)
        },
      })
      assert.equal(cuts, 1)
      assert.equal(file.id, sha256(bytes))
      assert.ok(
        sent.some((line) => line.startsWith('HEAD /api/uploads/')),
        `it asked the offset after the cut: ${sent.join(', ')}`,
      )
      const back = await app.inject({ method: 'GET', url: `/api/files/${file.id}` })
      assert.ok(back.rawPayload.equals(bytes))
    } finally {
      await relay.close()
      await app.close()
    }
  })

  it('uploads a ReadableStream of its given size, holding one part at a time', async () => {
    const { app, client } = await serving(8 << 20)
    try {
      const bytes = bytesOf(2_500_000, 6)
      const file = await client.files.upload(streamOf(bytes), {
        size: bytes.length,
        partSize: 1 << 20,
        type: 'image/png',
      })
      assert.equal(file.id, sha256(bytes))
      assert.equal(file.type, 'image/png')
      // A stream smaller than a part, and an empty one, go through the upload too.
      const short = await client.files.upload(streamOf(bytes.subarray(0, 10)), { size: 10 })
      assert.equal(short.id, sha256(bytes.subarray(0, 10)))
      const empty = await client.files.upload(streamOf(new Uint8Array(0)), { size: 0 })
      assert.equal(empty.size, 0)
      await assert.rejects(client.files.upload(streamOf(bytes)), TypeError)
      await assert.rejects(
        client.files.upload(streamOf(bytes.subarray(0, 100)), { size: 200 }),
        /the stream ended after 100 of 200 bytes/,
      )
    } finally {
      await app.close()
    }
  })

  it('an aborted or refused upload removes what the service held of it', async () => {
    const { fetch, sent } = recording()
    const { app, client } = await serving(4 << 20, fetch)
    try {
      const bytes = bytesOf(3 << 20, 2)
      const controller = new AbortController()
      await assert.rejects(
        client.files.upload(new Uint8Array(bytes), {
          partSize: 1 << 20,
          signal: controller.signal,
          onProgress: (held) => {
            if (held === 1 << 20) controller.abort(new Error('the person cancelled'))
          },
        }),
        /the person cancelled/,
      )
      const url = sent.find((line) => line.startsWith('DELETE '))?.slice('DELETE '.length)
      assert.ok(url !== undefined, `the upload was ended: ${sent.join(', ')}`)
      const head = await app.inject({ method: 'HEAD', url, headers: { 'tus-resumable': '1.0.0' } })
      assert.equal(head.statusCode, 404)

      await assert.rejects(
        client.files.upload(new Uint8Array((4 << 20) + 1), { partSize: 1 << 20 }),
        (error: unknown) => error instanceof NotesProblem && error.status === 413,
      )
    } finally {
      await app.close()
    }
  })
})
