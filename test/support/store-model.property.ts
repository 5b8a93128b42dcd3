import assert from 'node:assert/strict'
import { it } from 'node:test'
import fc from 'fast-check'
import type { NoteStore } from '../../src/store/types.js'
import { operations, pickId } from './arbitraries.js'
import { NoteModel } from './note-model.js'

/**
 * The model-based property every NoteStore must pass: random sequences of operations, each
 * answered exactly as the model answers it. `makeStore` gets the clock the model uses; `close`
 * ends a store that holds connections.
 */
export function runModelProperty<S extends NoteStore>(
  makeStore: (now: () => number) => S,
  options: { numRuns: number; close?: (store: S) => Promise<void> },
): void {
  it('answers every random sequence of operations exactly as the model does', async () => {
    await fc.assert(
      fc.asyncProperty(operations(), async (ops) => {
        let t = 1000
        const now = () => t
        const store = makeStore(now)
        const model = new NoteModel(undefined, now)
        try {
          for (const op of ops) {
            switch (op.kind) {
              case 'create':
                t += op.tick
                assert.equal((await store.create(op.fields)).json, model.create(op.fields))
                break
              case 'update': {
                const id = pickId(model.ids(), op.pick)
                const updated = await store.update(id, op.fields, op.patch)
                assert.equal(
                  updated === undefined || !('json' in updated) ? updated : updated.json,
                  model.update(id, op.fields, op.patch),
                )
                break
              }
              case 'delete': {
                const id = pickId(model.ids(), op.pick)
                assert.equal(await store.delete(id), model.delete(id))
                break
              }
              case 'get': {
                const id = pickId(model.ids(), op.pick)
                assert.equal((await store.get(id))?.json, model.get(id))
                break
              }
              case 'list':
                assert.equal((await store.list()).json, model.list())
            }
          }
          assert.equal((await store.list()).json, model.list())
          const stats = await store.stats()
          assert.equal(stats.notes, model.notes.length)
          assert.equal(
            stats.bytes,
            Buffer.byteLength(model.list()) - 2 - Math.max(0, model.notes.length - 1),
          )
        } finally {
          await options.close?.(store)
        }
      }),
      { numRuns: options.numRuns },
    )
  })
}
