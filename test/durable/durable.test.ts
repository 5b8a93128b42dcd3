import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { GroupCommit } from '../../src/durable/group-commit.js'
import {
  describeHolder,
  type LockHolder,
  releasePidLock,
  takePidLock,
} from '../../src/durable/pid-lock.js'
import { encodeRecord, FRAME, MAX_PAYLOAD, scanRecords } from '../../src/durable/record-frame.js'
import {
  liveHolder,
  lockText,
  procStat,
  race,
  thisProcess,
  zombieHolder,
} from '../support/pid-lock-holder.js'

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
  let locks = 0
  const freshLock = () => join(dir, `${++locks}.lock`)
  const me = `${JSON.stringify(thisProcess())}\n`
  /** Writes `text` as the lock, last touched `ago` ms before now. */
  const leave = (lock: string, text: string, ago = 0): void => {
    writeFileSync(lock, text)
    const at = new Date(Date.now() - ago)
    utimesSync(lock, at, at)
  }
  /** Takes the lock, expecting it taken, and releases it. */
  const taken = (lock: string): void => {
    assert.equal(takePidLock(lock, refused), undefined)
    assert.equal(readFileSync(lock, 'utf8'), me)
    releasePidLock(lock)
    assert.equal(existsSync(lock), false)
  }

  it('is taken once, holds the identity of this process, names this process to a second opener, and is released', () => {
    const lock = freshLock()
    assert.equal(takePidLock(lock, refused), undefined)
    assert.equal(readFileSync(lock, 'utf8'), me)
    assert.deepEqual(takePidLock(lock, refused), { pid: process.pid, own: true })
    releasePidLock(lock)
    assert.throws(() => readFileSync(lock), { code: 'ENOENT' })
    assert.throws(() => takePidLock(join(dir, 'no/such/dir.lock'), refused), { message: 'refused' })
  })

  it('takes over a lock left by a process that no longer runs, legacy (a bare PID) or not', async () => {
    const gone = spawnSync(process.execPath, ['-e', '']).pid as number
    for (const text of [`${gone}\n`, lockText({ pid: gone, start: 1 })]) {
      const lock = freshLock()
      leave(lock, text)
      taken(lock)
    }
  })

  it('takes a lock holding PID 1 at once: legacy, or with a start time that is not that of PID 1', () => {
    const start = procStat(1).start
    for (const text of ['1\n', '1', lockText({ pid: 1, start: start + 1 })]) {
      const lock = freshLock()
      leave(lock, text)
      taken(lock)
    }
    // PID 1 with its own start time is PID 1 itself, running.
    const lock = freshLock()
    leave(lock, lockText({ pid: 1, start }))
    assert.deepEqual(takePidLock(lock, refused), { pid: 1, own: false })
  })

  it('takes a lock holding the PID of this process from a previous life (legacy, or another start time)', () => {
    const { start } = thisProcess()
    for (const text of [`${process.pid}\n`, lockText({ start: start - 1 })]) {
      const lock = freshLock()
      leave(lock, text)
      taken(lock)
    }
  })

  it('takes a lock whose holder was killed and is a zombie (not reaped) at once', async () => {
    const lock = freshLock()
    const holder = await zombieHolder(lock)
    try {
      assert.equal(procStat(holder.pid).state, 'Z')
      taken(lock)
    } finally {
      await holder.stop()
    }
  })

  it('refuses a live holder in another process, naming it, and takes the lock once it is killed', async () => {
    const lock = freshLock()
    const holder = await liveHolder(lock)
    try {
      assert.deepEqual(takePidLock(lock, refused), { pid: holder.pid, own: false })
      assert.equal(
        describeHolder({ pid: holder.pid, own: false }, lock),
        `process ${holder.pid} (lock ${lock})`,
      )
    } finally {
      await holder.stop()
    }
    taken(lock)
  })

  it('leases a lock held in another PID namespace or on another host: refused while touched in the last 30 s', () => {
    const cases = [
      { fields: { pid: 4242, pidns: 'pid:[1]' }, seen: { otherNamespace: true } },
      {
        fields: { pid: 4242, host: 'elsewhere', boot: 'another-boot' },
        seen: { host: 'elsewhere' },
      },
    ]
    for (const { fields, seen } of cases) {
      const lock = freshLock()
      leave(lock, lockText(fields), 29_000)
      const { mtimeMs } = statSync(lock)
      const holder = takePidLock(lock, refused)
      assert.deepEqual(holder, { pid: 4242, own: false, ...seen, leaseEndsAt: mtimeMs + 30_000 })
      assert.equal(
        describeHolder(holder as LockHolder, lock),
        `process 4242 ${'host' in seen ? 'on host elsewhere' : 'in another PID namespace'} (lock ${lock}, renewed every 5 s; taken over if not renewed by ${new Date(mtimeMs + 30_000).toISOString()})`,
      )
      leave(lock, lockText(fields), 31_000)
      taken(lock)
    }
    // This host with another boot id: it rebooted since, so the holder is gone.
    const lock = freshLock()
    leave(lock, lockText({ pid: 4242, boot: 'another-boot' }))
    taken(lock)
  })

  it('takes over past a torn lock or a takeover guard left more than 5 s ago', () => {
    const lock = freshLock()
    leave(lock, '', 6_000)
    taken(lock)
    leave(lock, '{"pid":', 6_000)
    leave(`${lock}.takeover`, lockText({ pid: 4242 }), 6_000)
    taken(lock)
    assert.equal(existsSync(`${lock}.takeover`), false)
  })

  it('lets exactly one of openers that try at once win, with and without a stale lock', async () => {
    const lock = freshLock()
    const gone = spawnSync(process.execPath, ['-e', '']).pid as number
    const stale = ['', '1\n', `${gone}\n`, lockText({ pid: 1, start: procStat(1).start + 1 })]
    const { pids, rounds } = await race(lock, 3, 24, (round) => {
      const text = stale[round % stale.length] as string
      if (text !== '') leave(lock, text)
    })
    for (const [round, said] of rounds.entries()) {
      const winner = pids[said.indexOf('won')]
      const expected = pids.map((pid) => (pid === winner ? 'won' : `lost ${winner}`))
      assert.deepEqual(said, expected, `round ${round}`)
    }
  })

  it('touches its lock every 5 s, and releases only a lock that is still its own', async () => {
    const lock = freshLock()
    assert.equal(takePidLock(lock, refused), undefined)
    const old = new Date(Date.now() - 60_000)
    utimesSync(lock, old, old)
    await new Promise((resolve) => setTimeout(resolve, 5_300))
    const { mtimeMs } = statSync(lock)
    assert.ok(Date.now() - mtimeMs < 1_000, `touched ${Date.now() - mtimeMs} ms ago`)
    const other = lockText({ pid: 4242, pidns: 'pid:[1]' })
    writeFileSync(lock, other)
    releasePidLock(lock)
    assert.equal(readFileSync(lock, 'utf8'), other)
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
