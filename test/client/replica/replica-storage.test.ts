import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import type { Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import {
  FileReplicaStorage,
  FileReplicaStorages,
} from '../../../src/client/replica/file-storage.js'
import {
  type IdbFactoryLike,
  IndexedDbReplicaStorage,
} from '../../../src/client/replica/indexeddb-storage.js'
import {
  MemoryReplicaStorage,
  MemoryReplicaStorages,
} from '../../../src/client/replica/memory-storage.js'
import type { ReplicaStorage, ReplicaStorages } from '../../../src/client/replica/storage.js'
import { launchChromium, SKIP } from '../../support/chromium.js'
import { DIST, serveDist } from '../../support/dist-server.js'
import { liveHolder, lockText, procStat, zombieHolder } from '../../support/pid-lock-holder.js'
import { CASES, contentsOf, type StorageUnderTest } from '../../support/replica-storage.contract.js'

const CHILD = join(DIST, 'test/support/replica-storage-child.js')

function temporaryFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), 'replica-storage-'))
  after(() => rmSync(folder, { recursive: true, force: true }))
  return folder
}

function contractCases(subject: () => StorageUnderTest): void {
  let count = 0
  for (const contractCase of CASES) {
    const skip = contractCase.persistentOnly === true && !subject().persistent
    it(contractCase.name, { skip: skip && 'memory keeps nothing across close' }, () =>
      contractCase.run(subject(), `case-${++count}`),
    )
  }
}

describe('MemoryReplicaStorage (the storage contract)', () => {
  contractCases(() => ({
    persistent: false,
    open: async () => new MemoryReplicaStorage(),
    keyed: () => new MemoryReplicaStorages(),
  }))
})

describe('FileReplicaStorage (the storage contract)', () => {
  const folder = temporaryFolder()
  contractCases(() => ({
    persistent: true,
    open: (name) => FileReplicaStorage.open(join(folder, name)),
    keyed: (name) => new FileReplicaStorages(join(folder, name)),
  }))
})

const HEADER_BYTES = Buffer.byteLength('notes-service replica 1\n')

async function fileWith(path: string, writes: number): Promise<void> {
  const storage = await FileReplicaStorage.open(path)
  for (let i = 0; i < writes; i++) {
    await storage.write([{ table: 'notes', key: `n:${i}`, value: { id: i, title: `note ${i}` } }])
  }
  await storage.close()
}

function notesUpTo(count: number) {
  return contentsOf({
    notes: Object.fromEntries(
      Array.from({ length: count }, (_, i) => [`n:${i}`, { id: i, title: `note ${i}` }]),
    ),
  })
}

/** Runs the child script; resolves with its stdout once it exits. */
async function child(mode: 'open', path: string): Promise<string> {
  const opener = spawn(process.execPath, [CHILD, mode, path], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  opener.stdout.on('data', (chunk: Buffer) => {
    out += chunk
  })
  await once(opener, 'exit')
  return out
}

describe('FileReplicaStorage (the file)', () => {
  const folder = temporaryFolder()
  let files = 0
  const fresh = (): string => join(folder, `file-${++files}`)

  it('loses no resolved write when its process is killed (kill -9) mid-write, and opens again', async () => {
    for (let round = 0; round < 3; round++) {
      const path = fresh()
      const writer = spawn(process.execPath, [CHILD, 'write', path], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      const resolved: number[] = []
      let partial = ''
      await new Promise<void>((resolve) => {
        writer.stdout.on('data', (chunk: Buffer) => {
          const lines = (partial + chunk).split('\n')
          partial = lines.pop() ?? ''
          for (const line of lines) resolved.push(Number(line))
          // Each round stops at another point: past 200, 700 and 1,200 writes (compactions at 64 KiB).
          if (resolved.length >= 200 + 500 * round) resolve()
        })
      })
      writer.kill('SIGKILL')
      await once(writer, 'exit')
      const storage = await FileReplicaStorage.open(path)
      try {
        const { outbox } = await storage.load()
        const missing = resolved.filter((n) => !outbox.has(String(n).padStart(8, '0')))
        assert.deepEqual(missing, [], `round ${round}: resolved writes missing after the kill`)
        assert.ok(outbox.size >= resolved.length)
        // Every write is whole: its outbox entry and its note went in together.
        for (const [key, value] of outbox) assert.deepEqual((value as { n: number }).n, Number(key))
      } finally {
        await storage.close()
      }
    }
  })

  it('drops a torn last record on open, says where, and writes on after it', async () => {
    const path = fresh()
    await fileWith(path, 3)
    const size = statSync(path).size
    // A crash partway through a fourth record: its frame and half its payload.
    const torn = Buffer.alloc(20)
    torn.writeUInt32BE(40, 0)
    writeFileSync(path, torn, { flag: 'a' })
    const storage = await FileReplicaStorage.open(path)
    assert.deepEqual(storage.dropped, { offset: size, bytes: 20 })
    assert.deepEqual(statSync(path).size, size)
    assert.deepEqual(await storage.load(), notesUpTo(3))
    await storage.write([{ table: 'notes', key: 'n:3', value: { id: 3, title: 'note 3' } }])
    await storage.close()
    const again = await FileReplicaStorage.open(path)
    assert.deepEqual(again.dropped, undefined)
    assert.deepEqual(await again.load(), notesUpTo(4))
    await again.close()
  })

  it('treats a bad checksum on the last record as a torn write, and zeros after the records too', async () => {
    const path = fresh()
    await fileWith(path, 2)
    const bytes = readFileSync(path)
    const last = bytes.length - 3
    bytes[last] = (bytes[last] as number) ^ 0xff
    writeFileSync(path, Buffer.concat([bytes]))
    const storage = await FileReplicaStorage.open(path)
    assert.deepEqual(await storage.load(), notesUpTo(1))
    await storage.close()
    writeFileSync(path, Buffer.alloc(4096), { flag: 'a' })
    const again = await FileReplicaStorage.open(path)
    assert.deepEqual(await again.load(), notesUpTo(1))
    await again.close()
  })

  it('refuses a file with a flipped byte before its end, naming the byte offset', async () => {
    const path = fresh()
    await fileWith(path, 3)
    const bytes = readFileSync(path)
    // Inside the first record's payload (its frame starts right after the header line).
    bytes[HEADER_BYTES + 12] = (bytes[HEADER_BYTES + 12] as number) ^ 0x01
    writeFileSync(path, bytes)
    await assert.rejects(FileReplicaStorage.open(path), {
      name: 'ReplicaStorageError',
      code: 'damaged',
      message: `${path} is damaged at byte ${HEADER_BYTES}: a record whose checksum does not match; restore it from a backup or move it away.`,
    })
    // The refusal left the lock free: the file can be moved away and a new one opened.
    assert.equal(existsSync(`${path}.lock`), false)
  })

  it('refuses a file that is not a replica file', async () => {
    const path = fresh()
    writeFileSync(path, 'hello\n')
    await assert.rejects(FileReplicaStorage.open(path), {
      code: 'damaged',
      message: `${path} is not a notes-service replica file.`,
    })
  })

  it('lets one opener have the file: a second in this process and one in another are refused', async () => {
    const path = fresh()
    const storage = await FileReplicaStorage.open(path)
    try {
      await assert.rejects(FileReplicaStorage.open(path), {
        code: 'locked',
        message: `${path} is open in another storage in this process (lock ${path}.lock).`,
      })
      assert.equal(await child('open', path), 'locked\n')
    } finally {
      await storage.close()
    }
    assert.equal(await child('open', path), 'opened\n')
  })

  it('names a holder in another process, and takes over a lock of PID 1 or of a zombie at once', async () => {
    const path = fresh()
    const live = await liveHolder(`${path}.lock`)
    try {
      await assert.rejects(FileReplicaStorage.open(path), {
        code: 'locked',
        message: `${path} is open in process ${live.pid} (lock ${path}.lock).`,
      })
    } finally {
      await live.stop()
    }
    const pid1 = lockText({ pid: 1, start: procStat(1).start + 1 })
    for (const text of ['1\n', pid1]) {
      const other = fresh()
      writeFileSync(`${other}.lock`, text)
      const storage = await FileReplicaStorage.open(other)
      assert.equal(readFileSync(`${other}.lock`, 'utf8'), lockText({}))
      await storage.close()
    }
    const zombie = await zombieHolder(`${path}.lock`)
    try {
      const storage = await FileReplicaStorage.open(path)
      assert.equal(readFileSync(`${path}.lock`, 'utf8'), lockText({}))
      await storage.close()
    } finally {
      await zombie.stop()
    }
  })

  it('refuses a lock leased by another host, saying until when, and takes it once lapsed', async () => {
    const path = fresh()
    const lock = `${path}.lock`
    writeFileSync(lock, lockText({ pid: 4242, host: 'elsewhere', boot: 'another-boot' }))
    const until = new Date(statSync(lock).mtimeMs + 30_000).toISOString()
    await assert.rejects(FileReplicaStorage.open(path), {
      code: 'locked',
      message: `${path} is open in process 4242 on host elsewhere (lock ${lock}, renewed every 5 s; taken over if not renewed by ${until}).`,
    })
    const lapsed = new Date(Date.now() - 31_000)
    utimesSync(lock, lapsed, lapsed)
    await (await FileReplicaStorage.open(path)).close()
  })

  it('shares one fsync among the writes made while one is running (group commit)', async () => {
    const storage = await FileReplicaStorage.open(fresh())
    try {
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          storage.write([{ table: 'outbox', key: `${i}`, value: i }]),
        ),
      )
      assert.equal(storage.syncs, 1)
      await storage.write([{ table: 'meta', key: 'a', value: 1 }])
      assert.equal(storage.syncs, 2)
    } finally {
      await storage.close()
    }
  })

  it('compacts once the file passes twice the live data, and keeps every value', async () => {
    const path = fresh()
    const storage = await FileReplicaStorage.open(path, { compactMinBytes: 4096 })
    const body = 'y'.repeat(100)
    for (let i = 0; i < 400; i++) {
      await storage.write([
        { table: 'notes', key: `n:${i % 10}`, value: { i, body } },
        { table: 'meta', key: 'last', value: i },
      ])
    }
    assert.ok(storage.compactions >= 3, `${storage.compactions} compactions`)
    // Live: 10 notes and one meta value, about 1.5 kB; the file stays under twice the threshold.
    assert.ok(statSync(path).size < 2 * 4096, `${statSync(path).size} bytes`)
    assert.equal(existsSync(`${path}.tmp`), false)
    const expected = contentsOf({
      notes: Object.fromEntries(
        Array.from({ length: 10 }, (_, k) => [`n:${k}`, { i: 390 + k, body }]),
      ),
      meta: { last: 399 },
    })
    assert.deepEqual(await storage.load(), expected)
    await storage.close()
    const again = await FileReplicaStorage.open(path)
    assert.deepEqual(await again.load(), expected)
    await again.close()
  })
})

/** An IndexedDB whose open() does one thing: fires `event` (with `error`) or throws `error`. */
function refusingIndexedDb(event: 'error' | 'blocked' | 'throw', name: string): IdbFactoryLike {
  const error = { name, message: `${name} (a stand-in)` }
  return {
    open() {
      if (event === 'throw') throw error
      const request = {
        result: undefined as never,
        error,
        onsuccess: null,
        onerror: null as ((e: { preventDefault(): void }) => void) | null,
        onupgradeneeded: null,
        onblocked: null as (() => void) | null,
      }
      setTimeout(() => {
        if (event === 'blocked') request.onblocked?.()
        else request.onerror?.({ preventDefault() {} })
      })
      return request
    },
    deleteDatabase() {
      throw new Error('not used')
    },
  }
}

describe('IndexedDbReplicaStorage where IndexedDB is missing or refuses', () => {
  it('says unavailable where there is no IndexedDB (Node here; some private windows)', async () => {
    await assert.rejects(IndexedDbReplicaStorage.open('x'), {
      name: 'ReplicaStorageError',
      code: 'unavailable',
      message:
        'This browser offers no IndexedDB here (a private window or a sandboxed frame may not); the replica cannot be kept.',
    })
  })

  const cases = [
    ['error', 'InvalidStateError', 'unavailable', /private window/],
    ['throw', 'SecurityError', 'unavailable', /SecurityError/],
    ['error', 'VersionError', 'unavailable', /newer version of this page/],
    ['blocked', 'unused', 'blocked', /held open at an older version by another tab/],
  ] as const
  for (const [event, errorName, code, message] of cases) {
    it(`says ${code} when opening ${event === 'blocked' ? 'is blocked' : `fails with ${errorName}`}`, async () => {
      await assert.rejects(
        IndexedDbReplicaStorage.open('x', { indexedDB: refusingIndexedDb(event, errorName) }),
        { name: 'ReplicaStorageError', code, message },
      )
    })
  }
})

describe('IndexedDbReplicaStorage in Chromium (the storage contract)', { skip: SKIP }, () => {
  let browser: Browser | undefined
  let server: Server | undefined
  let page: Page

  before(async () => {
    const served = await serveDist()
    server = served.server
    browser = await launchChromium()
    page = await browser.newPage()
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(`${served.origin}/`)
    assert.deepEqual(errors, [])
  })

  after(async () => {
    await browser?.close()
    server?.close()
  })

  let count = 0
  for (const contractCase of CASES) {
    it(contractCase.name, async () => {
      await page.evaluate(
        async ([caseName, name]) => {
          const contract = '/test/support/replica-storage.contract.js'
          const module = '/src/client/replica/indexeddb-storage.js'
          const { runCase } = await import(contract)
          const { IndexedDbReplicaStorage, IndexedDbReplicaStorages } = await import(module)
          await runCase(
            caseName,
            {
              persistent: true,
              open: (n: string): Promise<ReplicaStorage> => IndexedDbReplicaStorage.open(n),
              keyed: (n: string): ReplicaStorages => new IndexedDbReplicaStorages(n),
            },
            name,
          )
        },
        [contractCase.name, `case-${++count}`] as const,
      )
    })
  }

  it('loses nothing when two connections (two tabs) write the same buckets at once', async () => {
    const answer = await page.evaluate(async () => {
      const module = '/src/client/replica/indexeddb-storage.js'
      const { IndexedDbReplicaStorage } = await import(module)
      const [one, two] = await Promise.all([
        IndexedDbReplicaStorage.open('two-tabs'),
        IndexedDbReplicaStorage.open('two-tabs'),
      ])
      await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          (i % 2 === 0 ? one : two).write([{ table: 'notes', key: `n:${i}`, value: i }]),
        ),
      )
      await one.close()
      await two.close()
      const third = await IndexedDbReplicaStorage.open('two-tabs')
      const { notes } = await third.load()
      await third.close()
      return [...notes.values()].sort((a, b) => (a as number) - (b as number))
    })
    assert.deepEqual(
      answer,
      Array.from({ length: 400 }, (_, i) => i),
    )
  })

  it('upgrades a database of the first version (four stores), keeping its tables, to hold bytes', async () => {
    const answer = await page.evaluate(async () => {
      // The test's tsconfig has no DOM library: the little of indexedDB used here.
      interface Request {
        result: {
          createObjectStore(name: string): { put(value: unknown, key: string): void }
          close(): void
        }
        onupgradeneeded: () => void
        onsuccess: () => void
        onerror: () => void
      }
      const { indexedDB } = globalThis as unknown as {
        indexedDB: { open(name: string, version: number): Request }
      }
      await new Promise<void>((resolve, reject) => {
        const request = indexedDB.open('first-version', 1)
        request.onupgradeneeded = () => {
          for (const table of ['notes', 'outbox', 'conflicts']) {
            request.result.createObjectStore(table)
          }
          request.result.createObjectStore('meta').put('[["feed","41"]]', '7')
        }
        request.onsuccess = () => {
          request.result.close()
          resolve()
        }
        request.onerror = () => reject(new Error('could not make the first version'))
      })
      const module = '/src/client/replica/indexeddb-storage.js'
      const { IndexedDbReplicaStorage } = await import(module)
      const storage = await IndexedDbReplicaStorage.open('first-version')
      await storage.putBytes('f.1', new Blob(['abc']))
      const { meta } = await storage.load()
      const bytes = await (await storage.getBytes('f.1')).text()
      await storage.close()
      return { meta: [...meta], bytes }
    })
    assert.deepEqual(answer, { meta: [['feed', '41']], bytes: 'abc' })
  })

  it('steps aside for a newer version opened in another tab, and refuses to open an older one after', async () => {
    const answer = await page.evaluate(async () => {
      const module = '/src/client/replica/indexeddb-storage.js'
      const { IndexedDbReplicaStorage } = await import(module)
      const storage = await IndexedDbReplicaStorage.open('versions')
      await storage.write([{ table: 'meta', key: 'a', value: 1 }])
      const upgraded = await new Promise<string>((resolve) => {
        // The test's tsconfig has no DOM library: the little of indexedDB used here.
        const { indexedDB } = globalThis as unknown as {
          indexedDB: {
            open(
              name: string,
              version: number,
            ): {
              result: { close(): void }
              error: { name: string } | null
              onsuccess: () => void
              onblocked: () => void
              onerror: () => void
            }
          }
        }
        const request = indexedDB.open('versions', 3)
        request.onsuccess = () => {
          request.result.close()
          resolve('upgraded')
        }
        request.onblocked = () => resolve('blocked')
        request.onerror = () => resolve(`error ${request.error?.name}`)
      })
      const after = await storage.load().then(
        () => 'loaded',
        (err: { code: string; message: string }) => `${err.code}: ${err.message}`,
      )
      const older = await IndexedDbReplicaStorage.open('versions').then(
        () => 'opened',
        (err: { code: string }) => err.code,
      )
      return { upgraded, after, older }
    })
    assert.deepEqual(answer, {
      upgraded: 'upgraded',
      after:
        'closed: The replica database versions was closed for a newer version of the page; reload it.',
      older: 'unavailable',
    })
  })

  it('refuses a write past the quota as a typed error and keeps nothing of it', async () => {
    // A context of its own: Chromium keeps the quota of a site whose storage is already in use.
    const context = await (browser as Browser).newContext()
    const quotaPage = await context.newPage()
    await quotaPage.goto(page.url())
    const cdp = await context.newCDPSession(quotaPage)
    const origin = new URL(page.url()).origin
    await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: 4 << 20 })
    try {
      const answer = await quotaPage.evaluate(async () => {
        const module = '/src/client/replica/indexeddb-storage.js'
        const { IndexedDbReplicaStorage } = await import(module)
        const storage = await IndexedDbReplicaStorage.open('quota')
        await storage.write([{ table: 'meta', key: 'small', value: 1 }])
        const big = 'z'.repeat(1 << 20)
        const refused = await storage
          .write(
            Array.from({ length: 12 }, (_, i) => ({ table: 'notes', key: `n:${i}`, value: big })),
          )
          .then(
            () => 'written',
            (err: { code: string }) => err.code,
          )
        const contents = await storage.load()
        await storage.close()
        return { refused, notes: contents.notes.size, meta: [...contents.meta.keys()] }
      })
      assert.deepEqual(answer, { refused: 'quota', notes: 0, meta: ['small'] })
    } finally {
      await context.close()
    }
  })
})
