import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import type { FileLimits } from '../../src/store/files.js'
import { bytesOf } from './files.contract.js'

const TUS = { 'tus-resumable': '1.0.0' }
const PART = { ...TUS, 'content-type': 'application/offset+octet-stream' }

/** Two apps on one store (the same app twice for a store one process holds), closed after. */
export interface ServedFiles {
  readonly apps: readonly [FastifyInstance, FastifyInstance]
  close(): Promise<void>
}

/** `first`, then, once `go` settles, `rest`: a part whose sender pauses half way. */
function paused(first: Buffer, rest: Buffer, go: Promise<void>): Readable {
  return Readable.from(
    (async function* () {
      yield first
      await go
      yield rest
    })(),
  )
}

/**
 * The caps of files held exactly whatever runs at once: the bytes of files and of unfinished
 * uploads together never pass the notebook's cap or the service's, whether two uploads grow at
 * once (on two instances of a shared store), a file is posted while an upload holds bytes, or an
 * upload becomes its file (its bytes counted once). `make` serves an empty store with these caps
 * of files (its config saying the same).
 */
export function runFileCapsContract(
  name: string,
  make: (limits: FileLimits) => ServedFiles | Promise<ServedFiles>,
): void {
  const served = async (limits: FileLimits, run: (apps: ServedFiles['apps']) => Promise<void>) => {
    const made = await make(limits)
    try {
      await run(made.apps)
    } finally {
      await made.close()
    }
  }
  const create = async (app: FastifyInstance, length: number): Promise<string> => {
    const created = await app.inject({
      method: 'POST',
      url: '/api/uploads',
      headers: { ...TUS, 'upload-length': String(length) },
    })
    assert.equal(created.statusCode, 201, created.body)
    return created.headers.location as string
  }
  const offsetOf = async (app: FastifyInstance, url: string): Promise<number> => {
    const head = await app.inject({ method: 'HEAD', url, headers: TUS })
    assert.equal(head.statusCode, 200)
    return Number(head.headers['upload-offset'])
  }
  const heldInFiles = async (app: FastifyInstance): Promise<number> => {
    const totals = await app.inject('/api/files?limit=100')
    assert.equal(totals.statusCode, 200, totals.body)
    const files = JSON.parse(totals.body).data as { size: number }[]
    return files.reduce((sum, file) => sum + file.size, 0)
  }

  describe(`${name}: the caps of files, exact under concurrency`, () => {
    for (const cap of ['notebook', 'service'] as const) {
      it(`lets two uploads growing at once hold no more than the ${cap}'s cap together`, () =>
        served(
          {
            maxFileBytes: 10_000,
            maxNotebookBytes: cap === 'notebook' ? 1000 : 1 << 20,
            maxBytes: cap === 'service' ? 1000 : 1 << 20,
          },
          async ([appA, appB]) => {
            const [a, b] = [await create(appA, 700), await create(appB, 700)]
            let go = () => {}
            const went = new Promise<void>((resolve) => {
              go = resolve
            })
            const send = (app: FastifyInstance, url: string, seed: number) => {
              const bytes = bytesOf(700, seed)
              return app.inject({
                method: 'PATCH',
                url,
                headers: { ...PART, 'upload-offset': '0' },
                payload: paused(bytes.subarray(0, 400), bytes.subarray(400), went),
              })
            }
            const sent = [send(appA, a, 1), send(appB, b, 2)]
            // Both requests have begun (and sent their first 400 bytes) before either goes on.
            await sleep(200)
            go()
            const answers = await Promise.all(sent)
            // One of them at least is refused (both, when each holds 400 as the other asks for
            // 300 more); none is answered otherwise.
            const codes = answers.map((answer) => answer.statusCode)
            assert.ok(codes.includes(507), `both answered ${codes.join(', ')}`)
            assert.ok(
              codes.every((code) => code === 204 || code === 507),
              codes.join(', '),
            )
            const refused = answers.find((answer) => answer.statusCode === 507)
            assert.equal(refused?.headers['content-type'], 'application/problem+json')
            const files = await heldInFiles(appA)
            assert.equal(files, 700 * codes.filter((code) => code === 204).length)
            // What the refused ones hold, beside the file the other became.
            let held = files
            for (const [i, url] of [a, b].entries()) {
              if (codes[i] === 507) held += await offsetOf(i === 0 ? appA : appB, url)
            }
            assert.ok(held <= 1000, `files and uploads hold ${held} bytes, past the cap of 1000`)
          },
        ))
    }

    it('counts an unfinished upload’s bytes against a file posted meanwhile, and gives them back when it goes', () =>
      served({ maxFileBytes: 10_000, maxNotebookBytes: 1000, maxBytes: 1 << 20 }, async ([app]) => {
        const url = await create(app, 900)
        const part = await app.inject({
          method: 'PATCH',
          url,
          headers: { ...PART, 'upload-offset': '0' },
          payload: bytesOf(600, 3),
        })
        assert.equal(part.statusCode, 204)
        const post = (size: number, seed: number) =>
          app.inject({
            method: 'POST',
            url: '/api/files',
            headers: { 'content-type': 'application/pdf' },
            payload: bytesOf(size, seed),
          })
        const over = await post(401, 4)
        assert.equal(over.statusCode, 507, over.body)
        assert.equal((await post(400, 5)).statusCode, 201)
        // The notebook is full: the upload's next byte does not fit either.
        const more = await app.inject({
          method: 'PATCH',
          url,
          headers: { ...PART, 'upload-offset': '600' },
          payload: bytesOf(1, 6),
        })
        assert.equal(more.statusCode, 507, more.body)
        assert.equal(await offsetOf(app, url), 600)
        const ended = await app.inject({ method: 'DELETE', url, headers: TUS })
        assert.equal(ended.statusCode, 204)
        assert.equal((await post(600, 7)).statusCode, 201)
        assert.equal(await heldInFiles(app), 1000)
      }))

    it('makes a finished upload its file with its bytes counted once', () =>
      served({ maxFileBytes: 10_000, maxNotebookBytes: 1000, maxBytes: 1 << 20 }, async ([app]) => {
        const url = await create(app, 700)
        const bytes = bytesOf(700, 8)
        const part = await app.inject({
          method: 'PATCH',
          url,
          headers: { ...PART, 'upload-offset': '0' },
          payload: bytes,
        })
        assert.equal(part.statusCode, 204, part.body)
        assert.equal(await heldInFiles(app), 700)
        // 700 held in all: 300 more fit, 301 do not, whether posted or uploaded.
        const over = await app.inject({
          method: 'POST',
          url: '/api/uploads',
          headers: { ...TUS, 'upload-length': '301' },
        })
        assert.equal(over.statusCode, 507, 'an upload of 301 bytes was created past the cap')
        const posted = await app.inject({
          method: 'POST',
          url: '/api/files',
          headers: { 'content-type': 'application/pdf' },
          payload: bytesOf(301, 10),
        })
        assert.equal(posted.statusCode, 507, posted.body)
        const rest = await create(app, 300)
        const last = await app.inject({
          method: 'PATCH',
          url: rest,
          headers: { ...PART, 'upload-offset': '0' },
          payload: bytesOf(300, 9),
        })
        assert.equal(last.statusCode, 204, last.body)
        assert.equal(await heldInFiles(app), 1000)
      }))
  })
}
