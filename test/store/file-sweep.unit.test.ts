import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { collectIds, FileSweeper } from '../../src/store/kernel/file-sweep.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { bytesOf, chunked } from '../support/files.contract.js'

const HOUR = 3_600_000
const NB = 'user:ann'

function setUp() {
  const clock = { t: 1_800_000_000_000 }
  const now = () => clock.t
  const notebooks = new MemoryNotebooks({
    maxNotes: 1000,
    maxBytes: 1 << 20,
    now,
    archive: { trashMs: 1000 * HOUR },
  })
  const sweeper = () =>
    new FileSweeper({
      space: notebooks.files,
      notesOf: (name) => notebooks.notebook(name),
      graceMs: 24 * HOUR,
      now,
    })
  const put = async (seed: number) =>
    (await notebooks.files.files(NB).put('image/png', chunked(bytesOf(100, seed)))).id
  const held = async () => (await notebooks.files.files(NB).list(100)).files.map((f) => f.id)
  return { clock, notebooks, sweeper, put, held, notes: notebooks.notebook(NB) }
}

describe('files no note refers to', () => {
  it('finds every id a text holds, in a longer run of hex digits too', () => {
    const id = `${'a'.repeat(63)}b`
    const ids = new Set<string>()
    collectIds(`{"src":"/api/files/${id}","x":"0${id}f"}`, ids)
    assert.ok(ids.has(id))
    assert.equal(collectIds('{"short":"abc"}', new Set()), undefined)
  })

  it('removes a file no note refers to once its grace has passed since its upload', async () => {
    const { clock, sweeper, put, held } = setUp()
    const sweep = sweeper()
    const id = await put(1)
    clock.t += 23 * HOUR
    assert.equal(await sweep.sweep(), 0)
    assert.deepEqual(await held(), [id])
    clock.t += HOUR
    assert.equal(await sweep.sweep(), 1)
    assert.deepEqual(await held(), [])
  })

  it('gives a file uploaded again its grace anew', async () => {
    const { clock, sweeper, put, held } = setUp()
    const sweep = sweeper()
    const id = await put(7)
    clock.t += 23 * HOUR
    // The same bytes again, for a note about to refer to them: not removed under it an hour on.
    assert.equal(await put(7), id)
    clock.t += HOUR
    assert.equal(await sweep.sweep(), 0)
    assert.deepEqual(await held(), [id])
    clock.t += 23 * HOUR
    assert.equal(await sweep.sweep(), 1)
    assert.deepEqual(await held(), [])
  })

  it('keeps a file a note or the trash refers to, and removes it the grace after the last reference went', async () => {
    const { clock, sweeper, put, held, notes } = setUp()
    const sweep = sweeper()
    const id = await put(2)
    const other = await put(3)
    const note = notes.create({ body: { images: [`see ${id} here`] } })
    notes.create({ cover: `/api/files/${other}` })
    const noteId = (JSON.parse(note.json) as { id: number }).id
    clock.t += 48 * HOUR
    assert.equal(await sweep.sweep(), 0)
    // In the trash it still counts: a note put back finds its files.
    notes.delete(noteId)
    clock.t += 48 * HOUR
    assert.equal(await sweep.sweep(), 0)
    notes.purge(noteId)
    clock.t += 23 * HOUR
    assert.equal(
      await sweep.sweep(),
      0,
      'the grace runs from the last sweep that saw it referred to',
    )
    clock.t += HOUR
    assert.equal(await sweep.sweep(), 1)
    assert.deepEqual(await held(), [other])
  })

  it('after a restart, keeps a file the grace from the start-up', async () => {
    const { clock, sweeper, put, held } = setUp()
    const id = await put(4)
    clock.t += 100 * HOUR
    const restarted = sweeper()
    assert.equal(await restarted.sweep(), 0)
    clock.t += 24 * HOUR
    assert.equal(await restarted.sweep(), 1)
    assert.deepEqual(await held(), [])
    assert.notEqual(id, undefined)
  })

  it('removes nothing from a notebook written while its notes were read', async () => {
    const { clock, notebooks, put, held, notes } = setUp()
    const id = await put(5)
    clock.t += 48 * HOUR
    let wrote = false
    const sweep = new FileSweeper({
      space: notebooks.files,
      notesOf: () =>
        new Proxy(notes, {
          get(target, key) {
            // A note that refers to the file arrives while the sweep reads the trash.
            if (key === 'trash' && !wrote) {
              wrote = true
              target.create({ picture: id })
            }
            const value = Reflect.get(target, key) as unknown
            return typeof value === 'function' ? value.bind(target) : value
          },
        }),
      graceMs: 24 * HOUR,
      now: () => clock.t,
    })
    assert.equal(await sweep.sweep(), 0)
    assert.deepEqual(await held(), [id])
    assert.equal(await sweep.sweep(), 0, 'the next sweep reads the new note')
    assert.deepEqual(await held(), [id])
  })
})
