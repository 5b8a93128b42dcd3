import { promisify } from 'node:util'
import {
  type BrotliOptions,
  brotliCompress,
  brotliCompressSync,
  constants,
  gzip,
  gzipSync,
  type ZlibOptions,
} from 'node:zlib'

/**
 * Content codings of JSON answers (br, gzip): which one a request accepts, and the body
 * compressed with it. Levels were chosen by measurement (bench/README.md, "Compression levels"):
 * time to compress W3's 1.3 MB list and a list of varied notes, against the bytes saved.
 */

export type Coding = 'br' | 'gzip'

/** The coding to answer in, and whether the request refused an uncompressed body (identity;q=0). */
export interface CodingChoice {
  readonly coding: Coding
  /** True when identity is refused: a body of 1 KiB or less is compressed too. */
  readonly always: boolean
}

/** Bodies over this many bytes are compressed; smaller ones cost more to code than they save. */
const COMPRESS_OVER = 1024

/** Bodies up to this size are compressed synchronously (well under a millisecond); larger ones on
 * the thread pool, so that a large list or note never holds the event loop. */
const SYNC_UP_TO = 64 * 1024

/** Compressions on the thread pool at once; beyond this a body goes uncompressed. */
const MAX_PENDING = 2

/**
 * Per request (a note, a write's answer): cheap levels, as every request pays them. Per version
 * (the list and its pages, compressed once and sent to every reader until the next write): the
 * levels past which more time buys little. See bench/README.md for the table.
 */
const LEVELS = {
  request: { br: 4, gzip: 1 },
  cached: { br: 5, gzip: 4 },
} as const

export type CompressionUse = keyof typeof LEVELS

const CHOICES: Record<`${Coding}${'' | '!'}`, CodingChoice> = {
  br: Object.freeze({ coding: 'br', always: false }),
  gzip: Object.freeze({ coding: 'gzip', always: false }),
  'br!': Object.freeze({ coding: 'br', always: true }),
  'gzip!': Object.freeze({ coding: 'gzip', always: true }),
}

/**
 * The coding an Accept-Encoding header asks for (RFC 9110 §12.5.3), or undefined for an
 * uncompressed answer. The highest q wins; br wins a tie with gzip; `*` stands for every coding
 * the header does not name; `q=0` refuses, and an entry with a malformed q is ignored. Identity
 * wins only when named with a higher q than both. An empty header asks for no coding.
 * 'gzip, deflate, br' -> br; 'br;q=0.5, gzip' -> gzip; '*;q=0.1, br;q=0' -> gzip;
 * 'gzip, identity;q=0' -> gzip, always; 'identity' -> undefined; '' -> undefined
 * The one implementation of the rule: the API, the notes page and the docs page use it.
 */
export function parseAcceptEncoding(header: string): CodingChoice | undefined {
  let br: number | undefined
  let gzipQ: number | undefined
  let identity: number | undefined
  let star: number | undefined
  for (const entry of header.split(',')) {
    const [token = '', ...params] = entry.split(';')
    let q = 1
    for (const param of params) {
      const [name = '', value = ''] = param.split('=')
      if (name.trim().toLowerCase() !== 'q') continue
      q = qValue(value.trim())
    }
    if (Number.isNaN(q)) continue
    const coding = token.trim().toLowerCase()
    if (coding === 'br') br = q
    else if (coding === 'gzip' || coding === 'x-gzip') gzipQ = q
    else if (coding === 'identity') identity = q
    else if (coding === '*') star = q
  }
  const brQ = br ?? star ?? 0
  const gzQ = gzipQ ?? star ?? 0
  const best = Math.max(brQ, gzQ)
  if (best === 0) return undefined
  if (identity !== undefined && identity > best) return undefined
  const refused = (identity ?? star) === 0
  const coding: Coding = brQ >= gzQ ? 'br' : 'gzip'
  return CHOICES[refused ? (`${coding}!` as const) : coding]
}

/** RFC 9110 §12.4.2 qvalue: '0.8' -> 0.8; '1.000' -> 1; 'x', '2', '0.1234' -> NaN */
function qValue(text: string): number {
  return /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.test(text) ? Number(text) : Number.NaN
}

/**
 * Whether a body is over COMPRESS_OVER bytes, plus `extra` bytes around it, cheaply for short
 * strings: a UTF-8 byte is at least one UTF-16 unit and at most three.
 */
export function isLarge(body: string | Buffer, extra = 0): boolean {
  const limit = COMPRESS_OVER - extra
  if (typeof body !== 'string') return body.length > limit
  if (body.length > limit) return true
  return body.length * 3 > limit && Buffer.byteLength(body) > limit
}

/** '"v.1"', 'br' -> '"v.1-br"': the ETag of a compressed representation. */
export function encodedEtag(etag: string, coding: Coding): string {
  return `${etag.slice(0, -1)}-${coding}"`
}

const brotliAsync = promisify<Buffer | string, BrotliOptions, Buffer>(brotliCompress)
const gzipAsync = promisify<Buffer | string, ZlibOptions, Buffer>(gzip)
const MAX_REMEMBERED = 256

/** Codings chosen and bodies compressed for one app: its memo and its share of the thread pool. */
export class Compression {
  /** Accept-Encoding values seen, and their choice (null: no coding). */
  readonly #choices = new Map<string, CodingChoice | null>()
  #pending = 0

  /** parseAcceptEncoding, remembered: a client sends the same header on every request. */
  choose(header: string | undefined): CodingChoice | undefined {
    if (header === undefined) return undefined
    let choice = this.#choices.get(header)
    if (choice === undefined) {
      choice = parseAcceptEncoding(header) ?? null
      // The bound keeps odd headers from piling up.
      if (this.#choices.size >= MAX_REMEMBERED) this.#choices.clear()
      this.#choices.set(header, choice)
    }
    return choice ?? undefined
  }

  /**
   * `body` compressed with `coding`: synchronously up to 64 KiB, else on the thread pool;
   * undefined when MAX_PENDING compressions are already there, and the caller answers
   * uncompressed (a burst of large answers then costs bandwidth, not a queue of CPU work).
   */
  compress(
    body: string | Buffer,
    coding: Coding,
    use: CompressionUse,
  ): Buffer | Promise<Buffer> | undefined {
    const level = LEVELS[use][coding]
    const size = typeof body === 'string' ? Buffer.byteLength(body) : body.length
    if (size <= SYNC_UP_TO) {
      return coding === 'br'
        ? brotliCompressSync(body, brotliOptions(level, size))
        : gzipSync(body, { level })
    }
    if (this.#pending >= MAX_PENDING) return undefined
    this.#pending++
    const compressed =
      coding === 'br' ? brotliAsync(body, brotliOptions(level, size)) : gzipAsync(body, { level })
    return compressed.finally(() => {
      this.#pending--
    })
  }
}

function brotliOptions(quality: number, size: number): BrotliOptions {
  return {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: quality,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: size,
    },
  }
}
