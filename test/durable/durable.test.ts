import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { GroupCommit } from '../../src/durable/group-commit.js'
import { releasePidLock, takePidLock } from '../../src/durable/pid-lock.js'
import { encodeRecord, FRAME, MAX_PAYLOAD, scanRecords } from '../../src/durable/record-frame.js'

/**
 * The durable/ floor on its own; the journal's and the file storage's suites check it through
 * their callers (messages, byte offsets, kill -9).
 */

describe('record-frame', () => {
  const read = (bytes: Buffer) => {
    const payloads: [string, number][] = []
    const scanned = scanRecords(bytes, 0, (p, offset) => payloads.push([p, offset]))
    return { scanned, payloads }
  }

  it('reads the records it encodes, with their offsets', () => {
    const bytes = Buffer.concat([encodeRecord('hi'), encodeRecord('é')])
    assert.deepEqual(bytes.subarray(0, FRAME + 2).toString('hex'), '00000002d8932aac6869')
    assert.deepEqual(read(bytes), {
      scanned: { ok: true, end: bytes.length },
      payloads: [
        ['hi', 0],
        ['é', 10],
      ],
    })
  })

  it('takes a torn tail (cut short, or zeros) as the end, and a length of 0 or above MAX_PAYLOAD as damage', () => {
    const two = Buffer.concat([encodeRecord('one'), encodeRecord('two')])
    assert.deepEqual(read(two.subarray(0, two.length - 1)).scanned, { ok: true, end: 11 })
    assert.deepEqual(read(Buffer.concat([two, Buffer.alloc(5)])).scanned, {
      ok: true,
      end: two.length,
    })
    // A frame that claims a length no record has, followed by good bytes: damage, not a tail.
    for (const length of [0, MAX_PAYLOAD + 1]) {
      const frame = Buffer.alloc(FRAME)
      frame.writeUInt32BE(length, 0)
      assert.deepEqual(read(Buffer.concat([encodeRecord('one'), frame, encodeRecord('two')])), {
        scanned: { ok: false, offset: 11, reason: `a record length of ${length}` },
        payloads: [['one', 0]],
      })
    }
  })
})

describe('pid-lock', () => {
  const dir = mkdtempSync(join(tmpdir(), 'durable-lock-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  const refused = (err: unknown) => new Error('refused', { cause: err })

  it('is taken once, names a running holder, and takes over a stale one', () => {
    const lock = join(dir, 'a.lock')
    assert.equal(takePidLock(lock, refused), undefined)
    assert.equal(readFileSync(lock, 'utf8'), `${process.pid}\n`)
    assert.equal(takePidLock(lock, refused), process.pid)
    const gone = spawnSync(process.execPath, ['-e', '']).pid
    writeFileSync(lock, `${gone}\n`)
    assert.equal(takePidLock(lock, refused), undefined)
    assert.equal(readFileSync(lock, 'utf8'), `${process.pid}\n`)
    releasePidLock(lock)
    assert.throws(() => readFileSync(lock), { code: 'ENOENT' })
    assert.throws(() => takePidLock(join(dir, 'no/such/dir.lock'), refused), { message: 'refused' })
  })
})

describe('group-commit', () => {
  it('commits the items of one tick as one batch, and those queued meanwhile as the next', async () => {
    const batches: number[][] = []
    const commits = new GroupCommit<number>(async (batch) => {
      batches.push(batch)
      await new Promise((resolve) => setTimeout(resolve, 5))
      if (batch[0] === 1) commits.push(4)
    })
    assert.equal(commits.busy, false)
    commits.push(1)
    commits.push(2)
    commits.push(3)
    assert.equal(commits.busy, true)
    await commits.idle()
    assert.deepEqual(batches, [[1, 2, 3], [4]])
    assert.equal(commits.busy, false)
    commits.push(5)
    assert.deepEqual(commits.takeQueued(), [5])
    await commits.idle()
    assert.deepEqual(batches, [[1, 2, 3], [4]])
  })
})
