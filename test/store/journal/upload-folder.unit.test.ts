import assert from 'node:assert/strict'
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { UploadFolder } from '../../../src/store/journal/upload-folder.js'
import { UploadBusyError } from '../../../src/store/uploads.js'
import { bytesOf, chunked } from '../../support/files.contract.js'
import { readAll, runUploadContract, T0, uploadInfo } from '../../support/uploads.contract.js'

runUploadContract('UploadFolder (beside a DATA_FILE)', () => {
  const root = mkdtempSync(join(tmpdir(), 'notes-upload-folder-'))
  const folder = join(root, 'notes.journal.uploads')
  return {
    staging: new UploadFolder(folder),
    reopen: () => new UploadFolder(folder),
    close: async () => rmSync(root, { recursive: true, force: true }),
  }
})

describe('UploadFolder: what only a folder can get wrong', () => {
  const folderOf = () => {
    const root = mkdtempSync(join(tmpdir(), 'notes-upload-folder-'))
    after(() => rmSync(root, { recursive: true, force: true }))
    return join(root, 'notes.journal.uploads')
  }

  it('removes at start-up the bytes of an upload that has no record (a crash inside create)', () => {
    const folder = folderOf()
    new UploadFolder(folder)
    const lone = join(folder, 'AAAAAAAAAAAAAAAAAAAAAA.part')
    writeFileSync(lone, 'bytes of nothing')
    new UploadFolder(folder)
    assert.equal(existsSync(lone), false)
  })

  it('keeps an upload removed while a part was being written removed, its bytes with it', async () => {
    const folder = folderOf()
    const staging = new UploadFolder(folder)
    const info = uploadInfo(1000)
    await staging.create(info)
    let removed!: () => void
    const removing = new Promise<void>((resolve) => {
      removed = resolve
    })
    async function* body() {
      yield bytesOf(300)
      // The upload expires (or its notebook goes) while this part is on its way.
      await staging.remove(info.id)
      removed()
      yield bytesOf(300, 2)
    }
    // The append learns it at its next part: what it wrote goes with the upload.
    await assert.rejects(
      staging.append(info.id, 0, body(), () => {}, T0 + 1),
      UploadBusyError,
    )
    await removing
    assert.equal(await staging.state(info.id), undefined)
    assert.deepEqual(readdirSync(folder), [])
    assert.equal(await new UploadFolder(folder).state(info.id), undefined)
  })

  it('serves an upload its bytes up to its length, never a longer tail', async () => {
    const folder = folderOf()
    const staging = new UploadFolder(folder)
    const info = uploadInfo(600)
    await staging.create(info)
    await staging.append(info.id, 0, chunked(bytesOf(600, 3), 250), () => {}, T0 + 1)
    // Bytes past its length on disk (a copy tool, a disk repaired): never part of the file.
    appendFileSync(join(folder, `${info.id}.part`), 'more')
    assert.ok((await readAll(staging.read(info.id))).equals(bytesOf(600, 3)))
  })
})
