import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import {
  brotliCompressSync,
  brotliDecompressSync,
  constants,
  gunzipSync,
  gzipSync,
} from 'node:zlib'

/**
 * The page's files compressed ahead of time. Brotli at its best quality costs about a third of a
 * second of CPU for the page's files, in every process that serves the page: `npm run build`
 * (and `npm run compile`) pay it once, writing each file's brotli and gzip bytes to
 * dist/src/page/compressed/, named by the SHA-256 of the file they compress. A name is the
 * content it stands for, so a copy can never belong to another version of a file; each is still
 * decompressed and compared before use (well under a millisecond for all of them), and a copy
 * that is missing, unreadable or different is compressed again at start-up, as without the
 * folder. From dist/src/pages/ here.
 */
export const COMPRESSED_PAGE = new URL('../page/compressed/', import.meta.url)

export type PageCoding = 'br' | 'gzip'

const SUFFIX: Record<PageCoding, string> = { br: '.br', gzip: '.gz' }

/** The name of a file's copies: its SHA-256 in base64url (its ETag is the first 27 characters). */
export function contentDigest(body: Buffer): string {
  return createHash('sha256').update(body).digest('base64url')
}

function compress(body: Buffer, coding: PageCoding): Buffer {
  return coding === 'br'
    ? brotliCompressSync(body, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
          [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
        },
      })
    : gzipSync(body, { level: constants.Z_BEST_COMPRESSION })
}

function decompress(bytes: Buffer, coding: PageCoding): Buffer {
  return coding === 'br' ? brotliDecompressSync(bytes) : gunzipSync(bytes)
}

/** The copy in `folder`, if it is there and decompresses to `body` exactly. */
function readCopy(
  body: Buffer,
  digest: string,
  coding: PageCoding,
  folder: URL,
): Buffer | undefined {
  try {
    const bytes = readFileSync(new URL(digest + SUFFIX[coding], folder))
    return decompress(bytes, coding).equals(body) ? bytes : undefined
  } catch {
    return undefined
  }
}

/** `body` in `coding`: the copy written by the build when it is sound, else compressed now. */
export function compressedPageFile(
  body: Buffer,
  digest: string,
  coding: PageCoding,
  folder: URL = COMPRESSED_PAGE,
): Buffer {
  return readCopy(body, digest, coding, folder) ?? compress(body, coding)
}

/**
 * Writes the copies of `bodies` that `folder` lacks (each through a temporary file, so that a
 * reader never sees half of one) and removes every other file there: copies of files that are
 * no longer the page's.
 */
export function writeCompressedPage(
  bodies: Iterable<Buffer>,
  folder: URL = COMPRESSED_PAGE,
): { written: number; kept: number; removed: number } {
  mkdirSync(folder, { recursive: true })
  const wanted = new Set<string>()
  let written = 0
  let kept = 0
  for (const body of bodies) {
    const digest = contentDigest(body)
    for (const coding of ['br', 'gzip'] as const) {
      const name = digest + SUFFIX[coding]
      if (wanted.has(name)) continue
      wanted.add(name)
      if (readCopy(body, digest, coding, folder) !== undefined) {
        kept++
        continue
      }
      const temporary = new URL(`${name}.${process.pid}.tmp`, folder)
      writeFileSync(temporary, compress(body, coding))
      renameSync(temporary, new URL(name, folder))
      written++
    }
  }
  let removed = 0
  for (const name of readdirSync(folder)) {
    if (wanted.has(name)) continue
    rmSync(new URL(name, folder), { force: true, recursive: true })
    removed++
  }
  return { written, kept, removed }
}
