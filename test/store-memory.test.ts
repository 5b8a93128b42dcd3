import { MemoryNoteStore } from '../src/store/memory.js'
import { PromisedNoteStore } from './promised-store.js'
import { type ContractStoreOptions, runStoreContract } from './store.contract.js'

const options = ({
  maxNotes = 1_000_000,
  maxBytes = 1 << 28,
  now,
  historyLimit,
}: ContractStoreOptions) => ({
  maxNotes,
  maxBytes,
  ...(now === undefined ? {} : { now }),
  ...(historyLimit === undefined ? {} : { historyLimit }),
})

runStoreContract('MemoryNoteStore', (o) => new MemoryNoteStore(options(o)))
runStoreContract(
  'PromisedNoteStore (asynchronous wrapper)',
  (o) => new PromisedNoteStore(options(o)),
)
