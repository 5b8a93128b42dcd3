import { describe } from 'node:test'
import { MemoryNoteStore } from '../../../src/store/memory/memory-store.js'
import { runModelProperty } from '../../support/store-model.property.js'

describe('MemoryNoteStore against the model', () => {
  runModelProperty((now) => new MemoryNoteStore({ maxNotes: 1000, maxBytes: 1 << 24, now }), {
    numRuns: 300,
  })
})
