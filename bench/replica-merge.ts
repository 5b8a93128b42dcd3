/**
 * The replica merging instead of asking: `count` notes, each edited offline on the replica (its
 * title) and meanwhile on the service (its body): every queued write meets a newer version, and
 * none is a true conflict. Times the replica's sync() and counts the requests its client sends
 * (every try, as its fetch sees them). Target: at most 2 requests per write.
 */
import {
  type BatchRequest,
  MemoryReplicaStorage,
  NotesClient,
  Replica,
} from '../src/client/index.js'

export interface MergeFigure {
  writes: number
  requests: number
  ms: number
  conflicts: number
}

export async function replicaMergeFigure(baseUrl: string, count: number): Promise<MergeFigure> {
  const direct = new NotesClient({ baseUrl })
  const made = await direct.batch(
    Array.from({ length: count }, (_, i) => ({
      method: 'POST' as const,
      url: '/api/note',
      body: { title: `merge ${i}`, body: 'one two' },
    })),
  )
  const ids = made.answers.map((answer) => (answer.body as { data: { id: number } }).data.id)
  let requests = 0
  const counting: typeof fetch = (input, init) => {
    requests++
    return fetch(input, init)
  }
  const replica = await Replica.open({
    client: new NotesClient({ baseUrl, fetch: counting }),
    storage: new MemoryReplicaStorage(),
  })
  let conflicts = 0
  replica.subscribe((event) => {
    if (event.type === 'conflict') conflicts++
  })
  try {
    await replica.sync()
    await replica.stop()
    for (const id of ids) await replica.update(`n:${id}`, { title: `merge ${id}, mine` })
    const theirs: BatchRequest[] = ids.map((id) => ({
      method: 'PATCH',
      url: `/api/note/${id}`,
      body: { body: 'one two three' },
    }))
    await direct.batch(theirs, { ifMatch: false })
    requests = 0
    const started = performance.now()
    await replica.sync()
    const ms = performance.now() - started
    const ok = ids.every((id) => {
      const note = replica.get(`n:${id}`)?.note
      return note?.body === 'one two three' && note.title === `merge ${id}, mine`
    })
    if (!ok || replica.conflicts.length > 0) throw new Error('the merge lost an edit')
    return { writes: count, requests, ms, conflicts }
  } finally {
    await replica.close()
  }
}
