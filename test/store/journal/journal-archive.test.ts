import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import type { ArchiveLimits } from '../../../src/store/archive.js'
import {
  type JournaledStoreOptions,
  openJournaledStore,
} from '../../../src/store/journal/journaled-notebooks.js'
import type { JournaledStore } from '../../../src/store/journal/journaled-store.js'
import { StoreFullError } from '../../../src/store/types.js'
import { startServer } from '../../hostile/server-process.js'
import { runArchiveContract } from '../../support/archive.contract.js'

const root = mkdtempSync(join(tmpdir(), 'notes-journal-archive-'))
const opened: JournaledStore[] = []
after(async () => {
  await Promise.allSettled(opened.map((store) => store.close()))
  rmSync(root, { recursive: true, force: true })
})
let files = 0
const freshPath = () => join(root, `notes-${++files}.journal`)

function open(options: Partial<JournaledStoreOptions> & { path: string }): JournaledStore {
  const store = openJournaledStore({ maxNotes: 1_000_000, maxBytes: 1 << 28, ...options })
  opened.push(store)
  return store
}

runArchiveContract('JournaledStore', ({ maxNotes, maxBytes, now, archive }) =>
  open({
    path: freshPath(),
    ...(maxNotes === undefined ? {} : { maxNotes }),
    ...(maxBytes === undefined ? {} : { maxBytes }),
    ...(now === undefined ? {} : { now }),
    ...(archive === undefined ? {} : { archive }),
  }),
)

/** Everything a client can see of a store's history and trash, and its notes. */
async function observe(store: JournaledStore, ids: readonly number[]) {
  const revisions: unknown[] = []
  for (const id of ids) revisions.push(store.revisions(id, 1000, undefined))
  return {
    list: store.list().json,
    version: store.version(),
    revisions,
    trash: store.trash(1000, undefined),
    stats: store.stats(),
  }
}

/**
 * Writes of every kind that history and trash keep: updates past the count bound, deletes into
 * the trash, a note put back, purges, a batch; answers the ids it made.
 */
async function writeHistory(store: JournaledStore, t: { now: number }): Promise<number[]> {
  const ids: number[] = []
  for (let n = 0; n < 12; n++) {
    t.now += 1
    ids.push(
      (JSON.parse((await store.create({ n, text: 'x'.repeat(200) })).json) as { id: number }).id,
    )
  }
  for (let round = 0; round < 8; round++) {
    for (const id of ids.slice(0, 6)) {
      t.now += 1
      await store.update(id, { round })
    }
  }
  for (const id of ids.slice(6)) {
    t.now += 1
    await store.delete(id)
  }
  t.now += 1
  await store.untrash(ids[6] as number)
  await store.purge(ids[7] as number)
  await store.batch((writer) => {
    writer.update(ids[0] as number, { batch: true }, 'replace')
    writer.delete(ids[1] as number)
    return 'ok'
  })
  return ids
}

describe('DATA_FILE: history and trash survive a restart', () => {
  const archive: Partial<ArchiveLimits> = { noteHistory: 5 }

  it('replays revisions, the trash, restores and purges as they were', async () => {
    const path = freshPath()
    const t = { now: 1_700_000_000_000 }
    const store = open({ path, now: () => t.now, archive })
    const ids = await writeHistory(store, t)
    const before = await observe(store, ids)
    assert.equal((before.revisions[2] as { revisions: unknown[] }).revisions.length, 5)
    assert.equal(before.trash.total, 5)
    await store.close()
    const again = open({ path, now: () => t.now, archive })
    assert.deepEqual(await observe(again, ids), before)
    // The bounds go on as they were: one more write drops the oldest of five.
    t.now += 1
    await again.update(ids[2] as number, { after: true })
    const revisions = again.revisions(ids[2] as number, 1000, undefined)?.revisions ?? []
    assert.equal(revisions.length, 5)
  })

  it('keeps them through a compaction, and the trash still counts toward the caps', async () => {
    const path = freshPath()
    const t = { now: 1_700_000_000_000 }
    const options = {
      path,
      now: () => t.now,
      archive,
      compactMinBytes: 4096,
      maxNotes: 12,
      historyLimit: 10,
    }
    const store = open(options)
    const ids = await writeHistory(store, t)
    // Enough writes to compact a few times over.
    for (let i = 0; i < 200; i++) {
      t.now += 1
      await store.update(ids[3] as number, { i, pad: 'y'.repeat(100) })
    }
    const before = await observe(store, ids)
    await store.close()
    // A compacted journal starts with an image; one never compacted, with the first create.
    const head = readFileSync(path).subarray(0, 4096).toString('latin1')
    assert.ok(
      head.includes('"t":"image"') && head.includes('"t":"pv"'),
      'the journal was compacted',
    )
    const again = open(options)
    assert.deepEqual(await observe(again, ids), before)
    // 6 live notes and 5 in the trash: room for one more of 12 until the trash is emptied.
    assert.equal(again.stats().notes, 6)
    await again.create({})
    await assert.rejects(async () => again.create({}), StoreFullError)
    assert.equal(await again.emptyTrash(), 5)
    await again.create({})
  })
})

describe('DATA_FILE: the service keeps history and trash across kill -9', () => {
  it('keeps every acknowledged revision, delete into the trash and restore', async () => {
    const path = freshPath()
    const server = await startServer({ env: { DATA_FILE: path } })
    const base = `http://127.0.0.1:${server.port}`
    const call = async (method: string, url: string, body?: unknown) => {
      const response = await fetch(`${base}${url}`, {
        method,
        ...(body === undefined
          ? {}
          : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
      })
      return { status: response.status, text: await response.text() }
    }
    const ids: number[] = []
    for (let n = 0; n < 6; n++) {
      const created = await call('POST', '/api/note', { n })
      ids.push((JSON.parse(created.text) as { data: { id: number } }).data.id)
    }
    // Acknowledged: each note's revisions as its answers said, three in the trash, one back.
    await Promise.all(
      ids.map(async (id) => {
        for (let round = 1; round <= 3; round++) await call('PATCH', `/api/note/${id}`, { round })
      }),
    )
    for (const id of ids.slice(3))
      assert.equal((await call('DELETE', `/api/note/${id}`)).status, 200)
    assert.equal((await call('POST', `/api/trash/${ids[5]}/restore`)).status, 200)
    const before = await Promise.all(ids.map((id) => call('GET', `/api/note/${id}/revisions`)))
    const trashBefore = await call('GET', '/api/trash')
    // Writes in flight when it dies: acknowledged or not, never half there.
    const inFlight = ids.map((id) =>
      call('PATCH', `/api/note/${id}`, { late: true }).catch(() => undefined),
    )
    server.child.kill('SIGKILL')
    await server.exited
    await Promise.all(inFlight)
    const again = await startServer({ env: { DATA_FILE: path } })
    try {
      const url = `http://127.0.0.1:${again.port}`
      for (const [i, id] of ids.entries()) {
        const response = await fetch(`${url}/api/note/${id}/revisions`)
        if (i === 3 || i === 4) {
          assert.equal(response.status, 404, `note ${id} is in the trash`)
          continue
        }
        const revisions = (JSON.parse(await response.text()) as { data: { note: unknown }[] }).data
        const earlier = (JSON.parse((before[i] as { text: string }).text) as { data: unknown[] })
          .data
        // The ones acknowledged before the kill, and perhaps one in flight on top of them.
        assert.deepEqual(revisions.slice(revisions.length - earlier.length), earlier, `note ${id}`)
        assert.ok(revisions.length - earlier.length <= 1)
      }
      const trash = await (await fetch(`${url}/api/trash`)).text()
      assert.equal(trash, trashBefore.text)
    } finally {
      await again.stop()
    }
  })
})
