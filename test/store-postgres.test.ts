import { after } from 'node:test'
import { PostgresNoteStore } from '../src/store/postgres/store.js'
import { PostgresCluster, postgresAvailable } from './postgres-cluster.js'
import { type ContractStoreOptions, runStoreContract } from './store.contract.js'

if (postgresAvailable('PostgresNoteStore contract')) {
  const cluster = await PostgresCluster.start()
  const url = await cluster.createDatabase()
  const stores: PostgresNoteStore[] = []
  after(async () => {
    await Promise.all(stores.map((store) => store.close()))
    await cluster.destroy()
  })
  runStoreContract(
    'PostgresNoteStore',
    ({ maxNotes = 1_000_000, maxBytes = 1 << 28, now }: ContractStoreOptions) => {
      const store = new PostgresNoteStore({
        url,
        schema: `contract_${stores.length + 1}`,
        maxNotes,
        maxBytes,
        poolSize: 2,
        ...(now === undefined ? {} : { now }),
      })
      stores.push(store)
      return store
    },
  )
}
