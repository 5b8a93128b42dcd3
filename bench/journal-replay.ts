/**
 * Start-up replay of a journal (DATA_FILE): the real service (`dist/src/server.js`) is given a
 * journal holding `notes` notes (~100-byte notes, written through POST /api/batch, 1,000 a
 * batch), stopped, and started again `starts` times; each start is timed from spawn to
 * "listening", beside the start of an empty journal, so the difference is the replay.
 *
 *   npm run compile && node dist/bench/journal-replay.js [notes=100000] [starts=3]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { send } from './http-client.js'
import { spawnService } from './spawn-service.js'

const NOTES = Number(process.argv[2] ?? 100_000)
const STARTS = Number(process.argv[3] ?? 3)
const dir = mkdtempSync(join(tmpdir(), 'notes-bench-replay-'))
const path = join(dir, 'notes.journal')

/** The service on `path`, and how long it took from spawn to listening, in ms. */
async function start(): Promise<{ stop: () => Promise<void>; port: number; ms: number }> {
  const started = performance.now()
  const service = await spawnService({
    DATA_FILE: path,
    MAX_NOTES: '5000000',
    MAX_STORE_BYTES: '469762048',
  })
  return { stop: service.stop, port: service.port, ms: performance.now() - started }
}

try {
  const empty = await start()
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const note = { title: 'a note', body: 'x'.repeat(80) }
  for (let made = 0; made < NOTES; made += 1000) {
    const count = Math.min(1000, NOTES - made)
    const body = JSON.stringify({
      requests: Array.from({ length: count }, () => ({
        method: 'POST',
        url: '/api/note',
        body: note,
      })),
    })
    const answer = await send(empty.port, 'POST', '/api/batch', { agent, body, timeoutMs: 60_000 })
    if (answer.status !== 200) throw new Error(`the preload answered ${answer.status}`)
  }
  agent.destroy()
  await empty.stop()
  const mb = (statSync(path).size / 1e6).toFixed(1)
  console.log(`an empty journal: started in ${Math.round(empty.ms)} ms`)
  for (let i = 0; i < STARTS; i++) {
    const full = await start()
    await full.stop()
    console.log(
      `a journal of ${NOTES} notes (${mb} MB): started in ${Math.round(full.ms)} ms (${Math.round(full.ms - empty.ms)} ms more than empty)`,
    )
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
