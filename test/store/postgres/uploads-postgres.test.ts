import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { after, afterEach, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { buildApp } from '../../../src/app.js'
import { DEFAULT_CONFIG } from '../../../src/config/config.js'
import { CHUNK_BYTES } from '../../../src/store/postgres/files-chunks.js'
import { PostgresNotebooks } from '../../../src/store/postgres/notebooks.js'
import { PostgresNoteStore } from '../../../src/store/postgres/store.js'
import { UploadBusyError } from '../../../src/store/uploads.js'
import { runFileCapsContract } from '../../support/file-caps.contract.js'
import { bytesOf, chunked } from '../../support/files.contract.js'
import { postgresAvailable, testDatabase } from '../../support/postgres-cluster.js'
import { onSchemaOf, pooledStore } from '../../support/schema-pool.js'
import { readAll, runUploadContract, uploadInfo } from '../../support/uploads.contract.js'

const MiB = 1024 * 1024
const fits = () => {}
const TUS = { 'tus-resumable': '1.0.0' }
const PART = { ...TUS, 'content-type': 'application/offset+octet-stream' }

/** A body that sends `first`, then waits for `go` before it sends `rest`. */
function paused(first: Buffer, rest: Buffer, go: Promise<void>): AsyncGenerator<Buffer> {
  return (async function* () {
    yield* chunked(first, 65_536)
    await go
    yield* chunked(rest, 65_536)
  })()
}

/** Waits until `check` holds, 20 s at most (then fails). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`never: ${what}`)
    await sleep(5)
  }
}

/** A gate: `open` lets what awaits `opened` go on. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = () => {}
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { opened, open }
}

const url = postgresAvailable('PostgresUploads') ? await testDatabase() : ''
if (url !== '') {
  const opened: { close(): Promise<void> }[] = []
  // In order: another instance on a pooled schema is closed before the schema goes back.
  afterEach(async () => {
    for (const one of opened.splice(0)) await one.close()
  })
  const admin = new pg.Pool({ connectionString: url, max: 2, allowExitOnIdle: true })
  after(async () => {
    await admin.end()
  })

  const onSchema = onSchemaOf(admin)
  /** What the schema holds of bytes: chunk rows, pending file blobs, blobs to collect. */
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

  /** Notebooks on an empty schema of the pool, closed after the case; `made` gets the schema. */
  const notebooksOn = () => {
    let schema = ''
    const notebooks = pooledStore(url, undefined, (made) => {
      schema = made
      return new PostgresNotebooks({ url, schema, poolSize: 3, maxNotes: 1000, maxBytes: MiB })
    })
    opened.push(notebooks)
    return { notebooks, schema }
  }
  /** Another instance of the service on `schema`, closed before the first one. */
  const instance = (schema: string) => {
    const other = new PostgresNotebooks({ url, schema, poolSize: 3, maxNotes: 1000, maxBytes: MiB })
    opened.unshift(other)
    return other
  }

  runUploadContract('PostgresNotebooks.uploads', () => {
    const { notebooks, schema } = notebooksOn()
    return { staging: notebooks.uploads, reopen: () => instance(schema).uploads }
  })

  /** Two instances of the service on one pooled schema (closed after the test), each an app. */
  const twoInstances = (poolSize: number) => {
    let schema = ''
    const make = (made: string) => {
      schema = made
      return new PostgresNoteStore({ url, schema, poolSize, maxNotes: 10, maxBytes: MiB })
    }
    const storeA = pooledStore(url, undefined, make)
    const storeB = new PostgresNoteStore({ url, schema, poolSize, maxNotes: 10, maxBytes: MiB })
    opened.push(storeA)
    opened.unshift(storeB)
    const [appA, appB] = [storeA, storeB].map((store) =>
      buildApp({ store, files: store.files, uploads: store.uploads, config: DEFAULT_CONFIG }),
    ) as [ReturnType<typeof buildApp>, ReturnType<typeof buildApp>]
    return { schema, storeA, storeB, appA, appB }
  }

  runFileCapsContract('PostgreSQL, two instances', (limits) => {
    let schema = ''
    const options = (made: string) => ({
      url,
      schema: made,
      poolSize: 3,
      maxNotes: 10,
      maxBytes: MiB,
      files: limits,
    })
    const storeA = pooledStore(url, undefined, (made) => {
      schema = made
      return new PostgresNoteStore(options(made))
    })
    const storeB = new PostgresNoteStore(options(schema))
    opened.push(storeA)
    opened.unshift(storeB)
    const config = {
      ...DEFAULT_CONFIG,
      maxFileBytes: limits.maxFileBytes,
      maxFilesBytesPerUser: limits.maxNotebookBytes,
      maxFilesBytes: limits.maxBytes,
    }
    const [appA, appB] = [storeA, storeB].map((store) =>
      buildApp({ store, files: store.files, uploads: store.uploads, config }),
    ) as [ReturnType<typeof buildApp>, ReturnType<typeof buildApp>]
    return {
      apps: [appA, appB],
      close: async () => {
        await appA.close()
        await appB.close()
      },
    }
  })

  describe('PostgresUploads: in chunks in the database', () => {
    it('is the single store’s too (PostgresNoteStore.uploads)', async () => {
      const store = pooledStore(url, undefined, (schema) => {
        return new PostgresNoteStore({ url, schema, poolSize: 2, maxNotes: 10, maxBytes: MiB })
      })
      opened.push(store)
      const bytes = bytesOf(CHUNK_BYTES + 5, 3)
      const info = uploadInfo(bytes.length, { notebook: 'shared' })
      await store.uploads.create(info)
      assert.equal(
        await store.uploads.append(info.id, 0, chunked(bytes, 4096), fits, 1),
        bytes.length,
      )
      assert.ok((await readAll(store.uploads.read(info.id))).equals(bytes))
    })

    it('keeps an upload’s bytes from the sweep of abandoned file uploads: it lives 24 h', async () => {
      const { notebooks, schema } = notebooksOn()
      const bytes = bytesOf(2 * CHUNK_BYTES + 77, 4)
      const info = uploadInfo(bytes.length)
      await notebooks.uploads.create(info)
      await notebooks.uploads.append(
        info.id,
        0,
        chunked(bytes.subarray(0, 600_000), 50_000),
        fits,
        1,
      )
      // A file upload an instance left behind mid-way, besides.
      await onSchema(
        schema,
        `WITH pending AS (INSERT INTO notes_file_uploads DEFAULT VALUES RETURNING blob)
        INSERT INTO notes_file_chunks (blob, part, data) SELECT blob, 0, '\\x00' FROM pending`,
      )
      await onSchema(schema, `UPDATE notes_file_uploads SET touched = now() - interval '2 hours'`)
      assert.equal(await notebooks.files.sweep(), 1)
      assert.deepEqual(await leftovers(schema), { chunks: 3, pending: 0, garbage: 0 })
      // Even a sweep of every pending blob, however recent, leaves it.
      await onSchema(schema, 'SELECT notes_sweep_uploads(0)')
      await notebooks.files.collect()
      assert.ok((await readAll(notebooks.uploads.read(info.id))).equals(bytes.subarray(0, 600_000)))
      await notebooks.uploads.append(info.id, 600_000, chunked(bytes.subarray(600_000)), fits, 2)
      assert.ok((await readAll(notebooks.uploads.read(info.id))).equals(bytes))
    })

    it('lets the chunks of a finished or removed upload go as garbage', async () => {
      const { notebooks, schema } = notebooksOn()
      const done = uploadInfo(CHUNK_BYTES + 1)
      const ended = uploadInfo(CHUNK_BYTES * 3)
      for (const info of [done, ended]) await notebooks.uploads.create(info)
      await notebooks.uploads.append(done.id, 0, chunked(bytesOf(done.length), 65_536), fits, 1)
      await notebooks.uploads.append(ended.id, 0, chunked(bytesOf(CHUNK_BYTES), 65_536), fits, 1)
      assert.deepEqual(await leftovers(schema), { chunks: 3, pending: 0, garbage: 0 })
      await notebooks.uploads.finish(done.id, 'c'.repeat(64))
      await notebooks.files.collect()
      assert.deepEqual(await leftovers(schema), { chunks: 1, pending: 0, garbage: 0 })
      assert.equal((await notebooks.uploads.state(done.id))?.file, 'c'.repeat(64))
      assert.deepEqual(await readAll(notebooks.uploads.read(done.id)), Buffer.alloc(0))
      await notebooks.uploads.remove(ended.id)
      await notebooks.files.collect()
      assert.deepEqual(await leftovers(schema), { chunks: 0, pending: 0, garbage: 0 })
      // An append to a finished or removed upload writes nothing.
      for (const id of [done.id, ended.id]) {
        await assert.rejects(
          notebooks.uploads.append(id, CHUNK_BYTES, chunked(bytesOf(10)), fits, 2),
          UploadBusyError,
        )
      }
      assert.deepEqual(await leftovers(schema), { chunks: 0, pending: 0, garbage: 0 })
    })

    it('continues on one instance an upload created on another', async () => {
      const { notebooks: a, schema } = notebooksOn()
      const b = instance(schema)
      const bytes = bytesOf(700_000, 9)
      const info = uploadInfo(bytes.length)
      await a.uploads.create(info)
      await a.uploads.append(info.id, 0, chunked(bytes.subarray(0, 300_000), 10_000), fits, 1)
      assert.equal((await b.uploads.state(info.id))?.offset, 300_000)
      await b.uploads.append(info.id, 300_000, chunked(bytes.subarray(300_000), 10_000), fits, 2)
      assert.equal((await a.uploads.state(info.id))?.offset, bytes.length)
      assert.ok((await readAll(a.uploads.read(info.id))).equals(bytes))
      assert.deepEqual(
        (await b.uploads.list()).map((state) => state.id),
        [info.id],
      )
    })

    it('never interleaves two appends to one upload, on two instances: the one overtaken stops', async () => {
      const { notebooks: a, schema } = notebooksOn()
      const b = instance(schema)
      const length = 3 * CHUNK_BYTES
      const fromA = bytesOf(length, 1)
      const fromB = bytesOf(length, 2)
      const info = uploadInfo(length)
      await a.uploads.create(info)
      // A's first chunk is committed, then its body waits.
      const go = gate()
      const first = fromA.subarray(0, CHUNK_BYTES + 1000)
      const appending = a.uploads.append(
        info.id,
        0,
        paused(first, fromA.subarray(first.length), go.opened),
        fits,
        1,
      )
      await until(
        async () => (await b.uploads.state(info.id))?.offset === CHUNK_BYTES,
        'A’s first chunk committed',
      )
      // B, sent from the offset A had when B began, is refused and writes nothing.
      await assert.rejects(
        b.uploads.append(info.id, 0, chunked(fromB, 65_536), fits, 2),
        UploadBusyError,
      )
      // B from the offset held now goes on; A, overtaken, stops at its next chunk.
      const rest = await b.uploads.append(
        info.id,
        CHUNK_BYTES,
        chunked(fromB.subarray(CHUNK_BYTES), 65_536),
        fits,
        3,
      )
      assert.equal(rest, length)
      go.open()
      await assert.rejects(appending, UploadBusyError)
      const held = await readAll(a.uploads.read(info.id))
      assert.ok(
        held.equals(Buffer.concat([fromA.subarray(0, CHUNK_BYTES), fromB.subarray(CHUNK_BYTES)])),
      )
      // Appends racing from one offset: exactly one wins, whole.
      const race = uploadInfo(2 * CHUNK_BYTES)
      await a.uploads.create(race)
      const settled = await Promise.allSettled(
        [a, b].map((one, n) =>
          one.uploads.append(race.id, 0, chunked(bytesOf(race.length, 10 + n), 100_000), fits, 4),
        ),
      )
      const won = settled.findIndex((one) => one.status === 'fulfilled')
      assert.equal(settled.filter((one) => one.status === 'fulfilled').length, 1)
      for (const one of settled) {
        if (one.status === 'rejected') assert.ok(one.reason instanceof UploadBusyError)
      }
      assert.ok((await readAll(b.uploads.read(race.id))).equals(bytesOf(race.length, 10 + won)))
    })

    it('answers 409 to a PATCH that another instance’s PATCH overtook, and makes the file whole', async () => {
      const { schema, storeA, storeB, appA, appB } = twoInstances(3)
      try {
        const bytes = bytesOf(3 * CHUNK_BYTES + 500, 7)
        const created = await appA.inject({
          method: 'POST',
          url: '/api/uploads',
          headers: { ...TUS, 'upload-length': String(bytes.length) },
        })
        const location = created.headers.location as string
        const go = gate()
        const body = Readable.from(
          paused(bytes.subarray(0, CHUNK_BYTES + 10), bytes.subarray(CHUNK_BYTES + 10), go.opened),
        )
        const slow = appA.inject({
          method: 'PATCH',
          url: location,
          headers: { ...PART, 'upload-offset': '0', 'content-length': String(bytes.length) },
          payload: body,
        })
        const offsetOn = async (app: typeof appB) =>
          (await app.inject({ method: 'HEAD', url: location, headers: TUS })).headers[
            'upload-offset'
          ]
        await until(
          async () => (await offsetOn(appB)) === String(CHUNK_BYTES),
          'A’s first chunk committed',
        )
        const rest = await appB.inject({
          method: 'PATCH',
          url: location,
          headers: { ...PART, 'upload-offset': String(CHUNK_BYTES) },
          payload: bytes.subarray(CHUNK_BYTES),
        })
        assert.equal(rest.statusCode, 204, rest.body)
        go.open()
        assert.equal((await slow).statusCode, 409)
        const file = JSON.parse((await appA.inject(location)).body).data as { id: string }
        assert.equal(file.id, createHash('sha256').update(bytes).digest('hex'))
        const got = await appB.inject(`/api/files/${file.id}`)
        assert.ok(got.rawPayload.equals(bytes))
        await Promise.all([storeA.files.collect(), storeB.files.collect()])
        // The file's chunks alone are left: the upload's went.
        assert.deepEqual(await leftovers(schema), { chunks: 4, pending: 0, garbage: 0 })
      } finally {
        await appA.close()
        await appB.close()
      }
    })

    it('makes a finished upload’s whole chunks its file’s without a copy, and copies those a part cut short', async () => {
      const { schema, storeA, appA, appB } = twoInstances(3)
      try {
        const blobs = async (location: string) => {
          const id = location.split('/').at(-1) as string
          const [row] = await onSchema<{ blob: string | null }>(
            schema,
            'SELECT blob FROM notes_resumable_uploads WHERE id = $1',
            [id],
          )
          return row?.blob ?? null
        }
        const fileBlob = async (file: string) => {
          const [row] = await onSchema<{ blob: string }>(
            schema,
            'SELECT blob FROM notes_files WHERE id = $1',
            [file],
          )
          return row?.blob
        }
        const send = async (bytes: Buffer, cut: number) => {
          const created = await appA.inject({
            method: 'POST',
            url: '/api/uploads',
            headers: { ...TUS, 'upload-length': String(bytes.length) },
          })
          const location = created.headers.location as string
          let held: string | null = null
          for (const [from, to] of [
            [0, cut],
            [cut, bytes.length],
          ] as const) {
            const part = await appB.inject({
              method: 'PATCH',
              url: location,
              headers: { ...PART, 'upload-offset': String(from) },
              payload: bytes.subarray(from, to),
            })
            assert.equal(part.statusCode, 204, part.body)
            if (to < bytes.length) held = await blobs(location)
          }
          const file = JSON.parse((await appA.inject(location)).body).data as { id: string }
          assert.equal(file.id, createHash('sha256').update(bytes).digest('hex'))
          assert.ok((await appB.inject(`/api/files/${file.id}`)).rawPayload.equals(bytes))
          const range = await appA.inject({
            url: `/api/files/${file.id}`,
            headers: { range: `bytes=${CHUNK_BYTES - 3}-${2 * CHUNK_BYTES + 3}` },
          })
          assert.ok(range.rawPayload.equals(bytes.subarray(CHUNK_BYTES - 3, 2 * CHUNK_BYTES + 4)))
          return { held, kept: await fileBlob(file.id) }
        }
        // Parts that end on a chunk's edge (as the client's 8 MiB parts do): the blob is taken over.
        const whole = await send(bytesOf(3 * CHUNK_BYTES + 99, 31), 2 * CHUNK_BYTES)
        assert.equal(whole.kept, whole.held)
        // A part that ended mid-chunk (a cut connection): its file is a copy, in whole chunks.
        const cut = await send(bytesOf(3 * CHUNK_BYTES + 99, 32), CHUNK_BYTES + 1000)
        assert.notEqual(cut.kept, cut.held)
        await storeA.files.collect()
        // Each file's chunks alone are left (4 each): the copied upload's went as garbage.
        assert.deepEqual(await leftovers(schema), { chunks: 8, pending: 0, garbage: 0 })
      } finally {
        await appA.close()
        await appB.close()
      }
    })

    it('answers a HEAD that meets the last part’s finish, on another instance, as the upload done', async () => {
      const { appA, appB } = twoInstances(4)
      try {
        // Between its last chunk and its file, the upload is complete and not yet a file: a HEAD
        // then finishes it too, reading the chunks that the PATCH's finish lets go.
        for (let round = 0; round < 3; round++) {
          const bytes = bytesOf(24 * CHUNK_BYTES + 11, 20 + round)
          const created = await appA.inject({
            method: 'POST',
            url: '/api/uploads',
            headers: { ...TUS, 'upload-length': String(bytes.length) },
          })
          const location = created.headers.location as string
          let patched = false
          const patch = appA
            .inject({
              method: 'PATCH',
              url: location,
              headers: { ...PART, 'upload-offset': '0' },
              payload: bytes,
            })
            .finally(() => {
              patched = true
            })
          const heads: string[] = []
          while (!patched) {
            const head = await appB.inject({ method: 'HEAD', url: location, headers: TUS })
            heads.push(`${head.statusCode} ${head.headers['upload-offset']}`)
          }
          assert.equal((await patch).statusCode, 204)
          assert.deepEqual(
            heads.filter((head) => !head.startsWith('200 ')),
            [],
          )
          const file = JSON.parse((await appB.inject(location)).body).data as { id: string }
          assert.equal(file.id, createHash('sha256').update(bytes).digest('hex'))
          assert.ok((await appB.inject(`/api/files/${file.id}`)).rawPayload.equals(bytes))
        }
      } finally {
        await appA.close()
        await appB.close()
      }
    })
  })
}
