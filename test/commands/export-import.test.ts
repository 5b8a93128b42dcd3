import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { get, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { wantsExport } from '../../src/api/note-export.js'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { Progress } from '../../src/commands/command-io.js'
import { signUserToken } from '../../src/commands/token-command.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { openJournaledStore } from '../../src/store/journal/journaled-notebooks.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import { PostgresNoteStore } from '../../src/store/postgres/store.js'
import type { NoteStore } from '../../src/store/types.js'
import { injectThroughServer } from '../support/helpers.js'
import { createTestDatabase, postgresAvailable } from '../support/postgres-cluster.js'

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url))
const NDJSON = { accept: 'application/x-ndjson' }
const SECRET = 'export-test-secret-of-32-bytes-or-more!'
const root = mkdtempSync(join(tmpdir(), 'notes-export-'))
const closers: (() => Promise<unknown>)[] = []
after(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  rmSync(root, { recursive: true, force: true })
})
let files = 0
const fresh = (name: string) => join(root, `${++files}-${name}`)

/** The app over `store`, closed after the file's tests. */
function appOver(store: NoteStore, overrides: Partial<Config> = {}): FastifyInstance {
  const app = buildApp({ store, config: { ...DEFAULT_CONFIG, ...overrides } })
  closers.push(() => app.close())
  return app
}

/** The note lines the list holds: '{"data":[{..},{..}]}' -> the notes' JSON as the export has them. */
function linesOfList(body: string, store: { exportNotes: NoteStore['exportNotes'] }) {
  void store
  const notes = JSON.parse(body).data as unknown[]
  return notes.map((note) => JSON.stringify(note))
}

/** Notes with fields that a round trip must keep: odd names, nesting, unicode, a moved id. */
async function fill(app: FastifyInstance, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const payload =
      i % 3 === 0
        ? { title: `note ${i}`, tags: ['a', { deep: [i, null, true] }], text: 'é ✓ \u2028 "q"' }
        : { n: i, __proto__x: 'p', nested: { a: { b: { c: i } } } }
    const created = await app.inject({ method: 'POST', url: '/api/note', payload })
    assert.equal(created.statusCode, 200)
  }
  const list = JSON.parse((await app.inject({ url: '/api/note' })).body).data as { id: number }[]
  const [first, second, third] = list as [{ id: number }, { id: number }, { id: number }]
  // A PATCH that changes a note, one that moves its id, and a delete: the list keeps its order.
  await app.inject({ method: 'PATCH', url: `/api/note/${first.id}`, payload: { title: 'changed' } })
  await app.inject({
    method: 'PATCH',
    url: `/api/note/${second.id}`,
    payload: { id: 'not a number' },
  })
  await app.inject({ method: 'DELETE', url: `/api/note/${third.id}` })
}

/** GET /api/note over a real socket, the response paused until the caller reads it. */
function openExport(app: FastifyInstance, headers: Record<string, string> = NDJSON) {
  const { port } = app.server.address() as AddressInfo
  return new Promise<IncomingMessage>((resolve, reject) => {
    const request = get({ host: '127.0.0.1', port, path: '/api/note', headers }, (response) => {
      response.pause()
      resolve(response)
    })
    request.on('error', reject)
  })
}

async function readAll(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of response) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString()
}

/** The stores an HTTP export is checked on; PostgreSQL when it can run here. */
const STORE_KINDS: [string, () => Promise<NoteStore>][] = [
  ['memory', async () => new MemoryNoteStore({ maxNotes: 1_000_000, maxBytes: 1 << 30 })],
  [
    'journal',
    async () => {
      const store = openJournaledStore({
        path: fresh('http.journal'),
        maxNotes: 1_000_000,
        maxBytes: 1 << 30,
      })
      closers.push(() => store.close())
      return store
    },
  ],
]
const withPostgres = postgresAvailable('export-import (PostgreSQL)')
if (withPostgres) {
  STORE_KINDS.push([
    'postgres',
    async () => {
      const store = new PostgresNoteStore({
        url: await createTestDatabase(),
        maxNotes: 1_000_000,
        maxBytes: 1 << 30,
      })
      await store.open()
      closers.push(() => store.close())
      return store
    },
  ])
}

for (const [kind, makeStore] of STORE_KINDS) {
  describe(`GET /api/note with Accept: application/x-ndjson (${kind})`, () => {
    it('streams the notes of the list, byte for byte, in list order, with its Notes-Version', async () => {
      const store = await makeStore()
      const app = appOver(store)
      await fill(app, 30)
      const list = await app.inject({ url: '/api/note' })
      const exported = await app.inject({ url: '/api/note', headers: NDJSON })
      assert.equal(exported.statusCode, 200)
      assert.equal(exported.headers['content-type'], 'application/x-ndjson')
      assert.equal(exported.headers['notes-version'], list.headers['notes-version'])
      assert.equal(exported.headers['cache-control'], 'no-cache')
      assert.equal(exported.headers['x-total-count'], '29')
      const etag = `"${String(list.headers['notes-version'])}-ndjson"`
      assert.equal(exported.headers.etag, etag)
      const unchanged = await app.inject({
        url: '/api/note',
        headers: { ...NDJSON, 'if-none-match': etag },
      })
      assert.equal(unchanged.statusCode, 304)
      assert.equal(unchanged.body, '')
      const head = await app.inject({ method: 'HEAD', url: '/api/note', headers: NDJSON })
      assert.equal(head.statusCode, 200)
      assert.equal(head.headers['x-total-count'], '29')
      assert.equal(head.headers['content-type'], 'application/x-ndjson')
      assert.equal(head.body, '')
      const lines = linesOfList(list.body, store)
      assert.equal(lines.length, 29)
      assert.equal(exported.body, `${lines.join('\n')}\n`)
      // The list's own bytes: each note's JSON joined by commas inside {"data":[...]}.
      assert.equal(list.body, `{"data":[${exported.body.trimEnd().split('\n').join(',')}]}`)
    })

    it('answers an empty notebook with no lines and its version', async () => {
      const store = await makeStore()
      const app = appOver(store)
      const list = await app.inject({ url: '/api/note' })
      const exported = await app.inject({ url: '/api/note', headers: NDJSON })
      assert.equal(exported.statusCode, 200)
      assert.equal(exported.body, '')
      assert.equal(exported.headers['notes-version'], list.headers['notes-version'])
    })

    it('is one snapshot: writes made while it streams do not show in it', async () => {
      const store = await makeStore()
      const app = appOver(store)
      // Enough notes that the stream is far from written when the writes come (~1.5 MB).
      const big = 'x'.repeat(300)
      for (let i = 0; i < 5000; i += 500) {
        await Promise.all(
          Array.from({ length: 500 }, (_, j) =>
            app.inject({ method: 'POST', url: '/api/note', payload: { i: i + j, big } }),
          ),
        )
      }
      const before = await app.inject({ url: '/api/note' })
      await app.listen({ port: 0, host: '127.0.0.1' })
      const response = await openExport(app)
      assert.equal(response.headers['notes-version'], before.headers['notes-version'])
      const notes = JSON.parse(before.body).data as { id: number }[]
      const last = notes.at(-1) as { id: number }
      const first = notes[0] as { id: number }
      await app.inject({
        method: 'PATCH',
        url: `/api/note/${last.id}`,
        payload: { big: 'changed' },
      })
      await app.inject({ method: 'DELETE', url: `/api/note/${first.id}` })
      await app.inject({ method: 'POST', url: '/api/note', payload: { late: true } })
      const body = await readAll(response)
      assert.equal(body, `${linesOfList(before.body, store).join('\n')}\n`)
      const now = await app.inject({ url: '/api/note' })
      assert.notEqual(now.headers['notes-version'], before.headers['notes-version'])
    })

    it('refuses page and search parameters with a 400 problem', async () => {
      const app = appOver(await makeStore())
      for (const query of [
        'limit=2',
        'order=desc',
        'q=a',
        'after=a1.x',
        'limit=0',
        'sort=updated',
      ]) {
        const response = await app.inject({ url: `/api/note?${query}`, headers: NDJSON })
        assert.equal(response.statusCode, 400, query)
        assert.equal(response.headers['content-type'], 'application/problem+json')
        assert.match(JSON.parse(response.body).detail, /export .* is the whole notebook/)
      }
      const ignored = await app.inject({ url: '/api/note?other=1', headers: NDJSON })
      assert.equal(ignored.statusCode, 200)
      // The default sort is list order, the export's.
      const created = await app.inject({ url: '/api/note?sort=created', headers: NDJSON })
      assert.equal(created.statusCode, 200)
    })
  })
}

describe('GET /api/note with Accept: application/x-ndjson (both lanes, shutdown)', () => {
  it('is served the same through the server listener (the fast lane hands it to Fastify)', async () => {
    const app = appOver(new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 }))
    await fill(app, 4)
    await app.ready()
    const direct = await app.inject({ url: '/api/note', headers: NDJSON })
    const server = injectThroughServer(app)
    const lane = await server({ url: '/api/note', headers: NDJSON })
    assert.equal(lane.statusCode, 200)
    assert.equal(lane.headers['content-type'], 'application/x-ndjson')
    assert.equal(lane.body, direct.body)
    const plain = await server({ url: '/api/note' })
    assert.equal(plain.headers['content-type'], 'application/json; charset=utf-8')
    const refused = await server({ url: '/api/note?limit=1', headers: NDJSON })
    assert.equal(refused.statusCode, 400)
  })

  it('does not ask for the export when application/x-ndjson has q=0', async () => {
    const app = appOver(new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 }))
    const response = await app.inject({
      url: '/api/note',
      headers: { accept: 'application/x-ndjson;q=0, application/json' },
    })
    assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
  })

  it('ends an export to a reader that stopped reading when the app closes', async () => {
    const store = new MemoryNoteStore({ maxNotes: 100_000, maxBytes: 1 << 30 })
    const app = buildApp({ store, config: DEFAULT_CONFIG })
    // 16 MB: more than the socket buffers on both sides hold, so the export is still being read.
    const big = 'y'.repeat(1000)
    for (let i = 0; i < 16_000; i++) store.create({ i, big })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const response = await openExport(app)
    const ended = new Promise<string>((resolve) => {
      response.once('error', () => resolve('error'))
      response.once('aborted', () => resolve('aborted'))
      response.once('end', () => resolve('end'))
    })
    const started = Date.now()
    await app.close()
    assert.ok(Date.now() - started < 5000, 'the close was not held by the reader')
    response.resume()
    assert.notEqual(await ended, 'end', 'a cut export must not look whole')
  })
})

describe('GET /api/note with Accept: application/x-ndjson (user tokens)', () => {
  it("exports the caller's notebook alone", async () => {
    const notebooks = new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1 << 20 })
    const app = buildApp({
      notebooks,
      userTokens: new UserTokens({ secret: SECRET }),
      config: DEFAULT_CONFIG,
    })
    closers.push(() => app.close())
    const secret = Buffer.from(SECRET)
    const alice = `Bearer ${await signUserToken({ secret, sub: 'alice', ttlSeconds: 600 })}`
    const bob = `Bearer ${await signUserToken({ secret, sub: 'bob', ttlSeconds: 600 })}`
    for (const [who, text] of [
      [alice, 'a1'],
      [bob, 'b1'],
      [alice, 'a2'],
    ] as const) {
      const created = await app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { authorization: who },
        payload: { text },
      })
      assert.equal(created.statusCode, 200)
    }
    const exported = await app.inject({
      url: '/api/note',
      headers: { ...NDJSON, authorization: alice },
    })
    const list = await app.inject({ url: '/api/note', headers: { authorization: alice } })
    assert.deepEqual(
      exported.body
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line).text),
      ['a1', 'a2'],
    )
    assert.equal(exported.headers['notes-version'], list.headers['notes-version'])
    const none = await app.inject({ url: '/api/note', headers: NDJSON })
    assert.equal(none.statusCode, 401)
  })
})

/** Runs the real CLI; its exit code, stdout and stderr. */
function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
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

/** A journal store with an app over it, to fill and read; closed (lock released) by `close`. */
function journalApp(path: string) {
  const store = openJournaledStore({ path, maxNotes: 1_000_000, maxBytes: 1 << 30 })
  const app = appOver(store)
  return {
    app,
    store,
    close: async () => {
      await app.close()
      await store.close()
    },
  }
}

describe('notes-service export and import (DATA_FILE)', () => {
  it('round-trips a journal through a file: the list is byte-identical, versions are new', async () => {
    const source = fresh('source.journal')
    const one = journalApp(source)
    await fill(one.app, 20)
    const list = await one.app.inject({ url: '/api/note' })
    const note = JSON.parse(list.body).data[0] as { id: number }
    const etag = (await one.app.inject({ url: `/api/note/${note.id}` })).headers.etag
    await one.close()
    const file = fresh('dump.ndjson')
    const exported = await cli(['export', '--out', file], { DATA_FILE: source })
    assert.deepEqual(exported, { code: 0, stdout: '', stderr: '' })
    const text = readFileSync(file, 'utf8')
    const lines = text.trimEnd().split('\n')
    assert.equal(lines[0], '{"notes-service-export":1}')
    assert.equal(lines[1], '{"notebook":"shared","notes":19}')
    // The 19 notes, then their history: each note's state, the past state of the two updated,
    // and the deleted note in the trash.
    assert.equal(lines[21], '{"history":1}')
    assert.equal(lines[22], '{"notebook":"shared","notes":19,"trash":1}')
    assert.equal(lines.length, 21 + 2 + 19 + 2 + 1)
    const target = fresh('target.journal')
    assert.deepEqual(await cli(['import', file], { DATA_FILE: target }), {
      code: 0,
      stdout: '',
      stderr: '',
    })
    const two = journalApp(target)
    const copied = await two.app.inject({ url: '/api/note' })
    assert.equal(copied.body, list.body)
    assert.notEqual(copied.headers['notes-version'], list.headers['notes-version'])
    const again = await two.app.inject({ url: `/api/note/${note.id}` })
    assert.equal(again.statusCode, 200)
    assert.notEqual(again.headers.etag, etag)
    const unchanged = await two.app.inject({
      url: `/api/note/${note.id}`,
      headers: { 'if-none-match': etag as string },
    })
    assert.equal(unchanged.statusCode, 200, 'an ETag of the old store matches nothing')
    await two.close()
    // The export of the copy is the same file.
    const second = fresh('dump2.ndjson')
    assert.equal((await cli(['export', '--out', second], { DATA_FILE: target })).code, 0)
    assert.equal(readFileSync(second, 'utf8'), text)
  })

  it('imports an HTTP export (no header) into the shared notebook, stdout by default', async () => {
    const app = appOver(new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 }))
    await fill(app, 6)
    const list = await app.inject({ url: '/api/note' })
    const file = fresh('http.ndjson')
    writeFileSync(file, (await app.inject({ url: '/api/note', headers: NDJSON })).body)
    const target = fresh('from-http.journal')
    assert.equal((await cli(['import', file], { DATA_FILE: target })).code, 0)
    const exported = await cli(['export'], { DATA_FILE: target })
    assert.equal(exported.code, 0)
    const [notes, history] = exported.stdout.split('{"history":1}\n')
    assert.equal(
      notes,
      `{"notes-service-export":1}\n{"notebook":"shared","notes":5}\n${linesOfList(list.body, app as never).join('\n')}\n`,
    )
    // An HTTP export says nothing of the notes' history: each is one create, at the import.
    assert.match(
      history ?? '',
      /^\{"notebook":"shared","notes":5,"trash":0\}\n(\{"at":\d{13},"change":"created","past":0\}\n){5}$/,
    )
  })

  it('gives later creates ids above every imported id', async () => {
    const file = fresh('ids.ndjson')
    const high = Date.now() + 10 * 365 * 86_400_000
    writeFileSync(file, `{"id":${high},"a":1}\n{"id":"7"}\n{"id":${high - 5}}\n`)
    const target = fresh('ids.journal')
    assert.equal((await cli(['import', file], { DATA_FILE: target })).code, 0)
    const { app, close } = journalApp(target)
    const created = await app.inject({ method: 'POST', url: '/api/note', payload: {} })
    assert.equal(JSON.parse(created.body).data.id, high + 1)
    const found = await app.inject({ url: `/api/note/${high}` })
    assert.equal(found.body, `{"data":{"id":${high},"a":1}}`)
    await close()
  })

  it('refuses a journal that holds notes without --replace, and replaces with it', async () => {
    const target = fresh('full.journal')
    const one = journalApp(target)
    await fill(one.app, 3)
    await one.close()
    const before = readFileSync(target)
    const file = fresh('one.ndjson')
    writeFileSync(file, '{"id":1,"only":true}\n')
    const refused = await cli(['import', file], { DATA_FILE: target })
    assert.equal(refused.code, 1)
    assert.equal(refused.stdout, '')
    assert.equal(
      refused.stderr,
      `notes-service import: DATA_FILE ${target} holds 2 notes; import into an empty store, or add --replace to replace them.\n`,
    )
    assert.deepEqual(readFileSync(target), before)
    assert.equal((await cli(['import', file, '--replace'], { DATA_FILE: target })).code, 0)
    const two = journalApp(target)
    assert.equal(
      (await two.app.inject({ url: '/api/note' })).body,
      '{"data":[{"id":1,"only":true}]}',
    )
    await two.close()
  })

  it('refuses a malformed file naming the line, before changing anything', async () => {
    const target = fresh('kept.journal')
    const one = journalApp(target)
    await fill(one.app, 3)
    await one.close()
    const before = readFileSync(target)
    const header = '{"notes-service-export":1}'
    const cases: [string, string][] = [
      [
        `${header}\n{"notebook":"shared","notes":2}\n{"a":1}\n[1]\n`,
        'line 4: a note must be a JSON object.',
      ],
      [
        `${header}\n{"notebook":"shared","notes":1}\n{"a":1}\n{"a":2}\n`,
        'line 4: expected a notebook line',
      ],
      [
        `${header}\n{"notebook":"shared","notes":3}\n{"a":1}\n`,
        'line 4: the file ends 2 notes short',
      ],
      ['{"notes-service-export":2}\n', 'line 1: an export of format 2'],
      ['{"a":1}\n\n{"a":2}\n', 'line 2: an empty line'],
      ['{"a":1}\n{"a":\n', 'line 2: not JSON.'],
      [
        `${header}\n{"notebook":"x","notes":0}\n{"notebook":"x","notes":0}\n`,
        'line 3: notebook "x" appears a second time.',
      ],
    ]
    for (const [text, expected] of cases) {
      const file = fresh('bad.ndjson')
      writeFileSync(file, text)
      const refused = await cli(['import', file, '--replace'], { DATA_FILE: target })
      assert.equal(refused.code, 1, expected)
      assert.ok(
        refused.stderr.startsWith(`notes-service import: ${file} ${expected}`),
        `${refused.stderr} should say ${expected}`,
      )
      assert.equal(refused.stderr.split('\n').length, 2, 'one line')
      assert.deepEqual(readFileSync(target), before)
    }
  })

  it('takes user notebooks; refuses caps, a running server, and usage errors', async () => {
    const target = fresh('refusals.journal')
    const users = fresh('users.ndjson')
    writeFileSync(
      users,
      '{"notes-service-export":1}\n{"notebook":"user:alice","notes":1}\n{"a":1}\n{"notebook":"shared","notes":0}\n',
    )
    // A user's notebook goes into a journal as into PostgreSQL; the empty one is not written back.
    const other = await cli(['import', users], { DATA_FILE: target })
    assert.equal(other.code, 0, other.stderr)
    assert.match(
      (await cli(['export'], { DATA_FILE: target })).stdout,
      /^\{"notes-service-export":1\}\n\{"notebook":"user:alice","notes":1\}\n\{"a":1\}\n\{"history":1\}\n\{"notebook":"user:alice","notes":1,"trash":0\}\n\{"at":\d{13},"change":"created","past":0\}\n$/,
    )
    rmSync(target)
    const three = fresh('three.ndjson')
    writeFileSync(three, '{"a":1}\n{"a":2}\n{"a":3}\n')
    const capped = await cli(['import', three], { DATA_FILE: target, MAX_NOTES: '2' })
    assert.deepEqual(capped, {
      code: 1,
      stdout: '',
      stderr: 'notes-service import: The file holds 3 notes; MAX_NOTES allows 2.\n',
    })
    const running = journalApp(target)
    const locked = await cli(['import', three], { DATA_FILE: target })
    assert.equal(locked.code, 1)
    assert.match(locked.stderr, /is in use by process \d+/)
    const lockedExport = await cli(['export'], { DATA_FILE: target })
    assert.equal(lockedExport.code, 1)
    await running.close()
    assert.equal((await cli(['import'], { DATA_FILE: target })).code, 2)
    assert.equal((await cli(['import', three, '--force'], { DATA_FILE: target })).code, 2)
    assert.equal((await cli(['export', '--out'], { DATA_FILE: target })).code, 2)
    const neither = await cli(['export'], {})
    assert.equal(neither.code, 1)
    assert.match(neither.stderr, /^notes-service export: neither DATA_FILE nor DATABASE_URL is set/)
    const missing = await cli(['export'], { DATA_FILE: fresh('missing.journal') })
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /does not exist/)
    const help = await cli(['--help'], {})
    assert.match(help.stdout, /export \[--out FILE\]/)
    assert.match(help.stdout, /import FILE \[--replace\]/)
  })
})

if (withPostgres) {
  describe('notes-service export and import (DATABASE_URL)', () => {
    it('round-trips journal -> PostgreSQL -> journal with byte-identical lists', async () => {
      const source = fresh('pg-source.journal')
      const one = journalApp(source)
      await fill(one.app, 40)
      const list = (await one.app.inject({ url: '/api/note' })).body
      await one.close()
      const file = fresh('pg.ndjson')
      assert.equal((await cli(['export', '--out', file], { DATA_FILE: source })).code, 0)
      const url = await createTestDatabase()
      assert.deepEqual(await cli(['import', file], { DATABASE_URL: url }), {
        code: 0,
        stdout: '',
        stderr: '',
      })
      const store = new PostgresNoteStore({ url, maxNotes: 1000, maxBytes: 1 << 24 })
      closers.push(() => store.close())
      const app = appOver(store)
      assert.equal((await app.inject({ url: '/api/note' })).body, list)
      const back = fresh('pg-back.ndjson')
      assert.equal((await cli(['export', '--out', back], { DATABASE_URL: url })).code, 0)
      assert.equal(readFileSync(back, 'utf8'), readFileSync(file, 'utf8'))
      const target = fresh('pg-target.journal')
      assert.equal((await cli(['import', back], { DATA_FILE: target })).code, 0)
      const two = journalApp(target)
      assert.equal((await two.app.inject({ url: '/api/note' })).body, list)
      await two.close()
      // Refused when it holds notes; nothing changed.
      const refused = await cli(['import', back], { DATABASE_URL: url })
      assert.equal(refused.code, 1)
      assert.match(refused.stderr, /The database holds 39 notes; import into an empty store/)
      assert.equal((await app.inject({ url: '/api/note' })).body, list)
    })

    it('moves every notebook to a new database, byte-identical per notebook', async () => {
      const url = await createTestDatabase()
      const notebooks = new PostgresNotebooks({ url, maxNotes: 10_000, maxBytes: 1 << 24 })
      closers.push(() => notebooks.close())
      await notebooks.open()
      const names = ['shared', 'user:alice', 'user:bob', 'user:ünï']
      for (const [i, name] of names.entries()) {
        const store = notebooks.notebook(name)
        for (let n = 0; n <= i * 3; n++) await store.create({ name, n })
      }
      const alice = notebooks.notebook('user:alice')
      const first = JSON.parse((await alice.list()).json)[0] as { id: number }
      await alice.update(first.id, { changed: true })
      const high = Date.now() + 10 * 365 * 86_400_000
      await alice.update(first.id, { id: high })
      const lists = new Map<string, string>()
      for (const name of names) lists.set(name, (await notebooks.notebook(name).list()).json)
      const file = fresh('notebooks.ndjson')
      const env = { DATABASE_URL: url, AUTH_JWT_SECRET: SECRET }
      assert.equal((await cli(['export', '--out', file], env)).code, 0)
      const lines = readFileSync(file, 'utf8').split('\n')
      assert.equal(lines[1], '{"notebook":"shared","notes":1}')
      // Into a journal (DATA_FILE with user tokens) and out again: the same file, byte for byte.
      const journal = fresh('notebooks.journal')
      const journalEnv = { DATA_FILE: journal, AUTH_JWT_SECRET: SECRET }
      assert.equal((await cli(['import', file], journalEnv)).code, 0)
      assert.equal((await cli(['export'], journalEnv)).stdout, readFileSync(file, 'utf8'))
      const copyUrl = await createTestDatabase()
      assert.equal((await cli(['import', file], { ...env, DATABASE_URL: copyUrl })).code, 0)
      const copy = new PostgresNotebooks({ url: copyUrl, maxNotes: 10_000, maxBytes: 1 << 24 })
      closers.push(() => copy.close())
      await copy.open()
      for (const name of names) {
        assert.equal((await copy.notebook(name).list()).json, lists.get(name), name)
      }
      // The next create's id is above every imported one, whichever notebook creates.
      const created = await copy.notebook('user:carol').create({})
      assert.equal(JSON.parse(created.json).id, high + 1)
      // --replace: the copy now holds the file alone again, the create gone.
      assert.equal(
        (await cli(['import', file, '--replace'], { ...env, DATABASE_URL: copyUrl })).code,
        0,
      )
      assert.equal((await copy.notebook('user:carol').list()).json, '[]')
      const fresh2 = new PostgresNotebooks({ url: copyUrl, maxNotes: 10_000, maxBytes: 1 << 24 })
      closers.push(() => fresh2.close())
      for (const name of names) {
        assert.equal((await fresh2.notebook(name).list()).json, lists.get(name), name)
      }
      const stats = await fresh2.stats()
      assert.equal(stats.notes, 1 + 4 + 7 + 10)
    })

    it("exports the caller's notebook alone (user tokens on PostgreSQL)", async () => {
      const notebooks = new PostgresNotebooks({
        url: await createTestDatabase(),
        maxNotes: 1000,
        maxBytes: 1 << 20,
      })
      await notebooks.open()
      closers.push(() => notebooks.close())
      const app = buildApp({
        notebooks,
        userTokens: new UserTokens({ secret: SECRET }),
        config: DEFAULT_CONFIG,
      })
      closers.push(() => app.close())
      const secret = Buffer.from(SECRET)
      const alice = `Bearer ${await signUserToken({ secret, sub: 'alice', ttlSeconds: 600 })}`
      const bob = `Bearer ${await signUserToken({ secret, sub: 'bob', ttlSeconds: 600 })}`
      for (const [who, text] of [
        [bob, 'b1'],
        [alice, 'a1'],
        [bob, 'b2'],
      ] as const) {
        await app.inject({
          method: 'POST',
          url: '/api/note',
          headers: { authorization: who },
          payload: { text },
        })
      }
      const exported = await app.inject({
        url: '/api/note',
        headers: { ...NDJSON, authorization: bob },
      })
      const list = await app.inject({ url: '/api/note', headers: { authorization: bob } })
      assert.equal(exported.statusCode, 200)
      assert.equal(list.body, `{"data":[${exported.body.trimEnd().split('\n').join(',')}]}`)
      assert.deepEqual(
        exported.body
          .trimEnd()
          .split('\n')
          .map((line) => JSON.parse(line).text),
        ['b1', 'b2'],
      )
      assert.equal(exported.headers['notes-version'], list.headers['notes-version'])
    })

    it('gives the export connection back when the reader goes away', async () => {
      const url = await createTestDatabase()
      const store = new PostgresNoteStore({
        url,
        maxNotes: 100_000,
        maxBytes: 1 << 30,
        poolSize: 4,
      })
      await store.open()
      closers.push(() => store.close())
      const app = appOver(store)
      const big = 'z'.repeat(500)
      for (let i = 0; i < 3000; i += 500) {
        await Promise.all(
          Array.from({ length: 500 }, () =>
            app.inject({ method: 'POST', url: '/api/note', payload: { big } }),
          ),
        )
      }
      await app.listen({ port: 0, host: '127.0.0.1' })
      // More early aborts than the pool has connections: each must give its connection back.
      for (let i = 0; i < 6; i++) {
        const response = await openExport(app)
        response.destroy()
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      const whole = await openExport(app)
      whole.resume()
      const body = await readAll(whole)
      assert.equal(body.trimEnd().split('\n').length, 3000)
      const list = await app.inject({ url: '/api/note' })
      assert.equal(list.statusCode, 200)
    })
  })
}

describe('wantsExport', () => {
  const cases: [string | undefined, boolean][] = [
    ['application/x-ndjson', true],
    ['Application/X-NDJSON', true],
    ['application/json, application/x-ndjson;q=0.5', true],
    ['application/x-ndjson; q=0', false],
    ['application/x-ndjson;q=0.0', false],
    ['application/json', false],
    ['*/*', false],
    ['application/x-ndjsonx', false],
    [undefined, false],
  ]
  for (const [accept, expected] of cases) {
    it(`${JSON.stringify(accept)} -> ${expected}`, () => {
      assert.equal(wantsExport(accept), expected)
    })
  }
})

describe('the progress line of export and import', () => {
  function stderr(isTTY: boolean) {
    const written: string[] = []
    const stream = Object.assign(
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          written.push(chunk.toString())
          done()
        },
      }),
      { isTTY },
    )
    return { stream, written }
  }

  it('writes nothing when stderr is not a terminal', () => {
    const { stream, written } = stderr(false)
    const progress = new Progress(stream, 'exported')
    progress.add(1000)
    progress.done()
    assert.deepEqual(written, [])
  })

  it('rewrites one line at most four times a second on a terminal, and ends it', async () => {
    const { stream, written } = stderr(true)
    const progress = new Progress(stream, 'imported')
    for (let i = 0; i < 100; i++) progress.add(10)
    assert.equal(written.length, 1)
    const first = written[0] as string
    assert.match(first, /^\rimported 10 notes, \d+ notes\/s/)
    assert.ok(first.endsWith('\u001b[K'), 'the rest of the line is cleared')
    await new Promise((resolve) => setTimeout(resolve, 300))
    progress.add(10)
    progress.done()
    assert.equal(written.length, 4)
    assert.match(written[2] as string, /^\rimported 1010 notes, /)
    assert.equal(written[3], '\n')
  })
})
