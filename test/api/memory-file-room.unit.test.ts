import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { bytesOf } from '../support/files.contract.js'
import { assertProblem } from '../support/helpers.js'

const T0 = 1_700_000_000_000
const CAP = 4096
const FULL = `The store holds its maximum of ${CAP} bytes of notes and files.`
const TUS = { 'tus-resumable': '1.0.0' }

/** The app over a memory store of CAP bytes, with the files and uploads it makes beside it. */
function memoryApp() {
  const store = new MemoryNoteStore({ maxNotes: 100, maxBytes: CAP, now: () => T0 })
  return buildApp({ store, config: DEFAULT_CONFIG })
}

/** A note body whose stored JSON (with the 13-digit id) is `bytes` long. */
const noteOf = (bytes: number): string =>
  JSON.stringify({ t: 'x'.repeat(bytes - `{"t":"","id":${T0}}`.length) })

describe('the memory store: files count toward MAX_STORE_BYTES with the notes', () => {
  it('refuses a note the files leave no room for, and a file the notes leave none for, until deletes free it', async () => {
    const app = memoryApp()
    const json = { 'content-type': 'application/json' }
    const post = (payload: string) =>
      app.inject({ method: 'POST', url: '/api/note', headers: json, payload })
    const upload = (payload: Buffer) =>
      app.inject({
        method: 'POST',
        url: '/api/files',
        headers: { 'content-type': 'image/png' },
        payload,
      })
    const file = await upload(bytesOf(2000))
    assert.equal(file.statusCode, 201, file.body)
    const { id } = (JSON.parse(file.body) as { data: { id: string } }).data
    assertProblem(await post(noteOf(2097)), 507, `${FULL} Delete notes or files to make room.`)
    assert.equal((await post(noteOf(2096))).statusCode, 200)
    assertProblem(await upload(bytesOf(1, 2)), 507, `${FULL} Delete notes or files to make room.`)
    // The same bytes again are the one file: they count once, so they pass even now.
    const again = await upload(bytesOf(2000))
    assert.equal(again.statusCode, 201)
    assert.equal(again.body, file.body)

    assert.equal((await app.inject({ method: 'DELETE', url: `/api/files/${id}` })).statusCode, 204)
    const createUpload = () =>
      app.inject({
        method: 'POST',
        url: '/api/uploads',
        headers: { ...TUS, 'upload-length': '100' },
      })
    const created = await createUpload()
    assert.equal(created.statusCode, 201)
    const note = await post(noteOf(2000))
    assert.equal(note.statusCode, 200)
    // Notes fill it now: a file is refused, a tus upload at its creation, and one made before
    // as it grows.
    assertProblem(await upload(bytesOf(1, 3)), 507, `${FULL} Delete notes or files to make room.`)
    assertProblem(await createUpload(), 507, `${FULL} Delete notes or files to make room.`)
    const part = await app.inject({
      method: 'PATCH',
      url: created.headers.location as string,
      headers: { ...TUS, 'content-type': 'application/offset+octet-stream', 'upload-offset': '0' },
      payload: bytesOf(100, 4),
    })
    assertProblem(part, 507, `${FULL} Delete notes or files to make room.`)
    const noteId = (JSON.parse(note.body) as { data: { id: number } }).data.id
    assert.equal(
      (await app.inject({ method: 'DELETE', url: `/api/note/${noteId}` })).statusCode,
      200,
    )
    // A deleted note counts until it leaves the trash.
    assertProblem(
      await upload(bytesOf(1, 3)),
      507,
      `${FULL} Delete notes or files, or empty the trash, to make room: deleted notes count until they leave it.`,
    )
    assert.equal((await app.inject({ method: 'DELETE', url: '/api/trash' })).statusCode, 200)
    assert.equal((await upload(bytesOf(2000, 3))).statusCode, 201)
    await app.close()
  })

  it('gives an upload’s room back when it is terminated', async () => {
    const app = memoryApp()
    const created = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: {
        ...TUS,
        'upload-length': '4000',
        'content-type': 'application/offset+octet-stream',
      },
      payload: bytesOf(3000, 5),
    })
    assert.equal(created.statusCode, 201, created.body)
    assert.equal(created.headers['upload-offset'], '3000')
    const post = () =>
      app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { 'content-type': 'application/json' },
        payload: noteOf(1500),
      })
    assertProblem(await post(), 507, `${FULL} Delete notes or files to make room.`)
    const url = created.headers.location as string
    assert.equal((await app.inject({ method: 'DELETE', url, headers: TUS })).statusCode, 204)
    assert.equal((await post()).statusCode, 200)
    await app.close()
  })

  it('starts with the whole room on a new store: what a restart of the memory store gives', async () => {
    const first = memoryApp()
    const payload = bytesOf(4000, 6)
    const headers = { 'content-type': 'image/png' }
    assert.equal(
      (await first.inject({ method: 'POST', url: '/api/files', headers, payload })).statusCode,
      201,
    )
    await first.close()
    // Nothing of the memory store outlives it, its files' room included.
    const second = memoryApp()
    assert.equal(
      (await second.inject({ method: 'POST', url: '/api/files', headers, payload })).statusCode,
      201,
    )
    await second.close()
  })
})
