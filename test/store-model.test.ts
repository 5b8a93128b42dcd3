import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { MemoryNoteStore } from '../src/store/memory.js'
import { operations, pickId } from './arbitraries.js'
import { NoteModel } from './note-model.js'

describe('MemoryNoteStore against the model', () => {
  it('answers every random sequence of operations exactly as the model does', () => {
    fc.assert(
      fc.property(operations(), (ops) => {
        let t = 1000
        const now = () => t
        const store = new MemoryNoteStore({ maxNotes: 1000, maxBytes: 1 << 24, now })
        const model = new NoteModel(undefined, now)
        for (const op of ops) {
          switch (op.kind) {
            case 'create':
              t += op.tick
              assert.equal(store.create(op.fields).json, model.create(op.fields))
              break
            case 'update': {
              const id = pickId(model.ids(), op.pick)
              const updated = store.update(id, op.fields, op.patch)
              assert.equal(
                updated === undefined || !('json' in updated) ? updated : updated.json,
                model.update(id, op.fields, op.patch),
              )
              break
            }
            case 'delete': {
              const id = pickId(model.ids(), op.pick)
              assert.equal(store.delete(id), model.delete(id))
              break
            }
            case 'get': {
              const id = pickId(model.ids(), op.pick)
              assert.equal(store.get(id)?.json, model.get(id))
              break
            }
            case 'list':
              assert.equal(store.list().json, model.list())
          }
        }
        assert.equal(store.list().json, model.list())
        assert.equal(store.stats().notes, model.notes.length)
        assert.equal(
          store.stats().bytes,
          Buffer.byteLength(model.list()) - 2 - Math.max(0, model.notes.length - 1),
        )
      }),
      { numRuns: 300 },
    )
  })
})
