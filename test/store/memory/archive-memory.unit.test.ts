import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../../src/store/memory/memory-store.js'
import { type ArchiveStoreOptions, runArchiveContract } from '../../support/archive.contract.js'
import { PromisedNoteStore } from '../../support/promised-store.js'

const options = ({
  maxNotes = 1_000_000,
  maxBytes = 1 << 28,
  now,
  archive,
}: ArchiveStoreOptions) => ({
  maxNotes,
  maxBytes,
  ...(now === undefined ? {} : { now }),
  ...(archive === undefined ? {} : { archive }),
})

runArchiveContract('MemoryNoteStore', (o) => new MemoryNoteStore(options(o)))
runArchiveContract(
  'PromisedNoteStore (asynchronous wrapper)',
  (o) => new PromisedNoteStore(options(o)),
)
// A notebook beside another that holds notes and history: the bounds are its own, the history's
// bytes the service's.
runArchiveContract('a notebook of MemoryNotebooks', (o) => {
  const { maxNotes, maxBytes, ...rest } = options(o)
  const notebooks = new MemoryNotebooks({
    maxNotes: 2 * maxNotes,
    maxBytes: 2 * maxBytes,
    maxNotesPerNotebook: maxNotes,
    maxBytesPerNotebook: maxBytes,
    ...rest,
  })
  const other = notebooks.notebook('other')
  const note = other.create({ other: true })
  if (o.archive?.maxHistoryBytes === undefined)
    other.update(JSON.parse(note.json).id, { edited: 1 })
  return notebooks.notebook('mine')
})
