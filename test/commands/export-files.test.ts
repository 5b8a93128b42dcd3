import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { buildApp } from '../../src/app.js'
import { ExportFileError, readExportFile } from '../../src/commands/export-file.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { ARCHIVE_DEFAULTS } from '../../src/store/archive.js'
import { isRefusal, type NotebookView, notebookStore } from '../../src/store/directory.js'
import type { FileSpace } from '../../src/store/files.js'
import { importIntoJournal } from '../../src/store/journal/journal-import.js'
import { JournaledNotebooks } from '../../src/store/journal/journaled-notebooks.js'
import { ArchiveRules } from '../../src/store/kernel/import-archive.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import { PostgresNoteStore } from '../../src/store/postgres/store.js'
import { SHARED_NOTEBOOK } from '../../src/store/types.js'
import { bytesOf, chunked } from '../support/files.contract.js'
import { createTestDatabase, postgresAvailable } from '../support/postgres-cluster.js'

/** What an import keeps of a history and trash: the defaults', now. */
const RULES = new ArchiveRules(ARCHIVE_DEFAULTS, Date.now())

/**
 * `notes-service export` and `import` carry every notebook's files: a move between DATA_FILE and
 * PostgreSQL, either way, keeps each file byte for byte, with its id, type, time and order; the
 * bytes are checked against their SHA-256 before anything changes.
 */

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url))
const MiB = 1024 * 1024
const T0 = 1_700_000_000_000
const root = mkdtempSync(join(tmpdir(), 'notes-export-files-'))
after(() => rmSync(root, { recursive: true, force: true }))
let made = 0
const fresh = (name: string) => join(root, `${++made}-${name}`)

function cli(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, maxBuffer: 1 << 28 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
        resolve({ code, stdout, stderr })
      },
    )
  })
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')

function openJournal(path: string): JournaledNotebooks {
  return new JournaledNotebooks({ path, maxNotes: 1000, maxBytes: 1 << 20, now: () => T0 })
}

async function readAll(stream: Readable | undefined): Promise<Buffer> {
  assert.ok(stream !== undefined, 'no stream for a stored file')
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Every file of a space as an export sees it: notebook, id, size, type, time and its bytes' hash. */
async function filesIn(space: FileSpace) {
  const seen: { notebook: string; id: string; size: number; type: string; created: number }[] = []
  for (const notebook of [...(await space.notebooks())].sort()) {
    const files = space.files(notebook)
    const { files: records } = await files.list(1000)
    for (const { id, size, type, created } of records) {
      const bytes = await readAll(await files.read(id, 0, size))
      assert.equal(sha256(bytes), id, `the bytes of ${id} in ${notebook}`)
      seen.push({ notebook, id, size, type, created })
    }
  }
  return seen
}

/**
 * A journal with files in two notebooks: the shared one, and one of the directory (a notebook of
 * ann's, by its store name). The same bytes are in both; one file is empty, one is 5 MiB.
 */
async function fillJournal(path: string) {
  const journal = openJournal(path)
  try {
    const trip = await journal.directory.create('ann', 'Trip')
    if (isRefusal(trip)) assert.fail(JSON.stringify(trip))
    const tripStore = notebookStore((trip as NotebookView).id)
    const shared = journal.files.files(SHARED_NOTEBOOK)
    const theirs = journal.files.files(tripStore)
    const hello = await shared.put('text/plain', chunked(Buffer.from('hello')), {
      created: T0 - 5000,
    })
    await shared.put('application/octet-stream', chunked(Buffer.alloc(0)))
    // Three data lines, the last one short.
    await shared.put('image/png', chunked(bytesOf(100_001, 2), 4096), { created: T0 - 3000 })
    await theirs.put('text/plain', chunked(Buffer.from('hello')), { created: T0 - 1000 })
    await theirs.put('video/mp4', chunked(bytesOf(5 * MiB, 3), 65_536))
    await journal.notebook(SHARED_NOTEBOOK).create({ attached: hello.id })
    await journal.notebook(tripStore).create({ packed: ['tent'] })
    return { tripStore, files: await filesIn(journal.files) }
  } finally {
    await journal.close()
  }
}

/** The files of the journal at `path`, opened for the reading and closed again. */
async function journalFiles(path: string) {
  const journal = openJournal(path)
  try {
    return await filesIn(journal.files)
  } finally {
    await journal.close()
  }
}

/** What the files folder beside the journal at `path` holds: each path under it, and its size. */
function folderOf(path: string): [string, number][] {
  const names = readdirSync(`${path}.files`, { recursive: true }) as string[]
  return names.sort().map((name) => [name, statSync(join(`${path}.files`, name)).size])
}

/** A body that hands on its first chunk, then fails. */
async function* failAfter(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    yield chunk
    throw new Error('the body was cut short')
  }
}

describe('export and import of files (DATA_FILE)', () => {
  it('writes each file after the notes, in base64 lines of 48 KiB, and reads it back whole', async () => {
    const source = fresh('source.journal')
    const { files } = await fillJournal(source)
    assert.equal(files.length, 5)
    const file = fresh('files.ndjson')
    assert.deepEqual(await cli(['export', '--out', file], { DATA_FILE: source }), {
      code: 0,
      stdout: '',
      stderr: '',
    })
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n')
    const at = lines.indexOf('{"files":5}')
    assert.ok(at > 0, 'a files line')
    // The notes come first: every notebook line is before the files line.
    assert.ok(lines.slice(at).every((line) => !line.startsWith('{"notebook"')))
    const header = JSON.parse(lines[at + 1] as string).file
    assert.deepEqual(header, { ...(files[0] as object) })
    assert.equal(lines[at + 2], `"${Buffer.from('hello').toString('base64')}"`)
    for (const line of lines.slice(at + 1)) {
      if (line.startsWith('"'))
        assert.ok(line.length <= 65_536 + 2, 'a data line of 48 KiB at most')
    }
    const target = fresh('target.journal')
    assert.equal((await cli(['import', file], { DATA_FILE: target })).code, 0)
    assert.deepEqual(await journalFiles(target), files)
    // Out again: the same file, byte for byte.
    const again = await cli(['export'], { DATA_FILE: target })
    assert.equal(again.stdout, readFileSync(file, 'utf8'))
  })

  it('refuses a changed byte naming its line, and changes nothing', async () => {
    const source = fresh('tamper.journal')
    await fillJournal(source)
    const file = fresh('tamper.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const lines = readFileSync(file, 'utf8').split('\n')
    // The second data line of the 100,001-byte file: one byte changed, still base64.
    const header = lines.findIndex((line) => line.includes('"size":100001'))
    const target = lines[header + 2] as string
    const changed = target.slice(0, 101) + (target[101] === 'A' ? 'B' : 'A') + target.slice(102)
    lines[header + 2] = changed
    writeFileSync(file, lines.join('\n'))
    const into = fresh('kept.journal')
    const kept = await fillJournal(into)
    const journalBefore = readFileSync(into)
    const refused = await cli(['import', file, '--replace'], { DATA_FILE: into })
    assert.equal(refused.code, 1)
    const id = JSON.parse(lines[header] as string).file.id as string
    const last = header + 4
    assert.match(
      refused.stderr,
      new RegExp(
        `^notes-service import: ${file} line ${last}: the bytes of file ${id} \\(its data lines ${header + 2} to ${last}\\) have the SHA-256 [0-9a-f]{64}, not their id: a data line was changed\\.\n$`,
      ),
    )
    assert.deepEqual(readFileSync(into), journalBefore)
    assert.deepEqual(await journalFiles(into), kept.files)
  })

  it('refuses a malformed files section naming the line', async () => {
    const hello = Buffer.from('hello')
    const id = sha256(hello)
    const head = `{"notes-service-export":1}\n{"notebook":"shared","notes":1}\n{"a":1}\n`
    const fileLine = (fields: object = {}) =>
      JSON.stringify({
        file: { notebook: 'shared', id, size: 5, type: 'text/plain', created: T0, ...fields },
      })
    const data = `"${hello.toString('base64')}"`
    const cases: [string, string][] = [
      [`{"files":1}\n${fileLine()}\n`, 'line 6: the file ends inside file'],
      [`{"files":2}\n${fileLine()}\n${data}\n`, 'line 7: the file ends 1 file short'],
      [`{"files":1}\n${fileLine()}\n${data}\n{"a":2}\n`, 'line 7: the files line says 1 file,'],
      [`{"files":1}\n${fileLine()}\n"aGVsbG8"\n`, 'line 6: expected a data line of file'],
      [`{"files":1}\n${fileLine()}\n"aGVsbG9="\n`, 'line 6: expected a data line of file'],
      [`{"files":1}\n${fileLine()}\n"aGVsbG8hIQ=="\n`, 'line 6: this data line holds 2 bytes more'],
      [`{"files":1}\n${fileLine({ size: -1 })}\n`, 'line 5: the size of file'],
      [`{"files":1}\n${fileLine({ type: 'Text/Plain' })}\n`, 'line 5: the type of file'],
      [`{"files":1}\n${fileLine({ id: 'abc' })}\n`, 'line 5: a file id is the SHA-256'],
      [`{"files":1}\n${fileLine({ extra: 1 })}\n`, 'line 5: expected a file line'],
      [`{"files":2}\n${fileLine()}\n${data}\n${fileLine()}\n`, 'line 7: file '],
      [`{"files":1}\n${fileLine({ size: 0 })}\n`, 'line 5: file '],
      [`{"files":1}\n${fileLine()}\n${data}\n{"notebook":"b","notes":0}\n`, 'line 7: the files'],
    ]
    for (const [files, message] of cases) {
      const path = fresh('bad.ndjson')
      writeFileSync(path, head + files)
      await assert.rejects(
        readExportFile(path, 100, RULES),
        (err) => err instanceof ExportFileError && err.message.startsWith(message),
        `${files} -> ${message}`,
      )
    }
    // A file of an older version, without files, still reads.
    const old = fresh('old.ndjson')
    writeFileSync(old, head)
    assert.deepEqual((await readExportFile(old, 100, RULES)).files, [])
  })

  it('refuses a journal that holds files without --replace; with it, the old files go', async () => {
    const source = fresh('one.journal')
    const { files } = await fillJournal(source)
    const file = fresh('one.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const target = fresh('old-files.journal')
    const journal = openJournal(target)
    const old = await journal.files.files('user:bob').put('text/plain', chunked(bytesOf(999, 9)))
    await journal.close()
    const refused = await cli(['import', file], { DATA_FILE: target })
    assert.equal(
      refused.stderr,
      `notes-service import: DATA_FILE ${target} holds a file; import into an empty store, or add --replace to replace them.\n`,
    )
    assert.equal((await cli(['import', file, '--replace'], { DATA_FILE: target })).code, 0)
    // The old file's bytes are gone from the folder, not only from the index.
    const folders = readdirSync(`${target}.files`, { recursive: true }) as string[]
    assert.equal(
      folders.some((name) => name.endsWith(old.id)),
      false,
    )
    assert.deepEqual(await journalFiles(target), files)
  })

  it('changes nothing when a file fails part way, and notices an export changed since its check', async () => {
    const source = fresh('midway.journal')
    await fillJournal(source)
    const file = fresh('midway.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const checked = await readExportFile(file, 100, RULES)
    const target = fresh('midway-target.journal')
    const kept = await fillJournal(target)
    const before = { journal: readFileSync(target), folder: folderOf(target) }
    // The 5 MiB file's body fails after its first bytes, the files before it placed already.
    const big = checked.files.findIndex((f) => f.size === 5 * MiB)
    assert.ok(big > 0)
    const failing: typeof checked = {
      ...checked,
      fileBody: (f) =>
        f === checked.files[big] ? failAfter(checked.fileBody(f)) : checked.fileBody(f),
    }
    const options = { path: target, replace: true, now: T0, maxNotes: 1000, maxBytes: 1 << 20 }
    await assert.rejects(importIntoJournal(failing, options), /cut short/)
    assert.deepEqual(readFileSync(target), before.journal)
    assert.deepEqual(folderOf(target), before.folder)
    assert.deepEqual(await journalFiles(target), kept.files)
    // The export changed after its check: a byte of the big file's last data line.
    const text = readFileSync(file, 'utf8')
    const at = text.indexOf('\n{"file":{"notebook":"shared"') - 10
    writeFileSync(file, text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1))
    await assert.rejects(importIntoJournal(checked, options), /changed in the export/)
    assert.deepEqual(readFileSync(target), before.journal)
    assert.deepEqual(folderOf(target), before.folder)
  })

  it('refuses files past MAX_FILE_BYTES, MAX_FILES_BYTES_PER_USER or MAX_FILES_BYTES', async () => {
    const source = fresh('caps.journal')
    const { tripStore } = await fillJournal(source)
    const file = fresh('caps.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const target = fresh('caps-target.journal')
    for (const [env, message] of [
      [{ MAX_FILE_BYTES: String(MiB) }, `holds ${5 * MiB} bytes; MAX_FILE_BYTES allows ${MiB}.`],
      [
        { MAX_FILES_BYTES_PER_USER: String(MiB) },
        `Notebook ${JSON.stringify(tripStore)} holds ${5 * MiB + 5} bytes of files; MAX_FILES_BYTES_PER_USER allows ${MiB}.`,
      ],
      [
        { MAX_FILES_BYTES: String(5 * MiB) },
        `The file holds ${5 * MiB + 100_011} bytes of files; MAX_FILES_BYTES allows ${5 * MiB}.`,
      ],
    ] as const) {
      const refused = await cli(['import', file], { DATA_FILE: target, ...env })
      assert.equal(refused.code, 1, refused.stderr)
      assert.ok(refused.stderr.endsWith(`${message}\n`), refused.stderr)
    }
  })
})

describe('export and import of files (PostgreSQL)', {
  skip: !postgresAvailable('export-files (PostgreSQL)'),
}, () => {
  it('moves every file from DATA_FILE to PostgreSQL and back, byte for byte', async () => {
    const source = fresh('to-pg.journal')
    const { files } = await fillJournal(source)
    const file = fresh('to-pg.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const url = await createTestDatabase()
    assert.deepEqual(await cli(['import', file], { DATABASE_URL: url }), {
      code: 0,
      stdout: '',
      stderr: '',
    })
    const database = new PostgresNotebooks({ url, maxNotes: 1000, maxBytes: 1 << 20 })
    await database.open()
    try {
      assert.deepEqual(await filesIn(database.files), files)
      // The notes written are analyzed by the import itself (a page's plan needs their statistics).
      const analyzed = new pg.Client({ connectionString: url })
      await analyzed.connect()
      try {
        const { rows } = await analyzed.query<{ relname: string }>(
          `SELECT relname FROM pg_stat_user_tables
            WHERE relname IN ('notes', 'notes_revisions', 'notes_trash') AND last_analyze IS NOT NULL
            ORDER BY relname`,
        )
        assert.deepEqual(
          rows.map((row) => row.relname),
          ['notes', 'notes_revisions', 'notes_trash'],
        )
      } finally {
        await analyzed.end()
      }
    } finally {
      await database.close()
    }
    // Served as it was uploaded: GET through the app, on the shared notebook.
    const store = new PostgresNoteStore({ url, maxNotes: 1000, maxBytes: 1 << 20 })
    await store.open()
    const app = buildApp({ store, files: store.files, config: DEFAULT_CONFIG })
    try {
      const image = files.find((f) => f.type === 'image/png') as { id: string }
      const got = await app.inject({ url: `/api/files/${image.id}` })
      assert.equal(got.statusCode, 200)
      assert.equal(got.headers['content-type'], 'image/png')
      assert.ok(got.rawPayload.equals(bytesOf(100_001, 2)))
    } finally {
      await app.close()
      await store.close()
    }
    // Out of PostgreSQL: the same files section (the directory's records may come in another
    // order); into a new journal: the same files.
    const back = await cli(['export'], { DATABASE_URL: url })
    assert.equal(back.code, 0, back.stderr)
    const section = (text: string) => sha256(Buffer.from(text.slice(text.indexOf('{"files":'))))
    assert.equal(section(back.stdout), section(readFileSync(file, 'utf8')))
    const backFile = fresh('from-pg.ndjson')
    writeFileSync(backFile, back.stdout)
    const journal = fresh('from-pg.journal')
    assert.equal((await cli(['import', backFile], { DATA_FILE: journal })).code, 0)
    assert.deepEqual(await journalFiles(journal), files)
  })

  it('refuses a database that holds files without --replace; with it, the old files go', async () => {
    const source = fresh('pg-replace.journal')
    const { files } = await fillJournal(source)
    const file = fresh('pg-replace.ndjson')
    assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
    const url = await createTestDatabase()
    const database = new PostgresNotebooks({ url, maxNotes: 1000, maxBytes: 1 << 20 })
    await database.open()
    try {
      const old = await database.files.files('user:bob').put('text/plain', chunked(bytesOf(10)))
      const refused = await cli(['import', file], { DATABASE_URL: url })
      assert.equal(
        refused.stderr,
        'notes-service import: The database holds a file; import into an empty store, or add --replace to replace them.\n',
      )
      assert.deepEqual(await filesIn(database.files), [
        { notebook: 'user:bob', id: old.id, size: 10, type: 'text/plain', created: old.created },
      ])
      const replaced = await cli(['import', file, '--replace'], { DATABASE_URL: url })
      assert.equal(replaced.code, 0, replaced.stderr)
      assert.deepEqual(await filesIn(database.files), files)
      // Only the new files' chunks are left: the old file's went with it.
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        const { rows } = await client.query<{ chunks: string }>(
          'SELECT count(*) AS chunks FROM notes_file_chunks',
        )
        const chunks = files.reduce((n, f) => n + Math.ceil(f.size / (256 * 1024)), 0)
        assert.equal(Number(rows[0]?.chunks), chunks)
      } finally {
        await client.end()
      }
    } finally {
      await database.close()
    }
  })
})
