import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { after, describe, it } from 'node:test'
import { isRefusal, notebookStore, type Refusal, type Role } from '../../../src/store/directory.js'
import type { FileRecord, FileSpace, NotebookFiles } from '../../../src/store/files.js'
import { importIntoJournal } from '../../../src/store/journal/journal-import.js'
import { JournalOpenError } from '../../../src/store/journal/journal-open-error.js'
import {
  JournaledNotebooks,
  type JournaledNotebooksOptions,
} from '../../../src/store/journal/journaled-notebooks.js'
import { ImportRefusedError, type ImportSource } from '../../../src/store/kernel/import-source.js'
import { SHARED_NOTEBOOK } from '../../../src/store/types.js'
import { bytesOf, chunked, runFileContract, sha256 } from '../../support/files.contract.js'

/**
 * Files on DATA_FILE: bytes in `<path>.files/<sha256 of the notebook's name>/<id>`, written to a
 * temporary name, fsynced and renamed before the answer; their index in the journal, across
 * restarts and compactions; start-up cleans what a crash left and stops at a file it lost. Across
 * kill -9 (a child process uploads until killed: mid-upload, right after an answer, or at a random
 * moment while several uploads run), every file answered is there byte for byte, every file
 * listed is whole, and no temporary file or file without a record is left.
 */

const root = mkdtempSync(join(tmpdir(), 'notes-journal-files-'))
const opened: JournaledNotebooks[] = []
after(async () => {
  await Promise.allSettled(opened.map((journal) => journal.close()))
  rmSync(root, { recursive: true, force: true })
})
let made = 0
const freshPath = () => join(root, `files-${++made}.journal`)

function open(options: Partial<JournaledNotebooksOptions> & { path: string }): JournaledNotebooks {
  const journal = new JournaledNotebooks({ maxNotes: 1 << 20, maxBytes: 1 << 26, ...options })
  opened.push(journal)
  return journal
}

function ok<T>(value: T | Refusal): T {
  if (isRefusal(value)) assert.fail(`refused: ${JSON.stringify(value)}`)
  return value as T
}

/**
 * The contract names notebooks ('nb:shared-one') and gives roles in them; here each such notebook
 * is made in the journal's own directory (its owner the first user given a role, else 'keeper'),
 * so roles, and a notebook's removal, go through the directory and its records.
 */
runFileContract('JournalFiles', (options) => {
  const { now, ...files } = options
  const journal = open({ path: freshPath(), files, ...(now === undefined ? {} : { now }) })
  const { directory } = journal
  const made = new Map<string, { id: string; store: string; owner: string }>()
  const storeOf = (nb: string) => made.get(nb)?.store ?? nb
  const nameOf = (store: string) =>
    [...made].find(([, notebook]) => notebook.store === store)?.[0] ?? store
  const space: FileSpace = {
    files: (nb) => journal.files.files(storeOf(nb)),
    writerFor: (nb, user) => journal.files.writerFor(storeOf(nb), user),
    notebooks: () => journal.files.notebooks().map(nameOf),
    totals: () => journal.files.totals(),
  }
  return {
    space,
    async setRole(nb: string, user: string, role: Role | undefined) {
      let notebook = made.get(nb)
      if (notebook === undefined) {
        const owner = role === 'owner' ? user : 'keeper'
        const { id } = ok(await directory.create(owner, nb))
        notebook = { id, store: notebookStore(id), owner }
        made.set(nb, notebook)
      }
      if (user === notebook.owner) return
      if (role === undefined) ok(await directory.removeMember(notebook.owner, notebook.id, user))
      else ok(await directory.setRole(notebook.owner, notebook.id, user, role))
    },
    async dropNotebook(nb: string) {
      const notebook = made.get(nb)
      assert.ok(notebook, `${nb} was never made`)
      ok(await directory.remove(notebook.owner, notebook.id))
    },
    close: () => journal.close(),
  }
})

async function readAll(stream: Readable | undefined): Promise<Buffer> {
  assert.ok(stream !== undefined, 'no stream for a stored file')
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

const folderOf = (path: string, notebook: string) =>
  join(`${path}.files`, createHash('sha256').update(notebook).digest('hex'))

/** Every file under the files folder of the journal at `path`, as paths relative to it. */
function onDisk(path: string): string[] {
  const top = `${path}.files`
  if (!existsSync(top)) return []
  return readdirSync(top, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(top.length + 1))
    .sort()
}

/** A turn of the event loop: a removal's unlink runs once its record is durable. */
const turn = () => new Promise((resolve) => setImmediate(resolve))

describe('JournalFiles: bytes on disk', () => {
  it('keeps each file under its notebook’s hashed folder and its id, and no temporary file', async () => {
    const path = freshPath()
    const journal = open({ path })
    const name = '../../etc/ a notebook/with\nany text'
    const bytes = bytesOf(200_000, 4)
    const record = await journal.files.files(name).put('image/png', chunked(bytes, 65_536))
    const file = join(folderOf(path, name), record.id)
    assert.ok(readFileSync(file).equals(bytes))
    const shared = await journal.files.files(SHARED_NOTEBOOK).put('text/plain', chunked(bytes))
    const hash = (nb: string) => createHash('sha256').update(nb).digest('hex')
    assert.deepEqual(
      onDisk(path),
      [`${hash(name)}/${record.id}`, `${hash(SHARED_NOTEBOOK)}/${shared.id}`].sort(),
    )
  })

  it('leaves no temporary file behind an upload that fails, is too large or passes a cap', async () => {
    const path = freshPath()
    const journal = open({ path, files: { maxFileBytes: 10_000, maxNotebookBytes: 15_000 } })
    const files = journal.files.files('user:ann')
    await files.put('text/plain', chunked(bytesOf(9_000, 1)))
    async function* broken(): AsyncGenerator<Buffer> {
      yield Buffer.alloc(5000, 1)
      throw new Error('connection reset')
    }
    await assert.rejects(files.put('text/plain', broken()), /connection reset/)
    await assert.rejects(
      files.put('text/plain', chunked(bytesOf(10_001, 2), 20_000)),
      /at most 10000/,
    )
    await assert.rejects(files.put('text/plain', chunked(bytesOf(7_000, 3))), /This notebook/)
    assert.equal(onDisk(path).length, 1)
  })

  it('stores the same bytes put at once as one file, whose bytes stay', async () => {
    const path = freshPath()
    const journal = open({ path })
    const files = journal.files.files('user:ann')
    const bytes = bytesOf(300_000, 5)
    const [a, b, c] = await Promise.all([
      files.put('image/png', chunked(bytes, 10_000)),
      files.put('image/png', chunked(bytes, 30_000)),
      files.put('image/png', chunked(bytes, 70_000)),
    ])
    // One file, which the later ones touched.
    const file = ({ touched: _, ...record }: FileRecord) => record
    assert.deepEqual(file(b), file(a))
    assert.deepEqual(file(c), file(a))
    assert.deepEqual(files.totals(), { files: 1, bytes: bytes.length })
    assert.equal(onDisk(path).length, 1)
    assert.ok((await readAll(await files.read(a.id, 0, bytes.length))).equals(bytes))
  })

  it('keeps the bytes of a file put again while its removal is being written', async () => {
    const path = freshPath()
    const journal = open({ path })
    const files = journal.files.files('user:ann')
    const bytes = bytesOf(50_000, 6)
    const first = await files.put('text/plain', chunked(bytes))
    const [deleted, again] = await Promise.all([
      files.delete(first.id),
      files.put('text/plain', chunked(bytes)),
    ])
    assert.equal(deleted, true)
    assert.ok(again.sequence > first.sequence)
    await turn()
    assert.ok((await readAll(await files.read(again.id, 0, bytes.length))).equals(bytes))
    await journal.close()
    const reopened = open({ path })
    assert.deepEqual(reopened.files.files('user:ann').stat(again.id), again)
  })

  it('unlinks a deleted file, and a removed notebook’s files once its removal is durable', async () => {
    const path = freshPath()
    const journal = open({ path })
    const { directory } = journal
    const gone = ok(await directory.create('ann', 'Gone'))
    const writer = journal.files.writerFor(notebookStore(gone.id), 'ann')
    await writer.put('text/plain', chunked(bytesOf(1000, 1)))
    await writer.put('text/plain', chunked(bytesOf(1000, 2)))
    const kept = await journal.files.files('user:ann').put('text/plain', chunked(bytesOf(10, 3)))
    const dropped = await journal.files.files('user:ann').put('text/plain', chunked(bytesOf(9, 4)))
    assert.equal(await journal.files.files('user:ann').delete(dropped.id), true)
    assert.equal(onDisk(path).length, 3)
    ok(await directory.remove('ann', gone.id))
    await turn()
    assert.deepEqual(onDisk(path), [`${folderOf(path, 'user:ann').slice(-64)}/${kept.id}`])
    assert.equal(existsSync(folderOf(path, notebookStore(gone.id))), false)
    await journal.close()
    const reopened = open({ path })
    assert.deepEqual(reopened.files.totals(), { files: 1, bytes: 10 })
    assert.deepEqual(reopened.files.notebooks(), ['user:ann'])
  })
})

describe('JournalFiles: across restarts and compactions', () => {
  it('keeps every file and its index across close and reopen, and later files after them', async () => {
    const path = freshPath()
    let journal = open({ path })
    const put = (nb: string, size: number, seed: number, type = 'application/pdf') =>
      journal.files.files(nb).put(type, chunked(bytesOf(size, seed), 4096))
    const a = await put(SHARED_NOTEBOOK, 10_000, 1)
    const b = await put('user:ann', 70_001, 2, 'image/png')
    const c = await put('user:ann', 0, 3, 'text/plain')
    const d = await put('nb:x', 5, 4)
    assert.equal(await journal.files.files('user:ann').delete(b.id), true)
    // The last file given is deleted: its sequence is still never given again.
    assert.equal(await journal.files.files('nb:x').delete(d.id), true)
    const lists = () =>
      [SHARED_NOTEBOOK, 'user:ann', 'nb:x'].map((nb) => journal.files.files(nb).list(100))
    const before = { lists: lists(), totals: journal.files.totals() }
    await journal.close()

    journal = open({ path })
    assert.deepEqual({ lists: lists(), totals: journal.files.totals() }, before)
    assert.deepEqual(journal.files.files(SHARED_NOTEBOOK).stat(a.id), a)
    assert.deepEqual(journal.files.files('user:ann').stat(c.id), c)
    assert.equal(journal.files.files('user:ann').stat(b.id), undefined)
    const got = await readAll(await journal.files.files(SHARED_NOTEBOOK).read(a.id, 100, 9_000))
    assert.ok(got.equals(bytesOf(10_000, 1).subarray(100, 9_000)))
    const e = await put('user:ann', 10, 5)
    assert.ok(e.sequence > d.sequence)
  })

  it('keeps the files through a compaction, which writes no removed one', async () => {
    const path = freshPath()
    let journal = open({ path, compactMinBytes: 4096 })
    const files = journal.files.files('user:ann')
    const kept: string[] = []
    for (let i = 0; i < 5; i++) {
      kept.push((await files.put('text/plain', chunked(bytesOf(1000 + i, 100 + i)))).id)
    }
    const note = await journal.notebook('user:ann').create({ text: 'beside the files' })
    let compacted = false
    let last = 0
    for (let i = 0; i < 400 && !compacted; i++) {
      const before = journal.fileBytes
      const { id, sequence } = await files.put('text/plain', chunked(Buffer.from(`churn ${i}`)))
      last = sequence
      assert.equal(await files.delete(id), true)
      compacted = journal.fileBytes < before
    }
    assert.ok(compacted, 'compacted')
    const journalText = readFileSync(path, 'latin1')
    assert.doesNotMatch(journalText, /"t":"fd"/)
    assert.equal(journalText.match(/"t":"f"/g)?.length, 5)
    // A write after the compaction goes on the compacted file.
    const more = await files.put('text/plain', chunked(Buffer.from('after')))
    assert.ok(more.sequence > last)
    const listed = await files.list(100)
    await journal.close()

    journal = open({ path, compactMinBytes: 4096 })
    const again = journal.files.files('user:ann')
    assert.deepEqual(await again.list(100), listed)
    assert.deepEqual(
      listed.files.map((file) => file.id),
      [...kept, more.id],
    )
    for (const [i, id] of kept.entries()) {
      assert.ok(
        (await readAll(await again.read(id, 0, 1000 + i))).equals(bytesOf(1000 + i, 100 + i)),
      )
    }
    assert.equal(onDisk(path).length, 6)
    assert.equal(journal.notebook('user:ann').get(JSON.parse(note.json).id)?.json, note.json)
  })
})

describe('JournalFiles: start-up', () => {
  it('removes temporary files and files without a record', async () => {
    const path = freshPath()
    let journal = open({ path })
    const record = await journal.files.files('user:ann').put('text/plain', chunked(bytesOf(99)))
    await journal.close()
    const folder = folderOf(path, 'user:ann')
    writeFileSync(join(folder, '0123456789abcdef.tmp'), 'half an upload')
    writeFileSync(join(folder, sha256(Buffer.from('no record'))), 'no record')
    const stray = folderOf(path, 'user:gone')
    mkdirSync(stray)
    writeFileSync(join(stray, sha256(Buffer.from('x'))), 'x')
    writeFileSync(join(folder, 'README'), 'not the store’s')
    journal = open({ path })
    assert.deepEqual(onDisk(path), [
      `${folder.slice(-64)}/README`,
      `${folder.slice(-64)}/${record.id}`,
    ])
    assert.equal(existsSync(stray), false)
    assert.deepEqual(journal.files.totals(), { files: 1, bytes: 99 })
  })

  it('stops with one line at a recorded file that is missing or of another size', async () => {
    const path = freshPath()
    const journal = open({ path })
    const record = await journal.files.files('user:ann').put('text/plain', chunked(bytesOf(99)))
    await journal.close()
    const file = join(folderOf(path, 'user:ann'), record.id)
    writeFileSync(file, bytesOf(98))
    assert.throws(
      () => open({ path }),
      (err) =>
        err instanceof JournalOpenError &&
        err.message ===
          `DATA_FILE ${path}: the file ${file} holds 98 bytes where its record says 99; restore ${path}.files from the backup the journal came from.`,
    )
    rmSync(file)
    await turn()
    assert.throws(
      () => open({ path }),
      (err) =>
        err instanceof JournalOpenError &&
        err.message ===
          `DATA_FILE ${path}: the file ${file} is missing (its record says 99 bytes); restore ${path}.files from the backup the journal came from.`,
    )
    // Refused, it holds no lock: restored, it opens.
    writeFileSync(file, bytesOf(99))
    await turn()
    assert.deepEqual(open({ path }).files.totals(), { files: 1, bytes: 99 })
  })

  it('refuses a new journal beside a folder of files, which are another journal’s', async () => {
    const path = freshPath()
    const journal = open({ path })
    await journal.files.files('user:ann').put('text/plain', chunked(bytesOf(99)))
    await journal.close()
    rmSync(path)
    const refused = (err: unknown) =>
      err instanceof JournalOpenError &&
      err.message ===
        `DATA_FILE ${path} is a new journal, but ${path}.files holds files of another; restore the journal they belong to, or move the folder away.`
    assert.throws(() => open({ path }), refused)
    // Nothing is left that the next start would take for the files' journal.
    assert.equal(existsSync(path), false)
    await turn()
    assert.throws(() => open({ path }), refused)
    assert.equal(onDisk(path).length, 1)
  })
})

describe('JournalFiles: import', () => {
  it('refuses to import over a journal that holds files, without --replace', async () => {
    const path = freshPath()
    const journal = open({ path })
    await journal.files.files(SHARED_NOTEBOOK).put('text/plain', chunked(bytesOf(10)))
    await journal.close()
    const empty: ImportSource = {
      directory: [],
      notebooks: [],
      notes: 0,
      bytes: 0,
      trash: 0,
      trashBytes: 0,
      historyBytes: 0,
      dropped: { count: 0, age: 0, bytes: 0, trash: 0 },
      lastId: Number.NEGATIVE_INFINITY,
      async *read() {},
      files: [],
      async *fileBody() {},
    }
    await assert.rejects(
      importIntoJournal(empty, { path, replace: false, now: 0, maxNotes: 10, maxBytes: 1000 }),
      (err) =>
        err instanceof ImportRefusedError &&
        err.message ===
          `DATA_FILE ${path} holds a file; import into an empty store, or add --replace to replace them.`,
    )
    assert.deepEqual(open({ path }).files.totals(), { files: 1, bytes: 10 })
  })
})

describe('JournalFiles: reads', () => {
  it('answers an empty stream for an empty range, and keeps reading a file deleted meanwhile', async () => {
    const journal = open({ path: freshPath() })
    const files: NotebookFiles = journal.files.files('user:ann')
    const bytes = bytesOf(1 << 20, 7)
    const { id } = await files.put('application/octet-stream', chunked(bytes, 1 << 16))
    assert.equal((await readAll(await files.read(id, 10, 10))).length, 0)
    const stream = await files.read(id, 0, bytes.length)
    assert.equal(await files.delete(id), true)
    await turn()
    assert.equal(await files.read(id, 0, 1), undefined)
    assert.ok((await readAll(stream)).equals(bytes))
  })
})

const NOTEBOOK = 'user:crash'

/**
 * Uploads files of 64 KiB chunks (file n has 1 + n % 6 of them, each its own bytes) into one
 * notebook, a line for each once answered; argv[3] says how it goes on:
 * - 'loop': three uploads at a time, until killed;
 * - 'midway': five files, then one whose body stops after four chunks (a line says so);
 * - 'after': one file, then nothing more.
 */
const CHILD = `
const { createHash } = await import('node:crypto')
const { JournaledNotebooks } = await import(process.argv[1])
const journal = new JournaledNotebooks({ path: process.argv[2], maxNotes: 1000, maxBytes: 1 << 20 })
const files = journal.files.files(${JSON.stringify(NOTEBOOK)})
const mode = process.argv[3]
setInterval(() => {}, 1 << 30)
const say = (line) => process.stdout.write(JSON.stringify(line) + '\\n')
async function* body(n, stopAt) {
  for (let i = 0; i < 1 + (n % 6); i++) {
    if (i === stopAt) {
      say({ midway: n })
      await new Promise(() => {})
    }
    yield Buffer.alloc(65536, createHash('sha256').update(n + ':' + i).digest())
  }
}
async function upload(n, stopAt) {
  const { id, size } = await files.put('application/octet-stream', body(n, stopAt))
  say({ id, size })
}
if (mode === 'loop') {
  let next = 0
  for (let w = 0; w < 3; w++) void (async () => { for (;;) await upload(next++) })()
} else if (mode === 'midway') {
  for (let n = 0; n < 5; n++) await upload(n)
  await upload(5, 4)
} else {
  await upload(3)
}
`

interface Answered {
  id: string
  size: number
}

/**
 * Runs the child in `mode` on the journal at `path` and kills it `delayMs` after `until` holds of
 * its lines.
 */
async function runAndKill(
  path: string,
  mode: 'loop' | 'midway' | 'after',
  until: (lines: readonly Record<string, unknown>[]) => boolean,
  delayMs = 0,
): Promise<{ answered: Answered[]; temporary: string[] }> {
  const module = new URL('../../../src/store/journal/journaled-notebooks.js', import.meta.url)
  const child = spawn(
    process.execPath,
    ['--input-type=module', '-e', CHILD, module.href, path, mode],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const exited = new Promise((resolve) => child.on('exit', resolve))
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  const lines = () =>
    output
      .split('\n')
      .slice(0, -1)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
  const deadline = Date.now() + 30_000
  while (!until(lines()) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  await new Promise((resolve) => setTimeout(resolve, delayMs))
  child.kill('SIGKILL')
  await exited
  const all = lines()
  assert.ok(until(all), `the child got as far as asked: ${output.slice(-500)}`)
  return {
    answered: all.filter((line) => typeof line.id === 'string') as unknown as Answered[],
    temporary: filesUnder(path).filter((file) => file.endsWith('.tmp')),
  }
}

/** Every file under the files folder of the journal at `path`, as absolute paths. */
function filesUnder(path: string): string[] {
  return onDisk(path).map((file) => join(`${path}.files`, file))
}

async function hashOf(stream: Readable | undefined): Promise<{ id: string; size: number }> {
  assert.ok(stream !== undefined, 'no stream for a listed file')
  const hash = createHash('sha256')
  let size = 0
  for await (const chunk of stream) {
    hash.update(chunk as Buffer)
    size += (chunk as Buffer).length
  }
  return { id: hash.digest('hex'), size }
}

/**
 * Opens the journal again and checks it: every answered file there, every listed file whole (its
 * bytes hash to its id), and on disk exactly the listed files. Answers how many there are.
 */
async function checkReopened(path: string, answered: readonly Answered[]): Promise<number> {
  const journal = open({ path, maxNotes: 1000, maxBytes: 1 << 20 })
  const files = journal.files.files(NOTEBOOK)
  const listed = (await files.list(10_000)).files
  const ids = new Set(listed.map((file) => file.id))
  for (const { id, size } of answered) {
    assert.ok(ids.has(id), `answered file ${id} is kept`)
    assert.equal((await files.stat(id))?.size, size)
  }
  for (const file of listed) {
    assert.deepEqual(await hashOf(await files.read(file.id, 0, file.size)), {
      id: file.id,
      size: file.size,
    })
  }
  const present = filesUnder(path)
  assert.deepEqual(
    present.filter((file) => file.endsWith('.tmp')),
    [],
  )
  assert.deepEqual(present.map((file) => file.slice(-64)).sort(), [...ids].sort())
  await journal.close()
  return listed.length
}

describe('JournalFiles across kill -9', () => {
  it('keeps nothing of an upload killed midway, and every file answered before it', async () => {
    const path = freshPath()
    const { answered, temporary } = await runAndKill(path, 'midway', (lines) =>
      lines.some((line) => line.midway !== undefined),
    )
    assert.equal(answered.length, 5)
    assert.equal(temporary.length, 1, 'the upload was cut short on disk')
    assert.equal(await checkReopened(path, answered), 5)
  })

  it('keeps a file killed right after its answer', async () => {
    const path = freshPath()
    const { answered } = await runAndKill(path, 'after', (lines) => lines.length > 0)
    assert.equal(answered.length, 1)
    assert.equal(await checkReopened(path, answered), 1)
  })

  it('keeps every file answered when killed at any moment among concurrent uploads', async () => {
    const path = freshPath()
    const stopAfter = 12 + Math.floor(Math.random() * 12)
    const { answered } = await runAndKill(
      path,
      'loop',
      (lines) => lines.length >= stopAfter,
      Math.random() * 20,
    )
    assert.ok(answered.length >= stopAfter)
    const kept = await checkReopened(path, answered)
    // The uploads in flight (three at most) were answered or not: either way whole or gone.
    assert.ok(kept >= answered.length && kept <= answered.length + 3, `${kept} files kept`)
  })
})
