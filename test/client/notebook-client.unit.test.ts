import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import {
  type ChangeEvent,
  type NotebooksEvent,
  NotesClient,
  type NotesClientOptions,
  NotesNetworkError,
  NotesProblem,
} from '../../src/client/index.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { Relay } from '../support/client-relay.js'
import { signed } from '../support/jwks-server.js'

const SECRET = 'a-secret-of-32-bytes-or-more-000'
/** The service's clock in these tests, in seconds: 2027-01-15T08:00:00Z. */
const T = 1_800_000_000
const NO_NOTEBOOK = 'No notebook has this id, or you are not one of its members.'
const VIEWER_WRITES = 'This needs the editor role in this notebook; you are a viewer.'
const SPENT = 'This invitation is unknown, expired, used up or withdrawn; ask for a new link.'
const ID = /^[A-Za-z0-9_-]{22}$/
const QUICK: Pick<NotesClientOptions, 'retries'> = { retries: { limit: 3, maxDelayMs: 50 } }

/** A service with notebooks and user tokens on 127.0.0.1, closed when the test ends. */
async function serve(t: TestContext): Promise<string> {
  const clock = (): number => T * 1000
  const app = buildApp({
    notebooks: new MemoryNotebooks({ maxNotes: 1_000, maxBytes: 1 << 20 }),
    userTokens: new UserTokens({ secret: SECRET, now: clock }),
    now: clock,
    config: { ...DEFAULT_CONFIG, ui: false },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => closeNow(app))
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

/** Closes without the keep-alive grace (the clients' idle connections would hold the test). */
async function closeNow(app: FastifyInstance): Promise<void> {
  const closing = app.close()
  app.server.closeAllConnections()
  await closing
}

/** A client acting as `sub`. */
async function userClient(
  baseUrl: string,
  sub: string,
  options: Partial<NotesClientOptions> = {},
): Promise<NotesClient> {
  const token = await signed(Buffer.from(SECRET), { alg: 'HS256' }, { sub, iat: T, exp: T + 3600 })
  return new NotesClient({ baseUrl, token, ...QUICK, ...options })
}

/** Runs `call`, which must throw a NotesProblem; answers its status, title and detail. */
async function problem(call: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await call
  } catch (err) {
    assert.ok(err instanceof NotesProblem, String(err))
    return { name: err.name, status: err.status, title: err.title, detail: err.detail }
  }
  assert.fail('no problem was thrown')
}

/** The next event of a feed, which must not have ended. */
async function nextEvent(feed: AsyncIterator<ChangeEvent>): Promise<ChangeEvent> {
  const { done, value } = await feed.next()
  assert.equal(done, false, 'the feed ended')
  return value as ChangeEvent
}

describe('NotesClient and notebooks', () => {
  it('makes, lists, renames and deletes notebooks, and manages members', async (t) => {
    const baseUrl = await serve(t)
    const ann = await userClient(baseUrl, 'ann')
    const team = await ann.createNotebook('Team')
    assert.match(team.id, ID)
    assert.deepEqual(team, { id: team.id, name: 'Team', role: 'owner', members: 1 })
    const [mine] = await ann.notebooks()
    assert.deepEqual(await ann.notebooks(), [
      { id: mine?.id, name: 'My notes', role: 'owner', members: 1 },
      team,
    ])
    assert.deepEqual(await ann.renameNotebook(team.id, 'Crew'), { ...team, name: 'Crew' })
    assert.deepEqual(await ann.getNotebook(team.id), { ...team, name: 'Crew' })
    assert.deepEqual(await ann.setMember(team.id, 'bob', 'editor'), { user: 'bob', role: 'editor' })
    assert.deepEqual(await ann.setMember(team.id, 'cat', 'viewer'), { user: 'cat', role: 'viewer' })
    assert.deepEqual(await ann.members(team.id), [
      { user: 'ann', role: 'owner' },
      { user: 'bob', role: 'editor' },
      { user: 'cat', role: 'viewer' },
    ])
    assert.equal(await ann.removeMember(team.id, 'cat'), undefined)
    // bob leaves: his own sub.
    const bob = await userClient(baseUrl, 'bob')
    assert.equal(await bob.removeMember(team.id, 'bob'), undefined)
    assert.deepEqual(await ann.members(team.id), [{ user: 'ann', role: 'owner' }])
    assert.deepEqual(await problem(ann.removeMember(team.id, 'ann')), {
      name: 'NotesProblem',
      status: 409,
      title: 'Conflict',
      detail: 'A notebook keeps at least one owner: make another member an owner first.',
    })
    assert.deepEqual(await problem(ann.createNotebook('')), {
      name: 'NotesProblem',
      status: 400,
      title: 'Bad Request',
      detail: 'name must be a string of 1 to 200 characters, not only spaces.',
    })
    assert.equal(await ann.deleteNotebook(team.id), undefined)
    assert.deepEqual(await problem(ann.getNotebook(team.id)), {
      name: 'NotesProblem',
      status: 404,
      title: 'Not Found',
      detail: NO_NOTEBOOK,
    })
    assert.deepEqual(await ann.notebooks(), [mine])
  })

  it("acts on a notebook's notes through notebook(id), by role, with ETags per notebook", async (t) => {
    const baseUrl = await serve(t)
    const ann = await userClient(baseUrl, 'ann')
    const { id } = await ann.createNotebook('Team')
    await ann.setMember(id, 'bob', 'editor')
    await ann.setMember(id, 'cat', 'viewer')
    const bobDefault = await userClient(baseUrl, 'bob')
    const bob = bobDefault.notebook(id)
    assert.equal(bob.notebookId, id)
    assert.equal(bobDefault.notebookId, undefined)

    const created = await bob.create({ title: 'agenda' })
    const noteId = created.note.id
    assert.deepEqual(created.note, { title: 'agenda', id: noteId })
    assert.match(created.etag ?? '', /^"[^"]+"$/)
    assert.equal(bob.etagOf(noteId), created.etag)
    // The ETag memory is the notebook client's: neither the default client nor another
    // client of the same notebook sends it.
    assert.equal(bobDefault.etagOf(noteId), undefined)
    assert.equal(bobDefault.notebook(id).etagOf(noteId), undefined)
    // The note is in the notebook, not in bob's default one.
    assert.equal(await bobDefault.get(noteId), undefined)
    assert.deepEqual((await bobDefault.list()).notes, [])

    const annInTeam = ann.notebook(id)
    assert.deepEqual(await annInTeam.get(noteId), {
      note: created.note,
      etag: created.etag,
      replayed: false,
    })
    const updated = await bob.update(noteId, { title: 'agenda v2' })
    assert.deepEqual(updated.note, { title: 'agenda v2', id: noteId })
    // ann last saw the first version: her update is conditional on it, and refused.
    assert.deepEqual(await problem(annInTeam.update(noteId, { title: 'mine' })), {
      name: 'ConflictError',
      status: 412,
      title: 'Precondition Failed',
      detail: `The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now ${updated.etag}. GET it, and send that ETag in If-Match to write over it.`,
    })

    const second = (await bob.create({ title: 'minutes' })).note
    const third = (await bob.create({ title: 'actions' })).note
    const list = await annInTeam.list()
    assert.deepEqual(list.notes, [updated.note, second, third])
    assert.equal(list.total, 3)
    const walked: number[][] = []
    for await (const page of annInTeam.pages({ limit: 2 })) {
      walked.push(page.notes.map((note) => note.id))
    }
    assert.deepEqual(walked, [[noteId, second.id], [third.id]])

    const batch = await bob.batch([
      { method: 'PATCH', url: `/api/note/${second.id}`, body: { title: 'minutes v2' } },
      { method: 'DELETE', url: `/api/note/${third.id}` },
    ])
    assert.deepEqual(
      batch.answers.map((answer) => [answer.status, answer.body]),
      [
        [200, { data: { title: 'minutes v2', id: second.id } }],
        [200, { data: String(third.id) }],
      ],
    )
    assert.equal(await bob.delete(noteId), String(noteId))
    assert.deepEqual((await annInTeam.list()).notes, [{ title: 'minutes v2', id: second.id }])

    const cat = (await userClient(baseUrl, 'cat')).notebook(id)
    assert.deepEqual((await cat.list()).notes, [{ title: 'minutes v2', id: second.id }])
    for (const write of [
      () => cat.create({ title: 'mine' }),
      () => cat.update(second.id, { title: 'mine' }),
      () => cat.delete(second.id),
    ]) {
      assert.deepEqual(await problem(write()), {
        name: 'NotesProblem',
        status: 403,
        title: 'Forbidden',
        detail: VIEWER_WRITES,
      })
    }
    assert.deepEqual(await problem(cat.setMember(id, 'eve', 'owner')), {
      name: 'NotesProblem',
      status: 403,
      title: 'Forbidden',
      detail: 'Only an owner of this notebook may do this.',
    })

    const eveDefault = await userClient(baseUrl, 'eve')
    const eve = eveDefault.notebook(id)
    const notFound = { name: 'NotesProblem', status: 404, title: 'Not Found', detail: NO_NOTEBOOK }
    assert.deepEqual(await problem(eve.get(second.id)), notFound)
    assert.deepEqual(await problem(eve.list()), notFound)
    assert.deepEqual(await problem(eve.create({ x: 1 })), notFound)
    assert.deepEqual(await problem(eveDefault.members(id)), notFound)
    assert.deepEqual(await problem(eve.events().next()), notFound)
    // A notebook that does not exist answers the same.
    assert.deepEqual(await problem(eveDefault.notebook('A'.repeat(22)).list()), notFound)
  })

  it('makes an invitation, lists it without its token, redeems and withdraws', async (t) => {
    const baseUrl = await serve(t)
    const ann = await userClient(baseUrl, 'ann')
    const { id } = await ann.createNotebook('Club')
    const invite = await ann.createInvite(id, { role: 'editor', expiresIn: 3600, uses: 2 })
    assert.match(invite.id, /^\S+$/)
    assert.match(invite.token, /^[A-Za-z0-9_-]{32}$/)
    assert.deepEqual(invite, {
      id: invite.id,
      role: 'editor',
      expires: new Date((T + 3600) * 1000).toISOString(),
      uses: 2,
      token: invite.token,
    })
    const byDefault = await ann.createInvite(id, { role: 'viewer' })
    assert.deepEqual(await ann.invites(id), [
      { id: invite.id, role: 'editor', expires: '2027-01-15T09:00:00.000Z', uses: 2 },
      { id: byDefault.id, role: 'viewer', expires: '2027-01-22T08:00:00.000Z', uses: 1 },
    ])

    const bob = await userClient(baseUrl, 'bob')
    assert.deepEqual(await bob.redeemInvite(invite.token), {
      id,
      name: 'Club',
      role: 'editor',
      members: 2,
    })
    assert.deepEqual((await bob.notebook(id).create({ title: 'joined' })).note.title, 'joined')
    assert.deepEqual(await ann.invites(id), [
      { id: invite.id, role: 'editor', expires: '2027-01-15T09:00:00.000Z', uses: 1 },
      { id: byDefault.id, role: 'viewer', expires: '2027-01-22T08:00:00.000Z', uses: 1 },
    ])

    assert.equal(await ann.withdrawInvite(id, invite.id), undefined)
    const cat = await userClient(baseUrl, 'cat')
    assert.deepEqual(await problem(cat.redeemInvite(invite.token)), {
      name: 'NotesProblem',
      status: 404,
      title: 'Not Found',
      detail: SPENT,
    })
    assert.deepEqual(await ann.invites(id), [
      { id: byDefault.id, role: 'viewer', expires: '2027-01-22T08:00:00.000Z', uses: 1 },
    ])
    assert.deepEqual(await problem(bob.createInvite(id, { role: 'viewer' })), {
      name: 'NotesProblem',
      status: 403,
      title: 'Forbidden',
      detail: 'Only an owner of this notebook may do this.',
    })
  })

  it("ends a removed member's feed with `revoked`; a viewer's feed goes on", async (t) => {
    const baseUrl = await serve(t)
    const ann = await userClient(baseUrl, 'ann')
    const { id } = await ann.createNotebook('Live')
    await ann.setMember(id, 'bob', 'editor')
    await ann.setMember(id, 'cat', 'viewer')
    const annInLive = ann.notebook(id)
    const bob = (await userClient(baseUrl, 'bob')).notebook(id)
    const cat = (await userClient(baseUrl, 'cat')).notebook(id)
    const { version } = await bob.list()
    const bobFeed = bob.events({ since: version })
    const catFeed = cat.events({ since: version })
    t.after(async () => {
      await bobFeed.return()
      await catFeed.return()
    })

    const { note } = await annInLive.create({ n: 1 })
    const created = { type: 'created', version: (await annInLive.list()).version, note }
    assert.deepEqual(await nextEvent(bobFeed), created)
    assert.deepEqual(await nextEvent(catFeed), created)
    await ann.removeMember(id, 'bob')
    // Its version is where the feed stood: the last change it delivered.
    assert.deepEqual(await nextEvent(bobFeed), {
      type: 'revoked',
      version: created.version,
      notebook: id,
    })
    assert.deepEqual(await bobFeed.next(), { done: true, value: undefined })
    assert.deepEqual(await problem(bob.list()), {
      name: 'NotesProblem',
      status: 404,
      title: 'Not Found',
      detail: NO_NOTEBOOK,
    })

    const updated = await annInLive.update(note.id, { n: 2 })
    const { version: last } = await annInLive.list()
    assert.deepEqual(await nextEvent(catFeed), {
      type: 'updated',
      version: last,
      note: updated.note,
    })
    // Deleting the notebook revokes every member's feed, the viewer's too.
    await ann.deleteNotebook(id)
    assert.deepEqual(await nextEvent(catFeed), { type: 'revoked', version: last, notebook: id })
    assert.deepEqual(await catFeed.next(), { done: true, value: undefined })
  })

  it('follows every notebook over one stream with allChanges(), resuming across a drop', async (t) => {
    const baseUrl = await serve(t)
    const relay = await Relay.start(Number(new URL(baseUrl).port))
    t.after(() => relay.close())
    const ann = await userClient(relay.url, 'ann')
    const bob = await userClient(baseUrl, 'bob')
    const [mine] = await ann.notebooks()
    const feed = ann.allChanges({ signal: AbortSignal.timeout(10_000) })
    const next = async (): Promise<NotebooksEvent> => {
      const { done, value } = await feed.next()
      assert.equal(done, false, 'the feed ended')
      return value as NotebooksEvent
    }
    const opened = await next()
    assert.deepEqual(opened, { type: 'opened', position: opened.position })
    assert.equal(feed.lastEventId, opened.position)

    const team = await bob.createNotebook('Team')
    await bob.setMember(team.id, 'ann', 'editor')
    const joined = await next()
    assert.deepEqual(joined, {
      type: 'joined',
      position: joined.position,
      notebook: { id: team.id, name: 'Team', role: 'editor', members: 2 },
    })
    const { note } = await bob.notebook(team.id).create({ title: 'agenda' })
    const created = await next()
    assert.deepEqual(created, {
      type: 'created',
      position: created.position,
      notebook: team.id,
      note,
    })
    const own = (await ann.create({ title: 'mine' })).note
    const inMine = await next()
    assert.deepEqual(inMine, {
      type: 'created',
      position: inMine.position,
      notebook: mine?.id,
      note: own,
    })

    // A drop: the feed connects again with the last position, and misses nothing.
    relay.cutAll()
    await bob.notebook(team.id).update(note.id, { title: 'agenda 2' }, { ifMatch: false })
    await bob.notebook(team.id).delete(note.id, { ifMatch: false })
    const reopened = await next()
    assert.deepEqual(reopened, { type: 'opened', position: reopened.position })
    const updated = await next()
    assert.deepEqual(updated, {
      type: 'updated',
      position: updated.position,
      notebook: team.id,
      note: { title: 'agenda 2', id: note.id },
    })
    const deleted = await next()
    assert.deepEqual(deleted, {
      type: 'deleted',
      position: deleted.position,
      notebook: team.id,
      id: note.id,
    })
    await bob.removeMember(team.id, 'ann')
    const left = await next()
    assert.deepEqual(left, { type: 'left', position: left.position, notebook: team.id })
    await feed.return()
  })

  it('sends a lost notebook or invitation POST once, and repeats PATCH, PUT and DELETE', async (t) => {
    const baseUrl = await serve(t)
    const sent: string[] = []
    let loseNext = false
    /** Sends every request; when told, loses the answer of the next one, as a cut socket would. */
    const losing: typeof fetch = async (input, init) => {
      sent.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`)
      const response = await fetch(input, init)
      if (!loseNext) return response
      loseNext = false
      await response.body?.cancel()
      throw new TypeError('fetch failed')
    }
    const ann = await userClient(baseUrl, 'ann', { fetch: losing })
    const bob = await userClient(baseUrl, 'bob', { fetch: losing })
    const lost = async <T>(call: () => Promise<T>): Promise<T> => {
      loseNext = true
      return call()
    }

    await assert.rejects(
      lost(() => ann.createNotebook('Once')),
      (err: unknown) => err instanceof NotesNetworkError,
    )
    const [, once] = await ann.notebooks()
    assert.deepEqual(once, { id: once?.id, name: 'Once', role: 'owner', members: 1 })
    const id = once?.id as string
    assert.deepEqual(await lost(() => ann.renameNotebook(id, 'Twice')), { ...once, name: 'Twice' })
    assert.deepEqual(await lost(() => ann.setMember(id, 'bob', 'viewer')), {
      user: 'bob',
      role: 'viewer',
    })
    await assert.rejects(
      lost(() => ann.createInvite(id, { role: 'editor' })),
      (err: unknown) => err instanceof NotesNetworkError,
    )
    const [invite] = await ann.invites(id)
    assert.equal(await lost(() => ann.withdrawInvite(id, invite?.id as string)), undefined)
    const { token } = await ann.createInvite(id, { role: 'editor' })
    await assert.rejects(
      lost(() => bob.redeemInvite(token)),
      (err: unknown) => err instanceof NotesNetworkError,
    )
    // The first try was applied: bob joined, and the invitation was used up.
    assert.deepEqual(await ann.members(id), [
      { user: 'ann', role: 'owner' },
      { user: 'bob', role: 'editor' },
    ])
    assert.equal(await lost(() => ann.removeMember(id, 'bob')), undefined)
    assert.equal(await lost(() => ann.deleteNotebook(id)), undefined)
    const path = `/api/notebooks/${id}`
    assert.deepEqual(sent, [
      'POST /api/notebooks',
      'GET /api/notebooks',
      `PATCH ${path}`,
      `PATCH ${path}`,
      `PUT ${path}/members/bob`,
      `PUT ${path}/members/bob`,
      `POST ${path}/invites`,
      `GET ${path}/invites`,
      `DELETE ${path}/invites/${invite?.id}`,
      `DELETE ${path}/invites/${invite?.id}`,
      `POST ${path}/invites`,
      `POST /api/invites/${token}`,
      `GET ${path}/members`,
      `DELETE ${path}/members/bob`,
      `DELETE ${path}/members/bob`,
      `DELETE ${path}`,
      `DELETE ${path}`,
    ])
    assert.equal((await ann.notebooks()).length, 1)
  })
})
