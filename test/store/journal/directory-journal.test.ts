import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { encodeRecord } from '../../../src/durable/record-frame.js'
import { isRefusal, notebookStore, type Refusal } from '../../../src/store/directory.js'
import { JournalOpenError } from '../../../src/store/journal/journal-open-error.js'
import {
  JournaledNotebooks,
  type JournaledNotebooksOptions,
} from '../../../src/store/journal/journaled-notebooks.js'
import type { Notebooks } from '../../../src/store/types.js'
import { runDirectoryContract } from '../../support/directory.contract.js'

/**
 * The directory on DATA_FILE: every act is a record of the journal, durable before it is
 * answered, kept by a compaction, and a removed notebook's notes stay removed.
 */

const root = mkdtempSync(join(tmpdir(), 'notes-journal-directory-'))
const opened: JournaledNotebooks[] = []
after(async () => {
  await Promise.allSettled(opened.map((journal) => journal.close()))
  rmSync(root, { recursive: true, force: true })
})
let files = 0
const freshPath = () => join(root, `directory-${++files}.journal`)

function open(options: Partial<JournaledNotebooksOptions> & { path: string }): JournaledNotebooks {
  const journal = new JournaledNotebooks({ maxNotes: 1 << 20, maxBytes: 1 << 26, ...options })
  opened.push(journal)
  return journal
}

/** What each journal the contract made was opened with, to open its file again. */
const optionsOf = new WeakMap<Notebooks, JournaledNotebooksOptions>()

runDirectoryContract(
  'JournaledNotebooks',
  (options) => {
    const path = freshPath()
    const journal = open({ ...options, path })
    optionsOf.set(journal, { maxNotes: 1 << 20, maxBytes: 1 << 26, ...options, path })
    return journal
  },
  async (notebooks) => {
    const options = optionsOf.get(notebooks) as JournaledNotebooksOptions
    await (notebooks as JournaledNotebooks).close()
    return open(options)
  },
)

/** 2027-01-15T08:00:00Z, as the contract's invitations. */
const NOW = 1_800_000_000_000
const DAY = 86_400_000

function ok<T>(value: T | Refusal): T {
  if (isRefusal(value)) assert.fail(`refused: ${JSON.stringify(value)}`)
  return value as T
}

describe('JournaledNotebooks: the directory across a compaction', () => {
  it('keeps every notebook, member and invitation, and none of the notes of a removed one', async () => {
    const path = freshPath()
    let journal = open({ path, compactMinBytes: 4096, historyLimit: 10 })
    const { directory } = journal
    const ann = await directory.defaultOf('ann')
    const kept = ok(await directory.create('ann', 'Kept'))
    ok(await directory.setRole('ann', kept.id, 'bob', 'editor'))
    ok(await directory.setRole('ann', kept.id, 'cat', 'viewer'))
    const catSince = (await directory.access('cat', kept.id))?.since
    const invite = ok(
      await directory.invite('ann', kept.id, { role: 'viewer', expires: NOW + DAY, uses: 3 }),
    )
    const withdrawn = ok(
      await directory.invite('ann', kept.id, { role: 'owner', expires: NOW + DAY, uses: 1 }),
    )
    assert.equal(await directory.withdraw('ann', kept.id, withdrawn.id), true)
    ok(await directory.redeem('dan', invite.token, NOW))
    const gone = ok(await directory.create('ann', 'Gone'))
    const goneNotes = journal.writerFor(notebookStore(gone.id), 'ann')
    for (let n = 0; n < 5; n++) await goneNotes.create({ text: `gone-note-${n}` })
    const note = await journal.writerFor(notebookStore(kept.id), 'bob').create({ text: 'kept' })
    assert.equal(journal.stats().notes, 6)
    ok(await directory.remove('ann', gone.id))
    assert.equal(journal.stats().notes, 1)
    assert.match(readFileSync(path, 'latin1'), /gone-note-4/)

    // Past 4 KiB and twice the notes, the next write compacts: the file shrinks.
    const id = (JSON.parse(note.json) as { id: number }).id
    const bob = journal.writerFor(notebookStore(kept.id), 'bob')
    let compacted = false
    for (let i = 0; i < 200 && !compacted; i++) {
      const before = journal.fileBytes
      await bob.update(id, { text: 'kept', i, pad: 'x'.repeat(100) })
      compacted = journal.fileBytes < before
    }
    assert.ok(compacted, 'compacted')
    const file = readFileSync(path, 'latin1')
    assert.doesNotMatch(file, /gone-note/)
    assert.doesNotMatch(file, /"t":"remove"/)
    // An act after the compaction goes on the compacted file.
    ok(await directory.rename('ann', kept.id, 'Kept on'))
    const seen = journal.notebook(notebookStore(kept.id)).list().json
    const stats = journal.stats()
    assert.equal(stats.notes, 1)
    await journal.close()

    journal = open({ path, compactMinBytes: 4096, historyLimit: 10 })
    const again = journal.directory
    assert.equal(await again.defaultOf('ann'), ann)
    assert.deepEqual(await again.list('ann'), [
      { id: ann, name: 'My notes', role: 'owner', members: 1 },
      { id: kept.id, name: 'Kept on', role: 'owner', members: 4 },
    ])
    assert.equal((await again.access('cat', kept.id))?.since, catSince)
    assert.match(readFileSync(path, 'latin1'), new RegExp(`"since":"${catSince}"`))
    assert.deepEqual(await again.members('cat', kept.id), [
      { user: 'ann', role: 'owner' },
      { user: 'bob', role: 'editor' },
      { user: 'cat', role: 'viewer' },
      { user: 'dan', role: 'viewer' },
    ])
    assert.deepEqual(await again.invites('ann', kept.id, NOW), [
      { id: invite.id, role: 'viewer', expires: NOW + DAY, uses: 2 },
    ])
    assert.deepEqual(await again.redeem('eve', withdrawn.token, NOW), { refused: 'not-found' })
    assert.equal(ok(await again.redeem('eve', invite.token, NOW)).role, 'viewer')
    assert.equal(await again.access('ann', gone.id), undefined)
    assert.equal(journal.notebook(notebookStore(kept.id)).list().json, seen)
    assert.equal(journal.notebook(notebookStore(gone.id)).list().json, '[]')
    assert.deepEqual(journal.stats(), stats)
  })

  it('drops the notes of a removed notebook at its record when replaying an uncompacted journal', async () => {
    const path = freshPath()
    let journal = open({ path, maxNotes: 3 })
    const gone = ok(await journal.directory.create('ann', 'Gone'))
    const writer = journal.writerFor(notebookStore(gone.id), 'ann')
    for (let n = 0; n < 3; n++) await writer.create({ n })
    ok(await journal.directory.remove('ann', gone.id))
    // The room they held is the service's again: three more notes fit under maxNotes 3.
    const ann = journal.writerFor('user:ann', 'ann')
    for (let n = 0; n < 3; n++) await ann.create({ n })
    await journal.close()
    journal = open({ path, maxNotes: 3 })
    assert.equal(journal.stats().notes, 3)
    assert.equal(journal.notebook(notebookStore(gone.id)).list().json, '[]')
    assert.equal(JSON.parse(journal.notebook('user:ann').list().json).length, 3)
  })
})

describe('JournaledNotebooks: a membership an older release wrote down', () => {
  it('opens, not knowing where it began, and takes the first read as its start (written down by a compaction); one made since is kept as it was', async () => {
    const path = freshPath()
    let journal = open({ path })
    const nb = ok(await journal.directory.create('ann', 'Old'))
    await journal.notebook(notebookStore(nb.id)).create({ before: 'bob' })
    ok(await journal.directory.setRole('ann', nb.id, 'bob', 'viewer'))
    const bobSince = (await journal.directory.access('bob', nb.id))?.since
    assert.equal(bobSince, journal.notebook(notebookStore(nb.id)).version())
    await journal.close()
    // A join as the release before wrote it: no "since".
    appendFileSync(
      path,
      encodeRecord(
        JSON.stringify({ t: 'dir', r: [{ t: 'role', id: nb.id, user: 'dan', role: 'viewer' }] }),
      ),
    )
    journal = open({ path, compactMinBytes: 4096, historyLimit: 10 })
    await journal.notebook(notebookStore(nb.id)).create({ after: 'dan' })
    // Not known: it began before now, and now stands in for it, the same on every read.
    const danSince = journal.notebook(notebookStore(nb.id)).version()
    assert.notEqual(danSince, bobSince)
    assert.deepEqual(await journal.directory.access('dan', nb.id), {
      id: nb.id,
      store: notebookStore(nb.id),
      role: 'viewer',
      since: danSince,
    })
    await journal.notebook(notebookStore(nb.id)).create({ later: 'dan' })
    assert.equal((await journal.directory.access('dan', nb.id))?.since, danSince)
    assert.equal((await journal.directory.access('bob', nb.id))?.since, bobSince)
    // A compaction writes it down.
    const writer = journal.writerFor(notebookStore(nb.id), 'ann')
    const note = await writer.create({ pad: '' })
    const id = (JSON.parse(note.json) as { id: number }).id
    let compacted = false
    for (let i = 0; i < 200 && !compacted; i++) {
      const before = journal.fileBytes
      await writer.update(id, { i, pad: 'x'.repeat(100) })
      compacted = journal.fileBytes < before
    }
    assert.ok(compacted, 'compacted')
    await journal.close()
    journal = open({ path })
    assert.equal((await journal.directory.access('dan', nb.id))?.since, danSince)
    assert.notEqual(journal.notebook(notebookStore(nb.id)).version(), danSince)
    // Joined again: known from then on.
    assert.equal(await journal.directory.removeMember('dan', nb.id, 'dan'), true)
    ok(await journal.directory.setRole('ann', nb.id, 'dan', 'editor'))
    assert.equal(
      (await journal.directory.access('dan', nb.id))?.since,
      journal.notebook(notebookStore(nb.id)).version(),
    )
  })
})

describe('JournaledNotebooks: a damaged directory record', () => {
  it('refuses to open, naming the byte where the record starts', async () => {
    const path = freshPath()
    const journal = open({ path })
    await journal.directory.create('ann', 'Fine')
    await journal.close()
    const offset = statSync(path).size
    appendFileSync(path, encodeRecord('{"t":"dir","r":[{"t":"grant","id":"x"}]}'))
    appendFileSync(path, encodeRecord('{"t":"dir","r":[]}'))
    assert.throws(
      () => open({ path }),
      (err) =>
        err instanceof JournalOpenError &&
        err.message ===
          `DATA_FILE ${path} is damaged at byte ${offset}: a directory change of type "grant"; restore it from a backup or move it away.`,
    )
  })
})

/** Makes notebooks, members and invitations until killed, a line for each once answered. */
const CHILD = `
const { JournaledNotebooks } = await import(process.argv[1])
const journal = new JournaledNotebooks({ path: process.argv[2], maxNotes: 1000, maxBytes: 1 << 20 })
const { directory } = journal
for (let i = 0; ; i++) {
  const owner = 'owner-' + i
  const notebook = await directory.create(owner, 'Crash ' + i)
  process.stdout.write(JSON.stringify({ notebook: notebook.id, owner }) + '\\n')
  const member = await directory.setRole(owner, notebook.id, 'member-' + i, 'editor')
  process.stdout.write(JSON.stringify({ member: member.user, notebook: notebook.id, owner }) + '\\n')
  const invite = await directory.invite(owner, notebook.id, { role: 'viewer', expires: ${NOW + DAY}, uses: 2 })
  process.stdout.write(JSON.stringify({ invite: invite.id, token: invite.token, notebook: notebook.id, owner }) + '\\n')
}
`

interface Acknowledged {
  notebook: string
  owner: string
  member?: string
  invite?: string
  token?: string
}

describe('JournaledNotebooks: the directory across kill -9', () => {
  it('keeps every act that was answered', async () => {
    const path = freshPath()
    const module = new URL('../../../src/store/journal/journaled-notebooks.js', import.meta.url)
    const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD, module.href, path], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise((resolve) => child.on('exit', resolve))
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
    })
    const lines = () => output.split('\n').slice(0, -1)
    const deadline = Date.now() + 20_000
    while (lines().length < 15 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 100))
    child.kill('SIGKILL')
    await exited
    const acknowledged = lines().map((line) => JSON.parse(line) as Acknowledged)
    assert.ok(acknowledged.length >= 15, `${acknowledged.length} acts answered`)

    const journal = open({ path, maxNotes: 1000, maxBytes: 1 << 20 })
    const { directory } = journal
    for (const act of acknowledged) {
      const { notebook, owner } = act
      if (act.member !== undefined) {
        const access = await directory.access(act.member, notebook)
        // Where the membership began, as its record wrote it down.
        assert.match(access?.since ?? '', /^[0-9a-z]+\.0$/)
        assert.deepEqual(
          { ...access, since: '' },
          { id: notebook, store: notebookStore(notebook), role: 'editor', since: '' },
        )
      } else if (act.invite !== undefined) {
        assert.deepEqual(await directory.invites(owner, notebook, NOW), [
          { id: act.invite, role: 'viewer', expires: NOW + DAY, uses: 2 },
        ])
        assert.equal(ok(await directory.redeem('joiner', act.token as string, NOW)).id, notebook)
      } else {
        const listed = (await directory.list(owner)).map(({ id, role }) => ({ id, role }))
        assert.deepEqual(listed.slice(1), [{ id: notebook, role: 'owner' }])
      }
    }
  })
})
