import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import fc from 'fast-check'
import { PostgresNoteStore } from '../src/store/postgres/store.js'
import { operations, pickId } from './arbitraries.js'
import { NoteModel } from './note-model.js'
import { PostgresCluster, postgresAvailable } from './postgres-cluster.js'

if (postgresAvailable('PostgresNoteStore against the model')) {
  const cluster = await PostgresCluster.start()
  const url = await cluster.createDatabase()
  after(async () => {
    await cluster.destroy()
  })

  describe('PostgresNoteStore against the model', () => {
    it('answers every random sequence of operations exactly as the model does', async () => {
      let run = 0
      await fc.assert(
        fc.asyncProperty(operations(), async (ops) => {
          let t = 1000
          const now = () => t
          const store = new PostgresNoteStore({
            url,
            schema: `model_${++run}`,
            maxNotes: 1000,
            maxBytes: 1 << 24,
            now,
            poolSize: 1,
          })
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
            await store.close()
          }
        }),
        { numRuns: 60 },
      )
    })
  })
}
