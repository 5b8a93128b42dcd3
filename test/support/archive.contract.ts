import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type ArchiveLimits, ID_TAKEN, type NoteArchive } from '../../src/store/archive.js'
import {
  type Change,
  type MaybePromise,
  type NoteRecord,
  type NoteStore,
  type NoteWriter,
  PreconditionFailed,
  StoreFullError,
} from '../../src/store/types.js'
import { page, waitUntil } from './store.contract.js'

export interface ArchiveStoreOptions {
  maxNotes?: number
  maxBytes?: number
  now?: () => number
  archive?: Partial<ArchiveLimits>
}

export type ArchivedStore = NoteStore & NoteArchive

const DAY = 86_400_000
const T0 = 1_700_000_000_000

/** The unquoted version of an ETag: '"k.5"' -> 'k.5'. */
const versionOf = (note: NoteRecord): string => JSON.parse(note.etag) as string

const parse = (json: string): Record<string, unknown> => JSON.parse(json) as Record<string, unknown>

async function written(result: unknown): Promise<NoteRecord> {
  const settled = await result
  if (settled === undefined || settled instanceof PreconditionFailed) {
    assert.fail(`write refused: ${String(settled)}`)
  }
  const { json, etag, modified } = settled as NoteRecord
  return { json, etag, modified }
}

/**
 * A batch's work that makes `writes` and answers `answer` once they are made: synchronously when
 * they are (a memory store's batch must be), else once they settle.
 */
function inOrder(
  writes: ((writer: NoteWriter) => unknown)[],
  answer: string | undefined,
): (writer: NoteWriter) => MaybePromise<string | undefined> {
  return (writer) => {
    const made = writes.map((write) => write(writer))
    return made.some((one) => one instanceof Promise)
      ? Promise.all(made).then(() => answer)
      : answer
  }
}

/**
 * The behaviour every store's history and trash must have (NoteArchive): revisions made by
 * every write, newest first and paged, bounded by count, age and bytes with the current state
 * always kept; deleted notes kept in the trash, counted toward the caps, restored with their id,
 * content and revisions at the end of the list, purged, and gone after their time.
 * `makeStore` makes an empty store with these options; `now` is a clock the cases move.
 */
export function runArchiveContract(
  name: string,
  makeStore: (options: ArchiveStoreOptions) => ArchivedStore | Promise<ArchivedStore>,
): void {
  const clocked = (options: Omit<ArchiveStoreOptions, 'now'> = {}) => {
    const clock = { t: T0 }
    const made = makeStore({ now: () => clock.t, ...options })
    return { clock, made }
  }

  describe(`${name}: history and trash`, () => {
    it('keeps every state a note has had, newest first, with its version, time and change', async () => {
      const { clock, made } = clocked()
      const store = await made
      const first = await written(store.create({ title: 'a' }))
      const id = parse(first.json).id as number
      clock.t += 1000
      const second = await written(store.update(id, { body: 'x' }))
      clock.t += 1000
      const third = await written(store.update(id, { title: 'b' }, 'replace'))
      const revisions = await store.revisions(id, 100, undefined)
      assert.ok(revisions !== undefined)
      assert.deepEqual(revisions.revisions, [
        { version: versionOf(third), at: T0 + 2000, change: 'updated', json: third.json },
        { version: versionOf(second), at: T0 + 1000, change: 'updated', json: second.json },
        { version: versionOf(first), at: T0, change: 'created', json: first.json },
      ])
      assert.equal(revisions.next, undefined)
      assert.deepEqual(parse(third.json), { title: 'b', id })
      assert.deepEqual(await store.revision(id, versionOf(second)), revisions.revisions[1])
      assert.equal(await store.revision(id, 'nope.1'), undefined)
      assert.equal(await store.revision(id + 1, versionOf(second)), undefined)
      assert.equal(await store.revisions(id + 1, 100, undefined), undefined)
    })

    it('pages revisions by version, and goes on after a version no longer kept', async () => {
      const { clock, made } = clocked({ archive: { noteHistory: 4 } })
      const store = await made
      const id = parse((await written(store.create({ n: 0 }))).json).id as number
      for (let n = 1; n <= 3; n++) {
        clock.t += 10
        await store.update(id, { n })
      }
      const firstPage = await store.revisions(id, 2, undefined)
      assert.ok(firstPage !== undefined)
      assert.deepEqual(
        firstPage.revisions.map((revision) => parse(revision.json).n),
        [3, 2],
      )
      assert.equal(firstPage.next, firstPage.revisions[1]?.version)
      const rest = await store.revisions(id, 2, firstPage.next)
      assert.deepEqual(
        rest?.revisions.map((revision) => parse(revision.json).n),
        [1, 0],
      )
      assert.equal(rest?.next, undefined)
      // Two more writes push n=0 and n=1 out: a cursor at n=1 is an empty page, not an error.
      const cursor = rest?.revisions[0]?.version
      await store.update(id, { n: 4 })
      await store.update(id, { n: 5 })
      const after = await store.revisions(id, 10, cursor)
      assert.deepEqual(after?.revisions, [])
      const all = await store.revisions(id, 10, undefined)
      assert.deepEqual(
        all?.revisions.map((revision) => parse(revision.json).n),
        [5, 4, 3, 2],
      )
    })

    it('keeps at most NOTE_HISTORY revisions a note, and the current state alone with 0', async () => {
      for (const [noteHistory, kept] of [
        [3, [5, 4, 3]],
        [1, [5]],
        [0, [5]],
      ] as const) {
        const { made } = clocked({ archive: { noteHistory } })
        const store = await made
        const id = parse((await written(store.create({ n: 0 }))).json).id as number
        for (let n = 1; n <= 5; n++) await store.update(id, { n })
        const revisions = await store.revisions(id, 100, undefined)
        assert.deepEqual(
          revisions?.revisions.map((revision) => parse(revision.json).n),
          kept,
          `NOTE_HISTORY=${noteHistory}`,
        )
      }
    })

    it('lets revisions older than HISTORY_DAYS go, but never the current state', async () => {
      const { clock, made } = clocked({ archive: { historyMs: 10 * DAY } })
      const store = await made
      const id = parse((await written(store.create({ n: 0 }))).json).id as number
      clock.t += 5 * DAY
      await store.update(id, { n: 1 })
      clock.t += 6 * DAY
      assert.deepEqual(
        (await store.revisions(id, 100, undefined))?.revisions.map((r) => parse(r.json).n),
        [1],
      )
      clock.t += 100 * DAY
      const old = await store.revisions(id, 100, undefined)
      assert.deepEqual(
        old?.revisions.map((r) => parse(r.json).n),
        [1],
      )
    })

    it('bounds the bytes of past revisions, the oldest going first', async () => {
      const { clock, made } = clocked({ archive: { maxHistoryBytes: 100 } })
      const store = await made
      const a = parse((await written(store.create({ a: 'aaaaaaaaaa', n: 0 }))).json).id as number
      const b = parse((await written(store.create({ b: 'bbbbbbbbbb', n: 0 }))).json).id as number
      for (let n = 1; n <= 3; n++) {
        clock.t += 1
        await store.update(a, { n })
        clock.t += 1
        await store.update(b, { n })
      }
      const left = async (id: number) =>
        (await store.revisions(id, 100, undefined))?.revisions.map((r) => parse(r.json).n)
      // Every state is 43 bytes: of the six past ones, the two made last fit in 100 bytes.
      assert.deepEqual(await left(a), [3, 2])
      assert.deepEqual(await left(b), [3, 2])
    })

    it('makes no revision for a write refused by its preconditions, nor for a refused batch', async () => {
      const store = await clocked().made
      const note = await written(store.create({ n: 0 }))
      const id = parse(note.json).id as number
      await written(store.update(id, { n: 1 }))
      const refused = await store.update(id, { n: 2 }, 'merge', { ifMatch: [note.etag] })
      assert.ok(refused instanceof PreconditionFailed)
      const batch = await store.batch(inOrder([(w) => w.update(id, { n: 3 })], undefined))
      assert.equal(batch, undefined)
      const kept = await store.batch(
        inOrder([(w) => w.update(id, { n: 4 }), (w) => w.update(id, { n: 5 })], 'ok'),
      )
      assert.equal(kept?.body, 'ok')
      assert.deepEqual(
        (await store.revisions(id, 100, undefined))?.revisions.map((r) => parse(r.json).n),
        [5, 4, 1, 0],
      )
    })

    it('keeps a deleted note in the trash, most recently deleted first, paged', async () => {
      const { clock, made } = clocked()
      const store = await made
      const ids: number[] = []
      for (let n = 0; n < 3; n++) {
        clock.t += 1
        ids.push(parse((await written(store.create({ n }))).json).id as number)
      }
      const [a, b, c] = ids as [number, number, number]
      clock.t = T0 + 100
      assert.equal(await store.delete(b), true)
      clock.t = T0 + 200
      assert.equal(await store.delete(a), true)
      assert.equal(await store.get(a), undefined)
      assert.equal((await store.stats()).notes, 1)
      assert.equal((await store.page(page({}))).total, 1)
      const trash = await store.trash(100, undefined)
      assert.equal(trash.total, 2)
      assert.deepEqual(
        trash.notes.map((note) => [parse(note.json), note.deleted]),
        [
          [{ n: 0, id: a }, T0 + 200],
          [{ n: 1, id: b }, T0 + 100],
        ],
      )
      assert.ok((trash.notes[0]?.sequence ?? 0) > (trash.notes[1]?.sequence ?? 0))
      assert.equal(trash.next, undefined)
      const first = await store.trash(1, undefined)
      assert.deepEqual(first.notes, trash.notes.slice(0, 1))
      assert.equal(first.next, trash.notes[0]?.sequence)
      const second = await store.trash(1, first.next)
      assert.deepEqual(second.notes, trash.notes.slice(1))
      assert.equal(second.next, undefined)
      // A deleted note answers no revisions until it is restored.
      assert.equal(await store.revisions(a, 100, undefined), undefined)
      assert.ok((await store.get(c)) !== undefined)
    })

    it('restores a note from the trash with its id, content and revisions, at the end of the list', async () => {
      const { clock, made } = clocked()
      const store = await made
      const changes: Change[] = []
      store.subscribe((change) => changes.push(change))
      const first = await written(store.create({ title: 'a' }))
      const id = parse(first.json).id as number
      clock.t += 1
      const edited = await written(store.update(id, { title: 'b' }))
      clock.t += 1
      const other = parse((await written(store.create({ other: true }))).json).id as number
      clock.t += 1
      await store.delete(id)
      clock.t += 1
      const restored = await store.untrash(id)
      assert.ok(restored !== undefined && restored !== ID_TAKEN)
      assert.equal(restored.json, edited.json)
      assert.notEqual(restored.etag, edited.etag)
      assert.equal(restored.modified, clock.t)
      assert.deepEqual(await written(store.get(id)), {
        json: restored.json,
        etag: restored.etag,
        modified: restored.modified,
      })
      const listed = await store.page(page({}))
      assert.deepEqual(
        (JSON.parse(listed.json) as { id: number }[]).map((note) => note.id),
        [other, id],
      )
      assert.deepEqual((await store.trash(100, undefined)).notes, [])
      const revisions = await store.revisions(id, 100, undefined)
      assert.deepEqual(revisions?.revisions, [
        { version: versionOf(restored), at: clock.t, change: 'created', json: edited.json },
        { version: versionOf(edited), at: T0 + 1, change: 'updated', json: edited.json },
        { version: versionOf(first), at: T0, change: 'created', json: first.json },
      ])
      await waitUntil(() => changes.length === 5)
      assert.deepEqual(
        changes.map((change) => change.type),
        ['created', 'updated', 'created', 'deleted', 'created'],
      )
      assert.equal(changes[4]?.data, edited.json)
      assert.equal(changes[4]?.version, versionOf(restored))
      assert.equal(await store.version(), versionOf(restored))
      assert.equal(await store.untrash(id), undefined)
    })

    it('refuses to restore over a live note with the same id, and changes nothing', async () => {
      const store = await clocked().made
      const id = parse((await written(store.create({ n: 0 }))).json).id as number
      const other = parse((await written(store.create({ n: 1 }))).json).id as number
      await store.delete(id)
      await written(store.update(other, { id }))
      const version = await store.version()
      assert.equal(await store.untrash(id), ID_TAKEN)
      assert.equal(await store.version(), version)
      assert.equal((await store.trash(100, undefined)).total, 1)
    })

    it('purges one note or the whole trash for good, with its revisions', async () => {
      const store = await clocked().made
      const ids: number[] = []
      for (let n = 0; n < 3; n++)
        ids.push(parse((await written(store.create({ n }))).json).id as number)
      for (const id of ids) await store.delete(id)
      const version = await store.version()
      assert.equal(await store.purge(ids[1] as number), true)
      assert.equal(await store.purge(ids[1] as number), false)
      assert.equal(await store.untrash(ids[1] as number), undefined)
      assert.equal((await store.trash(100, undefined)).total, 2)
      assert.equal(await store.emptyTrash(), 2)
      assert.equal(await store.emptyTrash(), 0)
      assert.equal((await store.trash(100, undefined)).total, 0)
      assert.equal(await store.version(), version, 'a purge changes no note')
    })

    it('counts the trash toward the caps until it is purged or its time passes', async () => {
      const { clock, made } = clocked({ maxNotes: 2, archive: { trashMs: 30 * DAY } })
      const store = await made
      const a = parse((await written(store.create({}))).json).id as number
      await written(store.create({}))
      await store.delete(a)
      await assert.rejects(async () => store.create({}), StoreFullError)
      assert.equal(await store.purge(a), true)
      const c = parse((await written(store.create({}))).json).id as number
      await store.delete(c)
      await assert.rejects(async () => store.create({}), StoreFullError)
      clock.t += 30 * DAY + 1
      assert.deepEqual((await store.trash(100, undefined)).notes, [])
      await written(store.create({}))
      assert.equal(await store.untrash(c), undefined)
    })

    it('counts the bytes of the trash toward the byte cap', async () => {
      const store = await clocked({ maxBytes: 100 }).made
      const a = parse((await written(store.create({ text: 'x'.repeat(40) }))).json).id as number
      await store.delete(a)
      await assert.rejects(async () => store.create({ text: 'y'.repeat(60) }), StoreFullError)
      await store.emptyTrash()
      await written(store.create({ text: 'y'.repeat(60) }))
    })

    it('removes a deleted note for good when the trash is off', async () => {
      const store = await clocked({ maxNotes: 1, archive: { trashMs: 0 } }).made
      const a = parse((await written(store.create({}))).json).id as number
      await store.delete(a)
      assert.deepEqual((await store.trash(100, undefined)).notes, [])
      assert.equal(await store.untrash(a), undefined)
      await written(store.create({}))
    })
  })
}
