/**
 * What a revision costs in memory: a memory store takes 1,000 notes and 100 updates of each
 * (100,000 past revisions kept), once with history on and once off, and the heap after a full GC
 * is compared. Reported per revision, beside the bytes of the JSON it keeps.
 *   node --expose-gc dist/bench/revision-memory.js [notes] [updates] [bodyBytes]
 */
import { MemoryNoteStore } from '../src/store/memory/memory-store.js'

const [notes = 1000, updates = 100, bodyBytes = 200] = process.argv.slice(2).map(Number)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')

/** The heap a store holds once filled, and the UTF-8 bytes of the past states it was given. */
function filled(noteHistory: number): { heap: number; pastBytes: number; store: MemoryNoteStore } {
  gc?.()
  const before = process.memoryUsage().heapUsed
  const store = new MemoryNoteStore({
    maxNotes: 10_000_000,
    maxBytes: 1 << 30,
    archive: { noteHistory, trashMs: 0 },
  })
  const ids: number[] = []
  for (let i = 0; i < notes; i++) ids.push(JSON.parse(store.create({ i }).json).id as number)
  let pastBytes = 0
  for (let round = 0; round < updates; round++) {
    for (const id of ids) {
      const body = `${round}:${'x'.repeat(bodyBytes)}`
      const note = store.update(id, { body })
      if (note === undefined || !('json' in note)) throw new Error('an update failed')
      pastBytes += Buffer.byteLength(note.json)
    }
  }
  gc?.()
  return { heap: process.memoryUsage().heapUsed - before, pastBytes, store }
}

const off = filled(0)
const offHeap = off.heap
const on = filled(updates + 1)
const revisions = notes * updates
const perRevision = (on.heap - offHeap) / revisions
// The last state of each note is its current one, not a past revision.
const jsonPerRevision = (on.pastBytes - notes * (bodyBytes + 40)) / revisions
console.log(
  JSON.stringify({
    notes,
    revisions,
    heapWithHistoryMiB: +(on.heap / 2 ** 20).toFixed(1),
    heapWithoutMiB: +(offHeap / 2 ** 20).toFixed(1),
    bytesPerRevision: Math.round(perRevision),
    noteJsonBytesPerRevision: Math.round(jsonPerRevision),
    bookkeepingPerRevision: Math.round(perRevision - jsonPerRevision),
    keptRevisions: on.store.revisions(JSON.parse(on.store.list().json)[0].id, 1000, undefined)
      ?.revisions.length,
  }),
)
