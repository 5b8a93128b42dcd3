import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, describe, it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import type { Revision } from '../../src/store/archive.js'
import { openJournaledStore } from '../../src/store/journal/journaled-notebooks.js'
import { PostgresNoteStore } from '../../src/store/postgres/store.js'
import type { NoteRecord, NoteStore } from '../../src/store/types.js'
import { cli, DAY, HISTORY_STORY, storyTimes, tempFiles } from '../support/history-story.js'
import { createTestDatabase, postgresAvailable } from '../support/postgres-cluster.js'

/*
 * `notes-service export` and `import` with the notes' history and the trash, between every pair of
 * store kinds (a journal, PostgreSQL): the same revisions (content, time, kind, order), the same
 * trash, each state at the version the file's order gives it in the new epoch, a second export
 * equal to the first, and a restore after the import that works on the new versions alone.
 */

const files = tempFiles('notes-history-')
const closers: (() => Promise<unknown>)[] = []
after(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  files.remove()
})

/** A store of one kind, its clock set by the test, and the environment the CLI reaches it by. */
interface Kind {
  readonly name: string
  open(now?: () => number): Promise<{ store: NoteStore; env: Record<string, string> }>
}

function journalKind(): Kind {
  const path = files.fresh('history.journal')
  return {
    name: 'journal',
    async open(now) {
      const store = openJournaledStore({
        path,
        maxNotes: 1000,
        maxBytes: 1 << 24,
        ...(now === undefined ? {} : { now }),
      })
      closers.push(() => store.close())
      return { store, env: { DATA_FILE: path } }
    },
  }
}

async function postgresKind(): Promise<Kind> {
  const url = await createTestDatabase()
  return {
    name: 'postgres',
    async open(now) {
      const store = new PostgresNoteStore({
        url,
        maxNotes: 1000,
        maxBytes: 1 << 24,
        ...(now === undefined ? {} : { now }),
      })
      await store.open()
      closers.push(() => store.close())
      return { store, env: { DATABASE_URL: url } }
    },
  }
}

const idOf = (note: NoteRecord): number => (JSON.parse(note.json) as { id: number }).id

/** What the story leaves (history-story.ts), as `revisions` and `trash` answer in any store. */
function expected(epoch: string, t: ReturnType<typeof storyTimes>, ids: Record<string, number>) {
  const v = (sequence: number) => `${epoch}.${sequence.toString(36)}`
  const json = (fields: object, id: number) => JSON.stringify({ ...fields, id })
  const a = (n: number) => json({ title: 'A', n }, ids.a as number)
  const b = json({ title: 'B' }, ids.b as number)
  const c = (n: number) => json({ title: 'C', n }, ids.c as number)
  const d = json({ title: 'D' }, ids.d as number)
  const revisions: Record<string, Revision[]> = {
    // A, updated twice: its create at 1, its past states at 2 and 3, its state at 4.
    a: [
      { version: v(4), at: t.a3, change: 'updated', json: a(3) },
      { version: v(3), at: t.a2, change: 'updated', json: a(2) },
      { version: v(2), at: t.start, change: 'created', json: a(1) },
    ],
    // B, deleted and put back: its past create at 5, its restore (a create) at 6, its position.
    b: [
      { version: v(6), at: t.bBack, change: 'created', json: b },
      { version: v(5), at: t.start, change: 'created', json: b },
    ],
  }
  // The trash: C (updated, then deleted) at 7 to 10, D (created, deleted) at 11 and 12.
  const trash = [
    { deleted: t.dGone, sequence: 12, json: d },
    { deleted: t.cGone, sequence: 10, json: c(2) },
  ]
  return { revisions, trash, list: `[${a(3)},${b}]`, sequence: 12, v }
}

async function checkImported(
  store: NoteStore,
  ids: Record<string, number>,
  t: ReturnType<typeof storyTimes>,
) {
  const version = await store.version()
  const epoch = version.slice(0, version.lastIndexOf('.'))
  const want = expected(epoch, t, ids)
  assert.equal(version, want.v(want.sequence))
  assert.equal((await store.list()).json, want.list)
  for (const name of ['a', 'b']) {
    const page = await store.revisions(ids[name] as number, 100, undefined)
    assert.deepEqual(page, { revisions: want.revisions[name], next: undefined }, name)
  }
  assert.deepEqual(await store.trash(100, undefined), {
    notes: want.trash,
    total: 2,
    next: undefined,
  })
  const a = await store.get(ids.a as number)
  assert.deepEqual(a, { json: want.revisions.a?.[0]?.json, etag: `"${want.v(4)}"`, modified: t.a3 })
  return want
}

/** Export from `from`, import into `to`, then check the copy, a second export, and restores. */
async function roundTrip(from: Kind, to: Kind): Promise<void> {
  const t = storyTimes(Date.now())
  const clock = { at: t.start }
  const source = await from.open(() => clock.at)
  const ids = await HISTORY_STORY(source.store, clock, t)
  const sourceVersion = await source.store.version()
  const oldA = (await source.store.get(ids.a as number))?.etag as string
  await closers.pop()?.()
  const file = files.fresh(`${from.name}.ndjson`)
  const exported = await cli(['export', '--out', file], source.env)
  assert.deepEqual(exported, { code: 0, stdout: '', stderr: '' })
  const target = await to.open()
  await closers.pop()?.()
  assert.deepEqual(await cli(['import', file], target.env), { code: 0, stdout: '', stderr: '' })

  const copy = await to.open()
  const want = await checkImported(copy.store, ids, t)
  assert.notEqual(await copy.store.version(), sourceVersion)
  await closers.pop()?.()
  // The copy exports the same file, byte for byte: times, kinds, order and trash are kept.
  const again = files.fresh(`${to.name}.ndjson`)
  assert.equal((await cli(['export', '--out', again], copy.env)).code, 0)
  assert.equal(readFileSync(again, 'utf8'), readFileSync(file, 'utf8'))

  // A restore after the import: by the new versions, as a new write; an old version names none.
  const reopened = await to.open()
  const app = buildApp({ store: reopened.store, config: DEFAULT_CONFIG })
  closers.push(() => app.close())
  const restore = (version: string, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url: `/api/note/${ids.a}/restore`, headers, payload: { version } })
  const old = await restore(oldA.slice(1, -1))
  assert.equal(old.statusCode, 404)
  assert.equal((await restore(want.v(2), { 'if-match': oldA })).statusCode, 412)
  const restored = await restore(want.v(2), { 'if-match': `"${want.v(4)}"` })
  assert.equal(restored.statusCode, 200)
  assert.equal(restored.headers.etag, `"${want.v(13)}"`)
  assert.equal(restored.body, `{"data":${want.revisions.a?.[2]?.json}}`)
  const untrashed = await app.inject({ method: 'POST', url: `/api/trash/${ids.c}/restore` })
  assert.equal(untrashed.statusCode, 200)
  assert.equal(untrashed.headers.etag, `"${want.v(14)}"`)
  const cPast = await reopened.store.revisions(ids.c as number, 100, undefined)
  assert.deepEqual(
    cPast?.revisions.slice(1).map(({ version, at, change }) => [version, at, change]),
    [
      [want.v(9), t.c2, 'updated'],
      [want.v(8), t.c1, 'created'],
    ],
  )
}

const KINDS: [string, () => Promise<Kind>][] = [['journal', async () => journalKind()]]
if (postgresAvailable('export and import of history (PostgreSQL)')) {
  KINDS.push(['postgres', postgresKind])
}

describe('notes-service export and import: history and trash, between store kinds', () => {
  for (const [from, makeFrom] of KINDS) {
    for (const [to, makeTo] of KINDS) {
      it(`${from} -> ${to}: the same revisions and trash, at the versions of the new epoch`, async () => {
        await roundTrip(await makeFrom(), await makeTo())
      })
    }
  }

  it('writes a notebook whose notes are all deleted, for its trash, and a week-old trash after TRASH_DAYS', async () => {
    const kind = journalKind()
    const clock = { at: Date.now() - 8 * DAY }
    const { store, env } = await kind.open(() => clock.at)
    const gone = await store.create({ title: 'gone' })
    await store.delete(idOf(gone))
    clock.at = Date.now() - DAY
    const recent = await store.create({ title: 'recent' })
    await store.delete(idOf(recent))
    await closers.pop()?.()
    const file = files.fresh('trash-only.ndjson')
    // A source whose trash keeps 7 days writes only the recent one.
    assert.equal((await cli(['export', '--out', file], { ...env, TRASH_DAYS: '7' })).code, 0)
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n')
    assert.deepEqual(lines.slice(0, 4), [
      '{"notes-service-export":1}',
      '{"notebook":"shared","notes":0}',
      '{"history":1}',
      '{"notebook":"shared","notes":0,"trash":1}',
    ])
    assert.equal(lines.length, 5)
    assert.deepEqual(JSON.parse(lines[4] as string), {
      deleted: clock.at,
      at: clock.at,
      change: 'created',
      past: 0,
      note: JSON.parse(recent.json),
    })
    const target = journalKind()
    const { env: targetEnv } = await target.open()
    await closers.pop()?.()
    assert.equal((await cli(['import', file], targetEnv)).code, 0)
    const { store: copy } = await target.open()
    assert.equal((await copy.list()).json, '[]')
    assert.deepEqual(await copy.trash(10, undefined), {
      notes: [{ deleted: clock.at, sequence: 2, json: recent.json }],
      total: 1,
      next: undefined,
    })
    assert.match(await copy.version(), /\.2$/, 'the notebook is at the sequence of the delete')
  })
})
