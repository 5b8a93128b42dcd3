import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, describe, it } from 'node:test'
import pg from 'pg'
import { MIGRATIONS } from '../../src/store/postgres/migrations.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import { migrate } from '../../src/store/postgres/schema.js'
import { PostgresNoteStore } from '../../src/store/postgres/store.js'
import { chunked } from './files.contract.js'
import { postgresAvailable, testDatabase } from './postgres-cluster.js'
import { contentsOf, pooledStore, SchemaPool } from './schema-pool.js'

/**
 * The pool of migrated schemas that the PostgreSQL suites' stores start on (schema-pool.ts): a
 * schema it hands out again must be exactly what a fresh migration leaves, epoch apart.
 */
if (postgresAvailable('the schema pool of the PostgreSQL tests')) {
  const url = await testDatabase()
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  const pools: SchemaPool[] = []
  after(async () => {
    await Promise.all(pools.map((pool) => pool.close()))
    await admin.end()
  })
  const newPool = () => {
    const pool = new SchemaPool(url)
    pools.push(pool)
    return pool
  }
  const limits = { maxNotes: 1000, maxBytes: 1 << 20, poolSize: 2 }

  /** The epoch of the shared notebook of `schema`, as a store reads it. */
  const epochOf = async (schema: string): Promise<string> => {
    const { rows } = await admin.query<{ epoch: string }>(
      `SELECT epoch FROM ${schema}.notes_notebooks WHERE notebook = 'shared'`,
    )
    return (rows[0] as { epoch: string }).epoch
  }

  /**
   * What `contentsOf` reads, comparable between two schemas: each epoch named by `epochs` (the
   * schema's own) as '<epoch>', the migrations' times (when each was applied) as '<time>'.
   */
  const comparable = async (schema: string) => {
    const { rows, sequences, shape } = await contentsOf(admin, schema)
    const epoch = await epochOf(schema)
    const tables = Object.fromEntries(
      [...rows].map(([table, json]) => [
        table,
        json
          .replaceAll(JSON.stringify(epoch), '"<epoch>"')
          .replace(/"applied": "[^"]+"/g, '"applied": "<time>"'),
      ]),
    )
    return { tables, sequences: Object.fromEntries(sequences), shape }
  }

  describe('the schema pool of the PostgreSQL tests', () => {
    it('resets a used schema to exactly what a fresh migration leaves, with a new random epoch', async () => {
      const pool = newPool()
      const schema = pool.take()
      let now = 1000
      const notebooks = new PostgresNotebooks({ url, schema, ...limits, now: () => now++ })
      const shared = notebooks.notebook('shared')
      const user = notebooks.notebook('user:bob')
      // Every table the store writes: notes, their changes, idempotency keys (of a create and of
      // a batch), the clocks of two notebooks, revisions and the trash, files and their chunks,
      // uploads that resume.
      await shared.create({ a: 1 })
      const second = await shared.create({ b: 2 })
      await shared.update(JSON.parse(second.json).id as number, { b: 3 })
      await shared.delete(1000)
      await shared.createOnce('key-1', 'f1', { c: 1 })
      await user.create({ mine: true })
      await user.batch(
        async (writer) => {
          const made = await writer.create({ in: 'batch' })
          await writer.update(JSON.parse(made.json).id as number, { in: 'batch', more: 1 })
          return 'done'
        },
        { key: 'batch-1', fingerprint: 'f2' },
      )
      // Files: two kept (one of two chunks), one of them deleted, and an upload that failed.
      const files = notebooks.files.files('user:bob')
      const big = await files.put('image/png', chunked(Buffer.alloc(300_000, 1), 65_536))
      await files.put('text/plain', chunked(Buffer.from('small')))
      await files.delete(big.id)
      await assert.rejects(
        files.put('text/plain', {
          async *[Symbol.asyncIterator]() {
            yield Buffer.alloc(10, 2)
            throw new Error('gone')
          },
        }),
        /gone/,
      )
      // An upload that resumes, part way: its row and a chunk.
      const upload = { id: 'u'.repeat(22), notebook: 'user:bob', length: 100, type: 'text/plain' }
      await notebooks.uploads.create({ ...upload, metadata: '', created: 1000 })
      await notebooks.uploads.append(upload.id, 0, chunked(Buffer.alloc(40, 3)), () => {}, 1001)
      // The deleted file's chunks, collected (deletes start it without waiting).
      await notebooks.files.collect()
      const usedEpoch = (await shared.version()).split('.')[0]
      assert.equal(usedEpoch, await epochOf(schema))
      await notebooks.close()
      const used = await contentsOf(admin, schema)
      const counts = Object.fromEntries(
        [...used.rows].map(([table, json]) => [table, (JSON.parse(json) as unknown[]).length]),
      )
      // Every table but the notes' own: the directory's (no user acted here) and its clock row.
      const {
        notes_access_clock,
        notes_access_changes,
        notes_directory,
        notes_members,
        notes_invites,
        ...rest
      } = counts
      assert.deepEqual(
        { notes_access_clock, notes_access_changes, notes_directory, notes_members, notes_invites },
        {
          notes_access_clock: 1,
          notes_access_changes: 0,
          notes_directory: 0,
          notes_members: 0,
          notes_invites: 0,
        },
      )
      const { notes_migrations, ...notes } = rest
      assert.equal(notes_migrations, MIGRATIONS.length)
      assert.deepEqual(notes, {
        notes: 4,
        notes_changes: 8,
        notes_clock: 1,
        notes_file_chunks: 2,
        notes_file_clock: 1,
        notes_file_garbage: 0,
        notes_file_notebooks: 1,
        notes_file_uploads: 0,
        notes_files: 1,
        notes_idempotency: 2,
        notes_notebooks: 2,
        notes_resumable_uploads: 1,
        // The past states of the two notes updated, and the note deleted, in the trash.
        notes_revisions: 2,
        notes_trash: 1,
      })

      await pool.give(schema)
      assert.deepEqual(pool.stats, { reused: 0, made: 1, reset: 1, dropped: 0 })

      const fresh = `fresh_${randomBytes(6).toString('hex')}`
      const client = new pg.Client({
        connectionString: url,
        options: `-c search_path=${fresh},public`,
      })
      await client.connect()
      try {
        await migrate(client, fresh)
      } finally {
        await client.end()
      }
      assert.deepEqual(await comparable(schema), await comparable(fresh))
      const resetEpoch = await epochOf(schema)
      assert.match(resetEpoch, /^[0-9a-f]+$/)
      assert.notEqual(resetEpoch, usedEpoch)
      assert.notEqual(resetEpoch, await epochOf(fresh))

      // Handed out again, it serves as a new store: its first note, in its new epoch.
      assert.equal(pool.take(), schema)
      const again = new PostgresNoteStore({ url, schema, ...limits, now: () => 5000 })
      try {
        assert.deepEqual(await again.list(), { json: '[]', version: `${resetEpoch}.0`, count: 0 })
        assert.equal((await again.create({})).json, '{"id":5000}')
        assert.equal(await again.version(), `${resetEpoch}.1`)
        assert.equal(await again.changesSince(`${usedEpoch}.1`, 10), undefined)
      } finally {
        await again.close()
      }
    })

    it('resets for the epoch a store names, and hands that schema only to a store naming it', async () => {
      const pool = newPool()
      const schema = pool.take('named')
      const store = new PostgresNoteStore({ url, schema, ...limits, epoch: 'named' })
      await store.create({})
      assert.equal(await store.version(), 'named.1')
      await store.close()
      await pool.give(schema, 'named')
      assert.notEqual(pool.take(), schema)
      assert.notEqual(pool.take('other'), schema)
      assert.equal(pool.take('named'), schema)
      const again = new PostgresNoteStore({ url, schema, ...limits, epoch: 'named' })
      try {
        assert.equal(await again.version(), 'named.0')
        assert.equal((await again.list()).json, '[]')
      } finally {
        await again.close()
      }
    })

    it('never hands out a schema whose reset failed, or one a store still holds', async () => {
      const pool = newPool()
      const schema = pool.take()
      const store = new PostgresNoteStore({ url, schema, ...limits })
      await store.create({})
      await store.close()
      // A schema a test altered is not what a migration makes: it is dropped, not reset.
      await admin.query(`ALTER TABLE ${schema}.notes ADD COLUMN extra text`)
      await pool.give(schema)
      assert.deepEqual(pool.stats, { reused: 0, made: 1, reset: 0, dropped: 1 })
      assert.notEqual(pool.take(), schema)
      await assert.rejects(pool.give(schema), /is not out of this pool/)

      // A store's schema comes back when the store is closed, not before.
      const held = pooledStore(url, undefined, (name) => {
        const one = new PostgresNoteStore({ url, schema: name, ...limits })
        return Object.assign(one, { schemaName: name })
      })
      await held.create({})
      // Another store, never closed, while the first is open: neither gets the other's schema.
      const unclosed = pooledStore(url, undefined, (name) => ({ name, close: async () => {} }))
      assert.notEqual(unclosed.name, held.schemaName)
      await held.close()
      const next = pooledStore(url, undefined, (name) => {
        const one = new PostgresNoteStore({ url, schema: name, ...limits })
        return Object.assign(one, { schemaName: name })
      })
      try {
        assert.equal(next.schemaName, held.schemaName)
        assert.equal((await next.list()).json, '[]')
      } finally {
        await next.close()
      }
    })
  })
}
