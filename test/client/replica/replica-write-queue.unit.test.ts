import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { MemoryReplicaStorage } from '../../../src/client/replica/memory-storage.js'
import type { ReplicaWrite } from '../../../src/client/replica/storage.js'
import { WriteQueue } from '../../../src/client/replica/write-queue.js'

/** A memory storage that counts its writes and can be told to refuse the next one. */
class CountingStorage extends MemoryReplicaStorage {
  writes: number[] = []
  refuseNext = false
  override async write(changes: readonly ReplicaWrite[]): Promise<void> {
    this.writes.push(changes.length)
    await new Promise((resolve) => setTimeout(resolve, 5))
    if (this.refuseNext) {
      this.refuseNext = false
      throw new Error('refused')
    }
    return super.write(changes)
  }
}

const put = (key: string, value: unknown): ReplicaWrite => ({ table: 'meta', key, value })

describe("the replica's write queue", () => {
  it('stores the writes called while one is on its way together, in call order', async () => {
    const storage = new CountingStorage()
    const queue = new WriteQueue(storage)
    const first = queue.write([put('a', 1)])
    const rest = Array.from({ length: 50 }, (_, i) =>
      queue.write([put('a', i + 2), put(`k${i}`, i)]),
    )
    await Promise.all([first, ...rest])
    // The first alone; the 50 called meanwhile in one write of 100 changes.
    assert.deepEqual(storage.writes, [1, 100])
    const meta = (await storage.load()).meta
    assert.equal(meta.get('a'), 51, 'the last write to a key wins, as called')
    assert.equal(meta.size, 51)
  })

  it('refuses every caller of a refused group, stores nothing of it, and goes on', async () => {
    const storage = new CountingStorage()
    const queue = new WriteQueue(storage)
    const first = queue.write([put('x', 1)])
    const grouped = [queue.write([put('y', 1)]), queue.write([put('z', 1)])]
    await first
    // The group is on its way now; refuse it.
    storage.refuseNext = true
    const outcomes = await Promise.allSettled(grouped)
    assert.deepEqual(
      outcomes.map((outcome) => outcome.status),
      ['rejected', 'rejected'],
    )
    await queue.write([put('w', 1)])
    await queue.settled()
    assert.deepEqual([...(await storage.load()).meta.keys()], ['w', 'x'])
  })
})
