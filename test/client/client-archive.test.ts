import assert from 'node:assert/strict'
import { createHmac, randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import {
  ConflictError,
  NoteNotFoundError,
  NotesClient,
  NotesProblem,
  type Revision,
} from '../../src/client/index.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { PostgresNotebooks } from '../../src/store/postgres/notebooks.js'
import type { Notebooks } from '../../src/store/types.js'
import { describeEachStore } from '../support/each-store.js'
import { createTestDatabase, postgresAvailable } from '../support/postgres-cluster.js'

/*
 * The client's history and trash methods (revisions, revision, restore, trash, restoreFromTrash,
 * purge, emptyTrash) against a service listening on 127.0.0.1, on every store, in the default
 * notebook and in a shared one.
 */

/** The service's clock: 2027-01-15T08:00:00Z, moved on by the tests. */
const T = 1_800_000_000_000
const iso = (ms: number): string => new Date(ms).toISOString()
const QUICK = { retries: { limit: 1, maxDelayMs: 50 } }

/** Listens on 127.0.0.1, closed (without the keep-alive grace) when the test ends. */
async function serve(t: TestContext, app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(async () => {
    const closing = app.close()
    app.server.closeAllConnections()
    await closing
  })
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

/** A clock the test sets: `clock.at` ms. */
function settableClock(): { at: number; now: () => number } {
  const clock = { at: T, now: () => clock.at }
  return clock
}

/** Runs `call`, which must throw a NotesProblem (not a subclass unless `kind`); its status and detail. */
async function problem(
  call: () => Promise<unknown>,
  kind: typeof NotesProblem = NotesProblem,
): Promise<[number, string]> {
  try {
    await call()
  } catch (err) {
    assert.ok(err instanceof kind, `${String(err)} is a ${kind.name}`)
    return [err.status, err.detail]
  }
  throw new Error('no problem was thrown')
}

describeEachStore(
  'NotesClient history and trash',
  (suite) => {
    it("pages a note's revisions, reads one, and restores one under the ETag last seen", async (t) => {
      const clock = settableClock()
      const { app } = suite.buildApp({}, { now: clock.now })
      const notes = new NotesClient({ baseUrl: await serve(t, app), ...QUICK })
      const { note } = await notes.create({ title: 'Plan', body: 'one' })
      const { id } = note
      clock.at = T + 1000
      await notes.update(id, { body: 'two' })
      clock.at = T + 2000
      await notes.update(id, { body: 'three', tags: ['late'] })
      const states: Revision[] = [
        {
          version: 'e.3',
          at: iso(T + 2000),
          change: 'updated',
          note: { title: 'Plan', body: 'three', id, tags: ['late'] },
        },
        {
          version: 'e.2',
          at: iso(T + 1000),
          change: 'updated',
          note: { title: 'Plan', body: 'two', id },
        },
        { version: 'e.1', at: iso(T), change: 'created', note: { title: 'Plan', body: 'one', id } },
      ]
      assert.deepEqual(await notes.revisions(id), { revisions: states, next: undefined })
      const first = await notes.revisions(id, { limit: 2 })
      assert.deepEqual(first, { revisions: states.slice(0, 2), next: 'e.2' })
      assert.deepEqual(await notes.revisions(id, { limit: 2, after: first?.next }), {
        revisions: states.slice(2),
        next: undefined,
      })
      assert.deepEqual(await notes.revision(id, 'e.1'), states[2])
      assert.equal(await notes.revision(id, 'e.9'), undefined)
      assert.equal(await notes.revisions(42), undefined)
      assert.equal(await notes.revision(42, 'e.1'), undefined)
      assert.deepEqual(await problem(() => notes.revisions(id, { limit: 0 })), [
        400,
        'limit must be a whole number from 1 to 1000; got "0".',
      ])

      // A restore sends the ETag the client last saw ("e.3"), and remembers the new one.
      clock.at = T + 3000
      assert.deepEqual(await notes.restore(id, 'e.1'), {
        note: { title: 'Plan', body: 'one', id },
        etag: '"e.4"',
        replayed: false,
      })
      assert.equal(notes.etagOf(id), '"e.4"')
      const [latest] = (await notes.revisions(id, { limit: 1 }))?.revisions ?? []
      assert.deepEqual(latest, {
        version: 'e.4',
        at: iso(T + 3000),
        change: 'updated',
        note: { title: 'Plan', body: 'one', id },
      })
      // A restore under the ETag of before ("e.3") is refused: the note changed since.
      await assert.rejects(
        notes.restore(id, 'e.2', { ifMatch: '"e.3"' }),
        (err: unknown) => err instanceof ConflictError && err.currentEtag === '"e.4"',
      )
      const [status, detail] = await problem(() => notes.restore(id, 'e.77'))
      assert.equal(status, 404)
      assert.match(detail, /^This note has no revision "e\.77"/)
      assert.deepEqual((await notes.get(id))?.note, { title: 'Plan', body: 'one', id })
    })

    it('pages the trash, restores from it, purges one note and empties it', async (t) => {
      const clock = settableClock()
      const { app } = suite.buildApp({}, { now: clock.now })
      const notes = new NotesClient({ baseUrl: await serve(t, app), ...QUICK })
      const a = (await notes.create({ title: 'a' })).note
      const b = (await notes.create({ title: 'b' })).note
      const c = (await notes.create({ title: 'c' })).note
      clock.at = T + 1000
      await notes.delete(a.id)
      clock.at = T + 2000
      await notes.delete(b.id)
      clock.at = T + 3000
      await notes.delete(c.id)
      const deleted = (note: typeof a, ms: number) => ({ deleted_at: iso(ms), note })
      assert.deepEqual(await notes.trash(), {
        notes: [deleted(c, T + 3000), deleted(b, T + 2000), deleted(a, T + 1000)],
        total: 3,
        next: undefined,
      })
      const page = await notes.trash({ limit: 2 })
      assert.deepEqual(page, {
        notes: [deleted(c, T + 3000), deleted(b, T + 2000)],
        total: 3,
        next: '5',
      })
      assert.deepEqual(await notes.trash({ limit: 2, after: page.next }), {
        notes: [deleted(a, T + 1000)],
        total: 3,
        next: undefined,
      })

      clock.at = T + 4000
      assert.deepEqual(await notes.restoreFromTrash(b.id), {
        note: b,
        etag: '"e.7"',
        replayed: false,
      })
      assert.equal(notes.etagOf(b.id), '"e.7"')
      assert.deepEqual((await notes.list()).notes, [b])
      assert.deepEqual((await notes.revisions(b.id))?.revisions, [
        { version: 'e.7', at: iso(T + 4000), change: 'created', note: b },
        { version: 'e.2', at: iso(T), change: 'created', note: b },
      ])
      assert.deepEqual(await problem(() => notes.restoreFromTrash(b.id), NoteNotFoundError), [
        404,
        'No note has this id.',
      ])
      // A live note holds a's id again (a PATCH may set any id): a restore is refused.
      await notes.update(b.id, { id: a.id })
      const [status, detail] = await problem(() => notes.restoreFromTrash(a.id))
      assert.equal(status, 409)
      assert.equal(
        detail,
        `A note with id ${a.id} exists again; delete it, or give it another id, to restore this one.`,
      )

      assert.equal(await notes.purge(c.id), true)
      assert.equal(await notes.purge(c.id), false)
      assert.deepEqual((await notes.trash()).notes, [deleted(a, T + 1000)])
      assert.equal(await notes.emptyTrash(), 1)
      assert.equal(await notes.emptyTrash(), 0)
      assert.deepEqual(await notes.trash(), { notes: [], total: 0, next: undefined })
    })
  },
  { lanes: false, notebook: false },
)

/** An HS256 JWT for `sub`, valid for an hour. */
function userToken(secret: string, sub: string): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  const body = `${part({ alg: 'HS256' })}.${part({ sub, exp: Math.floor(Date.now() / 1000) + 3600 })}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

/** The notebooks of one service on one kind of store, and what closes them. */
type MadeNotebooks = { notebooks: Notebooks; close: () => Promise<void> }

const NOTEBOOK_KINDS: [string, (now: () => number) => Promise<MadeNotebooks>][] = [
  [
    'memory',
    async (now) => ({
      notebooks: new MemoryNotebooks({
        maxNotes: 1000,
        maxBytes: 1 << 20,
        now,
      }),
      close: async () => {},
    }),
  ],
]
if (postgresAvailable('the client in a notebook (PostgreSQL)')) {
  NOTEBOOK_KINDS.push([
    'postgres',
    async (now) => {
      const notebooks = new PostgresNotebooks({
        url: await createTestDatabase(),
        maxNotes: 1000,
        maxBytes: 1 << 20,
        now,
      })
      await notebooks.open()
      return { notebooks, close: () => notebooks.close() }
    },
  ])
}

for (const [kind, makeNotebooks] of NOTEBOOK_KINDS) {
  describe(`NotesClient history and trash in a notebook (on ${kind})`, () => {
    it("acts on the notebook's own history and trash, by role", async (t) => {
      const clock = settableClock()
      const secret = randomUUID() + randomUUID()
      const { notebooks, close } = await makeNotebooks(clock.now)
      t.after(close)
      const app = buildApp({
        notebooks,
        userTokens: new UserTokens({ secret }),
        config: { ...DEFAULT_CONFIG, ui: false },
      })
      const baseUrl = await serve(t, app)
      const ann = new NotesClient({ baseUrl, token: userToken(secret, 'ann'), ...QUICK })
      const bob = new NotesClient({ baseUrl, token: userToken(secret, 'bob'), ...QUICK })
      const carol = new NotesClient({ baseUrl, token: userToken(secret, 'carol'), ...QUICK })
      const team = await ann.createNotebook('Team')
      await ann.setMember(team.id, 'bob', 'viewer')
      const inTeam = ann.notebook(team.id)
      // Something in ann's default notebook too, which the notebook's history never shows.
      await ann.create({ title: 'mine' })
      const { note, etag } = await inTeam.create({ title: 'Route', body: 'north' })
      // The notebook's versions: its own epoch (whatever the store), then the sequence.
      const v = (sequence: number) => `${etag?.slice(1, etag.lastIndexOf('.'))}.${sequence}`
      clock.at = T + 1000
      await inTeam.update(note.id, { body: 'south' })
      const south = { title: 'Route', body: 'south', id: note.id }
      const north = { title: 'Route', body: 'north', id: note.id }
      const history = {
        revisions: [
          { version: v(2), at: iso(T + 1000), change: 'updated', note: south },
          { version: v(1), at: iso(T), change: 'created', note: north },
        ],
        next: undefined,
      }
      assert.deepEqual(await inTeam.revisions(note.id), history)
      // A viewer reads the same; the default notebook has no such note; an outsider gets the 404.
      assert.deepEqual(await bob.notebook(team.id).revisions(note.id), history)
      assert.equal(await ann.revisions(note.id), undefined)
      const outside = await problem(() => carol.notebook(team.id).revisions(note.id))
      assert.deepEqual(outside, [
        404,
        'No notebook has this id, or you are not one of its members.',
      ])

      clock.at = T + 2000
      const restored = await inTeam.restore(note.id, v(1))
      assert.deepEqual(restored, { note: north, etag: `"${v(3)}"`, replayed: false })
      assert.equal(inTeam.etagOf(note.id), `"${v(3)}"`)
      assert.equal(ann.etagOf(note.id), undefined, "the default notebook's memory is its own")
      const viewer = await problem(() => bob.notebook(team.id).restore(note.id, v(2)))
      assert.deepEqual(viewer, [
        403,
        'This needs the editor role in this notebook; you are a viewer.',
      ])

      clock.at = T + 3000
      await inTeam.delete(note.id)
      const trashed = {
        notes: [{ deleted_at: iso(T + 3000), note: north }],
        total: 1,
        next: undefined,
      }
      assert.deepEqual(await inTeam.trash(), trashed)
      assert.deepEqual(await bob.notebook(team.id).trash(), trashed)
      assert.deepEqual(await ann.trash(), { notes: [], total: 0, next: undefined })
      assert.equal((await problem(() => bob.notebook(team.id).purge(note.id)))[0], 403)
      assert.equal((await problem(() => bob.notebook(team.id).emptyTrash()))[0], 403)
      clock.at = T + 4000
      assert.deepEqual(await inTeam.restoreFromTrash(note.id), {
        note: north,
        etag: `"${v(5)}"`,
        replayed: false,
      })
      await inTeam.delete(note.id)
      assert.equal(await ann.purge(note.id), false, 'not in the default notebook')
      assert.equal(await inTeam.purge(note.id), true)
      await inTeam.delete((await inTeam.create({ title: 'later' })).note.id)
      assert.equal(await inTeam.emptyTrash(), 1)
      assert.deepEqual(await inTeam.trash(), { notes: [], total: 0, next: undefined })
    })
  })
}
