import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { FileReplicaStorage } from '../src/client/replica/file-storage.js'
import type { ReplicaWrite } from '../src/client/replica/storage.js'
import { launchChromium } from '../test/support/chromium.js'
import { serveDist } from '../test/support/dist-server.js'
import { noteOf } from './replica-storage-page.js'

/**
 * The replica's start-up and write cost (bench/README.md, "Replica storage"): open + load of
 * 10,000 notes of ~200 bytes and one outbox write, from IndexedDB in Chromium (three layouts) and
 * from the file in Node. `npm run compile && node dist/bench/replica-storage.js [count] [rounds]`.
 */
const count = Number(process.argv[2] ?? 10_000)
const rounds = Number(process.argv[3] ?? 7)

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round((sorted[Math.floor(sorted.length / 2)] as number) * 10) / 10
}

async function chromium() {
  const { server, origin } = await serveDist()
  const browser = await launchChromium()
  try {
    const page = await browser.newPage()
    await page.goto(`${origin}/`)
    return await page.evaluate(
      async ([n, r]) => {
        const module = '/bench/replica-storage-page.js'
        const { measure } = await import(module)
        return measure(n, r)
      },
      [count, rounds] as const,
    )
  } finally {
    await browser.close()
    server.close()
  }
}

async function file() {
  const folder = mkdtempSync(join(tmpdir(), 'replica-bench-'))
  try {
    const path = join(folder, 'replica')
    const storage = await FileReplicaStorage.open(path)
    const writes: ReplicaWrite[] = []
    for (let i = 0; i < count; i++) {
      writes.push({ table: 'notes', key: `n:${1_700_000_000_000 + i}`, value: noteOf(i) })
    }
    await storage.write(writes)
    await storage.close()
    const bytes = statSync(path).size
    const loads: number[] = []
    for (let r = 0; r < rounds; r++) {
      const start = performance.now()
      const again = await FileReplicaStorage.open(path)
      const contents = await again.load()
      loads.push(performance.now() - start)
      if (contents.notes.size !== count) throw new Error(`loaded ${contents.notes.size}`)
      await again.close()
    }
    const again = await FileReplicaStorage.open(path)
    const writesMs: number[] = []
    for (let i = 0; i < 30; i++) {
      const start = performance.now()
      await again.write([
        {
          table: 'outbox',
          key: String(i).padStart(12, '0'),
          value: { op: 'update', note: noteOf(i) },
        },
        { table: 'meta', key: 'outbox-next', value: i + 1 },
      ])
      writesMs.push(performance.now() - start)
    }
    await again.close()
    return { bytes, load: median(loads), write: median(writesMs) }
  } finally {
    rmSync(folder, { recursive: true, force: true })
  }
}

const load = loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')
console.log(
  JSON.stringify(
    { count, rounds, loadavg: load, chromium: await chromium(), file: await file() },
    null,
    2,
  ),
)
