import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import {
  brotliCompressSync,
  brotliDecompressSync,
  constants,
  gunzipSync,
  gzipSync,
} from 'node:zlib'
import { loadPageFiles, pageSources } from '../../src/pages/notes-page.js'
import {
  COMPRESSED_PAGE,
  compressedPageFile,
  contentDigest,
  writeCompressedPage,
} from '../../src/pages/page-compression.js'

const folders: string[] = []
after(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})
/** An empty folder of its own, as the URL the functions take (with its trailing slash). */
function emptyFolder(): URL {
  const folder = mkdtempSync(join(tmpdir(), 'notes-page-compressed-'))
  folders.push(folder)
  return pathToFileURL(`${folder}/`)
}

const body = Buffer.from('<p>the page</p>\n'.repeat(200))
const digest = contentDigest(body)
/** Brotli at quality 1: a sound copy, and other bytes than the service's own quality 11 makes. */
const quickBrotli = brotliCompressSync(body, {
  params: { [constants.BROTLI_PARAM_QUALITY]: 1 },
})

describe("the page's compressed copies", () => {
  it('are left by the build for every file of the page, in brotli and gzip, and served', () => {
    const files = loadPageFiles()
    const sources = pageSources()
    assert.ok(sources.length > 10, `${sources.length} page files`)
    const copies = new Set<string>()
    for (const { name, url } of sources) {
      const file = readFileSync(url)
      const name64 = contentDigest(file)
      copies.add(`${name64}.br`).add(`${name64}.gz`)
      const br = readFileSync(new URL(`${name64}.br`, COMPRESSED_PAGE))
      const gz = readFileSync(new URL(`${name64}.gz`, COMPRESSED_PAGE))
      assert.ok(brotliDecompressSync(br).equals(file), `${name}: brotli copy`)
      assert.ok(gunzipSync(gz).equals(file), `${name}: gzip copy`)
      const served = files.get(name)?.variants
      assert.ok(served !== undefined, `${name}: served`)
      assert.ok(served.br.body.equals(br), `${name}: the brotli copy is what is served`)
      assert.ok(served.gzip.body.equals(gz), `${name}: the gzip copy is what is served`)
    }
    // Nothing else is in the folder: the build removes the copies of files the page no longer has.
    assert.deepEqual(readdirSync(COMPRESSED_PAGE).sort(), [...copies].sort())
  })

  it('uses a sound copy as it is', () => {
    const folder = emptyFolder()
    writeFileSync(new URL(`${digest}.br`, folder), quickBrotli)
    assert.ok(compressedPageFile(body, digest, 'br', folder).equals(quickBrotli))
  })

  it('compresses anew when the copy is missing, not brotli or gzip, or of another file', () => {
    const folder = emptyFolder()
    const fresh = (coding: 'br' | 'gzip') => compressedPageFile(body, digest, coding, folder)
    const unpacked = (coding: 'br' | 'gzip', bytes: Buffer) =>
      coding === 'br' ? brotliDecompressSync(bytes) : gunzipSync(bytes)
    for (const coding of ['br', 'gzip'] as const) {
      assert.ok(unpacked(coding, fresh(coding)).equals(body), `${coding}: none there`)
    }
    const garbage = Buffer.from('not compressed at all')
    writeFileSync(new URL(`${digest}.br`, folder), garbage)
    writeFileSync(new URL(`${digest}.gz`, folder), garbage)
    for (const coding of ['br', 'gzip'] as const) {
      const bytes = fresh(coding)
      assert.ok(!bytes.equals(garbage))
      assert.ok(unpacked(coding, bytes).equals(body), `${coding}: a copy that is not ${coding}`)
    }
    const other = Buffer.from('another file')
    writeFileSync(new URL(`${digest}.br`, folder), brotliCompressSync(other))
    writeFileSync(new URL(`${digest}.gz`, folder), gzipSync(other))
    for (const coding of ['br', 'gzip'] as const) {
      assert.ok(unpacked(coding, fresh(coding)).equals(body), `${coding}: a copy of another file`)
    }
  })

  it('are written where missing or unsound, kept where sound, and removed when stale', () => {
    const folder = emptyFolder()
    const second = Buffer.from('{"name": "notes"}\n'.repeat(50))
    assert.deepEqual(writeCompressedPage([body, second, body], folder), {
      written: 4,
      kept: 0,
      removed: 0,
    })
    assert.deepEqual(writeCompressedPage([body, second], folder), {
      written: 0,
      kept: 4,
      removed: 0,
    })
    writeFileSync(new URL(`${digest}.gz`, folder), 'torn')
    writeFileSync(new URL('stale.br', folder), quickBrotli)
    assert.deepEqual(writeCompressedPage([body, second], folder), {
      written: 1,
      kept: 3,
      removed: 1,
    })
    assert.ok(gunzipSync(readFileSync(new URL(`${digest}.gz`, folder))).equals(body))
    assert.deepEqual(writeCompressedPage([second], folder), { written: 0, kept: 2, removed: 2 })
    assert.deepEqual(readdirSync(folder).sort(), [
      `${contentDigest(second)}.br`,
      `${contentDigest(second)}.gz`,
    ])
  })
})
