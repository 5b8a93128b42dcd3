import { describe } from 'node:test'
import { PostgresNoteStore } from '../src/store/postgres/store.js'
import { postgresAvailable, testDatabase } from './postgres-cluster.js'
import { runModelProperty } from './store-model.property.js'

if (postgresAvailable('PostgresNoteStore against the model')) {
  const url = await testDatabase()

  describe('PostgresNoteStore against the model', () => {
    let run = 0
    runModelProperty(
      (now) =>
        new PostgresNoteStore({
          url,
          schema: `model_${++run}`,
          maxNotes: 1000,
          maxBytes: 1 << 24,
          now,
          poolSize: 1,
        }),
      { numRuns: 60, close: (store) => store.close() },
    )
  })
}
