import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { IdSpace } from '../../../src/store/kernel/id-space.js'
import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../../src/store/memory/memory-store.js'
import { type NoteStore, StoreFullError } from '../../../src/store/types.js'
import { runNotebooksContract } from '../../support/notebooks.contract.js'
import { runNotebooksModelProperty } from '../../support/notebooks-model.property.js'
import { type ContractStoreOptions, runStoreContract } from '../../support/store.contract.js'

runNotebooksContract(
  'MemoryNotebooks',
  (options) => new MemoryNotebooks({ ...defaults, ...options }),
)

const defaults = { maxNotes: 1 << 24, maxBytes: 1 << 24 }

describe('MemoryNotebooks against three models', () => {
  runNotebooksModelProperty((options) => new MemoryNotebooks(options), { numRuns: 300 })
})

/**
 * Notes for notebook 'b' that would show in 'a' if anything leaked: matches for the contract's
 * searches ('bread'), an id patched to the string '7', and the contract's idempotency keys with
 * other bodies. Created while the clock says -1000, so that their ids (-1000, -999, ...) are below
 * every id the contract expects 'a' to give. Fewer when the caps are small.
 */
function fillOther(store: NoteStore): void {
  const writes = [
    () => store.create({ title: 'Buy BREAD', t: 'bread', q: 'say "bread"\n' }),
    () => store.createOnce('k1', 'other body', { bread: 'brEad crumbs' }),
    () => store.createOnce('k-1', 'other body', { deep: [{ x: ['wholebread'] }] }),
    () => store.update(-1000, { id: '7' }),
    () => store.create({ t: 'ſtraße 100%', id: 'mine' }),
  ]
  for (const write of writes) {
    try {
      write()
    } catch (error) {
      if (!(error instanceof StoreFullError)) throw error
    }
  }
}

runStoreContract(
  'a notebook of MemoryNotebooks, while another notebook holds notes',
  (o: ContractStoreOptions) => {
    const maxNotes = o.maxNotes ?? 1_000_000
    const maxBytes = o.maxBytes ?? 1 << 28
    const clock = o.now ?? Date.now
    let filling = true
    const notebooks = new MemoryNotebooks({
      // The notebook's caps are the contract's; the service's leave room for 'b' beside them.
      maxNotes: 2 * maxNotes,
      maxBytes: 2 * maxBytes,
      maxNotesPerNotebook: maxNotes,
      maxBytesPerNotebook: maxBytes,
      now: () => (filling ? -1000 : clock()),
      ...(o.historyLimit === undefined ? {} : { historyLimit: o.historyLimit }),
    })
    fillOther(notebooks.notebook('b'))
    filling = false
    return notebooks.notebook('a')
  },
)

describe('MemoryNotebooks', () => {
  it("caps a notebook at the service's caps when no cap of its own is given", () => {
    const notebooks = new MemoryNotebooks({ maxNotes: 2, maxBytes: 100, now: () => 1 })
    assert.deepEqual(notebooks.notebook('a').stats(), {
      notes: 0,
      bytes: 0,
      maxNotes: 2,
      maxBytes: 100,
    })
    notebooks.notebook('a').create({})
    notebooks.notebook('a').create({})
    assert.throws(
      () => notebooks.notebook('a').create({}),
      new StoreFullError('This notebook holds its maximum of 2 notes.'),
    )
  })

  it('gives each notebook an epoch of its own', () => {
    const notebooks = new MemoryNotebooks(defaults)
    const epochs = Array.from({ length: 500 }, (_, n) => {
      const token = notebooks.notebook(String(n)).version()
      return token.slice(0, token.lastIndexOf('.'))
    })
    assert.equal(new Set(epochs).size, 500)
    assert.equal(
      epochs.every((epoch) => /^[0-9a-z]+$/.test(epoch)),
      true,
    )
  })

  it('leaves a MemoryNoteStore made alone with ids and caps of its own', () => {
    const one = new MemoryNoteStore({ maxNotes: 1, maxBytes: 100, now: () => 1000 })
    const two = new MemoryNoteStore({ maxNotes: 1, maxBytes: 100, now: () => 1000 })
    assert.equal(one.create({}).json, '{"id":1000}')
    assert.equal(two.create({}).json, '{"id":1000}')
    assert.throws(
      () => one.create({}),
      new StoreFullError('The store holds its maximum of 1 notes.'),
    )
    assert.throws(
      () => two.update(1000, { t: 'x'.repeat(100) }),
      new StoreFullError('The store holds its maximum of 100 bytes of notes.'),
    )
  })
})

describe('IdSpace', () => {
  it('steps over ids that moves hold, forgets those that creates have passed, and frees released ones', () => {
    const ids = new IdSpace()
    const create = (now: number) => {
      const id = ids.next(now)
      ids.give(id)
      return id
    }
    assert.equal(create(1000), 1000)
    // 200 notes moved ahead of the creates, to every even id from 1002 to 1400: well past the
    // point where counts that no create can meet again are swept.
    for (let id = 1002; id <= 1400; id += 2) assert.equal(ids.hold(id), true)
    assert.equal(ids.hold(1002), false, 'a second holder of 1002')
    assert.deepEqual([create(1000), create(1000), create(1000)], [1001, 1003, 1005])
    assert.equal(create(1301), 1301)
    for (let id = 1500; id < 1600; id++) ids.hold(id)
    assert.deepEqual([create(1000), create(1000)], [1303, 1305])
    // 1002 has two holders: one leaving does not free it, but creates passed it long ago anyway.
    ids.release(1002)
    ids.release(1398)
    assert.deepEqual([create(1396), create(1396), create(1396)], [1397, 1398, 1399])
    assert.equal(create(1499), 1499)
    assert.equal(create(1499), 1600)
    assert.equal(create(1000), 1601)
  })
})
