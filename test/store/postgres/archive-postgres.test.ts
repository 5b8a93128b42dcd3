import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { afterEach, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { type ArchiveLimits, ID_TAKEN } from '../../../src/store/archive.js'
import { PostgresNotebooks } from '../../../src/store/postgres/notebooks.js'
import { migrate } from '../../../src/store/postgres/schema.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import type { PostgresStoreOptions } from '../../../src/store/postgres/store-options.js'
import { type Change, StoreFullError } from '../../../src/store/types.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { pooledStore } from '../../support/schema-pool.js'

/** History and trash on PostgreSQL: across instances, restarts, caps and time. */
if (postgresAvailable('PostgreSQL history and trash')) {
  const url = await testDatabase()
  const opened: { close(): Promise<void> }[] = []
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((one) => one.close()))
  })

  type Options = Partial<Omit<PostgresStoreOptions, 'url' | 'schema'>>
  /** A store of its own on a pooled (fresh) schema. */
  const schemaOf = new WeakMap<PostgresNoteStore, string>()
  const fresh = (options: Options = {}) => {
    let made = ''
    const store = pooledStore(url, 'e', (schema) => {
      made = schema
      return new PostgresNoteStore({
        url,
        schema,
        poolSize: 2,
        maxNotes: 1000,
        maxBytes: 1 << 20,
        epoch: 'e',
        ...options,
      })
    })
    schemaOf.set(store, made)
    opened.push(store)
    return store
  }
  /** A schema for several stores at once (instances of one service), never a pooled one. */
  const sharedSchema = () => `archive_${randomBytes(6).toString('hex')}`
  const instance = (schema: string, options: Options = {}) => {
    const store = new PostgresNoteStore({
      url,
      schema,
      poolSize: 2,
      maxNotes: 1000,
      maxBytes: 1 << 20,
      epoch: 'e',
      pollMs: 100,
      ...options,
    })
    opened.push(store)
    return store
  }
  const clock = (start: number) => {
    const time = { now: start }
    return { time, now: () => time.now }
  }
  const archive = (limits: Partial<ArchiveLimits>) => ({ archive: limits })
  const versions = (page: { revisions: readonly { version: string }[] } | undefined) =>
    page?.revisions.map((revision) => revision.version)

  describe('PostgresNoteStore history', () => {
    it('keeps every state of a note as a revision, newest first, with its version, time and change', async () => {
      const { time, now } = clock(1000)
      const store = fresh({ now })
      const created = await store.create({ t: 'a' })
      time.now = 2000
      const merged = await store.update(1000, { t: 'b' })
      time.now = 3000
      const patched = await store.update(1000, { u: { v: 1 } }, 'merge-patch')
      time.now = 4000
      const replaced = await store.update(1000, { w: 1 }, 'replace')
      assert.deepEqual(
        [created, merged, patched, replaced].map((note) => note && 'etag' in note && note.etag),
        ['"e.1"', '"e.2"', '"e.3"', '"e.4"'],
      )
      assert.deepEqual(await store.revisions(1000, 10, undefined), {
        revisions: [
          { version: 'e.4', at: 4000, change: 'updated', json: '{"w":1,"id":1000}' },
          { version: 'e.3', at: 3000, change: 'updated', json: '{"t":"b","id":1000,"u":{"v":1}}' },
          { version: 'e.2', at: 2000, change: 'updated', json: '{"t":"b","id":1000}' },
          { version: 'e.1', at: 1000, change: 'created', json: '{"t":"a","id":1000}' },
        ],
        next: undefined,
      })
      // Pages by version; a cursor works whether or not that revision is still kept.
      assert.deepEqual(versions(await store.revisions(1000, 2, undefined)), ['e.4', 'e.3'])
      assert.equal((await store.revisions(1000, 2, undefined))?.next, 'e.3')
      assert.deepEqual(versions(await store.revisions(1000, 2, 'e.3')), ['e.2', 'e.1'])
      assert.equal((await store.revisions(1000, 2, 'e.3'))?.next, undefined)
      assert.deepEqual(await store.revision(1000, 'e.2'), {
        version: 'e.2',
        at: 2000,
        change: 'updated',
        json: '{"t":"b","id":1000}',
      })
      assert.equal((await store.revision(1000, 'e.4'))?.json, '{"w":1,"id":1000}')
      assert.equal(await store.revision(1000, 'e.02'), undefined)
      assert.equal(await store.revision(1000, 'other.2'), undefined)
      assert.equal(await store.revisions(1001, 10, undefined), undefined)
      assert.equal(await store.revision(1001, 'e.1'), undefined)
      // Revisions are outside the caps: the stats count the note's current state alone.
      assert.deepEqual(await store.stats(), {
        notes: 1,
        bytes: '{"w":1,"id":1000}'.length,
        maxNotes: 1000,
        maxBytes: 1 << 20,
      })
    })

    it('keeps at most noteHistory revisions of a note, the current one included, and none past historyMs', async () => {
      const { time, now } = clock(1000)
      const store = fresh({ now, ...archive({ noteHistory: 3, historyMs: 10_000 }) })
      await store.create({ n: 0 })
      for (let n = 1; n <= 5; n++) {
        time.now += 1000
        await store.update(1000, { n })
      }
      assert.deepEqual(versions(await store.revisions(1000, 10, 'e.9')), ['e.6', 'e.5', 'e.4'])
      assert.deepEqual(versions(await store.revisions(1000, 10, 'e.2')), [])
      // e.5 was made at 5000, e.4 at 4000: past revisions last historyMs.
      time.now = 5000 + 9999
      assert.deepEqual(versions(await store.revisions(1000, 10, undefined)), ['e.6', 'e.5'])
      time.now = 5000 + 10_000
      // The current state stays, however old.
      assert.deepEqual(versions(await store.revisions(1000, 10, undefined)), ['e.6'])
      time.now = 6000 + 10_000
      assert.deepEqual(versions(await store.revisions(1000, 10, undefined)), ['e.6'])
      assert.equal(await store.revision(1000, 'e.5'), undefined)
      assert.equal((await store.revision(1000, 'e.6'))?.at, 6000)
    })

    it('answers exactly noteHistory revisions of a note written many times, and counts the bytes it holds', async () => {
      let made = ''
      const store = pooledStore(url, 'e', (schema) => {
        made = schema
        return new PostgresNoteStore({
          url,
          schema,
          poolSize: 2,
          maxNotes: 1000,
          maxBytes: 1 << 20,
          epoch: 'e',
          archive: { noteHistory: 20 },
        })
      })
      opened.push(store)
      await store.create({ n: 0 })
      const id = (JSON.parse((await store.list()).json) as { id: number }[])[0]?.id as number
      for (let n = 1; n <= 70; n++) await store.update(id, { n })
      const page = await store.revisions(id, 100, undefined)
      assert.deepEqual(
        page?.revisions.map((revision) => (JSON.parse(revision.json) as { n: number }).n),
        Array.from({ length: 20 }, (_, i) => 70 - i),
      )
      // A few more than 19 past ones may wait for the next trim; never many more.
      const held = await withClient(async (client) => {
        const { rows } = await client.query<{ count: string }>(
          `SELECT count(*) FROM ${made}.notes_revisions`,
        )
        return Number(rows[0]?.count)
      })
      assert.ok(held >= 19 && held <= 19 + 3, `${held} past revisions held`)
      await historyBytes(made)
    })

    it('keeps the current state alone with noteHistory 0 or 1', async () => {
      for (const noteHistory of [0, 1]) {
        const store = fresh(archive({ noteHistory }))
        const { json } = await store.create({ a: 1 })
        const id = (JSON.parse(json) as { id: number }).id
        const updated = await store.update(id, { a: 2 })
        const page = await store.revisions(id, 10, undefined)
        assert.deepEqual(
          page?.revisions.map((revision) => [revision.change, revision.json]),
          [['updated', `{"a":2,"id":${id}}`]],
        )
        assert.equal(`"${page?.revisions[0]?.version}"`, (updated as { etag: string }).etag)
      }
    })

    it('bounds the bytes of past revisions over the database, oldest first, never the current states', async () => {
      const schema = sharedSchema()
      const { time, now } = clock(1000)
      const limits = archive({ maxHistoryBytes: 60 })
      const notebooks = new PostgresNotebooks({
        url,
        schema,
        poolSize: 2,
        maxNotes: 100,
        maxBytes: 1 << 20,
        now,
        ...limits,
      })
      opened.push(notebooks)
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const first = JSON.parse((await a.create({ s: 'x'.repeat(10) })).json) as { id: number }
      time.now++
      const second = JSON.parse((await b.create({ s: 'y'.repeat(10) })).json) as { id: number }
      // Each past state is 28 bytes: {"s":"xxxxxxxxxx","id":1000}
      for (let n = 0; n < 3; n++) {
        time.now++
        await a.update(first.id, { s: `${n}`.repeat(10) })
        time.now++
        await b.update(second.id, { s: `${n}`.repeat(10) })
      }
      // Six past states were made (168 bytes); the two newest fit in 60 and stay, one per notebook.
      assert.deepEqual(
        (await a.revisions(first.id, 10, undefined))?.revisions.map((r) => r.json),
        ['{"s":"2222222222","id":1000}', '{"s":"1111111111","id":1000}'],
      )
      assert.deepEqual(
        (await b.revisions(second.id, 10, undefined))?.revisions.map((r) => r.json),
        ['{"s":"2222222222","id":1001}', '{"s":"1111111111","id":1001}'],
      )
      assert.equal(await historyBytes(schema), 56)
    })
  })

  describe('PostgresNoteStore trash', () => {
    it('keeps a deleted note in the trash, and puts it back at the end of the list with its revisions, as a create', async () => {
      const { time, now } = clock(1000)
      const store = fresh({ now })
      await store.create({ t: 'a' })
      await store.create({ t: 'b' })
      time.now = 2000
      await store.update(1000, { t: 'A' })
      const heard: Change[] = []
      const stop = store.subscribe((change) => heard.push(change))
      time.now = 3000
      assert.equal(await store.delete(1000), true)
      assert.equal(await store.get(1000), undefined)
      assert.equal(await store.revisions(1000, 10, undefined), undefined)
      assert.deepEqual(await store.trash(10, undefined), {
        notes: [{ deleted: 3000, sequence: 4, json: '{"t":"A","id":1000}' }],
        total: 1,
        next: undefined,
      })
      // The trash counts toward the caps, not toward the notes the list holds.
      assert.deepEqual((await store.list()).count, 1)
      assert.deepEqual((await store.stats()).notes, 1)
      time.now = 4000
      const back = await store.untrash(1000)
      assert.deepEqual(back, { json: '{"t":"A","id":1000}', etag: '"e.5"', modified: 4000 })
      assert.deepEqual((await store.list()).json, '[{"t":"b","id":1001},{"t":"A","id":1000}]')
      assert.deepEqual(await store.revisions(1000, 10, undefined), {
        revisions: [
          { version: 'e.5', at: 4000, change: 'created', json: '{"t":"A","id":1000}' },
          { version: 'e.3', at: 2000, change: 'updated', json: '{"t":"A","id":1000}' },
          { version: 'e.1', at: 1000, change: 'created', json: '{"t":"a","id":1000}' },
        ],
        next: undefined,
      })
      assert.deepEqual((await store.trash(10, undefined)).total, 0)
      await waitFor(() => heard.length === 2)
      stop()
      assert.deepEqual(heard, [
        { type: 'deleted', version: 'e.4', sequence: 4, data: '{"id":1000}' },
        { type: 'created', version: 'e.5', sequence: 5, data: '{"t":"A","id":1000}' },
      ])
      assert.deepEqual(
        (await store.changesSince('e.3', 10))?.map((change) => change.type),
        ['deleted', 'created'],
      )
      assert.equal(await store.untrash(1000), undefined)
    })

    it('restores the most recently deleted note with an id, refuses one whose id a live note holds, and pages by delete', async () => {
      const { time, now } = clock(1000)
      const store = fresh({ now })
      for (let n = 0; n < 4; n++) await store.create({ n })
      // Two trashed notes with id 1000: the first deleted, then the one patched to its id.
      time.now = 2000
      await store.delete(1000)
      await store.update(1001, { id: 1000 })
      time.now = 3000
      await store.delete(1000)
      await store.delete(1002)
      const page = await store.trash(2, undefined)
      assert.deepEqual(
        page.notes.map((note) => [note.sequence, note.json]),
        [
          [8, '{"n":2,"id":1002}'],
          [7, '{"n":1,"id":1000}'],
        ],
      )
      assert.deepEqual([page.total, page.next], [3, 7])
      assert.deepEqual(
        (await store.trash(2, 7)).notes.map((note) => note.json),
        ['{"n":0,"id":1000}'],
      )
      assert.equal(((await store.untrash(1000)) as { json: string }).json, '{"n":1,"id":1000}')
      assert.equal(await store.untrash(1000), ID_TAKEN)
      assert.equal((await store.trash(10, undefined)).total, 2)
      const version = await store.version()
      assert.equal(await store.purge(1000), true)
      assert.equal(await store.purge(1000), false)
      assert.equal(await store.emptyTrash(), 1)
      assert.equal(await store.emptyTrash(), 0)
      assert.deepEqual(await store.trash(10, undefined), { notes: [], total: 0, next: undefined })
      // Purging is no change.
      assert.equal(await store.version(), version)
      // What is left of history is the restored note's: its state when deleted, and before its id
      // was patched.
      const past = (await store.revisions(1000, 10, undefined))?.revisions.slice(1)
      assert.deepEqual(
        past?.map((revision) => revision.json),
        ['{"n":1,"id":1000}', '{"n":1,"id":1001}'],
      )
      assert.equal(await historyBytesOfStore(store), 34)
    })

    it('counts the trash toward the caps until it is purged or passes its time', async () => {
      const { time, now } = clock(1000)
      const store = fresh({ now, maxNotes: 2, maxBytes: 1000, ...archive({ trashMs: 10_000 }) })
      await store.create({})
      await store.create({})
      await store.delete(1000)
      await assert.rejects(store.create({}), {
        name: 'StoreFullError',
        message: 'The store holds its maximum of 2 notes.',
        advice:
          'Delete notes, or empty the trash, to make room: deleted notes count until they leave it.',
      })
      assert.equal(await store.purge(1000), true)
      await store.create({})
      await store.delete(1001)
      time.now = 1000 + 9999
      await assert.rejects(store.create({}), StoreFullError)
      time.now = 1000 + 10_000
      assert.deepEqual((await store.trash(10, undefined)).total, 0)
      assert.equal(await store.untrash(1001), undefined)
      const made = await store.create({})
      assert.equal(made.json, '{"id":11000}')
      // Bytes too: 900 bytes deleted still hold their room.
      const big = fresh({ now, maxNotes: 10, maxBytes: 1000, ...archive({ trashMs: 10_000 }) })
      const { json } = await big.create({ s: 'x'.repeat(880) })
      await big.delete((JSON.parse(json) as { id: number }).id)
      await assert.rejects(big.create({ s: 'y'.repeat(200) }), StoreFullError)
      time.now += 10_000
      await big.create({ s: 'y'.repeat(200) })
    })

    it('removes a note for good with trashMs 0, with its revisions', async () => {
      const store = fresh(archive({ trashMs: 0 }))
      const { json } = await store.create({ a: 1 })
      const id = (JSON.parse(json) as { id: number }).id
      await store.update(id, { a: 2 })
      assert.ok((await historyBytesOfStore(store)) > 0)
      assert.equal(await store.delete(id), true)
      assert.deepEqual(await store.trash(10, undefined), { notes: [], total: 0, next: undefined })
      assert.equal(await store.untrash(id), undefined)
      assert.equal(await historyBytesOfStore(store), 0)
    })
  })

  describe('history and trash across instances', () => {
    it('reads on one instance the revisions and trash another wrote, and hears its restore in the feed', async () => {
      const schema = sharedSchema()
      const one = instance(schema)
      const two = instance(schema)
      await one.open()
      await two.open()
      const { json } = await one.create({ t: 'a' })
      const id = (JSON.parse(json) as { id: number }).id
      await one.update(id, { t: 'b' })
      assert.deepEqual(
        (await two.revisions(id, 10, undefined))?.revisions.map((r) => [r.version, r.json]),
        [
          ['e.2', `{"t":"b","id":${id}}`],
          ['e.1', `{"t":"a","id":${id}}`],
        ],
      )
      await two.version()
      const heard: Change[] = []
      const stop = two.subscribe((change) => heard.push(change))
      await sleep(50)
      await one.delete(id)
      assert.deepEqual((await two.trash(10, undefined)).total, 1)
      const back = await one.untrash(id)
      assert.equal((back as { etag: string }).etag, '"e.4"')
      await waitFor(() => heard.length === 2)
      stop()
      assert.deepEqual(
        heard.map((change) => [change.type, change.version, change.data]),
        [
          ['deleted', 'e.3', `{"id":${id}}`],
          ['created', 'e.4', `{"t":"b","id":${id}}`],
        ],
      )
      assert.equal(await two.untrash(id), undefined)
      assert.deepEqual(versions(await two.revisions(id, 10, undefined)), ['e.4', 'e.2', 'e.1'])
    })

    it('restores a trashed note once when two instances restore it at the same moment', async () => {
      const schema = sharedSchema()
      const one = instance(schema)
      const two = instance(schema)
      const { json } = await one.create({})
      const id = (JSON.parse(json) as { id: number }).id
      await one.delete(id)
      const answers = await Promise.all([one.untrash(id), two.untrash(id)])
      assert.deepEqual(
        answers.map((answer) => (answer === undefined ? 'none' : typeof answer)).sort(),
        ['none', 'object'],
      )
      assert.equal((await two.list()).count, 1)
    })

    it('holds the caps, the trash counted, across instances', async () => {
      const schema = sharedSchema()
      const one = instance(schema, { maxNotes: 3 })
      const two = instance(schema, { maxNotes: 3 })
      const ids: number[] = []
      for (let n = 0; n < 3; n++) {
        ids.push((JSON.parse((await one.create({ n })).json) as { id: number }).id)
      }
      await one.delete(ids[0] as number)
      await assert.rejects(two.create({}), StoreFullError)
      assert.equal(await two.purge(ids[0] as number), true)
      await one.create({})
    })

    it('keeps revisions and trash when every instance is closed and another opens the database', async () => {
      const schema = sharedSchema()
      const first = instance(schema)
      const { json } = await first.create({ t: 'a' })
      const id = (JSON.parse(json) as { id: number }).id
      await first.update(id, { t: 'b' })
      const other = (JSON.parse((await first.create({ t: 'c' })).json) as { id: number }).id
      await first.update(other, { t: 'd' })
      await first.delete(other)
      await first.close()
      opened.splice(opened.indexOf(first), 1)
      const again = instance(schema)
      assert.deepEqual(versions(await again.revisions(id, 10, undefined)), ['e.2', 'e.1'])
      assert.deepEqual((await again.trash(10, undefined)).notes[0]?.json, `{"t":"d","id":${other}}`)
      await again.untrash(other)
      assert.deepEqual(versions(await again.revisions(other, 10, undefined)), ['e.6', 'e.4', 'e.3'])
    })
  })

  describe('history and trash on a database of the release before them', () => {
    it('gives the notes there their current state as a revision, and keeps the next ones', async () => {
      const schema = sharedSchema()
      await withClient(async (client) => {
        await client.query(`SET search_path = ${schema}, public`)
        await migrate(client, schema, 'olde', 5)
        await client.query("SELECT * FROM notes_open_notebook('shared', 'olde')")
        await client.query(
          `SELECT * FROM notes_create('shared', ARRAY[1000]::bigint[], ARRAY['{"a":1,"id":'],
            ARRAY['}'], ARRAY['1'], ARRAY[100, 100000, 100, 100000, 100]::bigint[], 'The store',
            NULL, NULL, NULL, NULL)`,
        )
      })
      const store = instance(schema, { now: () => 2000 })
      assert.deepEqual(await store.revisions(1000, 10, undefined), {
        revisions: [{ version: 'olde.1', at: 1000, change: 'created', json: '{"a":1,"id":1000}' }],
        next: undefined,
      })
      await store.update(1000, { a: 2 })
      assert.deepEqual(versions(await store.revisions(1000, 10, undefined)), ['olde.2', 'olde.1'])
      await store.delete(1000)
      assert.deepEqual((await store.trash(10, undefined)).notes, [
        { deleted: 2000, sequence: 3, json: '{"a":2,"id":1000}' },
      ])
      assert.equal(await historyBytes(schema), '{"a":1,"id":1000}'.length)
    })
  })

  describe('PostgresNotebooks history and trash', () => {
    it('keeps each notebook its own, and drops them with a notebook', async () => {
      const schema = sharedSchema()
      const notebooks = new PostgresNotebooks({
        url,
        schema,
        poolSize: 2,
        maxNotes: 100,
        maxBytes: 1 << 20,
        maxNotesPerNotebook: 2,
      })
      opened.push(notebooks)
      const a = notebooks.notebook('a')
      const b = notebooks.notebook('b')
      const id = (JSON.parse((await a.create({ t: 'a' })).json) as { id: number }).id
      await a.update(id, { t: 'b' })
      const gone = (JSON.parse((await a.create({ t: 'c' })).json) as { id: number }).id
      await a.delete(gone)
      assert.equal(await b.revisions(id, 10, undefined), undefined)
      assert.equal((await b.trash(10, undefined)).total, 0)
      assert.equal(await b.untrash(gone), undefined)
      assert.equal(await b.purge(gone), false)
      // The notebook's trash counts toward its own cap, not toward another's.
      await assert.rejects(a.create({}), /This notebook holds its maximum of 2 notes/)
      await b.create({})
      await b.create({})
      assert.ok((await historyBytes(schema)) > 0)
      await notebooks.drop('a')
      assert.equal(await historyBytes(schema), 0)
      const counts = await clockCounts(schema)
      assert.deepEqual(counts, { notes: '2', trash_notes: '0', trash_bytes: '0' })
      const fresh = notebooks.notebook('a')
      assert.equal((await fresh.trash(10, undefined)).total, 0)
    })

    it('restores and purges only as an editor: the writer is checked in the same transaction', async () => {
      const schema = sharedSchema()
      const notebooks = new PostgresNotebooks({
        url,
        schema,
        poolSize: 2,
        maxNotes: 100,
        maxBytes: 1 << 20,
      })
      opened.push(notebooks)
      const made = await notebooks.directory.create('ann', 'team')
      assert.ok('id' in made)
      const store = (await notebooks.directory.access('ann', made.id))?.store as string
      const ann = notebooks.writerFor(store, 'ann') as PostgresNoteStore
      const bob = notebooks.writerFor(store, 'bob') as PostgresNoteStore
      const id = (JSON.parse((await ann.create({})).json) as { id: number }).id
      await ann.delete(id)
      await assert.rejects(bob.untrash(id), { name: 'AccessLostError' })
      await assert.rejects(bob.purge(id), { name: 'AccessLostError' })
      await assert.rejects(bob.emptyTrash(), { name: 'AccessLostError' })
      assert.equal((await bob.trash(10, undefined)).total, 1)
      assert.equal(((await ann.untrash(id)) as { json: string }).json, `{"id":${id}}`)
    })
  })

  async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return await work(client)
    } finally {
      await client.end()
    }
  }
  async function historyBytes(schema: string): Promise<number> {
    return withClient(async (client) => {
      const { rows } = await client.query<{ held: string; counted: string }>(
        `SELECT (SELECT coalesce(sum(octet_length(json)), 0) FROM ${schema}.notes_revisions) AS held,
          (SELECT history_bytes FROM ${schema}.notes_clock) AS counted`,
      )
      const row = rows[0] as { held: string; counted: string }
      assert.equal(row.counted, row.held, 'the clock counts the bytes the revisions hold')
      return Number(row.held)
    })
  }
  function historyBytesOfStore(store: PostgresNoteStore): Promise<number> {
    return historyBytes(schemaOf.get(store) as string)
  }
  async function clockCounts(schema: string) {
    return withClient(async (client) => {
      const { rows } = await client.query(
        `SELECT notes, trash_notes, trash_bytes FROM ${schema}.notes_clock`,
      )
      return rows[0]
    })
  }
}

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await sleep(10)
  }
}
