import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  MemoryReplicaStorages,
  type NoteResult,
  NotesClient,
  type NotesClientOptions,
  Replica,
  type ReplicaStorage,
} from '../../../src/client/index.js'
import { FileReplicaStorage } from '../../../src/client/replica/file-storage.js'
import type { Config } from '../../../src/config/config.js'
import { NOWHERE, Relay, serve } from '../../support/client-relay.js'
import { describeEachStore } from '../../support/each-store.js'
import type { SuiteContext } from '../../support/helpers.js'

/**
 * Files attached through the replica against a real service on 127.0.0.1 (through a TCP relay
 * that can lead nowhere, as a network that is down would), on the file storage, so that a
 * reload is a new Replica over the same file.
 */

const QUICK: Pick<NotesClientOptions, 'retries'> = { retries: { limit: 2, maxDelayMs: 200 } }

interface Setup {
  direct: NotesClient
  relay: Relay
  /** The service's port, for relay.target. */
  port: number
  /** A replica over the relay on the file storage `name` (opened again by the same name). */
  open(name: string): Promise<{ replica: Replica; storage: ReplicaStorage }>
}

async function setup(t: TestContext, suite: SuiteContext, config: Partial<Config> = {}) {
  const folder = mkdtempSync(join(tmpdir(), 'replica-files-'))
  t.after(() => rmSync(folder, { recursive: true, force: true }))
  const port = await serve(t, suite.buildApp(config).app)
  const relay = await Relay.start(port)
  const replicas: Replica[] = []
  t.after(async () => {
    await Promise.all(replicas.map((replica) => replica.close()))
    await relay.close()
  })
  const setup: Setup = {
    direct: new NotesClient({ baseUrl: `http://127.0.0.1:${port}`, ...QUICK }),
    relay,
    port,
    async open(name) {
      const storage = await FileReplicaStorage.open(join(folder, name))
      const client = new NotesClient({ baseUrl: relay.url, ...QUICK })
      const replica = await Replica.open({ client, storage, maxDelayMs: 200 })
      replicas.push(replica)
      return { replica, storage }
    },
  }
  return setup
}

const timeout = (): { signal: AbortSignal } => ({ signal: AbortSignal.timeout(20_000) })

/** `size` bytes that differ from one offset to the next (a shifted copy would not match). */
function bytesOf(size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size)
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + (i >> 8)) % 256
  return bytes
}

/**
 * Opens replicas that share one storage, as tabs of a browser share one IndexedDB database
 * (what IndexedDbReplicaStorage says by its sharedName); each is closed when the test ends.
 */
function tabsOn(t: TestContext, port: number): () => Promise<Replica> {
  const storages = new MemoryReplicaStorages()
  return async () => {
    const storage = await storages.open('nb')
    const shared: ReplicaStorage = {
      sharedName: 'nb',
      load: () => storage.load(),
      write: (changes) => storage.write(changes),
      putBytes: (key, bytes) => storage.putBytes(key, bytes),
      getBytes: (key) => storage.getBytes(key),
      deleteBytes: (key) => storage.deleteBytes(key),
      bytesKeys: () => storage.bytesKeys(),
      close: () => storage.close(),
    }
    const client = new NotesClient({ baseUrl: `http://127.0.0.1:${port}`, ...QUICK })
    const replica = await Replica.open({ client, storage: shared, maxDelayMs: 200 })
    t.after(() => replica.close())
    return replica
  }
}

async function fileCount(direct: NotesClient): Promise<number | undefined> {
  return (await direct.files.list()).total
}

describeEachStore(
  'Replica files',
  (suite) => {
    it('keeps a file attached offline on the device, across a reload, and sends it when the service is back', async (t) => {
      const { direct, relay, port, open } = await setup(t, suite)
      relay.target = NOWHERE
      const first = await open('a')
      first.replica.start()
      const note = await first.replica.create({ title: 'Holiday' })
      // Past the 8 MiB of one request: it goes up resumably, in two parts.
      const bytes = bytesOf((8 << 20) + 5000)
      const attached = await first.replica.attachFile(note.key, new Blob([bytes]), {
        name: 'beach.raw',
        type: 'application/x-raw',
      })
      assert.deepEqual(
        { ...attached, state: undefined },
        {
          key: attached.key,
          entry: note.key,
          name: 'beach.raw',
          type: 'application/x-raw',
          size: bytes.length,
          state: undefined,
          sent: 0,
          status: undefined,
          detail: undefined,
        },
      )
      assert.deepEqual(await first.storage.bytesKeys(), [attached.key])
      await sleep(400)
      assert.equal(first.replica.online, false)
      // Tried now and then (waiting, or sending again), never refused.
      assert.deepEqual(
        first.replica.files().map((file) => [file.key, file.state !== 'refused', file.sent]),
        [[attached.key, true, 0]],
      )
      assert.equal(await fileCount(direct), 0, 'nothing reached the service')
      assert.deepEqual((await direct.list()).notes, [])

      // A reload: a new replica over the same storage still holds the file and its bytes.
      await first.replica.close()
      const again = await open('a')
      assert.deepEqual(
        again.replica.files().map((file) => [file.key, file.entry, file.name, file.size]),
        [[attached.key, note.key, 'beach.raw', bytes.length]],
      )
      const progress: number[] = []
      again.replica.subscribe((event) => {
        const sent = again.replica.files()[0]?.sent
        if (event.type === 'files' && sent !== undefined && sent !== progress.at(-1)) {
          progress.push(sent)
        }
      })

      relay.target = port
      await again.replica.sync(timeout())
      assert.deepEqual(again.replica.files(), [])
      assert.deepEqual(await again.storage.bytesKeys(), [], 'the bytes left the device')
      assert.deepEqual(
        progress,
        [0, 8 << 20, bytes.length],
        'progress after each part the service holds',
      )
      const [stored] = (await direct.files.list()).files
      assert.ok(stored !== undefined)
      const notes = (await direct.list()).notes as NoteResult['note'][]
      assert.deepEqual(notes, [
        {
          title: 'Holiday',
          files: [
            { id: stored.id, name: 'beach.raw', size: bytes.length, type: 'application/x-raw' },
          ],
          id: again.replica.get(note.key)?.id,
        },
      ])
      assert.deepEqual(again.replica.get(note.key)?.note, notes[0])
      const downloaded = new Uint8Array(
        await (await direct.files.download(stored.id)).arrayBuffer(),
      )
      assert.ok(Buffer.from(downloaded).equals(Buffer.from(bytes)), 'the same bytes')
    })

    it('hands a file the service refuses (413) or whose note is gone to the application', async (t) => {
      const { direct, open } = await setup(t, suite, { maxFileBytes: 1000 })
      const { replica, storage } = await open('b')
      const events: string[] = []
      replica.subscribe((event) => events.push(event.type))
      const big = await replica.create({ title: 'too big' })
      const gone = await replica.create({ title: 'deleted soon' })
      const large = await replica.attachFile(big.key, bytesOf(2000), { name: 'large.bin' })
      const orphan = await replica.attachFile(
        gone.key,
        new Blob(['small'], { type: 'text/plain' }),
        {
          name: 'small.txt',
        },
      )
      await replica.delete(gone.key)
      await replica.sync(timeout())

      assert.ok(events.includes('files'))
      const refused = replica.files().map((file) => [file.key, file.state, file.status])
      assert.deepEqual(refused, [
        [large.key, 'refused', 413],
        [orphan.key, 'refused', 404],
      ])
      assert.match(replica.files()[0]?.detail ?? '', /1000/)
      const unsent = await replica.unsentFiles()
      assert.deepEqual(
        unsent.map((file) => [file.key, file.name, file.type, file.size]),
        [
          [large.key, 'large.bin', 'application/octet-stream', 2000],
          [orphan.key, 'small.txt', 'text/plain', 5],
        ],
      )
      assert.equal(await unsent[1]?.bytes?.text(), 'small')
      assert.equal(await fileCount(direct), 0)
      assert.deepEqual(
        (await direct.list()).notes.map((note) => note.files),
        [undefined],
      )

      // The application takes them off the device.
      assert.equal(await replica.removeFile(large.key), true)
      assert.equal(await replica.removeFile(orphan.key), true)
      assert.equal(await replica.removeFile(orphan.key), false)
      assert.deepEqual(replica.files(), [])
      assert.deepEqual(await storage.bytesKeys(), [])
    })

    it('sends a file once from two replicas sharing one storage (two tabs), each reading the queue again first', async (t) => {
      const { direct, port } = await setup(t, suite)
      const tab = tabsOn(t, port)
      const { note } = await direct.create({ title: 'shared' })
      const { note: other } = await direct.create({ title: 'other' })
      const first = await tab()
      await first.sync(timeout())
      const attached = await first.attachFile(`n:${note.id}`, new Blob(['once']), { name: 'a.txt' })
      // The second tab opens with the file queued; the first sends it, then the second syncs.
      const second = await tab()
      assert.deepEqual(
        second.files().map((file) => file.key),
        [attached.key],
      )
      await first.sync(timeout())
      // One the first tab queues later (stopped, so it is not sending it too: Node 20 has no
      // Web Locks) is seen by the second, though it was opened before.
      await first.stop()
      const later = await first.attachFile(`n:${other.id}`, new Blob(['later']), { name: 'b.txt' })
      await second.sync(timeout())
      assert.deepEqual(second.files(), [], 'neither refused (its bytes gone) nor sent again')
      assert.deepEqual(
        first.files().map((file) => file.key),
        [later.key],
      )
      await first.sync(timeout())
      const names = async (id: number): Promise<unknown> =>
        ((await direct.get(id))?.note.files as { name: string }[] | undefined)?.map((f) => f.name)
      assert.deepEqual(await names(note.id), ['a.txt'])
      assert.deepEqual(await names(other.id), ['b.txt'])
      assert.deepEqual(first.files(), [])
      assert.equal(await fileCount(direct), 2)
    })

    it('leaves to the other tab a file it queued on a note made there and not yet sent', async (t) => {
      const { direct, port } = await setup(t, suite)
      const tab = tabsOn(t, port)
      const first = await tab()
      const second = await tab()
      await Promise.all([first.sync(timeout()), second.sync(timeout())])
      // Made offline in the first tab: the second holds no such note, and must not take the file
      // for one whose note is gone (a refusal), nor send it.
      await first.stop()
      const made = await first.create({ title: 'made here' })
      const attached = await first.attachFile(made.key, new Blob(['mine']), { name: 'c.txt' })
      await second.sync(timeout())
      await second.attachFile(
        (await second.create({ title: 'theirs' })).key,
        new Blob(['theirs']),
        { name: 'd.txt' },
      )
      await second.sync(timeout())
      assert.deepEqual(second.files(), [], 'the first tab’s file neither taken nor refused here')
      assert.deepEqual(
        first.files().map((file) => [file.key, file.state]),
        [[attached.key, 'waiting']],
      )
      await first.sync(timeout())
      assert.deepEqual(first.files(), [])
      const id = first.get(made.key)?.id as number
      assert.deepEqual(
        ((await direct.get(id))?.note.files as { name: string }[] | undefined)?.map((f) => f.name),
        ['c.txt'],
      )
      assert.equal(await fileCount(direct), 2)
    })

    it('removes a queued file before it is sent, and refers to the same bytes once', async (t) => {
      const { direct, relay, port, open } = await setup(t, suite)
      relay.target = NOWHERE
      const { replica, storage } = await open('c')
      replica.start()
      const note = await replica.create({ title: 'n' })
      const dropped = await replica.attachFile(note.key, new Blob(['dropped']), { name: 'x' })
      await replica.attachFile(note.key, new Blob(['same']), { name: 'one.txt' })
      await replica.attachFile(note.key, new Blob(['same']), { name: 'two.txt' })
      assert.equal(await replica.removeFile(dropped.key), true)
      assert.equal((await storage.bytesKeys()).length, 2)
      await assert.rejects(replica.attachFile('n:404', new Blob(['x']), { name: 'x' }), RangeError)
      await assert.rejects(replica.attachFile(note.key, new Blob(['x'])), TypeError)
      relay.target = port
      await replica.sync(timeout())
      assert.equal(await fileCount(direct), 1)
      const [stored] = (await direct.list()).notes
      assert.ok(stored !== undefined)
      assert.deepEqual(
        (stored.files as { name: string }[]).map((file) => file.name),
        ['one.txt'],
      )
      assert.deepEqual(await storage.bytesKeys(), [])
    })
  },
  { lanes: false, notebook: false },
)
