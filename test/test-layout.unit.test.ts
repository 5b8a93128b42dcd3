import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { filesUnder, ROOT, reaches, testSources } from './support/test-files.js'

/**
 * The layout of test/: its rooms are src/'s (test/store/journal/ holds the tests of
 * src/store/journal/; the whole service's tests sit in test/ itself), test/support/ holds what
 * tests share (harnesses, clusters, models, contracts, browsers), test/hostile/ the fuzz and soak
 * harnesses and their CLIs, test/container/ the image's tests. A test file that can start a child
 * process (PostgreSQL's initdb and pg_ctl, Chromium through playwright-core, the service, the CLI)
 * is `NAME.test.ts`; every other one is `NAME.unit.test.ts`, the tier `npm run test:unit` runs.
 */

/** Where a test file reaching one of these can start a child process. */
const STARTS_PROCESSES = ['node:child_process', 'child_process', 'playwright-core']

/** The folders of test/ that are not rooms of src/. */
const OWN_FOLDERS = ['test/container', 'test/hostile', 'test/support']

/** Every folder under `folder`, root-relative: 'test/store', 'test/store/journal', ... */
function foldersUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => [`${folder}/${entry.name}`, ...foldersUnder(`${folder}/${entry.name}`)])
}

describe('the layout of test/', () => {
  it('finds the test files and what they reach', () => {
    assert.ok(testSources('all').includes('test/store/journal/store-journal.test.ts'))
    assert.ok(testSources('unit').includes('test/auth/user-tokens.unit.test.ts'))
    assert.deepEqual(reaches('test/support/each-store.ts', STARTS_PROCESSES), [
      'test/support/postgres-cluster.ts',
      'node:child_process',
    ])
    assert.equal(reaches('test/support/helpers.ts', STARTS_PROCESSES), undefined)
  })

  it('has rooms that are rooms of src/', () => {
    const rooms = foldersUnder('test').filter(
      (folder) => !OWN_FOLDERS.some((own) => folder === own || folder.startsWith(`${own}/`)),
    )
    const ofSrc = new Set(foldersUnder('src').map((folder) => folder.replace(/^src\//, 'test/')))
    assert.ok(rooms.includes('test/store/journal'))
    const strays = rooms.filter((room) => !ofSrc.has(room))
    assert.deepEqual(strays, [])
  })

  it('keeps modules that are not test files in test/support/ (or hostile/, container/)', () => {
    const strays = filesUnder('test').filter(
      (path) =>
        !path.endsWith('.test.ts') && !OWN_FOLDERS.some((own) => path.startsWith(`${own}/`)),
    )
    assert.deepEqual(strays, [])
  })

  it('names NAME.test.ts every test file that can start a child process, NAME.unit.test.ts every other', () => {
    const misnamed = testSources('all').flatMap((source) => {
      const chain = reaches(source, STARTS_PROCESSES)
      const unit = source.endsWith('.unit.test.ts')
      if (unit && chain !== undefined) {
        return [`${source} reaches ${chain.join(' -> ')}: name it NAME.test.ts`]
      }
      if (!unit && chain === undefined) {
        return [`${source} starts no child process: name it NAME.unit.test.ts`]
      }
      return []
    })
    assert.deepEqual(misnamed, [])
  })
})
