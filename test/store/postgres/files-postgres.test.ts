import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import type { Readable } from 'node:stream'
import { after, afterEach, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import pg from 'pg'
import { isRefusal, notebookStore, type Refusal } from '../../../src/store/directory.js'
import { type FileRecord, FileTooLargeError } from '../../../src/store/files.js'
import { CHUNK_BYTES } from '../../../src/store/postgres/files-chunks.js'
import { PostgresNotebooks } from '../../../src/store/postgres/notebooks.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { AccessLostError, SHARED_NOTEBOOK, StoreFullError } from '../../../src/store/types.js'
import {
  bytesOf,
  chunked,
  type FileSpaceOptions,
  type MadeFileSpace,
  runFileContract,
  sha256,
} from '../../support/files.contract.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { onSchemaOf, pooledStore } from '../../support/schema-pool.js'

const MiB = 1024 * 1024

function ok<T>(value: T | Refusal): T {
  if (isRefusal(value)) assert.fail(`refused: ${JSON.stringify(value)}`)
  return value as T
}

async function readAll(stream: Readable | undefined): Promise<Buffer> {
  assert.ok(stream !== undefined, 'no stream for a stored file')
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** A full collection, so that what is measured next is what is held, not garbage yet to go. */
const collect: () => void = (() => {
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
})()

/**
 * The bytes this process holds in its heap and in buffers outside it, after a collection: two,
 * a turn of the event loop apart, since the memory of the buffers that the first finds garbage
 * is given back while the program goes on (right after one, megabytes of them still count).
 */
async function held(): Promise<number> {
  collect()
  await new Promise(setImmediate)
  collect()
  const { heapUsed, arrayBuffers } = process.memoryUsage()
  return heapUsed + arrayBuffers
}

const url = postgresAvailable('PostgresFiles') ? await testDatabase() : ''
if (url !== '') {
  const opened: { close(): Promise<void> }[] = []
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((one) => one.close()))
  })
  const admin = new pg.Pool({ connectionString: url, max: 2, allowExitOnIdle: true })
  after(async () => {
    await Promise.all(opened.map((one) => one.close()))
    await admin.end()
  })

  const onSchema = onSchemaOf(admin)
  /** `user` holds `role` in the notebook kept under `store` (a row of the directory of its own). */
  const setRole = async (schema: string, store: string, user: string, role?: string) => {
    await onSchema(
      schema,
      'INSERT INTO notes_directory (id, name, store) VALUES ($1, $1, $1) ON CONFLICT DO NOTHING',
      [store],
    )
    if (role === undefined) {
      await onSchema(schema, 'DELETE FROM notes_members WHERE notebook = $1 AND sub = $2', [
        store,
        user,
      ])
    } else {
      await onSchema(
        schema,
        `INSERT INTO notes_members (notebook, sub, role) VALUES ($1, $2, $3)
        ON CONFLICT (notebook, sub) DO UPDATE SET role = EXCLUDED.role`,
        [store, user, role],
      )
    }
  }
  /** What the schema holds of files' bytes: chunk rows, uploads pending, blobs to collect. */
  const leftovers = async (schema: string) => {
    const [row] = await onSchema<{ chunks: string; pending: string; garbage: string }>(
      schema,
      `SELECT (SELECT count(*) FROM notes_file_chunks) AS chunks,
        (SELECT count(*) FROM notes_file_uploads) AS pending,
        (SELECT count(*) FROM notes_file_garbage) AS garbage`,
    )
    return {
      chunks: Number(row?.chunks),
      pending: Number(row?.pending),
      garbage: Number(row?.garbage),
    }
  }

  type Options = Omit<ConstructorParameters<typeof PostgresNotebooks>[0], 'url' | 'schema'>
  /** Notebooks on an empty schema of the pool, closed after the case; `made` gets the schema. */
  const notebooksOn = (options: Partial<Options> = {}) => {
    let schema = ''
    const notebooks = pooledStore(url, undefined, (made) => {
      schema = made
      return new PostgresNotebooks({
        url,
        schema,
        poolSize: 3,
        maxNotes: 1000,
        maxBytes: MiB,
        ...options,
      })
    })
    opened.push(notebooks)
    return { notebooks, schema }
  }
  const limitsOf = ({ now, ...files }: FileSpaceOptions) => ({
    files,
    ...(now === undefined ? {} : { now }),
  })

  runFileContract('PostgresNotebooks.files', (options): MadeFileSpace => {
    const { notebooks, schema } = notebooksOn(limitsOf(options))
    return {
      space: notebooks.files,
      setRole: (nb, user, role) => setRole(schema, nb, user, role),
      dropNotebook: (nb) => notebooks.drop(nb),
    }
  })

  runFileContract('PostgresNoteStore.files (a store of its own)', (options): MadeFileSpace => {
    let schema = ''
    const store = pooledStore(url, undefined, (made) => {
      schema = made
      return new PostgresNoteStore({
        url,
        schema,
        poolSize: 3,
        maxNotes: 1000,
        maxBytes: MiB,
        ...limitsOf(options),
      })
    })
    opened.push(store)
    return {
      space: store.files,
      setRole: (nb, user, role) => setRole(schema, nb, user, role),
      dropNotebook: async (nb) => {
        await onSchema(schema, 'SELECT notes_drop_notebook($1)', [nb])
      },
    }
  })

  describe('PostgresFiles: in chunks in the database', () => {
    it('reads any range of a file of several chunks exactly, across chunk edges and statements', async () => {
      const { notebooks } = notebooksOn()
      const files = notebooks.files.files('user:alice')
      const size = 6 * CHUNK_BYTES + 1234
      const bytes = bytesOf(size, 7)
      const file = await files.put('application/zip', chunked(bytes, 100_000))
      assert.equal(file.id, sha256(bytes))
      const C = CHUNK_BYTES
      for (const [start, end] of [
        [0, size],
        [0, C],
        [C - 1, C + 1],
        [C, 2 * C],
        [1, 5 * C + 17],
        [3 * C + 5, size],
        [size - 1, size],
        [2 * C, 2 * C],
      ] as const) {
        const got = await readAll(await files.read(file.id, start, end))
        assert.ok(got.equals(bytes.subarray(start, end)), `bytes ${start}-${end}`)
      }
    })

    it('serves every file on every instance: two instances on one database read each other’s', async () => {
      const { notebooks: a, schema } = notebooksOn()
      const b = new PostgresNotebooks({ url, schema, poolSize: 3, maxNotes: 1000, maxBytes: MiB })
      try {
        const fromA = bytesOf(CHUNK_BYTES + 99, 1)
        const fromB = bytesOf(3000, 2)
        const one = await a.files.files('user:ann').put('image/png', chunked(fromA, 65_536))
        const two = await b.files.files('user:ann').put('text/plain', chunked(fromB))
        assert.deepEqual(await b.files.files('user:ann').stat(one.id), one)
        assert.deepEqual(await a.files.files('user:ann').stat(two.id), two)
        assert.ok(
          (await readAll(await b.files.files('user:ann').read(one.id, 0, one.size))).equals(fromA),
        )
        assert.ok(
          (await readAll(await a.files.files('user:ann').read(two.id, 0, two.size))).equals(fromB),
        )
        assert.deepEqual(
          (await b.files.files('user:ann').list(10)).files.map((file) => file.id),
          [one.id, two.id],
        )
        assert.equal(await b.files.files('user:ann').delete(one.id), true)
        assert.equal(await a.files.files('user:ann').stat(one.id), undefined)
        assert.deepEqual(await a.files.totals(), { files: 1, bytes: 3000 })
      } finally {
        await b.close()
      }
    })

    it('lets no two uploads pass a cap together, on two instances, in a notebook or over the service', async () => {
      const files = { maxNotebookBytes: 10_000, maxBytes: 15_000 }
      const { notebooks: a, schema } = notebooksOn({ files })
      const b = new PostgresNotebooks({
        url,
        schema,
        poolSize: 3,
        maxNotes: 1000,
        maxBytes: MiB,
        files,
      })
      try {
        const settled = await Promise.allSettled(
          Array.from({ length: 6 }, (_, i) =>
            (i % 2 === 0 ? a : b).files
              .files('user:ann')
              .put('text/plain', chunked(bytesOf(6000, i), 1000)),
          ),
        )
        assert.equal(settled.filter((one) => one.status === 'fulfilled').length, 1)
        for (const one of settled) {
          if (one.status === 'rejected') assert.ok(one.reason instanceof StoreFullError)
        }
        const more = await Promise.allSettled(
          ['user:bob', 'user:cat', 'user:dan'].map((nb, i) =>
            (i % 2 === 0 ? b : a).files
              .files(nb)
              .put('text/plain', chunked(bytesOf(6000, 10 + i), 1000)),
          ),
        )
        assert.equal(more.filter((one) => one.status === 'fulfilled').length, 1)
        assert.deepEqual(await a.files.totals(), { files: 2, bytes: 12_000 })
        assert.deepEqual(await leftovers(schema), { chunks: 2, pending: 0, garbage: 0 })
      } finally {
        await b.close()
      }
    })

    it('keeps the same bytes uploaded at once in one notebook as one file', async () => {
      const { notebooks, schema } = notebooksOn()
      const bytes = bytesOf(CHUNK_BYTES + 10, 5)
      const files = notebooks.files.files('user:ann')
      const records = await Promise.all(
        Array.from({ length: 4 }, () => files.put('image/gif', chunked(bytes, 50_000))),
      )
      // One file, which the later ones touched.
      const file = ({ touched: _, ...record }: FileRecord) => record
      for (const record of records) assert.deepEqual(file(record), file(records[0] as FileRecord))
      assert.deepEqual(await files.totals(), { files: 1, bytes: bytes.length })
      assert.deepEqual(await leftovers(schema), { chunks: 2, pending: 0, garbage: 0 })
    })

    it('leaves no chunk behind of an upload that fails part way, whatever the failure', async () => {
      const { notebooks, schema } = notebooksOn({
        files: { maxFileBytes: 3 * MiB, maxNotebookBytes: 4 * MiB },
      })
      const files = notebooks.files.files('user:ann')
      // The start-up sweep's collection, still running, would be a second collector of the
      // chunks below whose commit the counts could be read before.
      await notebooks.files.sweep()
      async function* broken(): AsyncGenerator<Buffer> {
        yield* chunked(bytesOf(700_000), 65_536)
        throw new Error('connection reset')
      }
      await assert.rejects(files.put('text/plain', broken()), /connection reset/)
      assert.deepEqual(await leftovers(schema), { chunks: 0, pending: 0, garbage: 0 })
      await assert.rejects(
        files.put('text/plain', chunked(bytesOf(3 * MiB + 1), 65_536)),
        FileTooLargeError,
      )
      assert.deepEqual(await leftovers(schema), { chunks: 0, pending: 0, garbage: 0 })
      await files.put('text/plain', chunked(bytesOf(3 * MiB, 2), 65_536))
      await assert.rejects(
        files.put('text/plain', chunked(bytesOf(2 * MiB, 3), 65_536)),
        StoreFullError,
      )
      assert.deepEqual(await leftovers(schema), { chunks: 12, pending: 0, garbage: 0 })
      // A writer who loses their role while their bytes arrive: nothing kept, nothing left.
      const store = 'nb:lost'
      await setRole(schema, store, 'eve', 'editor')
      async function* slow(): AsyncGenerator<Buffer> {
        yield bytesOf(300_000, 4)
        await setRole(schema, store, 'eve', 'viewer')
        yield bytesOf(300_000, 5)
      }
      await assert.rejects(
        notebooks.files.writerFor(store, 'eve').put('text/plain', slow()),
        (error: unknown) => error instanceof AccessLostError && error.role === 'viewer',
      )
      assert.deepEqual(await leftovers(schema), { chunks: 12, pending: 0, garbage: 0 })
      // The same bytes twice: the first file stays, the second blob goes.
      await files.put('text/plain', chunked(bytesOf(300_000, 6), 65_536))
      assert.deepEqual(await leftovers(schema), { chunks: 14, pending: 0, garbage: 0 })
      await files.put('text/plain', chunked(bytesOf(300_000, 6), 100_000))
      assert.deepEqual(await leftovers(schema), { chunks: 14, pending: 0, garbage: 0 })
    })

    it('keeps a file whose upload is let go once it was kept (its COMMIT’s answer lost on the way)', async () => {
      const { notebooks, schema } = notebooksOn()
      const files = notebooks.files.files('user:ann')
      const bytes = bytesOf(CHUNK_BYTES + 5, 8)
      const file = await files.put('text/plain', chunked(bytes, 65_536))
      const [row] = await onSchema<{ blob: string }>(
        schema,
        'SELECT blob FROM notes_files WHERE id = $1',
        [file.id],
      )
      await onSchema(schema, 'SELECT notes_discard_upload($1)', [row?.blob])
      await notebooks.files.collect()
      assert.deepEqual(await leftovers(schema), { chunks: 2, pending: 0, garbage: 0 })
      assert.ok((await readAll(await files.read(file.id, 0, file.size))).equals(bytes))
    })

    it('removes the uploads an instance left pending an hour or more, and the upload then fails', async () => {
      const { notebooks, schema } = notebooksOn()
      let resume: () => void = () => {}
      let pulled: () => void = () => {}
      const halfway = new Promise<void>((resolve) => {
        pulled = resolve
      })
      async function* stalled(): AsyncGenerator<Buffer> {
        yield bytesOf(CHUNK_BYTES, 1)
        yield bytesOf(10, 2)
        pulled()
        await new Promise<void>((resolve) => {
          resume = resolve
        })
        yield bytesOf(CHUNK_BYTES, 3)
      }
      const put = notebooks.files.files('user:ann').put('text/plain', stalled())
      await halfway
      await sleep(50)
      assert.deepEqual(await leftovers(schema), { chunks: 1, pending: 1, garbage: 0 })
      // Touched just now: a sweep leaves it.
      assert.equal(await notebooks.files.sweep(), 0)
      await onSchema(
        schema,
        "UPDATE notes_file_uploads SET touched = touched - interval '61 minutes'",
      )
      assert.equal(await notebooks.files.sweep(), 1)
      assert.deepEqual(await leftovers(schema), { chunks: 0, pending: 0, garbage: 0 })
      resume()
      await assert.rejects(put, /removed as abandoned/)
      assert.deepEqual(await leftovers(schema), { chunks: 0, pending: 0, garbage: 0 })
      assert.deepEqual(await notebooks.files.totals(), { files: 0, bytes: 0 })
    })

    it('ends a read with an error, never a short file, when the file is deleted under it', async () => {
      const { notebooks } = notebooksOn()
      const files = notebooks.files.files('user:ann')
      const bytes = bytesOf(8 * CHUNK_BYTES, 3)
      const file = await files.put('text/plain', chunked(bytes, 100_000))
      const stream = await files.read(file.id, 0, file.size)
      assert.ok(stream !== undefined)
      const reading = stream[Symbol.asyncIterator]()
      assert.equal(((await reading.next()).value as Buffer).length, CHUNK_BYTES)
      assert.equal(await files.delete(file.id), true)
      // Its chunks go after the answer: once they have, the read cannot go on.
      await notebooks.files.collect()
      await assert.rejects(
        (async () => {
          for (;;) if ((await reading.next()).done) break
        })(),
        /lost part/,
      )
    })

    it('removes a notebook’s files with the notebook when the directory removes it', async () => {
      const { notebooks, schema } = notebooksOn()
      const made = ok(await notebooks.directory.create('ann', 'Gone soon'))
      const store = notebookStore(made.id)
      const files = notebooks.files.writerFor(store, 'ann')
      await files.put('text/plain', chunked(bytesOf(CHUNK_BYTES * 2, 1), 65_536))
      await notebooks.files.files('user:ann').put('text/plain', chunked(bytesOf(10, 2)))
      ok(await notebooks.directory.remove('ann', made.id))
      assert.deepEqual(await notebooks.files.notebooks(), ['user:ann'])
      await notebooks.files.collect()
      assert.deepEqual(await notebooks.files.totals(), { files: 1, bytes: 10 })
      assert.deepEqual(await leftovers(schema), { chunks: 1, pending: 0, garbage: 0 })
      await assert.rejects(
        files.put('text/plain', chunked(bytesOf(5, 3))),
        (error: unknown) => error instanceof AccessLostError && error.role === undefined,
      )
    })

    it('holds a few chunks, not the file, while 20 MiB go up from a slow body and come down to a slow reader', async () => {
      const { notebooks } = notebooksOn({ files: { maxFileBytes: 32 * MiB } })
      const files = notebooks.files.files(SHARED_NOTEBOOK)
      const size = 20 * MiB
      const piece = 64 * 1024
      const hash = createHash('sha256')
      // Warm up: the pool's connections and the statements, before the baseline.
      await files.put('text/plain', chunked(bytesOf(CHUNK_BYTES + 1, 9), piece))
      const baseline = await held()
      let peak = 0
      async function* slowBody(): AsyncGenerator<Buffer> {
        for (let at = 0; at < size; at += piece) {
          const bytes = bytesOf(piece, at / piece + 1)
          hash.update(bytes)
          yield bytes
          await sleep(1)
          if ((at / piece) % 32 === 0) peak = Math.max(peak, (await held()) - baseline)
        }
      }
      const file = await files.put('application/octet-stream', slowBody())
      assert.equal(file.size, size)
      assert.equal(file.id, hash.digest('hex'))
      assert.ok(peak < 8 * MiB, `grew by ${(peak / MiB).toFixed(1)} MiB uploading 20 MiB`)

      const down = createHash('sha256')
      let read = 0
      let readPeak = 0
      const stream = await files.read(file.id, 0, size)
      assert.ok(stream !== undefined)
      for await (const chunk of stream) {
        down.update(chunk as Buffer)
        read += (chunk as Buffer).length
        await sleep(2)
        readPeak = Math.max(readPeak, (await held()) - baseline)
      }
      assert.equal(read, size)
      assert.equal(down.digest('hex'), file.id)
      assert.ok(readPeak < 8 * MiB, `grew by ${(readPeak / MiB).toFixed(1)} MiB reading 20 MiB`)
    })
  })
}
