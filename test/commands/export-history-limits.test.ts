import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { openJournaledStore } from '../../src/store/journal/journaled-notebooks.js'
import { PostgresNoteStore } from '../../src/store/postgres/store.js'
import type { NoteStore } from '../../src/store/types.js'
import { cli, HISTORY_STORY, storyTimes, tempFiles } from '../support/history-story.js'
import { createTestDatabase, postgresAvailable } from '../support/postgres-cluster.js'

/*
 * What an import keeps of a file's history and trash under the target's limits (NOTE_HISTORY,
 * HISTORY_DAYS, MAX_HISTORY_BYTES, TRASH_DAYS, the caps), what it says it let go, an export made
 * before history was carried, and the history lines it refuses, changing nothing.
 */

const files = tempFiles('notes-history-limits-')
const closers: (() => Promise<unknown>)[] = []
after(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  files.remove()
})

/** The story's export (history-story.ts), its times and ids. */
let file = ''
let t: ReturnType<typeof storyTimes>
let ids: Record<'a' | 'b' | 'c' | 'd', number>

before(async () => {
  const path = files.fresh('source.journal')
  t = storyTimes(Date.now())
  const clock = { at: t.start }
  const store = openJournaledStore({ path, maxNotes: 100, maxBytes: 1 << 20, now: () => clock.at })
  ids = await HISTORY_STORY(store, clock, t)
  await store.close()
  file = files.fresh('story.ndjson')
  assert.equal((await cli(['export', '--out', file], { DATA_FILE: path })).code, 0)
})

/** Opens the journal at `path` (closed after the file's tests). */
function journal(path: string): NoteStore {
  const store = openJournaledStore({ path, maxNotes: 100, maxBytes: 1 << 20 })
  closers.push(() => store.close())
  return store
}

/** The versions' sequences (base 36) and times of a note's revisions, newest first. */
async function history(store: NoteStore, id: number): Promise<[string, number][]> {
  const page = await store.revisions(id, 100, undefined)
  return (page?.revisions ?? []).map(({ version, at }) => [version.split('.')[1] as string, at])
}

async function trashOf(store: NoteStore): Promise<string[]> {
  return (await store.trash(100, undefined)).notes.map(({ json }) => JSON.parse(json).title)
}

/** Imports the story into a new journal with `env`; the journal's store, and what was said. */
async function importWith(env: Record<string, string>) {
  const path = files.fresh('target.journal')
  const result = await cli(['import', file], { DATA_FILE: path, ...env })
  assert.equal(result.code, 0, result.stderr)
  assert.equal(result.stdout, '')
  return { store: journal(path), stderr: result.stderr, path }
}

const SAID = "notes-service import: imported; not kept, as this store's limits say:"

describe("notes-service import: the target's history and trash limits", () => {
  it('keeps every revision and the whole trash within the defaults, silently', async () => {
    const { store, stderr } = await importWith({})
    assert.equal(stderr, '')
    assert.deepEqual(await history(store, ids.a), [
      ['4', t.a3],
      ['3', t.a2],
      ['2', t.start],
    ])
    assert.deepEqual(await history(store, ids.b), [
      ['6', t.bBack],
      ['5', t.start],
    ])
    assert.deepEqual(await trashOf(store), ['D', 'C'])
  })

  it('keeps the newest NOTE_HISTORY - 1 past revisions of each note, at the same versions', async () => {
    const { store, stderr } = await importWith({ NOTE_HISTORY: '2' })
    assert.equal(stderr, `${SAID} 1 past revision beyond NOTE_HISTORY.\n`)
    assert.deepEqual(await history(store, ids.a), [
      ['4', t.a3],
      ['3', t.a2],
    ])
    assert.deepEqual(await history(store, ids.b), [
      ['6', t.bBack],
      ['5', t.start],
    ])
    const none = await importWith({ NOTE_HISTORY: '0' })
    assert.equal(none.stderr, `${SAID} 4 past revisions beyond NOTE_HISTORY.\n`)
    assert.deepEqual(await history(none.store, ids.a), [['4', t.a3]])
  })

  it('lets go of revisions past HISTORY_DAYS and of deleted notes past TRASH_DAYS', async () => {
    const { store, stderr } = await importWith({ HISTORY_DAYS: '8.5', TRASH_DAYS: '2.5' })
    assert.equal(
      stderr,
      `${SAID} 3 past revisions older than HISTORY_DAYS, 1 deleted note past TRASH_DAYS, with their revisions.\n`,
    )
    assert.deepEqual(await history(store, ids.a), [['4', t.a3]])
    assert.deepEqual(await history(store, ids.b), [['6', t.bBack]])
    assert.deepEqual(await trashOf(store), ['D'])
    // No trash at all: a delete removes a note for good, so none is imported.
    const off = await importWith({ TRASH_DAYS: '0' })
    assert.equal(off.stderr, `${SAID} 2 deleted notes past TRASH_DAYS, with their revisions.\n`)
    assert.deepEqual(await trashOf(off.store), [])
  })

  const pastBytes = () => {
    const a1 = Buffer.byteLength(JSON.stringify({ title: 'A', n: 1, id: ids.a }))
    const a2 = Buffer.byteLength(JSON.stringify({ title: 'A', n: 2, id: ids.a }))
    const b = Buffer.byteLength(JSON.stringify({ title: 'B', id: ids.b }))
    const c1 = Buffer.byteLength(JSON.stringify({ title: 'C', n: 1, id: ids.c }))
    return { a1, total: a1 + a2 + b + c1 }
  }

  it('lets the oldest revisions go past MAX_HISTORY_BYTES, by time, then in file order', async () => {
    const { a1, total } = pastBytes()
    // A's first state and B's are as old: A's comes first in the file, and goes.
    const { store, stderr } = await importWith({ MAX_HISTORY_BYTES: String(total - a1) })
    assert.equal(stderr, `${SAID} 1 past revision beyond MAX_HISTORY_BYTES (the oldest).\n`)
    assert.deepEqual(await history(store, ids.a), [
      ['4', t.a3],
      ['3', t.a2],
    ])
    assert.deepEqual(await history(store, ids.b), [
      ['6', t.bBack],
      ['5', t.start],
    ])
    const exact = await importWith({ MAX_HISTORY_BYTES: String(total) })
    assert.equal(exact.stderr, '')
  })

  if (postgresAvailable('history limits on PostgreSQL')) {
    it('keeps the same on PostgreSQL, whose trash and revisions count as they do on a journal', async () => {
      const url = await createTestDatabase()
      const { a1, total } = pastBytes()
      const env = { DATABASE_URL: url, MAX_HISTORY_BYTES: String(total - a1) }
      const result = await cli(['import', file], env)
      assert.equal(
        result.stderr,
        `${SAID} 1 past revision beyond MAX_HISTORY_BYTES (the oldest).\n`,
      )
      const store = new PostgresNoteStore({ url, maxNotes: 100, maxBytes: 1 << 20 })
      await store.open()
      closers.push(() => store.close())
      assert.deepEqual(await history(store, ids.a), [
        ['4', t.a3],
        ['3', t.a2],
      ])
      assert.deepEqual(await history(store, ids.b), [
        ['6', t.bBack],
        ['5', t.start],
      ])
      assert.deepEqual(await trashOf(store), ['D', 'C'])
      const stats = await store.stats()
      assert.equal(stats.notes, 2)
    })
  }

  it('counts the trash toward the caps', async () => {
    const path = files.fresh('capped.journal')
    const refused = await cli(['import', file], { DATA_FILE: path, MAX_NOTES: '3' })
    assert.deepEqual(refused, {
      code: 1,
      stdout: '',
      stderr:
        'notes-service import: The file holds 4 notes (2 of them in the trash); MAX_NOTES allows 3.\n',
    })
    // Without the trash past TRASH_DAYS, it fits.
    const fits = await cli(['import', file], { DATA_FILE: path, MAX_NOTES: '3', TRASH_DAYS: '2.5' })
    assert.equal(fits.code, 0, fits.stderr)
  })

  it('refuses a store whose trash holds notes without --replace, and replaces it with it', async () => {
    const path = files.fresh('trash-held.journal')
    const held = openJournaledStore({ path, maxNotes: 100, maxBytes: 1 << 20 })
    const note = await held.create({ title: 'old' })
    await held.delete(JSON.parse(note.json).id)
    await held.close()
    const before = readFileSync(path)
    const refused = await cli(['import', file], { DATA_FILE: path })
    assert.equal(
      refused.stderr,
      `notes-service import: DATA_FILE ${path} holds a deleted note in its trash; import into an empty store, or add --replace to replace them.\n`,
    )
    assert.deepEqual(readFileSync(path), before)
    assert.equal((await cli(['import', file, '--replace'], { DATA_FILE: path })).code, 0)
    assert.deepEqual(await trashOf(journal(path)), ['D', 'C'])
  })

  it('imports an export made before history was carried: each note one create, no trash', async () => {
    const lines = readFileSync(file, 'utf8').split('\n')
    const old = files.fresh('old.ndjson')
    writeFileSync(old, `${lines.slice(0, lines.indexOf('{"history":1}')).join('\n')}\n`)
    const path = files.fresh('from-old.journal')
    const started = Date.now()
    assert.deepEqual(await cli(['import', old], { DATA_FILE: path }), {
      code: 0,
      stdout: '',
      stderr: '',
    })
    const store = journal(path)
    const [[sequence, at] = ['', 0]] = await history(store, ids.a)
    assert.equal(sequence, '1')
    assert.ok(at >= started && at <= Date.now(), 'made at the time of the import')
    assert.deepEqual(await history(store, ids.b), [['2', at]])
    assert.deepEqual(await trashOf(store), [])
  })
})

describe('notes-service import: a damaged history section', () => {
  /** The story's lines, and the line number (from 1) of the history's first line. */
  const story = () => {
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n')
    return { lines, at: lines.indexOf('{"history":1}') + 1 }
  }

  it('is refused naming its line, and nothing changes, in a journal or PostgreSQL', async () => {
    const path = files.fresh('kept.journal')
    assert.equal((await cli(['import', file], { DATA_FILE: path })).code, 0)
    const before = readFileSync(path)
    const url = postgresAvailable('damaged history on PostgreSQL') ? await createTestDatabase() : ''
    if (url !== '') assert.equal((await cli(['import', file], { DATABASE_URL: url })).code, 0)
    const { lines, at } = story()
    const edit = (line: number, text: string) => lines.map((l, i) => (i === line - 1 ? text : l))
    const block = at + 1
    const cases: [string[], string][] = [
      [
        edit(block, '{"notebook":"shared","notes":3,"trash":2}'),
        `line ${block}: the history of notebook "shared" has 3 notes; its notebook line says 2.`,
      ],
      [
        edit(block, '{"notebook":"elsewhere","notes":2,"trash":2}'),
        `line ${block}: the history of notebook "elsewhere", which the file does not list.`,
      ],
      [
        edit(block + 1, '{"at":1,"change":"moved","past":2}'),
        `line ${block + 1}: a note's state: its times are whole numbers of ms since 1970, its change "created" or "updated", its past a count.`,
      ],
      [
        edit(block + 2, '{"at":1,"change":"created","note":[1]}'),
        `line ${block + 2}: a past state: its note must be a JSON object.`,
      ],
      [
        edit(block + 1, '{"at":-5,"change":"updated","past":2}'),
        `line ${block + 1}: a note's state: its times`,
      ],
      [
        lines.slice(0, -1),
        `line ${lines.length}: the file ends inside the history of notebook "shared": 1 deleted note missing.`,
      ],
      [
        edit(at, '{"history":2}'),
        `line ${lines.length + 1}: the file ends 1 notebook short of what its history line says.`,
      ],
      [
        [...lines, '{"notebook":"z","notes":0}'],
        `line ${lines.length + 1}: expected the files line`,
      ],
      [
        edit(lines.length, lines.at(-1)?.replace('"deleted"', '"removed"') ?? ''),
        `line ${lines.length}: expected a deleted note`,
      ],
    ]
    for (const [text, message] of cases) {
      const bad = files.fresh('bad.ndjson')
      writeFileSync(bad, `${text.join('\n')}\n`)
      for (const env of url === ''
        ? [{ DATA_FILE: path }]
        : [{ DATA_FILE: path }, { DATABASE_URL: url }]) {
        const refused = await cli(['import', bad, '--replace'], env)
        assert.equal(refused.code, 1, message)
        assert.ok(
          refused.stderr.startsWith(`notes-service import: ${bad} ${message}`),
          `${refused.stderr} should say ${message}`,
        )
        assert.equal(refused.stderr.split('\n').length, 2, 'one line')
      }
      assert.deepEqual(readFileSync(path), before)
    }
    if (url !== '') {
      const store = new PostgresNoteStore({ url, maxNotes: 100, maxBytes: 1 << 20 })
      closers.push(() => store.close())
      assert.deepEqual(await trashOf(store), ['D', 'C'])
      assert.equal((await history(store, ids.a)).length, 3)
    }
  })

  it('refuses a past state nested deeper than MAX_DEPTH, as a note line is', async () => {
    const { lines, at } = story()
    const deep = { title: 'A', n: { a: { b: 1 } }, id: ids.a }
    // The first past state of A, two lines after its block's.
    const past = lines[at + 2] as string
    const edited = lines.map((l, i) =>
      i === at + 2 ? `${past.slice(0, past.indexOf('"note":'))}"note":${JSON.stringify(deep)}}` : l,
    )
    const bad = files.fresh('deep.ndjson')
    writeFileSync(bad, `${edited.join('\n')}\n`)
    const refused = await cli(['import', bad], {
      DATA_FILE: files.fresh('deep.journal'),
      MAX_DEPTH: '2',
    })
    assert.equal(
      refused.stderr,
      `notes-service import: ${bad} line ${at + 3}: a past state: a note nested deeper than 2 levels (MAX_DEPTH).\n`,
    )
  })
})
