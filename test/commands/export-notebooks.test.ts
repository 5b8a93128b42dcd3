import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  isRefusal,
  type NewInvite,
  type NotebookView,
  notebookStore,
} from '../../src/store/directory.js'
import { JournaledNotebooks } from '../../src/store/journal/journaled-notebooks.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import type { Notebooks } from '../../src/store/types.js'
import { createTestDatabase, postgresAvailable } from '../support/postgres-cluster.js'

/**
 * `notes-service export` and `import` move who may see what with the notes: notebooks with their
 * names, members in the order they joined, and invitations whose tokens, kept only as hashes,
 * still work after the move, between DATA_FILE and PostgreSQL either way.
 */

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url))
const SECRET = 'export-test-secret-of-32-bytes-or-more!'
const NOW = Date.now()
const root = mkdtempSync(join(tmpdir(), 'notes-export-notebooks-'))
after(() => rmSync(root, { recursive: true, force: true }))
let files = 0
const fresh = (name: string) => join(root, `${++files}-${name}`)

function cli(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      {
        env: { PATH: process.env.PATH ?? '', AUTH_JWT_SECRET: SECRET, ...env },
        maxBuffer: 1 << 26,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
        resolve({ code, stdout, stderr })
      },
    )
  })
}

const ok = <T>(value: T | { refused: string }): T => {
  if (isRefusal(value)) assert.fail(JSON.stringify(value))
  return value as T
}

/** Fills a directory: two notebooks, members who joined across them, an invitation, notes. */
async function fill(notebooks: Notebooks) {
  const { directory } = notebooks
  const trip = ok<NotebookView>(await directory.create('ann', 'Trip'))
  const club = ok<NotebookView>(await directory.create('cat', 'Club'))
  ok(await directory.setRole('cat', club.id, 'bob', 'viewer'))
  ok(await directory.setRole('ann', trip.id, 'bob', 'editor'))
  const invite = ok<NewInvite>(
    await directory.invite('ann', trip.id, { role: 'viewer', expires: NOW + 86_400_000, uses: 2 }),
  )
  await notebooks.notebook(notebookStore(trip.id)).create({ packed: ['tent'] })
  await notebooks.notebook('user:ann').create({ mine: true })
  return { trip, club, invite }
}

/** What each user sees of the directory, to compare two stores. */
async function seen(notebooks: Notebooks, ids: readonly string[]) {
  const { directory } = notebooks
  const lists = await Promise.all(['ann', 'bob', 'cat'].map((user) => directory.list(user)))
  const members = await Promise.all(ids.map((id) => directory.members('ann', id)))
  return { lists, members }
}

describe('export and import of notebooks (DATA_FILE)', () => {
  it('moves notebooks, members and invitations to another journal; the token still works', async () => {
    const source = fresh('source.journal')
    const journal = new JournaledNotebooks({ path: source, maxNotes: 1000, maxBytes: 1 << 20 })
    const { trip, club, invite } = await fill(journal)
    const before = await seen(journal, [trip.id, club.id])
    await journal.close()
    const file = fresh('notebooks.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const lines = readFileSync(file, 'utf8').split('\n')
    assert.match(lines[1] ?? '', /^\{"directory":\d+\}$/)
    // No token is in the file: an invitation is its hash.
    assert.equal(readFileSync(file, 'utf8').includes(invite.token), false)
    const target = fresh('target.journal')
    assert.equal((await cli(['import', file], { DATA_FILE: target })).code, 0)
    // Out again: the same file, byte for byte.
    assert.equal((await cli(['export'], { DATA_FILE: target })).stdout, readFileSync(file, 'utf8'))
    const copy = new JournaledNotebooks({ path: target, maxNotes: 1000, maxBytes: 1 << 20 })
    try {
      assert.deepEqual(await seen(copy, [trip.id, club.id]), before)
      assert.equal(
        ok<NotebookView>(await copy.directory.redeem('dan', invite.token, NOW)).id,
        trip.id,
      )
      assert.equal((await copy.notebook(notebookStore(trip.id)).list()).count, 1)
    } finally {
      await copy.close()
    }
    // A journal holding notebooks is not replaced without --replace.
    const refused = await cli(['import', file], { DATA_FILE: target })
    assert.equal(refused.code, 1)
    assert.match(
      refused.stderr,
      /holds \d+ notebooks with their members; import into an empty store/,
    )
  })

  it('refuses a directory that would leave a notebook without an owner, naming the line', async () => {
    const file = fresh('unowned.ndjson')
    const id = 'A'.repeat(22)
    writeFileSync(
      file,
      [
        '{"notes-service-export":1}',
        '{"directory":2}',
        JSON.stringify({ t: 'notebook', id, name: 'Orphan', store: notebookStore(id) }),
        JSON.stringify({ t: 'role', id, user: 'bob', role: 'viewer' }),
        '',
      ].join('\n'),
    )
    const refused = await cli(['import', file], { DATA_FILE: fresh('unowned.journal') })
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, new RegExp(`line 4: notebook ${id} has no owner\\.`))
  })
})

describe('export and import of notebooks (PostgreSQL)', {
  skip: !postgresAvailable('export-notebooks (PostgreSQL)'),
}, () => {
  it('moves notebooks from PostgreSQL to DATA_FILE and back, keeping who may see what', async () => {
    const url = await createTestDatabase()
    const database = new PostgresNotebooks({ url, maxNotes: 1000, maxBytes: 1 << 20 })
    await database.open()
    let ids: string[]
    let before: Awaited<ReturnType<typeof seen>>
    let token: string
    try {
      const { trip, club, invite } = await fill(database)
      ids = [trip.id, club.id]
      token = invite.token
      before = await seen(database, ids)
    } finally {
      await database.close()
    }
    const file = fresh('pg.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATABASE_URL: url })).code, 0)
    const journalPath = fresh('from-pg.journal')
    assert.equal((await cli(['import', file], { DATA_FILE: journalPath })).code, 0)
    assert.equal(
      (await cli(['export'], { DATA_FILE: journalPath })).stdout,
      readFileSync(file, 'utf8'),
    )
    const copyUrl = await createTestDatabase()
    const back = fresh('back.ndjson')
    writeFileSync(back, (await cli(['export'], { DATA_FILE: journalPath })).stdout)
    assert.equal((await cli(['import', back], { DATABASE_URL: copyUrl })).code, 0)
    const copy = new PostgresNotebooks({ url: copyUrl, maxNotes: 1000, maxBytes: 1 << 20 })
    await copy.open()
    try {
      assert.deepEqual(await seen(copy, ids), before)
      assert.equal(ok<NotebookView>(await copy.directory.redeem('dan', token, NOW)).id, ids[0])
      const refused = await cli(['import', back], { DATABASE_URL: copyUrl })
      assert.equal(refused.code, 1)
      assert.match(refused.stderr, /The database holds 2 notes; import into an empty store/)
      assert.equal((await cli(['import', back, '--replace'], { DATABASE_URL: copyUrl })).code, 0)
      assert.deepEqual(await copy.directory.members('ann', ids[0] as string), before.members[0])
    } finally {
      await copy.close()
    }
  })
})
