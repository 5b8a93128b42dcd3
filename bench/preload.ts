import { Agent } from 'node:http'
import { send } from './http-client.js'
import { type PreloadedIds, smallNote } from './workloads.js'

const CONCURRENCY = 32

/**
 * Creates `count` small notes over HTTP, 32 requests in flight on keep-alive connections.
 * The note of request count/2 is the middle one (within 32 places of the list's middle);
 * the last note is created alone once every other has been answered, so it is truly last.
 */
export async function preload(port: number, count: number): Promise<PreloadedIds> {
  if (count === 0) return { middle: undefined, last: undefined }
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY })
  const ids: number[] = new Array(count)
  const create = async (n: number): Promise<void> => {
    const answer = await send(port, 'POST', '/api/note', { body: smallNote(n), agent })
    if (answer.status !== 200) throw new Error(`preload POST answered ${answer.status}`)
    ids[n] = (JSON.parse(answer.body) as { data: { id: number } }).data.id
  }
  try {
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < count - 1) await create(next++)
    }
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count - 1) }, worker))
    await create(count - 1)
  } finally {
    agent.destroy()
  }
  return { middle: ids[Math.floor(count / 2)], last: ids[count - 1] }
}

/** How many notes the server holds, read from its list. */
export async function countNotes(port: number): Promise<number> {
  const answer = await send(port, 'GET', '/api/note', { timeoutMs: 60_000 })
  if (answer.status !== 200) throw new Error(`GET /api/note answered ${answer.status}`)
  return (JSON.parse(answer.body) as { data: unknown[] }).data.length
}
