import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { buildApp } from '../../../src/app.js'
import { UserTokens } from '../../../src/auth/user-tokens.js'
import { signUserToken } from '../../../src/commands/token-command.js'
import { DEFAULT_CONFIG } from '../../../src/config/config.js'
import {
  JournaledNotebooks,
  type JournaledNotebooksOptions,
  openJournaledStore,
} from '../../../src/store/journal/journaled-notebooks.js'
import { type NoteStore, StoreFullError } from '../../../src/store/types.js'
import { startServer } from '../../hostile/server-process.js'
import { runNotebooksContract } from '../../support/notebooks.contract.js'
import { type ContractStoreOptions, runStoreContract } from '../../support/store.contract.js'

/**
 * User notebooks on DATA_FILE: one journal holds every notebook (each with its own epoch, ids
 * unique over all), and every one of them survives restarts and compaction exactly.
 */

const root = mkdtempSync(join(tmpdir(), 'notes-journal-notebooks-'))
const opened: { close(): Promise<void> }[] = []
after(async () => {
  await Promise.allSettled(opened.map((journal) => journal.close()))
  rmSync(root, { recursive: true, force: true })
})
let files = 0
const freshPath = () => join(root, `notebooks-${++files}.journal`)

function open(options: Partial<JournaledNotebooksOptions> & { path: string }): JournaledNotebooks {
  const journal = new JournaledNotebooks({ maxNotes: 1 << 24, maxBytes: 1 << 28, ...options })
  opened.push(journal)
  return journal
}

runNotebooksContract('JournaledNotebooks', (options) => open({ ...options, path: freshPath() }))

runStoreContract(
  'a notebook of JournaledNotebooks, while another notebook holds notes',
  (o: ContractStoreOptions) => {
    const maxNotes = o.maxNotes ?? 1_000_000
    const maxBytes = o.maxBytes ?? 1 << 28
    const clock = o.now ?? Date.now
    let filling = true
    const journal = open({
      path: freshPath(),
      maxNotes: 2 * maxNotes,
      maxBytes: 2 * maxBytes,
      maxNotesPerNotebook: maxNotes,
      maxBytesPerNotebook: maxBytes,
      now: () => (filling ? -1000 : clock()),
      ...(o.historyLimit === undefined ? {} : { historyLimit: o.historyLimit }),
    })
    const other = journal.notebook('user:b')
    // Ids below every id the contract expects, in a notebook it never reads.
    // Fewer when the caps are small: the store refuses them (a rejection; anything else fails
    // the test as an unhandled one).
    for (const fields of [{ t: 'bread', other: true }, { q: 'say "bread"\n' }]) {
      other.create(fields).catch((error: unknown) => {
        if (!(error instanceof StoreFullError)) throw error
      })
    }
    filling = false
    return journal.notebook('user:a')
  },
)

/** What a reader sees of a notebook: everything a restart must keep. */
async function seen(store: NoteStore) {
  const list = await store.list()
  return {
    list: list.json,
    version: await store.version(),
    etags: (JSON.parse(list.json) as { id: number }[]).map((note) => store.get(note.id)),
    history: await store.changesSince(`${(await store.version()).split('.')[0]}.1`, 1000),
  }
}

describe('JournaledNotebooks: restarts', () => {
  it('keeps every notebook, its version, ETags, history and keys across a restart and a compaction', async () => {
    const path = freshPath()
    const names = ['shared', 'user:alice', 'user:bob', 'user:ünï', 'user:', 'user:__proto__']
    let journal = open({ path, compactMinBytes: 4096, historyLimit: 100 })
    for (const [i, name] of names.entries()) {
      const store = journal.notebook(name)
      for (let n = 0; n <= i * 2; n++) await store.create({ name, n, pad: 'x'.repeat(40) })
      await store.createOnce(`key-${i}`, 'fp', { keyed: name })
    }
    const alice = journal.notebook('user:alice')
    const first = (JSON.parse((await alice.list()).json) as { id: number }[])[0] as { id: number }
    await alice.update(first.id, { changed: true })
    // A batch with a key, in a notebook of its own: one record naming the notebook.
    await journal.notebook('user:bob').batch(
      (writer) => {
        // The writer of a journal's batch is its memory store's: synchronous.
        void writer.create({ batched: 1 })
        void writer.create({ batched: 2 })
        return '{"data":[]}'
      },
      { key: 'batch-key', fingerprint: 'bfp' },
    )
    const before = new Map<string, unknown>()
    for (const name of names) before.set(name, await seen(journal.notebook(name)))
    const epochs = names.map((name) => journal.notebook(name).version().split('.')[0])
    assert.equal(new Set(epochs).size, names.length, 'an epoch per notebook')
    await journal.close()

    journal = open({ path, compactMinBytes: 4096, historyLimit: 100 })
    for (const name of names)
      assert.deepEqual(await seen(journal.notebook(name)), before.get(name), name)
    // The keys are each notebook's own: a repeat in alice's is replayed, the same key in a new
    // notebook creates.
    const replay = await journal
      .notebook('user:alice')
      .createOnce('key-1', 'fp', { keyed: 'user:alice' })
    assert.equal(replay.replayed, true)
    const fresh = await journal.notebook('user:carol').createOnce('key-1', 'fp', { keyed: 'carol' })
    assert.equal(fresh.replayed, false)

    // Enough writes to compact several times; every notebook reads the same after it and after
    // another restart.
    const size = journal.fileBytes
    const bob = journal.notebook('user:bob')
    const bobNote = (JSON.parse((await bob.list()).json) as { id: number }[])[0] as { id: number }
    let shrank = false
    let last = size
    for (let i = 0; i < 300; i++) {
      await bob.update(bobNote.id, { i, pad: 'y'.repeat(100) })
      if (journal.fileBytes < last) shrank = true
      last = journal.fileBytes
    }
    assert.ok(shrank, 'compacted')
    const after1 = new Map<string, unknown>()
    for (const name of [...names, 'user:carol'])
      after1.set(name, await seen(journal.notebook(name)))
    await journal.close()
    journal = open({ path, compactMinBytes: 4096, historyLimit: 100 })
    for (const name of [...names, 'user:carol']) {
      assert.deepEqual(await seen(journal.notebook(name)), after1.get(name), name)
    }
    // Ids stay unique over every notebook after the restarts: the next create is above them all.
    const all = [...names, 'user:carol'].flatMap(
      (name) => JSON.parse(journal.notebook(name).list().json) as { id: number }[],
    )
    const created = JSON.parse((await journal.notebook('user:dan').create({})).json) as {
      id: number
    }
    assert.ok(all.every((note) => note.id < created.id))
  })

  it('opens a journal written without user tokens with them: its notes are the shared notebook', async () => {
    const path = freshPath()
    const single = openJournaledStore({ path, maxNotes: 100, maxBytes: 1 << 20 })
    await single.create({ t: 'before' })
    const version = single.version()
    await single.close()
    const journal = open({ path, maxNotesPerNotebook: 10, maxBytesPerNotebook: 1 << 16 })
    assert.equal(journal.notebook('shared').version(), version)
    assert.match(journal.notebook('shared').list().json, /"before"/)
    assert.equal(journal.notebook('user:ann').list().json, '[]')
  })

  it('names the store in a refusal without per-notebook caps, the notebook with them', async () => {
    const single = openJournaledStore({ path: freshPath(), maxNotes: 1, maxBytes: 1 << 20 })
    opened.push(single)
    await single.create({})
    await assert.rejects(single.create({}), { message: 'The store holds its maximum of 1 notes.' })
    const journal = open({ path: freshPath(), maxNotes: 5, maxNotesPerNotebook: 1 })
    await journal.notebook('user:a').create({})
    await assert.rejects(journal.notebook('user:a').create({}), {
      message: 'This notebook holds its maximum of 1 notes.',
    })
  })
})

describe('DATA_FILE with user tokens, over HTTP', () => {
  it('keeps each user to their notebook, across a restart', async () => {
    const SECRET = 'a-secret-of-32-bytes-or-more-for-tests'
    const path = freshPath()
    const secret = Buffer.from(SECRET)
    const bearer = async (sub: string) =>
      `Bearer ${await signUserToken({ secret, sub, ttlSeconds: 600 })}`
    const [ann, ben] = [await bearer('ann'), await bearer('ben')]
    const start = () => {
      const journal = new JournaledNotebooks({ path, maxNotes: 100, maxBytes: 1 << 20 })
      const app = buildApp({
        notebooks: journal,
        userTokens: new UserTokens({ secret: SECRET }),
        config: { ...DEFAULT_CONFIG, apiKeys: ['service-key-0123456789'] },
      })
      app.addHook('onClose', async () => journal.close())
      return app
    }
    let app = start()
    const post = (authorization: string, text: string) =>
      app.inject({
        method: 'POST',
        url: '/api/note',
        headers: { authorization },
        payload: { text },
      })
    const annNote = JSON.parse((await post(ann, 'ann 1')).body).data as { id: number }
    await post(ben, 'ben 1')
    await post('Bearer service-key-0123456789', 'shared 1')
    const read = async (authorization: string) => {
      const list = await app.inject({ url: '/api/note', headers: { authorization } })
      return { body: list.body, etag: list.headers.etag, version: list.headers['notes-version'] }
    }
    const before = [await read(ann), await read(ben), await read('Bearer service-key-0123456789')]
    assert.deepEqual(
      before.map((r) => (JSON.parse(r.body).data as { text: string }[]).map((n) => n.text)),
      [['ann 1'], ['ben 1'], ['shared 1']],
    )
    // Ben cannot see, change or delete Ann's note: the spec's empty 404.
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const answer = await app.inject({
        method,
        url: `/api/note/${annNote.id}`,
        headers: { authorization: ben },
        ...(method === 'PATCH' ? { payload: { text: 'mine' } } : {}),
      })
      assert.equal(answer.statusCode, 404, method)
      assert.equal(answer.body, '')
    }
    await app.close()
    app = start()
    const afterRestart = [
      await read(ann),
      await read(ben),
      await read('Bearer service-key-0123456789'),
    ]
    assert.deepEqual(afterRestart, before)
    await app.close()
  })
})

describe('DATA_FILE with user tokens: kill -9', () => {
  it("keeps every user's acknowledged writes, in that user's notebook only", async () => {
    const SECRET = 'a-secret-of-32-bytes-or-more-for-tests'
    const path = freshPath()
    const env = { DATA_FILE: path, AUTH_JWT_SECRET: SECRET }
    const secret = Buffer.from(SECRET)
    const users = ['ann', 'ben', 'cy']
    const tokens = await Promise.all(
      users.map(async (sub) => `Bearer ${await signUserToken({ secret, sub, ttlSeconds: 600 })}`),
    )
    const server = await startServer({ env })
    const call = (port: number, token: string, method: string, path: string, body?: unknown) =>
      fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: token, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).then(async (response) => ({ status: response.status, body: await response.text() }))
    const acknowledged = users.map(() => [] as string[])
    // Each user writes single creates and batches of three, until the process dies.
    const writers = users.flatMap((user, u) =>
      Array.from({ length: 3 }, async (_, w) => {
        for (let j = 0; ; j++) {
          const tag = `${user}-${w}-${j}`
          const answer =
            j % 2 === 0
              ? await call(server.port, tokens[u] as string, 'POST', '/api/note', { tag }).catch(
                  () => undefined,
                )
              : await call(server.port, tokens[u] as string, 'POST', '/api/batch', {
                  requests: [0, 1, 2].map((n) => ({
                    method: 'POST',
                    url: '/api/note',
                    body: { tag, n },
                  })),
                }).catch(() => undefined)
          if (answer?.status !== 200) return
          acknowledged[u]?.push(tag)
        }
      }),
    )
    // Killed at a random moment once every user has a few writes acknowledged.
    const deadline = Date.now() + 30_000
    while (acknowledged.some((tags) => tags.length < 4) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 200))
    server.child.kill('SIGKILL')
    await server.exited
    await Promise.all(writers)
    const again = await startServer({ env })
    try {
      for (const [u, user] of users.entries()) {
        const list = await call(again.port, tokens[u] as string, 'GET', '/api/note')
        const tags = (JSON.parse(list.body).data as { tag: string }[]).map((note) => note.tag)
        const counts = new Map<string, number>()
        for (const tag of tags) counts.set(tag, (counts.get(tag) ?? 0) + 1)
        assert.ok(
          (acknowledged[u]?.length ?? 0) > 3,
          `${user}: ${acknowledged[u]?.length} acknowledged`,
        )
        for (const tag of acknowledged[u] ?? []) {
          const expected = Number(tag.split('-')[2]) % 2 === 0 ? 1 : 3
          assert.equal(counts.get(tag), expected, `${user}'s ${tag} is kept whole`)
        }
        assert.ok(
          tags.every((tag) => tag.startsWith(`${user}-`)),
          `${user} sees only their notes`,
        )
      }
    } finally {
      await again.stop()
    }
  })
})
