import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { FileSweeper } from '../../../src/store/kernel/file-sweep.js'
import { memoryFileStores } from '../../../src/store/memory/memory-file-stores.js'
import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../../src/store/memory/memory-store.js'
import { StoreFullError } from '../../../src/store/types.js'
import { bytesOf, chunked } from '../../support/files.contract.js'

const T0 = 1_700_000_000_000
const ROOM = 'Delete notes or files to make room.'

/** A memory store of `maxBytes` with its files and uploads beside it, and a fixed clock. */
function storeOf(maxBytes: number) {
  const store = new MemoryNoteStore({ maxNotes: 100, maxBytes, now: () => T0, epoch: 'e' })
  return { store, ...memoryFileStores({ store }) }
}

/** The fields of a note whose JSON, with the 13-digit id the clock gives, is `bytes` long. */
function noteOf(bytes: number): { t: string } {
  return { t: 'x'.repeat(bytes - `{"t":"","id":${T0}}`.length) }
}

/** Asserts that `work` is refused as full, with this message and advice. */
async function refused(work: () => unknown, message: string, advice = ROOM): Promise<void> {
  await assert.rejects(
    async () => work(),
    (error: unknown) =>
      error instanceof StoreFullError && error.message === message && error.advice === advice,
  )
}

describe('a memory store with its files: one byte cap for notes and files', () => {
  it('refuses a note that files leave no room for, and a file that notes leave none for', async () => {
    const { store, files } = storeOf(1000)
    const full = 'The store holds its maximum of 1000 bytes of notes and files.'
    const file = await files.files('shared').put('image/png', chunked(bytesOf(600)))
    await refused(() => store.create(noteOf(401)), full)
    assert.deepEqual(store.stats(), { notes: 0, bytes: 0, maxNotes: 100, maxBytes: 1000 })
    store.create(noteOf(400))
    await refused(() => files.files('shared').put('text/plain', chunked(bytesOf(1, 2))), full)
    assert.deepEqual(await files.totals(), { files: 1, bytes: 600 })
    // Deleting the file frees its room for notes; the note's growth fits then.
    assert.equal(await files.files('shared').delete(file.id), true)
    const [note] = JSON.parse(store.list().json) as [{ id: number }]
    assert.ok(!(store.update(note.id, noteOf(1000)) instanceof StoreFullError))
    assert.equal(store.stats().bytes, 1000)
  })

  it('counts the same bytes stored twice once: they pass when the store is full', async () => {
    const { store, files } = storeOf(1000)
    const notebook = files.files('shared')
    const bytes = bytesOf(450)
    await notebook.put('image/png', chunked(bytes))
    store.create(noteOf(550))
    const again = await notebook.put('text/plain', chunked(bytes))
    assert.deepEqual([again.size, again.type], [450, 'image/png'])
    assert.deepEqual(await files.totals(), { files: 1, bytes: 450 })
    const full = 'The store holds its maximum of 1000 bytes of notes and files.'
    // New bytes as long are refused once known; longer ones as soon as they pass the largest.
    await refused(() => notebook.put('image/png', chunked(bytesOf(450, 2))), full)
    let pulled = 0
    async function* counted() {
      for await (const chunk of chunked(bytesOf(2000, 3), 100)) {
        pulled += 1
        yield chunk
      }
    }
    await refused(() => notebook.put('image/png', counted()), full)
    assert.equal(pulled, 5)
    assert.deepEqual(await files.totals(), { files: 1, bytes: 450 })
  })

  it('counts an upload as it grows, once when it becomes a file, and frees it when it goes', async () => {
    const { store, files, uploads } = storeOf(1000)
    const info = { notebook: 'shared', length: 600, type: 'image/png', metadata: '', created: T0 }
    await uploads.create({ ...info, id: 'a'.repeat(22) })
    // Made while the room holds its length: it is refused as it grows, below.
    await uploads.create({ ...info, id: 'b'.repeat(22), length: 800 })
    const bytes = bytesOf(600, 3)
    const room = () => {}
    await uploads.append('a'.repeat(22), 0, chunked(bytes.subarray(0, 500)), room, T0)
    await refused(
      () => store.create(noteOf(501)),
      'The store holds its maximum of 1000 bytes of notes and files.',
    )
    store.create(noteOf(300))
    // Its last bytes fit (500 + 100 + 300), and the file they become is not counted twice.
    await uploads.append('a'.repeat(22), 500, chunked(bytes.subarray(500)), room, T0)
    const file = await files.files('shared').put('image/png', uploads.read('a'.repeat(22)))
    await uploads.finish('a'.repeat(22), file.id)
    await refused(
      () => store.create(noteOf(101)),
      'The store holds its maximum of 1000 bytes of notes and files.',
    )
    assert.equal(await files.files('shared').delete(file.id), true)
    // A length the room cannot hold now (300 of notes) is refused at its creation.
    await refused(
      () => uploads.create({ ...info, id: 'c'.repeat(22), length: 800 }),
      'The store holds its maximum of 1000 bytes of notes and files.',
    )
    assert.equal(await uploads.state('c'.repeat(22)), undefined)
    // An upload refused as it grows keeps what fitted; terminating it gives that back.
    await refused(
      () => uploads.append('b'.repeat(22), 0, chunked(bytesOf(800, 4), 100), room, T0),
      'The store holds its maximum of 1000 bytes of notes and files.',
    )
    assert.equal((await uploads.state('b'.repeat(22)))?.offset, 700)
    await uploads.remove('b'.repeat(22))
    store.create(noteOf(700))
    assert.equal(store.stats().bytes, 1000)
  })

  it('frees the room of a file the sweep removes', async () => {
    const { store, files } = storeOf(1000)
    await files.files('shared').put('image/png', chunked(bytesOf(900)))
    // The files' clock is the real one: the sweep's starts after the upload.
    let now = Date.now()
    const sweeper = new FileSweeper({
      space: files,
      notesOf: () => store,
      graceMs: 1000,
      now: () => now,
    })
    await refused(
      () => store.create(noteOf(101)),
      'The store holds its maximum of 1000 bytes of notes and files.',
    )
    now += 1000
    assert.equal(await sweeper.sweep(), 1)
    store.create(noteOf(1000))
  })

  it('counts every notebook’s files toward the service’s cap, beside their own caps', async () => {
    const notebooks = new MemoryNotebooks({
      maxNotes: 100,
      maxBytes: 1000,
      maxBytesPerNotebook: 800,
      now: () => T0,
      files: { maxNotebookBytes: 700 },
    })
    await notebooks.files.files('user:alice').put('image/png', chunked(bytesOf(700)))
    await refused(
      () => notebooks.files.files('user:alice').put('image/png', chunked(bytesOf(1, 2))),
      'This notebook holds its maximum of 700 bytes of files.',
      'Delete files to make room.',
    )
    await refused(
      () => notebooks.notebook('user:bob').create(noteOf(301)),
      'The service holds its maximum of 1000 bytes of notes and files.',
      'Its room is shared by every notebook: deleting notes or files frees it; try again later.',
    )
    // A notebook's own cap counts its notes alone.
    notebooks.notebook('user:bob').create(noteOf(300))
    await refused(
      () => notebooks.files.files('user:bob').put('image/png', chunked(bytesOf(1, 3))),
      'The service holds its maximum of 1000 bytes of notes and files.',
      'Its room is shared by every notebook: deleting notes or files frees it; try again later.',
    )
    // Removing alice's notebook gives back her files' room.
    notebooks.drop('user:alice')
    await notebooks.files.files('user:bob').put('image/png', chunked(bytesOf(500, 3)))
    notebooks.notebook('user:carol').create(noteOf(200))
    assert.deepEqual(notebooks.stats(), { notes: 2, bytes: 500, maxNotes: 100, maxBytes: 1000 })
  })
})
