/**
 * node --expose-gc dist/bench/export.js [--notes N]
 *
 * The export (ndjson) on the memory store: N notes (default 100,000, the workloads' small
 * note), then
 * 1. one export, GET /api/note with Accept: application/x-ndjson, read as fast as it comes over
 *    a real socket on 127.0.0.1: MB/s and notes/s (best of three);
 * 2. four exports at once to slow readers (64 KiB every 100 ms each), for 5 s: how much the heap
 *    and RSS grow while they stream, beside what the notebook itself takes. A snapshot costs a
 *    reference per note (8 bytes), the rest is about a chunk per export, whatever N is.
 * Server and readers share this process (the readers hold little: 64 KiB each).
 */
import { get, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { buildApp } from '../src/app.js'
import { DEFAULT_CONFIG } from '../src/config/config.js'
import { MemoryNoteStore } from '../src/store/memory/memory-store.js'
import { smallNote } from './workloads.js'

const { values } = parseArgs({ options: { notes: { type: 'string', default: '100000' } } })
const count = Number(values.notes)
const MB = 1024 * 1024

const store = new MemoryNoteStore({ maxNotes: 10_000_000, maxBytes: 1 << 30 })
const app = buildApp({ store, config: { ...DEFAULT_CONFIG, ui: false } })
const heapBefore = settledHeap()
for (let i = 0; i < count; i++) store.create(JSON.parse(smallNote(i)) as Record<string, unknown>)
const notebookHeap = settledHeap() - heapBefore
await app.listen({ port: 0, host: '127.0.0.1' })
const { port } = app.server.address() as AddressInfo

function open(): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    get(
      { host: '127.0.0.1', port, path: '/api/note', headers: { accept: 'application/x-ndjson' } },
      resolve,
    ).on('error', reject)
  })
}

function settledHeap(): number {
  globalThis.gc?.()
  return process.memoryUsage().heapUsed
}

// 1. One export, as fast as it is read.
let best = { seconds: Number.POSITIVE_INFINITY, bytes: 0, lines: 0 }
for (let run = 0; run < 3; run++) {
  const started = process.hrtime.bigint()
  const response = await open()
  let bytes = 0
  let lines = 0
  for await (const chunk of response) {
    const buffer = chunk as Buffer
    bytes += buffer.length
    for (let at = buffer.indexOf(10); at !== -1; at = buffer.indexOf(10, at + 1)) lines++
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  if (lines !== count) throw new Error(`an export of ${lines} lines, not ${count}`)
  if (seconds < best.seconds) best = { seconds, bytes, lines }
}
console.log(
  `one export: ${count} notes, ${(best.bytes / MB).toFixed(1)} MB in ${(best.seconds * 1000).toFixed(0)} ms: ${(best.bytes / MB / best.seconds).toFixed(0)} MB/s, ${Math.round(count / best.seconds)} notes/s`,
)

// 2. Four slow readers.
const heapIdle = settledHeap()
const rssIdle = process.memoryUsage().rss
const readers = await Promise.all([open(), open(), open(), open()])
let read = 0
let peakHeap = 0
let peakRss = 0
const slow = readers.map(async (response) => {
  response.pause()
  const deadline = Date.now() + 5000
  while (Date.now() < deadline) {
    let taken = 0
    while (taken < 64 * 1024) {
      const chunk = response.read() as Buffer | null
      if (chunk === null) break
      taken += chunk.length
    }
    read += taken
    await sleep(100)
  }
  response.destroy()
})
// Live heap (after a full collection), so that garbage not yet collected does not count.
const sampler = setInterval(() => {
  peakHeap = Math.max(peakHeap, settledHeap())
  peakRss = Math.max(peakRss, process.memoryUsage().rss)
}, 500)
await Promise.all(slow)
clearInterval(sampler)
console.log(
  `notebook: ${(notebookHeap / MB).toFixed(1)} MB of heap; four slow exports (${(read / MB).toFixed(1)} MB read in 5 s): heap +${((peakHeap - heapIdle) / MB).toFixed(1)} MB, RSS +${((peakRss - rssIdle) / MB).toFixed(1)} MB at their peak`,
)
await app.close()
