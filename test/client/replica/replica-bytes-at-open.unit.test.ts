import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryReplicaStorage, NotesClient, Replica } from '../../../src/client/index.js'
import { newFileKey } from '../../../src/client/replica/outbox.js'

/**
 * What a replica removes of the files' bytes when it opens: those no queued file names, left by
 * a crash or a send, but not bytes another tab put a moment ago and has yet to name.
 */
describe('Replica.open and the bytes no queued file names', () => {
  it('removes old unnamed bytes and keeps young ones, which another tab may be attaching', async () => {
    const storage = new MemoryReplicaStorage()
    const young = newFileKey()
    const old = newFileKey(Date.now() - 3_600_000)
    // A key of the versions before keys said their time.
    const untimed = 'f.5d1ad9d4-2b06-4c47-9d11-3a8f0c1f0e6a'
    for (const key of [young, old, untimed]) await storage.putBytes(key, new Blob(['x']))
    const client = new NotesClient({ baseUrl: 'http://127.0.0.1:9' })
    const replica = await Replica.open({ client, storage })
    assert.deepEqual(await storage.bytesKeys(), [young])
    await replica.close()
  })

  it('writes the time into each file key, in base 36 ms', () => {
    const key = newFileKey(1_800_000_000_000)
    assert.match(key, /^f\.mywpiww0\.[0-9a-f-]{36}$/)
  })
})
