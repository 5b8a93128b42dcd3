import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { UploadFolder } from '../../../src/store/journal/upload-folder.js'
import { runUploadContract } from '../../support/uploads.contract.js'

runUploadContract('UploadFolder (beside a DATA_FILE)', () => {
  const root = mkdtempSync(join(tmpdir(), 'notes-upload-folder-'))
  const folder = join(root, 'notes.journal.uploads')
  return {
    staging: new UploadFolder(folder),
    reopen: () => new UploadFolder(folder),
    close: async () => rmSync(root, { recursive: true, force: true }),
  }
})
