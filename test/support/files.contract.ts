import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import type { Readable } from 'node:stream'
import { describe, it } from 'node:test'
import type { Role } from '../../src/store/directory.js'
import {
  type FileLimits,
  type FileSpace,
  FileTooLargeError,
  type NotebookFiles,
} from '../../src/store/files.js'
import { AccessLostError, StoreFullError } from '../../src/store/types.js'

/** What a case asks of the store under test. */
export interface FileSpaceOptions extends Partial<FileLimits> {
  now?: () => number
}

/** A file space made for one case, with a way to set who may write, and to let it go. */
export interface MadeFileSpace {
  readonly space: FileSpace
  /**
   * Makes `user` hold `role` (undefined: not a member) in the notebook kept under `notebook`, as
   * the directory would, so that writerFor sees it at once.
   */
  setRole(notebook: string, user: string, role: Role | undefined): void | Promise<void>
  /** Removes the notebook (as deleting it does): its files go with it. */
  dropNotebook(notebook: string): void | Promise<void>
  close?(): Promise<void>
}

const T0 = 1_700_000_000_000

/** The chunks of `bytes`, `size` at a time, as an upload's body arrives. */
export async function* chunked(bytes: Buffer, size = 7): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size)
}

export const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

async function readAll(stream: Readable | undefined): Promise<Buffer> {
  assert.ok(stream !== undefined, 'no stream for a stored file')
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Bytes that are not one repeated value: a counter's, seeded. */
export function bytesOf(size: number, seed = 1): Buffer {
  const bytes = Buffer.alloc(size)
  let x = seed * 2654435761
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    bytes[i] = x >>> 24
  }
  return bytes
}

/**
 * The behaviour every store's files must have (FileSpace): bytes kept exactly under their
 * SHA-256, the same bytes once per notebook, ranges read back, pages in the order stored, caps
 * per notebook and per service, nothing of one notebook in another, and writers that lose their
 * role writing nothing. `make` makes an empty space with these options.
 */
export function runFileContract(
  name: string,
  make: (options: FileSpaceOptions) => MadeFileSpace | Promise<MadeFileSpace>,
): void {
  const opened = async (options: FileSpaceOptions = {}) => {
    const clock = { t: T0 }
    const made = await make({ now: () => clock.t, ...options })
    return { clock, made, files: (nb = 'user:alice') => made.space.files(nb) }
  }
  const closing = async (made: MadeFileSpace, run: () => Promise<void>) => {
    try {
      await run()
    } finally {
      await made.close?.()
    }
  }

  describe(`${name}: files`, () => {
    it('keeps the bytes under their SHA-256, with size, type and time, and reads them back', async () => {
      const { made, files } = await opened()
      await closing(made, async () => {
        const bytes = bytesOf(100_003)
        const record = await files().put('image/png', chunked(bytes, 4096))
        assert.deepEqual(
          { id: record.id, size: record.size, type: record.type, created: record.created },
          { id: sha256(bytes), size: bytes.length, type: 'image/png', created: T0 },
        )
        assert.deepEqual(await files().stat(record.id), record)
        assert.ok((await readAll(await files().read(record.id, 0, bytes.length))).equals(bytes))
        assert.deepEqual(await files().totals(), { files: 1, bytes: bytes.length })
        assert.deepEqual(await made.space.totals(), { files: 1, bytes: bytes.length })
        assert.deepEqual(await made.space.notebooks(), ['user:alice'])
      })
    })

    it('reads any range of a file exactly, an empty one and an empty file included', async () => {
      const { made, files } = await opened()
      await closing(made, async () => {
        const bytes = bytesOf(70_001, 3)
        const { id } = await files().put('application/pdf', chunked(bytes, 9_999))
        for (const [start, end] of [
          [0, 1],
          [1, 2],
          [65_535, 65_537],
          [9_998, 10_001],
          [9_999, 19_998],
          [12_345, 70_001],
          [70_000, 70_001],
          [500, 500],
        ] as const) {
          const got = await readAll(await files().read(id, start, end))
          assert.ok(got.equals(bytes.subarray(start, end)), `bytes ${start}-${end}`)
        }
        const empty = await files().put('text/plain', chunked(Buffer.alloc(0)))
        assert.equal(empty.id, sha256(Buffer.alloc(0)))
        assert.equal(empty.size, 0)
        assert.equal((await readAll(await files().read(empty.id, 0, 0))).length, 0)
      })
    })

    it('keeps the same bytes once in a notebook, with their first type and time, touched anew', async () => {
      const { clock, made, files } = await opened()
      await closing(made, async () => {
        const bytes = bytesOf(5000)
        const first = await files().put('image/jpeg', chunked(bytes))
        assert.equal(first.touched, undefined)
        clock.t += 1000
        const again = await files().put('text/plain', chunked(bytes, 100))
        // Uploaded again: the sweep of files no note refers to gives it its grace from now.
        assert.deepEqual(again, { ...first, touched: T0 + 1000 })
        assert.deepEqual(await files().stat(first.id), again)
        assert.deepEqual((await files().list(10)).files, [again])
        assert.deepEqual(await files().totals(), { files: 1, bytes: 5000 })
      })
    })

    it('keeps a new file with the time an import gives it, and bytes held with their first', async () => {
      const { made, files } = await opened()
      await closing(made, async () => {
        const bytes = bytesOf(3000, 5)
        const imported = await files().put('image/gif', chunked(bytes), {
          created: T0 - 86_400_000,
        })
        assert.equal(imported.created, T0 - 86_400_000)
        assert.deepEqual(await files().stat(imported.id), imported)
        const again = await files().put('image/gif', chunked(bytes), { created: T0 - 1 })
        assert.deepEqual(again, { ...imported, touched: T0 })
        assert.equal((await files().put('text/plain', chunked(bytesOf(10, 6)))).created, T0)
      })
    })

    it('lists a notebook’s files oldest first, in pages that visit each once', async () => {
      const { clock, made, files } = await opened()
      await closing(made, async () => {
        const ids: string[] = []
        for (let i = 0; i < 7; i++) {
          clock.t += 10
          ids.push((await files().put('text/plain', chunked(Buffer.from(`file ${i}`)))).id)
        }
        const seen: string[] = []
        let after: number | undefined
        for (let round = 0; round < 10; round++) {
          const page = await files().list(3, after)
          seen.push(...page.files.map((file) => file.id))
          if (page.next === undefined) break
          after = page.next
        }
        assert.deepEqual(seen, ids)
        const first = await files().list(3)
        assert.equal(first.files.length, 3)
        assert.equal(first.next, first.files[2]?.sequence)
        const all = await files().list(100)
        assert.equal(all.next, undefined)
        assert.equal(all.files.length, 7)
      })
    })

    it('deletes a file: gone from stat, read and the list, its room given back', async () => {
      const { made, files } = await opened({ maxNotebookBytes: 10_000 })
      await closing(made, async () => {
        const a = await files().put('text/plain', chunked(bytesOf(6000, 1)))
        const b = await files().put('text/plain', chunked(bytesOf(100, 2)))
        assert.equal(await files().delete(a.id), true)
        assert.equal(await files().delete(a.id), false)
        assert.equal(await files().stat(a.id), undefined)
        assert.equal(await files().read(a.id, 0, 1), undefined)
        assert.deepEqual(
          (await files().list(10)).files.map((file) => file.id),
          [b.id],
        )
        assert.deepEqual(await files().totals(), { files: 1, bytes: 100 })
        // The room it had is free again.
        await files().put('text/plain', chunked(bytesOf(9000, 3)))
      })
    })

    it('refuses a file past the largest as it arrives, and keeps nothing', async () => {
      const { made, files } = await opened({ maxFileBytes: 1000 })
      await closing(made, async () => {
        await files().put('text/plain', chunked(bytesOf(1000)))
        let pulled = 0
        async function* endless(): AsyncGenerator<Buffer> {
          for (;;) {
            pulled += 1
            yield Buffer.alloc(100, 1)
          }
        }
        await assert.rejects(files().put('text/plain', endless()), FileTooLargeError)
        assert.ok(pulled <= 11, `read ${pulled} chunks past the limit`)
        assert.deepEqual(await files().totals(), { files: 1, bytes: 1000 })
      })
    })

    it('refuses a file past the notebook’s cap or the service’s, naming only its own', async () => {
      const { made, files } = await opened({ maxNotebookBytes: 1000, maxBytes: 1500 })
      await closing(made, async () => {
        await files('user:alice').put('text/plain', chunked(bytesOf(900, 1)))
        await assert.rejects(
          files('user:alice').put('text/plain', chunked(bytesOf(101, 2))),
          (error: unknown) =>
            error instanceof StoreFullError && /This notebook/.test(error.message),
        )
        await assert.rejects(
          files('user:bob').put('text/plain', chunked(bytesOf(601, 3))),
          (error: unknown) =>
            error instanceof StoreFullError &&
            /The service/.test(error.message) &&
            !/alice/.test(`${error.message} ${error.advice}`),
        )
        await files('user:bob').put('text/plain', chunked(bytesOf(600, 4)))
        assert.deepEqual(await made.space.totals(), { files: 2, bytes: 1500 })
      })
    })

    it('keeps each notebook’s files its own, the same bytes included', async () => {
      const { clock, made, files } = await opened()
      await closing(made, async () => {
        const bytes = bytesOf(3000)
        const alice = await files('user:alice').put('image/png', chunked(bytes))
        assert.equal(await files('user:bob').stat(alice.id), undefined)
        assert.equal(await files('user:bob').read(alice.id, 0, 1), undefined)
        assert.equal(await files('user:bob').delete(alice.id), false)
        assert.deepEqual((await files('user:bob').list(10)).files, [])
        clock.t += 5
        const bob = await files('user:bob').put('text/plain', chunked(bytes))
        assert.equal(bob.id, alice.id)
        assert.equal(bob.type, 'text/plain')
        assert.equal(bob.created, T0 + 5)
        assert.equal(await files('user:alice').delete(alice.id), true)
        assert.ok((await readAll(await files('user:bob').read(bob.id, 0, 3000))).equals(bytes))
        assert.deepEqual(await made.space.notebooks(), ['user:bob'])
      })
    })

    it('writes as a member only while the member may write', async () => {
      const { made } = await opened()
      await closing(made, async () => {
        const nb = 'nb:shared-one'
        await made.setRole(nb, 'bob', 'editor')
        const bob: NotebookFiles = made.space.writerFor(nb, 'bob')
        const kept = await bob.put('text/plain', chunked(Buffer.from('one')))
        await made.setRole(nb, 'bob', 'viewer')
        await assert.rejects(
          bob.put('text/plain', chunked(Buffer.from('two'))),
          (error: unknown) => error instanceof AccessLostError && error.role === 'viewer',
        )
        await assert.rejects(
          Promise.resolve().then(() => bob.delete(kept.id)),
          AccessLostError,
        )
        await made.setRole(nb, 'bob', undefined)
        await assert.rejects(
          bob.put('text/plain', chunked(Buffer.from('three'))),
          (error: unknown) => error instanceof AccessLostError && error.role === undefined,
        )
        assert.deepEqual(await made.space.files(nb).totals(), { files: 1, bytes: 3 })
        // Reads are the notebook's own.
        assert.ok(await bob.stat(kept.id))
      })
    })

    it('removes a notebook’s files with the notebook', async () => {
      const { made, files } = await opened()
      await closing(made, async () => {
        await made.setRole('nb:gone', 'alice', 'owner')
        const file = await files('nb:gone').put('text/plain', chunked(bytesOf(2000)))
        await files('user:alice').put('text/plain', chunked(bytesOf(10, 9)))
        await made.dropNotebook('nb:gone')
        assert.equal(await files('nb:gone').stat(file.id), undefined)
        assert.deepEqual(await made.space.totals(), { files: 1, bytes: 10 })
        assert.deepEqual(await made.space.notebooks(), ['user:alice'])
      })
    })

    it('keeps nothing of an upload whose body fails part way', async () => {
      const { made, files } = await opened()
      await closing(made, async () => {
        async function* broken(): AsyncGenerator<Buffer> {
          yield Buffer.alloc(5000, 1)
          throw new Error('connection reset')
        }
        await assert.rejects(files().put('text/plain', broken()), /connection reset/)
        assert.deepEqual(await files().totals(), { files: 0, bytes: 0 })
        assert.deepEqual((await files().list(10)).files, [])
      })
    })
  })
}
