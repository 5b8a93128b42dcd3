import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../../src/app.js'
import { UserTokens } from '../../../src/auth/user-tokens.js'
import {
  NotebooksReplica,
  type NotebooksReplicaEvent,
  NotesClient,
  type NotesClientOptions,
  Replica,
  type ReplicaEvent,
  type UnsentWrites,
} from '../../../src/client/index.js'
import { FileReplicaStorages } from '../../../src/client/replica/file-storage.js'
import { MemoryReplicaStorage } from '../../../src/client/replica/memory-storage.js'
import { DEFAULT_CONFIG } from '../../../src/config/config.js'
import { MemoryNotebooks } from '../../../src/store/memory/memory-notebooks.js'
import { Relay } from '../../support/client-relay.js'
import { signed } from '../../support/jwks-server.js'

/**
 * A replica of every notebook a user can read, against a real service with user tokens on
 * 127.0.0.1; the user's client goes through a relay that can lead nowhere (offline).
 */

const SECRET = 'a-secret-of-32-bytes-or-more-000'
const T = 1_800_000_000
const QUICK: Pick<NotesClientOptions, 'retries'> = { retries: { limit: 2, maxDelayMs: 100 } }
/** A port where nothing listens: connections to it are refused. */
const NOWHERE = 9

interface Setup {
  port: number
  relay: Relay
  folder: string
  /** A client of `sub`, straight to the service (with `options` too). */
  direct(sub: string, options?: Partial<NotesClientOptions>): Promise<NotesClient>
  /** Ann's replica over the relay, on the file storages in `folder`. */
  open(): Promise<{
    replica: NotebooksReplica
    unsent: UnsentWrites[]
    events: NotebooksReplicaEvent[]
  }>
}

async function setup(t: TestContext): Promise<Setup> {
  const clock = (): number => T * 1000
  const app: FastifyInstance = buildApp({
    notebooks: new MemoryNotebooks({ maxNotes: 1_000, maxBytes: 1 << 20 }),
    userTokens: new UserTokens({ secret: SECRET, now: clock }),
    now: clock,
    config: { ...DEFAULT_CONFIG, ui: false },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as AddressInfo).port
  const relay = await Relay.start(port)
  const folder = mkdtempSync(join(tmpdir(), 'notebooks-replica-'))
  const replicas: NotebooksReplica[] = []
  t.after(async () => {
    for (const replica of replicas) await replica.close()
    await relay.close()
    const closing = app.close()
    app.server.closeAllConnections()
    await closing
    rmSync(folder, { recursive: true, force: true })
  })
  const tokenOf = (sub: string) =>
    signed(Buffer.from(SECRET), { alg: 'HS256' }, { sub, iat: T, exp: T + 3600 })
  return {
    port,
    relay,
    folder,
    async direct(sub, options = {}) {
      return new NotesClient({
        baseUrl: `http://127.0.0.1:${port}`,
        token: await tokenOf(sub),
        ...QUICK,
        ...options,
      })
    },
    async open() {
      const client = new NotesClient({ baseUrl: relay.url, token: await tokenOf('ann'), ...QUICK })
      const unsent: UnsentWrites[] = []
      const events: NotebooksReplicaEvent[] = []
      const replica = await NotebooksReplica.open({
        client,
        storages: new FileReplicaStorages(folder),
        unsent: (handover) => {
          unsent.push(handover)
        },
        maxDelayMs: 100,
      })
      replica.subscribe((event) => {
        if (event.type === 'joined' || event.type === 'left') events.push(event)
      })
      replicas.push(replica)
      return { replica, unsent, events }
    },
  }
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!check()) {
    assert.ok(Date.now() < deadline, `never: ${what}`)
    await sleep(10)
  }
}

const timeout = (): { signal: AbortSignal } => ({ signal: AbortSignal.timeout(10_000) })

/** The notes of notebook `id`'s local view. */
function view(replica: NotebooksReplica, id: string): unknown[] {
  return (replica.replica(id)?.notes() ?? []).map((entry) => entry.note)
}

describe('NotebooksReplica', () => {
  it('follows every notebook over one stream: joined, a viewer refused, left while offline', async (t) => {
    const { port, relay, folder, direct, open } = await setup(t)
    const annDirect = await direct('ann')
    const bob = await direct('bob')
    const [mine] = await annDirect.notebooks()
    assert.ok(mine !== undefined)
    const shared = await bob.createNotebook('Shared')
    await bob.setMember(shared.id, 'ann', 'editor')
    const agenda = (await bob.notebook(shared.id).create({ title: 'agenda' })).note

    const { replica, unsent, events } = await open()
    await replica.sync(timeout())
    const sharedForAnn = { id: shared.id, name: 'Shared', role: 'editor', members: 2 }
    assert.deepEqual(replica.notebooks(), [mine, sharedForAnn])
    // The first run starts keeping every notebook listed.
    const firstRun = [
      { type: 'joined', notebook: mine },
      { type: 'joined', notebook: sharedForAnn },
    ]
    assert.deepEqual(events, firstRun)
    assert.deepEqual(view(replica, shared.id), [agenda])
    assert.deepEqual(view(replica, mine.id), [])

    // Bob writes in the shared notebook: ann's copy has it.
    const minutes = (await bob.notebook(shared.id).create({ title: 'minutes' })).note
    await until(() => view(replica, shared.id).length === 2, "bob's note in ann's copy")
    assert.deepEqual(view(replica, shared.id), [agenda, minutes])
    // Ann's own write goes to her notebook, and nowhere else.
    await replica.replica(mine.id)?.create({ title: 'mine' })
    await replica.sync(timeout())
    const [own] = (await annDirect.list()).notes
    assert.deepEqual((await annDirect.list()).notes, [{ title: 'mine', id: own?.id }])
    assert.deepEqual((await bob.notebook(shared.id).list()).notes, [agenda, minutes])

    // Bob adds ann to a third notebook, as a viewer: her replica gains it, loaded.
    const third = await bob.createNotebook('Third')
    const plan = (await bob.notebook(third.id).create({ title: 'plan' })).note
    await bob.setMember(third.id, 'ann', 'viewer')
    const thirdForAnn = { id: third.id, name: 'Third', role: 'viewer', members: 2 }
    await until(() => events.length === 3, 'the third notebook joined')
    assert.deepEqual(events, [...firstRun, { type: 'joined', notebook: thirdForAnn }])
    await replica.sync(timeout())
    assert.deepEqual(replica.notebooks(), [mine, sharedForAnn, thirdForAnn])
    assert.deepEqual(view(replica, third.id), [plan])

    // A viewer's write is refused (403): handed to the application, not tried forever.
    const draft = await replica.replica(third.id)?.create({ title: 'draft' })
    await until(() => unsent.length === 1, 'the refused write handed over')
    assert.deepEqual(unsent, [
      {
        notebook: thirdForAnn,
        reason: 'read-only',
        writes: [
          {
            key: draft?.key,
            id: undefined,
            op: 'create',
            fields: { title: 'draft' },
            mergePatch: false,
            replace: false,
            note: { title: 'draft' },
          },
        ],
        conflicts: [],
        files: [],
      },
    ])
    assert.equal(replica.replica(third.id)?.waiting, 0)
    assert.deepEqual(view(replica, third.id), [plan])
    assert.deepEqual((await bob.notebook(third.id).list()).notes, [plan])

    // Offline, ann queues writes in the shared notebook; bob removes her meanwhile.
    relay.target = NOWHERE
    relay.cutAll()
    const sharedReplica = replica.replica(shared.id)
    const local = await sharedReplica?.create({ title: 'offline note' })
    await sharedReplica?.update(`n:${agenda.id}`, { title: 'agenda, edited offline' })
    const photo = new Blob(['offline photo'], { type: 'image/png' })
    const attached = await sharedReplica?.attachFile(local?.key as string, photo, { name: 'p.png' })
    assert.equal(sharedReplica?.waiting, 2)
    assert.equal(
      existsSync(join(folder, `nb.${shared.id}.replica.files`, attached?.key ?? '')),
      true,
    )
    await bob.removeMember(shared.id, 'ann')
    await sleep(300)
    assert.equal(unsent.length, 1, 'nothing is known while offline')

    // Back online: the copy is removed, and the queued writes are handed over.
    relay.target = port
    await until(() => unsent.length === 2, 'the writes of the notebook lost handed over')
    const handedFile = (unsent as UnsentWrites[])[1]?.files[0]
    assert.deepEqual(unsent[1], {
      notebook: sharedForAnn,
      reason: 'left',
      writes: [
        {
          key: local?.key,
          id: undefined,
          op: 'create',
          fields: { title: 'offline note' },
          mergePatch: false,
          replace: false,
          note: { title: 'offline note' },
        },
        {
          key: `n:${agenda.id}`,
          id: agenda.id,
          op: 'update',
          fields: { title: 'agenda, edited offline' },
          mergePatch: false,
          replace: false,
          note: { title: 'agenda, edited offline', id: agenda.id },
        },
      ],
      conflicts: [],
      files: [{ ...attached, state: 'waiting', bytes: handedFile?.bytes }],
    })
    // The file's bytes, read into memory before its copy left the device.
    assert.equal(await handedFile?.bytes?.text(), 'offline photo')
    await until(() => replica.notebooks().length === 2, 'the shared notebook dropped')
    await replica.sync(timeout())
    assert.deepEqual(replica.notebooks(), [mine, thirdForAnn])
    assert.equal(replica.replica(shared.id), undefined)
    assert.deepEqual(events, [
      ...firstRun,
      { type: 'joined', notebook: thirdForAnn },
      { type: 'left', notebook: sharedForAnn },
    ])
    assert.equal(existsSync(join(folder, `nb.${shared.id}.replica`)), false)
    assert.equal(existsSync(join(folder, `nb.${shared.id}.replica.files`)), false)
    assert.equal(existsSync(join(folder, `nb.${third.id}.replica`)), true)
    // Nothing of it reached the service.
    assert.deepEqual((await bob.notebook(shared.id).list()).notes, [agenda, minutes])
  })

  it('keeps every notebook and its outbox across a restart on the same file storages', async (t) => {
    const { relay, port, direct, open } = await setup(t)
    const annDirect = await direct('ann')
    const bob = await direct('bob')
    const [mine] = await annDirect.notebooks()
    assert.ok(mine !== undefined)
    const shared = await bob.createNotebook('Shared')
    await bob.setMember(shared.id, 'ann', 'editor')
    const agenda = (await bob.notebook(shared.id).create({ title: 'agenda' })).note

    const first = await open()
    await first.replica.sync(timeout())
    await first.replica.stop()
    await first.replica.replica(mine.id)?.create({ title: 'queued at home' })
    await first.replica.replica(shared.id)?.update(`n:${agenda.id}`, { title: 'agenda 2' })
    await first.replica.close()
    // Changed while ann's replica was closed: the stream resumes from where it stopped.
    const minutes = (await bob.notebook(shared.id).create({ title: 'minutes' })).note

    relay.target = NOWHERE
    const again = await open()
    assert.deepEqual(again.replica.notebooks(), [
      mine,
      { id: shared.id, name: 'Shared', role: 'editor', members: 2 },
    ])
    assert.equal(again.replica.replica(mine.id)?.waiting, 1)
    assert.equal(again.replica.replica(shared.id)?.waiting, 1)
    assert.deepEqual(view(again.replica, mine.id), [{ title: 'queued at home' }])
    assert.deepEqual(view(again.replica, shared.id), [{ title: 'agenda 2', id: agenda.id }])

    relay.target = port
    await again.replica.sync(timeout())
    const [home] = (await annDirect.list()).notes
    assert.deepEqual((await annDirect.list()).notes, [{ title: 'queued at home', id: home?.id }])
    assert.deepEqual((await bob.notebook(shared.id).list()).notes, [
      { title: 'agenda 2', id: agenda.id },
      minutes,
    ])
    await until(() => view(again.replica, shared.id).length === 2, 'the change made while closed')
    assert.deepEqual(view(again.replica, shared.id), [
      { title: 'agenda 2', id: agenda.id },
      minutes,
    ])
    assert.deepEqual(again.unsent, [])
  })
})

describe('a Replica of one named notebook', () => {
  it('stops for good when the notebook is lost, and keeps its unsent writes for the application', async (t) => {
    const { direct } = await setup(t)
    const ann = await direct('ann')
    const bob = await direct('bob')
    const shared = await bob.createNotebook('Shared')
    await bob.setMember(shared.id, 'ann', 'editor')
    const agenda = (await bob.notebook(shared.id).create({ title: 'agenda' })).note
    let requests = 0
    const counted = (
      await direct('ann', {
        fetch: (input, init) => {
          requests++
          return fetch(input, init)
        },
      })
    ).notebook(shared.id)
    const replica = await Replica.open({
      client: counted,
      storage: new MemoryReplicaStorage(),
      maxDelayMs: 100,
    })
    t.after(() => replica.close())
    const events: ReplicaEvent['type'][] = []
    replica.subscribe((event) => events.push(event.type))
    await replica.sync(timeout())
    assert.deepEqual(
      replica.notes().map((entry) => entry.note),
      [agenda],
    )

    // Bob removes ann: her feed is revoked, and the replica stops rather than retrying.
    await bob.removeMember(shared.id, 'ann')
    await until(() => replica.lost, 'the replica saw the notebook lost')
    assert.ok(events.includes('lost'))
    // A write made now stays queued for the application, as do the notes it had.
    const draft = await replica.create({ title: 'draft' })
    assert.deepEqual(
      replica.unsent().map((write) => [write.key, write.op, write.fields]),
      [[draft.key, 'create', { title: 'draft' }]],
    )
    await assert.rejects(replica.sync(timeout()), /no longer this user's/)
    const after = requests
    await sleep(500)
    assert.equal(requests, after, 'no request after the loss (it would be refused for ever)')
    assert.equal(replica.waiting, 1)

    // A replica opened later on the lost notebook finds it at once, by the list's 404.
    const later = await Replica.open({
      client: ann.notebook(shared.id),
      storage: new MemoryReplicaStorage(),
      maxDelayMs: 100,
    })
    t.after(() => later.close())
    await assert.rejects(later.sync(timeout()))
    await until(() => later.lost, 'a later replica saw the notebook lost')
  })
})
