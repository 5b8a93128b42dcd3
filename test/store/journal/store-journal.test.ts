import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { JournalOpenError } from '../../../src/store/journal/journal-open-error.js'
import {
  type JournaledStoreOptions,
  openJournaledStore,
} from '../../../src/store/journal/journaled-notebooks.js'
import type { JournaledStore } from '../../../src/store/journal/journaled-store.js'
import { type NoteWriter, PreconditionFailed, StoreFullError } from '../../../src/store/types.js'
import { startServer } from '../../hostile/server-process.js'
import { lockText, procStat, zombieHolder, zombieService } from '../../support/pid-lock-holder.js'
import { page, runStoreContract } from '../../support/store.contract.js'

const SERVER = fileURLToPath(new URL('../../../src/server.js', import.meta.url))
const root = mkdtempSync(join(tmpdir(), 'notes-journal-'))
const opened: JournaledStore[] = []
after(async () => {
  await Promise.allSettled(opened.map((store) => store.close()))
  rmSync(root, { recursive: true, force: true })
})

let files = 0
/** A fresh path in the test directory. */
const freshPath = () => join(root, `notes-${++files}.journal`)

function open(options: Partial<JournaledStoreOptions> & { path: string }): JournaledStore {
  const store = openJournaledStore({ maxNotes: 1_000_000, maxBytes: 1 << 28, ...options })
  opened.push(store)
  return store
}

runStoreContract('JournaledStore', ({ maxNotes, maxBytes, now, historyLimit }) =>
  open({
    path: freshPath(),
    ...(maxNotes === undefined ? {} : { maxNotes }),
    ...(maxBytes === undefined ? {} : { maxBytes }),
    ...(now === undefined ? {} : { now }),
    ...(historyLimit === undefined ? {} : { historyLimit }),
  }),
)

/** Everything a client can observe of a store, to compare before and after a reopen. */
async function observe(store: JournaledStore, since: string) {
  return {
    list: store.list(),
    version: store.version(),
    stats: store.stats(),
    pages: [store.page(page({ limit: 2 })), store.page(page({ order: 'desc', limit: 3 }))],
    changes: store.changesSince(since, 1000),
    again: await store.createOnce('key-1', 'fp-1', { ignored: true }),
    reused: await store.createOnce('key-1', 'other', {}).catch((err: Error) => err.name),
  }
}

/** Creates with and without keys, updates (one moving an id), deletes. */
async function writeSome(store: JournaledStore, t: { now: number }): Promise<string> {
  const start = store.version()
  const a = JSON.parse((await store.create({ title: 'a' })).json) as { id: number }
  t.now += 10
  await store.createOnce('key-1', 'fp-1', { title: 'keyed' })
  t.now += 10
  const c = JSON.parse((await store.create({ title: 'c', n: [1, { x: null }] })).json) as {
    id: number
  }
  t.now += 10
  await store.update(a.id, { body: 'more' })
  await store.update(c.id, { nested: { k: null } }, 'merge-patch')
  await store.update(c.id, { id: 42 })
  const d = JSON.parse((await store.create({ title: 'd' })).json) as { id: number }
  await store.delete(d.id)
  await Promise.all([store.create({ p: 1 }), store.create({ p: 2 }), store.update(42, { q: 1 })])
  return start
}

describe('JournaledStore: restarts', () => {
  it('reopens with the same list, version, ETags, history and idempotency keys', async () => {
    const path = freshPath()
    const t = { now: 1_700_000_000_000 }
    const store = open({ path, now: () => t.now })
    const since = await writeSome(store, t)
    const before = await observe(store, since)
    await store.close()
    const again = open({ path, now: () => t.now })
    assert.equal(again.dropped, undefined)
    assert.deepEqual(await observe(again, since), before)
    assert.equal(before.again.replayed, true)
    assert.equal(before.reused, 'IdempotencyKeyReusedError')
    // A later write goes on from the same sequence.
    const note = await again.create({ after: true })
    assert.equal(
      note.etag,
      `"${before.version.split('.')[0]}.${((before.changes?.length ?? 0) + 1).toString(36)}"`,
    )
  })

  it('tells subscribers of a change only once it is durable, and in order', async () => {
    const store = open({ path: freshPath() })
    const seen: string[] = []
    store.subscribe((change) => seen.push(`${change.type} ${change.sequence}`))
    const writes = [store.create({ a: 1 }), store.create({ b: 2 })]
    assert.deepEqual(seen, [])
    await Promise.all(writes)
    assert.deepEqual(seen, ['created 1', 'created 2'])
  })

  it('answers a repeated Idempotency-Key only once the first create is durable', async () => {
    const store = open({ path: freshPath() })
    const seen: string[] = []
    store.subscribe((change) => seen.push(change.type))
    const first = store.createOnce('k', 'fp', { a: 1 })
    const repeat = await store.createOnce('k', 'fp', { a: 1 })
    assert.deepEqual(seen, ['created'])
    assert.equal(repeat.replayed, true)
    assert.deepEqual(repeat.note, (await first).note)
  })

  it('reopens the writes of a batch and its key; a refused batch leaves the file as it was', async () => {
    const path = freshPath()
    const t = { now: 1_700_000_000_000 }
    const store = open({ path, now: () => t.now })
    await store.create({ a: 1 })
    const id = t.now
    const work = (writer: NoteWriter) => {
      writer.create({ b: 1 })
      writer.update(id, { a: 2 })
      writer.delete(id)
      return 'kept'
    }
    assert.deepEqual(await store.batch(work, { key: 'b', fingerprint: 'fp' }), {
      body: 'kept',
      replayed: false,
    })
    const size = statSync(path).size
    const refused = await store.batch((writer) => {
      writer.create({ c: 1 })
      return writer.delete(12345) === false ? undefined : 'kept'
    })
    assert.equal(refused, undefined)
    assert.equal(statSync(path).size, size)
    const before = {
      list: store.list(),
      version: store.version(),
      changes: store.changesSince(`${store.version().split('.')[0]}.0`, 10),
    }
    await store.close()
    const again = open({ path, now: () => t.now })
    assert.deepEqual(
      {
        list: again.list(),
        version: again.version(),
        changes: again.changesSince(`${again.version().split('.')[0]}.0`, 10),
      },
      before,
    )
    assert.equal(before.changes?.length, 4)
    assert.deepEqual(await again.batch(() => 'again', { key: 'b', fingerprint: 'fp' }), {
      body: 'kept',
      replayed: true,
    })
  })

  it('keeps a conditional write that fails out of the journal', async () => {
    const path = freshPath()
    const store = open({ path })
    const note = JSON.parse((await store.create({ a: 1 })).json) as { id: number }
    const size = statSync(path).size
    const refused = await store.update(note.id, { a: 2 }, 'merge', { ifMatch: ['"nope"'] })
    assert.ok(refused instanceof PreconditionFailed)
    assert.equal(statSync(path).size, size)
  })
})

describe('JournaledStore: damage', () => {
  it('drops a torn last record and keeps every record before it', async () => {
    const path = freshPath()
    const store = open({ path })
    await store.create({ n: 1 })
    await store.create({ n: 2 })
    const list = store.list().json
    const two = statSync(path).size
    await store.create({ n: 3 })
    await store.close()
    const size = statSync(path).size
    truncateSync(path, size - 5)
    const again = open({ path })
    assert.equal(again.list().json, list)
    assert.deepEqual(again.dropped, { offset: two, bytes: size - 5 - two })
    assert.equal(statSync(path).size, two)
  })

  it('drops a torn batch whole: none of its writes comes back', async () => {
    const path = freshPath()
    const store = open({ path })
    await store.create({ n: 1 })
    const list = store.list().json
    const one = statSync(path).size
    await store.batch((writer) => {
      for (let n = 2; n < 6; n++) writer.create({ n })
      return 'kept'
    })
    await store.close()
    // Cut anywhere inside the batch's one record: its first writes are complete bytes, yet lost.
    truncateSync(path, statSync(path).size - 40)
    const again = open({ path })
    assert.equal(again.list().json, list)
    assert.equal(again.dropped?.offset, one)
  })

  it('drops zeros left at the end by a crash (the file grew before its data landed)', async () => {
    const path = freshPath()
    const store = open({ path })
    await store.create({ n: 1 })
    const list = store.list().json
    await store.close()
    appendFileSync(path, Buffer.alloc(100))
    const again = open({ path })
    assert.equal(again.list().json, list)
    assert.equal(again.dropped?.bytes, 100)
  })

  it('refuses to open a journal damaged in the middle, naming the byte offset', async () => {
    const path = freshPath()
    const store = open({ path })
    await store.create({ n: 1 })
    const second = statSync(path).size
    await store.create({ n: 2 })
    await store.create({ n: 3 })
    await store.close()
    const bytes = readFileSync(path)
    bytes[second + 12] = (bytes[second + 12] as number) ^ 0xff
    writeFileSync(path, bytes)
    assert.throws(
      () => open({ path }),
      (err: Error) =>
        err instanceof JournalOpenError &&
        err.message ===
          `DATA_FILE ${path} is damaged at byte ${second}: a record whose checksum does not match; restore it from a backup or move it away.`,
    )
    // Refused opens leave no lock behind.
    assert.throws(() => statSync(`${path}.lock`), { code: 'ENOENT' })
  })

  it('refuses a file that is not a journal, and a directory', () => {
    const foreign = freshPath()
    writeFileSync(foreign, 'hello\n')
    assert.throws(() => open({ path: foreign }), {
      message: `DATA_FILE ${foreign} is not a notes-service journal.`,
    })
    const directory = freshPath()
    mkdirSync(directory)
    assert.throws(() => open({ path: directory }), {
      name: 'JournalOpenError',
      message: `DATA_FILE ${directory} is a directory.`,
    })
  })

  it('refuses a second store on a file in use, and takes over a lock left by a dead process', async () => {
    const path = freshPath()
    const store = open({ path })
    assert.throws(() => open({ path }), {
      message: `DATA_FILE ${path} is in use by process ${process.pid} (lock ${path}.lock); one process per file.`,
    })
    await store.create({ n: 1 })
    await store.close()
    writeFileSync(`${path}.lock`, `${await deadPid()}\n`)
    const again = open({ path })
    assert.equal(again.stats().notes, 1)
    assert.equal(readFileSync(`${path}.lock`, 'utf8'), lockText({}))
  })

  it('takes over at once a lock of PID 1 (the previous start of a container) and one of a zombie', async () => {
    const pid1 = lockText({ pid: 1, start: procStat(1).start + 1 })
    for (const text of ['1\n', pid1]) {
      const path = freshPath()
      writeFileSync(`${path}.lock`, text)
      const store = open({ path })
      assert.equal(readFileSync(`${path}.lock`, 'utf8'), lockText({}))
      await store.close()
    }
    const path = freshPath()
    const holder = await zombieHolder(`${path}.lock`)
    try {
      const store = open({ path })
      assert.equal(readFileSync(`${path}.lock`, 'utf8'), lockText({}))
      await store.close()
    } finally {
      await holder.stop()
    }
  })

  it('refuses a lock leased by another PID namespace, saying until when, and takes it once lapsed', async () => {
    const path = freshPath()
    const lock = `${path}.lock`
    writeFileSync(lock, lockText({ pid: 4242, pidns: 'pid:[1]' }))
    const { mtimeMs } = statSync(lock)
    const until = new Date(mtimeMs + 30_000).toISOString()
    assert.throws(
      () => open({ path }),
      (err: Error) =>
        err instanceof JournalOpenError &&
        err.leaseEndsAt === mtimeMs + 30_000 &&
        err.message ===
          `DATA_FILE ${path} is in use by process 4242 in another PID namespace (lock ${lock}, renewed every 5 s; taken over if not renewed by ${until}); one process per file.`,
    )
    const lapsed = new Date(Date.now() - 31_000)
    utimesSync(lock, lapsed, lapsed)
    await open({ path }).close()
  })
})

describe('JournaledStore: compaction', () => {
  it('compacts again only once the file has doubled since, when the history outweighs the notes', async () => {
    // One small note and 1,000 changes kept: the image (mostly history) is far more than twice
    // the note, which alone would make every write compact again.
    const store = open({ path: freshPath(), historyLimit: 1000, compactMinBytes: 4096 })
    const id = JSON.parse((await store.create({ n: 0 })).json).id as number
    let last = store.fileBytes
    let compactions = 0
    for (let n = 1; n <= 3000; n++) {
      await store.update(id, { n })
      if (store.fileBytes < last) compactions++
      last = store.fileBytes
    }
    assert.ok(compactions >= 1 && compactions <= 8, `${compactions} compactions`)
    assert.ok(store.fileBytes < 1 << 20, `${store.fileBytes} bytes`)
  })

  it('compacts a journal past twice the live data; the file shrinks and reopens the same', async () => {
    const path = freshPath()
    const t = { now: 1_700_000_000_000 }
    // Without revisions and trash, which an image keeps too (journal-archive.test.ts).
    const archive = { noteHistory: 0, trashMs: 0 }
    const store = open({
      path,
      now: () => t.now,
      compactMinBytes: 16 * 1024,
      historyLimit: 50,
      archive,
    })
    await store.createOnce('kept', 'fp', { keyed: true })
    const note = JSON.parse((await store.create({ text: 'x'.repeat(100) })).json) as { id: number }
    let largest = 0
    let shrank = 0
    for (let i = 0; i < 400; i++) {
      t.now += 1
      const writes: Promise<unknown>[] = [store.update(note.id, { text: `${i}`.repeat(50) })]
      const extra = await store.create({ i })
      writes.push(store.delete((JSON.parse(extra.json) as { id: number }).id))
      await Promise.all(writes)
      const size = statSync(path).size
      if (size < largest / 2) shrank++
      largest = Math.max(largest, size)
    }
    // Past 16 KiB and twice its last image, the file is compacted: it shrinks, and stays bounded.
    assert.ok(largest > 16 * 1024, `the journal grew to ${largest}`)
    assert.ok(shrank > 0, 'the journal was compacted')
    assert.ok(largest < 64 * 1024, `the journal grew to ${largest}`)
    const [epoch, digits] = store.version().split('.') as [string, string]
    const since = `${epoch}.${(Number.parseInt(digits, 36) - 40).toString(36)}`
    const observe = async (s: JournaledStore) => ({
      list: s.list(),
      version: s.version(),
      history: s.changesSince(since, 100),
      again: await s.createOnce('kept', 'fp', {}),
    })
    const before = await observe(store)
    assert.equal(before.history?.length, 40)
    assert.equal(before.again.replayed, true)
    await store.close()
    const again = open({ path, now: () => t.now, historyLimit: 50, archive })
    assert.deepEqual(await observe(again), before)
  })
})

describe('DATA_FILE: the service', () => {
  it('keeps every acknowledged create across kill -9', async () => {
    const path = freshPath()
    const server = await startServer({ env: { DATA_FILE: path } })
    const acknowledged: string[] = []
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        for (let j = 0; j < 10; j++) {
          const answer = await call(server.port, 'POST', '/api/note', { i, j })
          if (answer.status === 200) acknowledged.push(answer.body)
        }
      }),
    )
    // Writes in flight when the process dies: acknowledged or not, never half-there.
    const inFlight = Array.from({ length: 20 }, (_, i) =>
      call(server.port, 'POST', '/api/note', { late: i }).catch(() => undefined),
    )
    server.child.kill('SIGKILL')
    await server.exited
    await Promise.all(inFlight)
    const again = await startServer({ env: { DATA_FILE: path } })
    try {
      const list = JSON.parse((await call(again.port, 'GET', '/api/note')).body) as {
        data: unknown[]
      }
      const stored = new Set(list.data.map((note) => JSON.stringify(note)))
      assert.equal(acknowledged.length, 200)
      for (const body of acknowledged) {
        const { data } = JSON.parse(body) as { data: unknown }
        assert.ok(stored.has(JSON.stringify(data)), `${body} is kept`)
      }
    } finally {
      await again.stop()
    }
  })

  it('keeps every acknowledged batch whole across kill -9, and no other batch even in part', async () => {
    const path = freshPath()
    const server = await startServer({ env: { DATA_FILE: path } })
    const batch = (tag: string) => ({
      requests: Array.from({ length: 5 }, (_, n) => ({
        method: 'POST',
        url: '/api/note',
        body: { tag, n },
      })),
    })
    const acknowledged: string[] = []
    const sent: string[] = []
    const writers = Array.from({ length: 8 }, async (_, i) => {
      for (let j = 0; ; j++) {
        const tag = `${i}-${j}`
        sent.push(tag)
        const answer = await call(server.port, 'POST', '/api/batch', batch(tag)).catch(
          () => undefined,
        )
        if (answer?.status !== 200) return
        acknowledged.push(tag)
      }
    })
    // Killed at a random moment once a few batches are acknowledged (however slow the machine).
    const deadline = Date.now() + 30_000
    while (acknowledged.length <= 8 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 300))
    server.child.kill('SIGKILL')
    await server.exited
    await Promise.all(writers)
    const again = await startServer({ env: { DATA_FILE: path } })
    try {
      const list = JSON.parse((await call(again.port, 'GET', '/api/note')).body) as {
        data: { tag: string }[]
      }
      const counts = new Map<string, number>()
      for (const note of list.data) counts.set(note.tag, (counts.get(note.tag) ?? 0) + 1)
      assert.ok(acknowledged.length > 8, `${acknowledged.length} batches acknowledged`)
      for (const tag of acknowledged) assert.equal(counts.get(tag), 5, `batch ${tag} is kept whole`)
      for (const tag of sent)
        assert.ok([undefined, 5].includes(counts.get(tag)), `batch ${tag} is whole or absent`)
    } finally {
      await again.stop()
    }
  })

  it('logs a torn last record that start-up dropped, as a warning naming where', async () => {
    const path = freshPath()
    const store = open({ path })
    await store.create({ n: 1 })
    const end = statSync(path).size
    await store.create({ n: 2 })
    await store.close()
    truncateSync(path, statSync(path).size - 3)
    const server = await startServer({ env: { DATA_FILE: path } })
    try {
      const warning = server.logs.find((entry) => entry.level === 40)
      assert.deepEqual(
        { msg: warning?.msg, offset: warning?.offset, dataFile: warning?.dataFile },
        {
          msg: 'DATA_FILE ended in a torn record (a crash mid-write); it was dropped',
          offset: end,
          dataFile: path,
        },
      )
      const { data } = JSON.parse((await call(server.port, 'GET', '/api/note')).body) as {
        data: { n: number }[]
      }
      assert.deepEqual(
        data.map((note) => note.n),
        [1],
      )
    } finally {
      await server.stop()
    }
  })

  it('starts at once on the file of a service started through /bin/sh -c and killed (a zombie)', async () => {
    const path = freshPath()
    const killed = await zombieService(path)
    try {
      assert.equal(procStat(killed.pid).state, 'Z')
      const server = await startServer({ env: { DATA_FILE: path } })
      try {
        assert.deepEqual(await call(server.port, 'GET', '/api/note?limit=1'), {
          status: 200,
          body: '{"data":[]}',
        })
        const lock = JSON.parse(readFileSync(`${path}.lock`, 'utf8')) as { pid: number }
        assert.equal(lock.pid, server.child.pid)
      } finally {
        await server.stop()
      }
    } finally {
      await killed.stop()
    }
  })

  it('waits once for a lock leased by another PID namespace: starts when it lapses, exits 2 when it is renewed', async () => {
    const path = freshPath()
    const lock = `${path}.lock`
    const leave = (at: number): void => {
      writeFileSync(lock, lockText({ pid: 4242, pidns: 'pid:[1]' }))
      utimesSync(lock, new Date(at), new Date(at))
    }
    const refusal = (at: number) =>
      `notes-service: DATA_FILE ${path} is in use by process 4242 in another PID namespace (lock ${lock}, renewed every 5 s; taken over if not renewed by ${new Date(at + 30_000).toISOString()}); one process per file.`
    // Renewed while the service waits: the holder runs.
    const first = Math.floor(Date.now() / 1000) * 1000 - 25_000
    leave(first)
    const renewed = Math.floor(Date.now() / 1000) * 1000
    const child = spawn(process.execPath, [SERVER], {
      env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', DATA_FILE: path },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr === '') utimesSync(lock, new Date(renewed), new Date(renewed))
      stderr += chunk
    })
    // A service that took the lock at once would run on: stopped, it fails the test.
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    const [code] = await once(child, 'close')
    clearTimeout(timer)
    assert.deepEqual(
      { code, stderr },
      { code: 2, stderr: `${refusal(first)} Waiting until then.\n${refusal(renewed)}\n` },
    )
    // Not renewed: the service starts once the lease lapses.
    leave(Date.now() - 28_000)
    const server = await startServer({ env: { DATA_FILE: path } })
    try {
      assert.equal((await call(server.port, 'GET', '/api/note?limit=1')).status, 200)
      const owner = JSON.parse(readFileSync(lock, 'utf8')) as { pid: number }
      assert.equal(owner.pid, server.child.pid)
    } finally {
      await server.stop()
    }
  })

  it('exits 2 with one line for a second process on the file, a foreign file and a directory', async () => {
    const path = freshPath()
    const server = await startServer({ env: { DATA_FILE: path } })
    try {
      const pid = server.child.pid as number
      assert.deepEqual(await runServer({ DATA_FILE: path }), {
        code: 2,
        stderr: `notes-service: DATA_FILE ${path} is in use by process ${pid} (lock ${path}.lock); one process per file.\n`,
      })
    } finally {
      await server.stop()
    }
    assert.throws(() => statSync(`${path}.lock`), { code: 'ENOENT' }, 'shutdown removes the lock')
    const foreign = freshPath()
    writeFileSync(foreign, '{"notes":[]}')
    assert.deepEqual(await runServer({ DATA_FILE: foreign }), {
      code: 2,
      stderr: `notes-service: DATA_FILE ${foreign} is not a notes-service journal.\n`,
    })
    assert.deepEqual(await runServer({ DATA_FILE: root }), {
      code: 2,
      stderr: `notes-service: DATA_FILE ${root} is a directory.\n`,
    })
    assert.deepEqual(
      await runServer({ DATA_FILE: freshPath(), DATABASE_URL: 'postgres://localhost/notes' }),
      {
        code: 2,
        stderr:
          'notes-service: DATA_FILE and DATABASE_URL are both set: the notes live in one of them; unset the other.\n',
      },
    )
  })

  it('answers 507 when the disk is full, keeps what was acknowledged, and recovers', async (t) => {
    const disk = join(root, 'small-disk')
    mkdirSync(disk)
    const mounted = await run('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', disk])
    if (mounted.code !== 0) {
      const message = `SKIPPED: cannot mount a small tmpfs to fill (${mounted.stderr.trim()})`
      process.stderr.write(`\n*** ${message} ***\n\n`)
      t.skip(message)
      return
    }
    try {
      const path = join(disk, 'notes.journal')
      const store = open({ path, compactMinBytes: 1 << 30 })
      const kept: string[] = []
      let full: unknown
      for (let i = 0; i < 1000 && full === undefined; i++) {
        const writes = Array.from({ length: 4 }, () => store.create({ text: 'x'.repeat(4000) }))
        for (const result of await Promise.allSettled(writes)) {
          if (result.status === 'fulfilled') kept.push(result.value.json)
          else full = result.reason
        }
      }
      assert.ok(full instanceof StoreFullError, `the disk filled: ${String(full)}`)
      // The store holds exactly what was acknowledged, as does the file.
      assert.equal(store.list().json, `[${kept.join(',')}]`)
      assert.equal(store.stats().notes, kept.length)
      const first = JSON.parse(kept[0] as string) as { id: number }
      assert.equal(await store.delete(first.id), true)
      const after = await store.create({ small: true })
      await store.close()
      const again = open({ path })
      assert.equal(again.list().json, `[${[...kept.slice(1), after.json].join(',')}]`)
      const listed = again.list().json
      await again.close()
      // Over HTTP: the disk is nearly full again; creates are acknowledged until a 507.
      const server = await startServer({ env: { DATA_FILE: path } })
      try {
        const created: unknown[] = []
        let refused: { status: number; body: string } | undefined
        for (let i = 0; i < 100 && refused === undefined; i++) {
          const answer = await call(server.port, 'POST', '/api/note', { text: 'y'.repeat(4000) })
          if (answer.status === 200)
            created.push((JSON.parse(answer.body) as { data: unknown }).data)
          else refused = answer
        }
        assert.equal(refused?.status, 507)
        assert.equal((JSON.parse(refused?.body ?? '{}') as { status: number }).status, 507)
        const { data } = JSON.parse((await call(server.port, 'GET', '/api/note')).body) as {
          data: unknown[]
        }
        assert.deepEqual(data, [...(JSON.parse(listed) as unknown[]), ...created])
      } finally {
        await server.stop()
      }
    } finally {
      await run('umount', [disk])
    }
  })
})

function call(
  port: number,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method, path, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
}

/** `node dist/src/server.js` with these variables, to its exit. */
function runServer(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SERVER],
      { env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }, timeout: 10_000 },
      (err, _stdout, stderr) => resolve({ code: err === null ? 0 : Number(err.code), stderr }),
    )
  })
}

function run(command: string, args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, (err, _stdout, stderr) =>
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stderr }),
    )
  })
}

/** The PID of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''])
  await new Promise((resolve) => child.on('exit', resolve))
  return child.pid as number
}
