import { describe } from 'node:test'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { pooledStore } from '../../support/schema-pool.js'
import { runModelProperty } from '../../support/store-model.property.js'

if (postgresAvailable('PostgresNoteStore against the model')) {
  const url = await testDatabase()

  describe('PostgresNoteStore against the model', () => {
    runModelProperty(
      (now) =>
        pooledStore(
          url,
          undefined,
          (schema) =>
            new PostgresNoteStore({
              url,
              schema,
              maxNotes: 1000,
              maxBytes: 1 << 24,
              now,
              poolSize: 1,
            }),
        ),
      { numRuns: 60, close: (store) => store.close() },
    )
  })
}
