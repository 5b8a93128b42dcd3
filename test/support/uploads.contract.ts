import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { Readable } from 'node:stream'
import { describe, it } from 'node:test'
import {
  expireUploads,
  UPLOAD_LIFETIME_MS,
  UploadBusyError,
  type UploadInfo,
  type UploadStaging,
} from '../../src/store/uploads.js'
import { bytesOf, chunked } from './files.contract.js'

/** An upload staging made for one case. */
export interface MadeStaging {
  readonly staging: UploadStaging
  /**
   * The same uploads as a process started anew would see them (a durable store: the folder read
   * again, another connection to the database); undefined for one that keeps nothing.
   */
  reopen?(): UploadStaging | Promise<UploadStaging>
  close?(): Promise<void>
}

export const T0 = 1_700_000_000_000

/** A new upload's info: an id as the routes draw it, in notebook `notebook`. */
export function uploadInfo(length: number, fields: Partial<UploadInfo> = {}): UploadInfo {
  return {
    id: randomBytes(16).toString('base64url'),
    notebook: 'user:alice',
    length,
    type: 'application/pdf',
    metadata: `filename ${Buffer.from('a.pdf').toString('base64')}`,
    created: T0,
    ...fields,
  }
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** `bytes` in pieces of `size`, then a failure: a connection cut after those bytes. */
async function* cutAfter(bytes: Buffer, size: number, failure: Error): AsyncGenerator<Buffer> {
  yield* chunked(bytes, size)
  throw failure
}

/**
 * The behaviour every UploadStaging must have: an upload recorded with no bytes, appended to at
 * the offset it holds (and only there), every byte counted kept exactly and read back in order,
 * what a failing body sent before its failure kept, finished into a file's id, removed, and
 * listed; on a durable one, all of it the same when opened again. `make` makes an empty one.
 */
export function runUploadContract(name: string, make: () => MadeStaging | Promise<MadeStaging>) {
  const withStaging = async (run: (made: MadeStaging) => Promise<void>) => {
    const made = await make()
    try {
      await run(made)
    } finally {
      await made.close?.()
    }
  }
  const fits = () => {}

  describe(`${name}: UploadStaging`, () => {
    it('records an upload with no bytes, and knows no other', () =>
      withStaging(async ({ staging }) => {
        const info = uploadInfo(1000)
        await staging.create(info)
        assert.deepEqual(await staging.state(info.id), {
          ...info,
          offset: 0,
          touched: T0,
          file: undefined,
        })
        assert.equal(await staging.state(uploadInfo(1).id), undefined)
        assert.deepEqual(await readAll(staging.read(info.id)), Buffer.alloc(0))
      }))

    it('appends at the offset it holds, answers each new offset, and reads back every byte', () =>
      withStaging(async ({ staging }) => {
        // Across the PostgreSQL chunk size (256 KiB), in pieces that do not divide it.
        const bytes = bytesOf(700_000, 5)
        const info = uploadInfo(bytes.length)
        await staging.create(info)
        const cuts = [0, 10, 300_000, 300_001, 650_000, bytes.length]
        for (let i = 1; i < cuts.length; i++) {
          const [from, to] = [cuts[i - 1] as number, cuts[i] as number]
          const offset = await staging.append(
            info.id,
            from,
            chunked(bytes.subarray(from, to), 7_001),
            fits,
            T0 + i,
          )
          assert.equal(offset, to)
          const state = await staging.state(info.id)
          assert.equal(state?.offset, to)
          assert.equal(state?.touched, T0 + i)
        }
        assert.ok((await readAll(staging.read(info.id))).equals(bytes))
      }))

    it('refuses an append at another offset than it holds, and keeps nothing of it', () =>
      withStaging(async ({ staging }) => {
        const bytes = bytesOf(100, 2)
        const info = uploadInfo(100)
        await staging.create(info)
        await staging.append(info.id, 0, chunked(bytes.subarray(0, 40)), fits, T0 + 1)
        for (const at of [0, 39, 41]) {
          await assert.rejects(
            staging.append(info.id, at, chunked(bytes.subarray(at, 100)), fits, T0 + 2),
            UploadBusyError,
          )
        }
        assert.equal((await staging.state(info.id))?.offset, 40)
        assert.ok((await readAll(staging.read(info.id))).equals(bytes.subarray(0, 40)))
        await assert.rejects(
          staging.append(uploadInfo(1).id, 0, chunked(bytes), fits, T0),
          UploadBusyError,
        )
      }))

    it('keeps what a failing body sent before its failure, throws the failure, and goes on from there', () =>
      withStaging(async ({ staging }) => {
        const bytes = bytesOf(400_000, 8)
        const info = uploadInfo(bytes.length)
        await staging.create(info)
        const cut = new Error('connection cut')
        await assert.rejects(
          staging.append(info.id, 0, cutAfter(bytes.subarray(0, 123_457), 5_000, cut), fits, T0),
          (err) => err === cut,
        )
        assert.equal((await staging.state(info.id))?.offset, 123_457)
        // Past a chunk's worth, too.
        await assert.rejects(
          staging.append(
            info.id,
            123_457,
            cutAfter(bytes.subarray(123_457, 390_000), 65_536, cut),
            fits,
            T0 + 1,
          ),
          (err) => err === cut,
        )
        assert.equal((await staging.state(info.id))?.offset, 390_000)
        assert.equal((await staging.state(info.id))?.touched, T0 + 1)
        const done = await staging.append(
          info.id,
          390_000,
          chunked(bytes.subarray(390_000), 999),
          fits,
          T0 + 2,
        )
        assert.equal(done, bytes.length)
        assert.ok((await readAll(staging.read(info.id))).equals(bytes))
      }))

    it('stops where `room` refuses, keeping the bytes before the piece that did not fit', () =>
      withStaging(async ({ staging }) => {
        const bytes = bytesOf(10_000, 3)
        const info = uploadInfo(bytes.length)
        await staging.create(info)
        const full = new Error('no room')
        const room = (offset: number) => {
          if (offset > 6_500) throw full
        }
        await assert.rejects(
          staging.append(info.id, 0, chunked(bytes, 1_000), room, T0 + 1),
          (err) => err === full,
        )
        assert.equal((await staging.state(info.id))?.offset, 6_000)
        assert.ok((await readAll(staging.read(info.id))).equals(bytes.subarray(0, 6_000)))
      }))

    it('takes an empty body, touching the upload, and an upload of no bytes', () =>
      withStaging(async ({ staging }) => {
        const info = uploadInfo(0)
        await staging.create(info)
        assert.equal(await staging.append(info.id, 0, chunked(Buffer.alloc(0)), fits, T0 + 5), 0)
        assert.equal((await staging.state(info.id))?.touched, T0 + 5)
        assert.deepEqual(await readAll(staging.read(info.id)), Buffer.alloc(0))
      }))

    it('finishes an upload into its file, and removes one', () =>
      withStaging(async ({ staging }) => {
        const bytes = bytesOf(5_000, 4)
        const kept = uploadInfo(bytes.length)
        const ended = uploadInfo(10, { created: T0 + 1 })
        await staging.create(kept)
        await staging.create(ended)
        await staging.append(kept.id, 0, chunked(bytes, 512), fits, T0 + 2)
        await staging.finish(kept.id, 'f'.repeat(64))
        assert.deepEqual(await staging.state(kept.id), {
          ...kept,
          offset: bytes.length,
          touched: T0 + 2,
          file: 'f'.repeat(64),
        })
        await staging.remove(ended.id)
        assert.equal(await staging.state(ended.id), undefined)
        assert.deepEqual(
          (await staging.list()).map((state) => state.id),
          [kept.id],
        )
        await staging.remove(kept.id)
        assert.deepEqual(await staging.list(), [])
      }))

    it('counts the bytes of unfinished uploads, per notebook and in all, but the one excepted', () =>
      withStaging(async ({ staging }) => {
        const mine = uploadInfo(100, { notebook: 'nb1' })
        const other = uploadInfo(100, { notebook: 'nb1' })
        const theirs = uploadInfo(100, { notebook: 'nb2' })
        const done = uploadInfo(7, { notebook: 'nb1' })
        for (const info of [mine, other, theirs, done]) await staging.create(info)
        assert.deepEqual(await staging.held('nb1', undefined), { notebook: 0, service: 0 })
        await staging.append(mine.id, 0, chunked(bytesOf(40)), fits, T0)
        await staging.append(other.id, 0, chunked(bytesOf(25)), fits, T0)
        await staging.append(theirs.id, 0, chunked(bytesOf(9)), fits, T0)
        await staging.append(done.id, 0, chunked(bytesOf(7)), fits, T0)
        await staging.finish(done.id, 'e'.repeat(64))
        assert.deepEqual(await staging.held('nb1', undefined), { notebook: 65, service: 74 })
        assert.deepEqual(await staging.held('nb1', mine.id), { notebook: 25, service: 34 })
        assert.deepEqual(await staging.held('nb2', mine.id), { notebook: 9, service: 34 })
        assert.deepEqual(await staging.held('nb3', undefined), { notebook: 0, service: 74 })
      }))

    it('drops every upload of a removed notebook, and only those', () =>
      withStaging(async (made) => {
        const { staging } = made
        const gone = [uploadInfo(50, { notebook: 'nb1' }), uploadInfo(50, { notebook: 'nb1' })]
        const kept = uploadInfo(50, { notebook: 'nb2' })
        for (const info of [...gone, kept]) {
          await staging.create(info)
          await staging.append(info.id, 0, chunked(bytesOf(20)), fits, T0)
        }
        await staging.drop('nb1')
        for (const info of gone) assert.equal(await staging.state(info.id), undefined)
        assert.deepEqual(
          (await staging.list()).map((state) => state.id),
          [kept.id],
        )
        assert.deepEqual(await staging.held('nb1', undefined), { notebook: 0, service: 20 })
        const again = (await made.reopen?.()) ?? staging
        assert.deepEqual(
          (await again.list()).map((state) => state.id),
          [kept.id],
        )
      }))

    it('lists every upload as it stands, and expires those past their lifetime', () =>
      withStaging(async ({ staging }) => {
        const infos = [0, 1, 2].map((n) => uploadInfo(100, { created: T0 + n, notebook: `nb${n}` }))
        for (const info of infos) await staging.create(info)
        await staging.append(
          (infos[1] as UploadInfo).id,
          0,
          chunked(bytesOf(30)),
          fits,
          T0 + UPLOAD_LIFETIME_MS,
        )
        const listed = [...(await staging.list())].sort((a, b) => a.created - b.created)
        assert.deepEqual(
          listed.map(({ id, notebook, offset, touched, file }) => ({
            id,
            notebook,
            offset,
            touched,
            file,
          })),
          infos.map((info, n) => ({
            id: info.id,
            notebook: info.notebook,
            offset: n === 1 ? 30 : 0,
            touched: n === 1 ? T0 + UPLOAD_LIFETIME_MS : info.created,
            file: undefined,
          })),
        )
        // Past 24 h after its last byte: the first goes (T0), the third's (T0 + 2) is not yet.
        assert.equal(await expireUploads(staging, T0 + UPLOAD_LIFETIME_MS + 1), 1)
        assert.deepEqual(
          (await staging.list()).map((state) => state.id).sort(),
          [(infos[1] as UploadInfo).id, (infos[2] as UploadInfo).id].sort(),
        )
      }))

    it('keeps uploads, their offsets and their bytes when opened anew (a durable store)', async (t) => {
      const made = await make()
      try {
        if (made.reopen === undefined) {
          t.skip('keeps nothing once closed')
          return
        }
        const bytes = bytesOf(300_000, 6)
        const going = uploadInfo(bytes.length)
        const finished = uploadInfo(10, { created: T0 + 1 })
        await made.staging.create(going)
        await made.staging.create(finished)
        await made.staging.append(
          going.id,
          0,
          chunked(bytes.subarray(0, 270_001), 9_000),
          fits,
          T0 + 3,
        )
        await made.staging.append(finished.id, 0, chunked(bytesOf(10)), fits, T0 + 4)
        await made.staging.finish(finished.id, 'a'.repeat(64))
        const again = await made.reopen()
        // Its last bytes' time, or later (a folder takes the time its bytes were written).
        const { touched, ...state } = (await again.state(going.id)) ?? assert.fail('kept')
        assert.deepEqual(
          { ...state, file: state.file },
          { ...going, offset: 270_001, file: undefined },
        )
        assert.ok(touched >= T0 + 3)
        assert.equal((await again.state(finished.id))?.file, 'a'.repeat(64))
        assert.ok((await readAll(again.read(going.id))).equals(bytes.subarray(0, 270_001)))
        await again.append(going.id, 270_001, chunked(bytes.subarray(270_001), 4_096), fits, T0 + 5)
        assert.ok((await readAll(again.read(going.id))).equals(bytes))
      } finally {
        await made.close?.()
      }
    })
  })
}
