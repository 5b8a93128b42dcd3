import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import type { FileLimits } from '../../src/store/files.js'
import { JournaledNotebooks } from '../../src/store/journal/journaled-notebooks.js'
import { UploadFolder } from '../../src/store/journal/upload-folder.js'
import { memoryFileStores } from '../../src/store/memory/memory-file-stores.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { SHARED_NOTEBOOK } from '../../src/store/types.js'
import { runFileCapsContract } from '../support/file-caps.contract.js'

const configOf = (limits: FileLimits) => ({
  ...DEFAULT_CONFIG,
  maxFileBytes: limits.maxFileBytes,
  maxFilesBytesPerUser: limits.maxNotebookBytes,
  maxFilesBytes: limits.maxBytes,
})

runFileCapsContract('memory', (limits) => {
  const store = new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 })
  const app = buildApp({ store, ...memoryFileStores({ store }, limits), config: configOf(limits) })
  return { apps: [app, app], close: () => app.close() }
})

runFileCapsContract('DATA_FILE', (limits) => {
  const root = mkdtempSync(join(tmpdir(), 'notes-file-caps-'))
  const path = join(root, 'notes.journal')
  const journal = new JournaledNotebooks({ maxNotes: 100, maxBytes: 1 << 20, path, files: limits })
  const app = buildApp({
    store: journal.notebook(SHARED_NOTEBOOK),
    files: journal.files,
    uploads: new UploadFolder(`${path}.uploads`, journal.files.uploadRoom),
    config: configOf(limits),
  })
  return {
    apps: [app, app],
    close: async () => {
      await app.close()
      await journal.close()
      rmSync(root, { recursive: true, force: true })
    },
  }
})
