import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { runDirectoryContract } from '../../support/directory.contract.js'

runDirectoryContract(
  'MemoryNotebooks',
  (options) => new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1 << 20, ...options }),
)
