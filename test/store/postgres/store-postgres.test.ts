import { after, afterEach } from 'node:test'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { type ArchiveStoreOptions, runArchiveContract } from '../../support/archive.contract.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { pooledStore } from '../../support/schema-pool.js'
import { type ContractStoreOptions, runStoreContract } from '../../support/store.contract.js'

if (postgresAvailable('PostgresNoteStore contract')) {
  const url = await testDatabase()
  const stores: PostgresNoteStore[] = []
  // Each case's stores are closed after it, so that the cases' connections never add up past the
  // cluster's max_connections.
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()))
  })
  after(async () => {
    await Promise.all(stores.map((store) => store.close()))
  })
  runStoreContract(
    'PostgresNoteStore',
    ({ maxNotes = 1_000_000, maxBytes = 1 << 28, now, historyLimit }: ContractStoreOptions) => {
      const store = pooledStore(
        url,
        undefined,
        (schema) =>
          new PostgresNoteStore({
            url,
            schema,
            maxNotes,
            maxBytes,
            poolSize: 2,
            ...(now === undefined ? {} : { now }),
            ...(historyLimit === undefined ? {} : { historyLimit }),
          }),
      )
      stores.push(store)
      return store
    },
  )
  runArchiveContract(
    'PostgresNoteStore',
    ({ maxNotes = 1_000_000, maxBytes = 1 << 28, now, archive }: ArchiveStoreOptions) => {
      const store = pooledStore(
        url,
        undefined,
        (schema) =>
          new PostgresNoteStore({
            url,
            schema,
            maxNotes,
            maxBytes,
            poolSize: 2,
            ...(now === undefined ? {} : { now }),
            archive,
          }),
      )
      stores.push(store)
      return store
    },
  )
}
