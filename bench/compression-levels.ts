/**
 * node dist/bench/compression-levels.js [--notes 10000] [--runs 5] [--varied]
 *
 * Times Node's zlib on the list the service answers in W3 (10,000 small notes, built by the memory
 * store as the service builds it), for every gzip level and brotli quality: the median time of
 * `runs` compressions, synchronous and on the thread pool, and the bytes each one saves. W3's
 * notes all share one text, which flatters every coder; --varied builds notes of random words
 * instead, closer to what people write. The levels in src/api/compression.ts were chosen from
 * these tables (bench/README.md).
 */
import { parseArgs, promisify } from 'node:util'
import {
  type BrotliOptions,
  brotliCompress,
  brotliCompressSync,
  constants,
  gzip,
  gzipSync,
  type ZlibOptions,
} from 'node:zlib'
import { MemoryNoteStore } from '../src/store/memory/memory-store.js'
import { median } from './numbers.js'
import { smallNote } from './workloads.js'

const { values } = parseArgs({
  options: {
    notes: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '5' },
    varied: { type: 'boolean', default: false },
  },
})
const notes = Number(values.notes)
const runs = Number(values.runs)

const WORDS =
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part'.split(
    ' ',
  )
let seed = 1
/** A deterministic pseudo-random integer below `n` (a linear congruential generator). */
function random(n: number): number {
  seed = (seed * 1103515245 + 12345) % 2 ** 31
  return seed % n
}
/** A note whose title and body are different words each time: text that compresses as prose. */
function variedNote(n: number): string {
  const words = (count: number): string =>
    Array.from({ length: count }, () => WORDS[random(WORDS.length)]).join(' ')
  return JSON.stringify({ title: `${words(3)} ${n}`, body: words(12), stars: random(1000) })
}

const store = new MemoryNoteStore({ maxNotes: 1_000_000, maxBytes: 1024 * 1024 * 1024 })
for (let n = 0; n < notes; n++) {
  const note = values.varied === true ? variedNote(n) : smallNote(n)
  store.create(JSON.parse(note) as Record<string, unknown>)
}
const body = Buffer.from(`{"data":${store.list().json}}`)

const gzipAsync = promisify<Buffer, ZlibOptions, Buffer>(gzip)
const brotliAsync = promisify<Buffer, BrotliOptions, Buffer>(brotliCompress)

interface Row {
  coding: string
  level: number
  syncMs: number
  asyncMs: number
  bytes: number
}

function brotliOptions(quality: number): BrotliOptions {
  return {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: quality,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
    },
  }
}

async function measure(
  coding: string,
  level: number,
  sync: () => Buffer,
  async: () => Promise<Buffer>,
): Promise<Row> {
  sync()
  const syncTimes: number[] = []
  const asyncTimes: number[] = []
  let bytes = 0
  // Slow levels (brotli 10 and 11 take seconds) get fewer runs.
  const times = level >= 10 && coding === 'br' ? Math.min(runs, 2) : runs
  for (let i = 0; i < times; i++) {
    let start = performance.now()
    bytes = sync().length
    syncTimes.push(performance.now() - start)
    start = performance.now()
    await async()
    asyncTimes.push(performance.now() - start)
  }
  return { coding, level, syncMs: median(syncTimes), asyncMs: median(asyncTimes), bytes }
}

const rows: Row[] = []
for (let level = 1; level <= 9; level++) {
  rows.push(
    await measure(
      'gzip',
      level,
      () => gzipSync(body, { level }),
      () => gzipAsync(body, { level }),
    ),
  )
}
for (let quality = 0; quality <= 11; quality++) {
  const options = brotliOptions(quality)
  rows.push(
    await measure(
      'br',
      quality,
      () => brotliCompressSync(body, options),
      () => brotliAsync(body, options),
    ),
  )
}

process.stdout.write(
  `list of ${notes} ${values.varied === true ? 'varied' : 'small (W3)'} notes: ${body.length} ` +
    `bytes; median of ${runs} runs; node ${process.version}\n\n`,
)
process.stdout.write('| coding | level | sync ms | thread pool ms | bytes | ratio | MB/s |\n')
process.stdout.write('| ------ | ----: | ------: | -------------: | ----: | ----: | ---: |\n')
for (const row of rows) {
  process.stdout.write(
    `| ${row.coding} | ${row.level} | ${row.syncMs.toFixed(1)} | ${row.asyncMs.toFixed(1)} | ` +
      `${row.bytes} | ${(body.length / row.bytes).toFixed(1)} | ` +
      `${(body.length / 1e6 / (row.syncMs / 1000)).toFixed(0)} |\n`,
  )
}
