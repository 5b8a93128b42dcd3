import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { it } from 'node:test'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { describeEachNotebooks } from '../support/each-notebooks.js'
import { HeldAccess } from '../support/held-access.js'
import {
  as,
  assertProblem,
  notebookApp,
  SECRET,
  SERVICE_KEY,
  T,
  team,
} from '../support/notebook-requests.js'
import { SseClient } from '../support/sse-client.js'
import { withoutStarts } from '../support/unknown-starts.js'

/*
 * GET /api/events?notebooks=all: the changes of every notebook a user can read, over one
 * connection, with joined and left, resumed by one id, on every instance.
 */

const NO_NOTEBOOK = 'No notebook has this id, or you are not one of its members.'

/** The named events of a stream, as [event, data] pairs. */
const named = (client: SseClient) =>
  client.messages
    .filter((message) => message.event !== undefined)
    .map((message) => [message.event, JSON.parse(message.data ?? 'null')] as const)

describeEachNotebooks('notebooks: one stream for every notebook', (context) => {
  it('streams every notebook the user can read, with joined and left, and resumes by one id', async (t) => {
    if (context.lane !== 'server') return t.skip('streams are read on a socket')
    const { app } = notebookApp(context, { changeHistory: 3 })
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    const { port } = app.server.address() as AddressInfo
    const ann = await as(app, 'ann')
    const bob = await as(app, 'bob')
    const annDefault = ((await ann.data('GET', '/api/notebooks/me')) as { id: string }).id
    const team = (await bob.data('POST', '/api/notebooks', { name: 'Team' })) as { id: string }
    await bob.data('PUT', `/api/notebooks/${team.id}/members/ann`, { role: 'editor' })

    const stream = await SseClient.open(port, '/api/events?notebooks=all', ann.authorization)
    t.after(() => stream.close())
    assert.equal(stream.status, 200)
    await stream.until((client) => client.messages.length >= 1)
    const opening = stream.messages[0]
    assert.equal(opening?.id?.split('~').length, 2)
    const inTeam = await bob.data('POST', `/api/notebooks/${team.id}/note`, { where: 'team' })
    const mine = await ann.data('POST', '/api/note', { where: 'mine' })
    await stream.events(2)
    // Two notebooks' changes: each notebook's in order, the two in any order.
    const byNotebook = (events: ReturnType<typeof named>) =>
      [...events].sort(([, a], [, b]) => String(a.notebook).localeCompare(String(b.notebook)))
    assert.deepEqual(
      byNotebook(named(stream)),
      byNotebook([
        ['created', { notebook: team.id, note: inTeam }],
        ['created', { notebook: annDefault, note: mine }],
      ]),
    )

    // Joined by someone else's act, and by her own (an invitation).
    const club = (await bob.data('POST', '/api/notebooks', { name: 'Club' })) as { id: string }
    await bob.data('PUT', `/api/notebooks/${club.id}/members/ann`, { role: 'viewer' })
    await stream.events(3)
    assert.deepEqual(named(stream)[2], [
      'joined',
      { notebook: { id: club.id, name: 'Club', role: 'viewer', members: 2 } },
    ])
    const inClub = await bob.data('POST', `/api/notebooks/${club.id}/note`, { where: 'club' })
    await stream.events(4)
    assert.deepEqual(named(stream)[3], ['created', { notebook: club.id, note: inClub }])
    // Left, listed as it was then (renamed, her role changed, a member more): nothing more of it.
    await bob.data('PATCH', `/api/notebooks/${club.id}`, { name: 'Book club' })
    await bob.data('PUT', `/api/notebooks/${club.id}/members/ann`, { role: 'editor' })
    await bob.data('PUT', `/api/notebooks/${club.id}/members/cat`, { role: 'viewer' })
    assert.equal(
      (await bob.request('DELETE', `/api/notebooks/${club.id}/members/ann`)).statusCode,
      204,
    )
    await stream.events(5)
    assert.deepEqual(named(stream)[4], [
      'left',
      { notebook: { id: club.id, name: 'Book club', role: 'editor', members: 3 } },
    ])
    await bob.data('POST', `/api/notebooks/${club.id}/note`, { where: 'club, unseen' })
    const last = stream.messages.at(-1)?.id as string
    assert.equal(last.split('~').length, 2)
    stream.close()

    // Away: changes in both notebooks, then back with the last id.
    const away = [
      await bob.data('POST', `/api/notebooks/${team.id}/note`, { away: 1 }),
      await ann.data('POST', '/api/note', { away: 2 }),
      await ann.data('PATCH', `/api/note/${String(mine.id)}`, { away: 3 }),
    ]
    const resumed = await SseClient.open(port, '/api/events?notebooks=all', {
      ...ann.authorization,
      'last-event-id': last,
    })
    t.after(() => resumed.close())
    await resumed.events(3)
    const events = named(resumed)
    const of = (notebook: string) => events.filter(([, data]) => data.notebook === notebook)
    assert.deepEqual(of(team.id), [['created', { notebook: team.id, note: away[0] }]])
    assert.deepEqual(of(annDefault), [
      ['created', { notebook: annDefault, note: away[1] }],
      ['updated', { notebook: annDefault, note: away[2] }],
    ])

    // Too far behind one notebook's history (3 changes kept): a reset of that notebook alone.
    const position = resumed.messages.at(-1)?.id as string
    resumed.close()
    for (let i = 0; i < 5; i++) await ann.data('POST', '/api/note', { flood: i })
    const teamNote = await bob.data('POST', `/api/notebooks/${team.id}/note`, { after: 'reset' })
    const again = await SseClient.open(port, '/api/events?notebooks=all', {
      ...ann.authorization,
      'last-event-id': position,
    })
    t.after(() => again.close())
    await again.events(2)
    assert.deepEqual(
      named(again).sort(([a], [b]) => String(a).localeCompare(String(b))),
      [
        ['created', { notebook: team.id, note: teamNote }],
        ['reset', { notebook: annDefault }],
      ],
    )
  })

  it('refuses a service key and an id it did not give', async () => {
    const { app } = notebookApp(context)
    const service = await as(app, '', SERVICE_KEY)
    assertProblem(
      await service.request('GET', '/api/events?notebooks=all'),
      400,
      'notebooks=all follows the notebooks of a user: send a user token. A service key follows the shared notebook at /api/events.',
    )
    const ann = await as(app, 'ann')
    assertProblem(
      await ann.request('GET', '/api/events?notebooks=some'),
      400,
      'notebooks takes one value: all (every notebook you can read).',
    )
    const response = await app.inject({
      method: 'GET',
      url: '/api/events?notebooks=all',
      headers: { ...ann.authorization, 'last-event-id': 'not an id' },
    })
    assertProblem(response, 400, 'Last-Event-ID must be an event id this stream sent.')
  })
})

describeEachNotebooks('notebooks: a change of access on every instance', (context) => {
  it('answers the next request on another instance for the new role, and revokes its streams there', async (t) => {
    const another = context.another
    if (another === undefined || context.lane !== 'server') {
      return t.skip('one process holds memory and the journal; streams are read on a socket')
    }
    const first = notebookApp(context)
    const options = { maxNotes: 1000, maxBytes: 1 << 20 }
    const second = context.inLane(
      buildApp({
        notebooks: another(first.notebooks, options),
        userTokens: new UserTokens({ secret: SECRET, now: () => T * 1000 }),
        now: () => T * 1000,
        config: { ...DEFAULT_CONFIG, apiKeys: [SERVICE_KEY] },
      }),
    )
    await second.listen({ port: 0, host: '127.0.0.1' })
    const { port } = second.server.address() as AddressInfo
    const ann = await as(first.app, 'ann')
    const bobThere = await as(second, 'bob')
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Everywhere' })) as {
      id: string
    }
    const base = `/api/notebooks/${id}`
    await ann.data('PUT', `${base}/members/bob`, { role: 'editor' })
    const note = await bobThere.data('POST', `${base}/note`, { by: 'bob' })
    await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    assertProblem(
      await bobThere.request('PATCH', `${base}/note/${String(note.id)}`, { by: 'bob again' }),
      403,
      'This needs the editor role in this notebook; you are a viewer.',
    )
    const stream = await SseClient.open(port, `${base}/events`, bobThere.authorization)
    const all = await SseClient.open(port, '/api/events?notebooks=all', bobThere.authorization)
    t.after(() => {
      stream.close()
      all.close()
    })
    await stream.until((client) => client.text.startsWith('retry:'))
    await all.until((client) => client.messages.length >= 1)
    assert.equal((await ann.request('DELETE', `${base}/members/bob`)).statusCode, 204)
    const removed = Date.now()
    assertProblem(
      await bobThere.request('GET', `${base}/note/${String(note.id)}`),
      404,
      NO_NOTEBOOK,
    )
    await stream.closed(1000)
    assert.ok(Date.now() - removed < 1000, `revoked after ${Date.now() - removed} ms`)
    const [revoked] = await stream.events(1)
    assert.deepEqual(
      { event: revoked?.event, data: revoked?.data },
      { event: 'revoked', data: JSON.stringify({ notebook: id }) },
    )
    const [left] = await all.events(1, 1000)
    assert.deepEqual(
      { event: left?.event, data: JSON.parse(left?.data ?? 'null') },
      { event: 'left', data: { notebook: { id, name: 'Everywhere', role: 'viewer', members: 2 } } },
    )
  })
})

describeEachNotebooks('notebooks: nothing after a removal reaches the removed', (context) => {
  it('sends a removed member no change made after the removal was answered, on another instance', async (t) => {
    const another = context.another
    if (another === undefined || context.lane !== 'server') {
      return t.skip('one process holds memory and the journal; streams are read on a socket')
    }
    const first = notebookApp(context)
    const second = context.inLane(
      buildApp({
        notebooks: another(first.notebooks, { maxNotes: 1000, maxBytes: 1 << 20 }),
        userTokens: new UserTokens({ secret: SECRET, now: () => T * 1000 }),
        now: () => T * 1000,
        config: { ...DEFAULT_CONFIG, apiKeys: [SERVICE_KEY] },
      }),
    )
    await second.listen({ port: 0, host: '127.0.0.1' })
    const { port } = second.server.address() as AddressInfo
    const ann = await as(first.app, 'ann')
    const bob = await as(second, 'bob')
    const all = await SseClient.open(port, '/api/events?notebooks=all', bob.authorization)
    t.after(() => all.close())
    await all.until((client) => client.messages.length >= 1)
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Brief' })) as { id: string }
    const base = `/api/notebooks/${id}`
    // Each round: bob joins, is removed, and a note is made at once after the removal's answer.
    for (let round = 0; round < 40; round++) {
      await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
      // Joined and followed on the other instance before the removal.
      await all.until(
        (client) => client.messages.filter((m) => m.event === 'joined').length > round,
      )
      assert.equal((await ann.request('DELETE', `${base}/members/bob`)).statusCode, 204)
      await ann.data('POST', `${base}/note`, { round })
    }
    // A last join, heard after everything before it (a pair heard at once may send nothing).
    await ann.data('PUT', `${base}/members/bob`, { role: 'editor' })
    await all.until((client) =>
      client.messages.some(
        (message) => message.event === 'joined' && message.data?.includes('"role":"editor"'),
      ),
    )
    const leaked = all.messages.filter((message) => message.event === 'created')
    assert.deepEqual(leaked, [])
  })
})

describeEachNotebooks(
  'notebooks: one stream for every notebook, from the moment of each join',
  (context) => {
    /** Ann's stream of every notebook, open, on an app whose changes of access `held` holds back. */
    const open = async (t: { after: (fn: () => unknown) => void }) => {
      const held = new HeldAccess()
      const { app } = notebookApp(context, {}, (notebooks) => held.wrap(notebooks))
      await app.listen({ port: 0, host: '127.0.0.1' })
      t.after(() => app.close())
      const { port } = app.server.address() as AddressInfo
      const ann = await as(app, 'ann')
      const bob = await as(app, 'bob')
      const team = (await bob.data('POST', '/api/notebooks', { name: 'Team' })) as { id: string }
      const stream = await SseClient.open(port, '/api/events?notebooks=all', ann.authorization)
      t.after(() => stream.close())
      await stream.until((client) => client.messages.length >= 1)
      return { held, bob, team, stream, notes: `/api/notebooks/${team.id}/note` }
    }
    const joined = (id: string, role: string) => [
      'joined',
      { notebook: { id, name: 'Team', role, members: 2 } },
    ]

    it('sends a change made right after the join, though the join is heard after it', async (t) => {
      if (context.lane !== 'server') return t.skip('streams are read on a socket')
      const { held, bob, team, stream, notes } = await open(t)
      held.hold()
      await bob.data('PUT', `/api/notebooks/${team.id}/members/ann`, { role: 'viewer' })
      const note = await bob.data('POST', notes, { made: 'right after the join' })
      held.release()
      await stream.events(2, 5_000)
      assert.deepEqual(named(stream), [
        joined(team.id, 'viewer'),
        ['created', { notebook: team.id, note }],
      ])
    })

    it('sends nothing made while the user was not a member, when a join, a removal and a join again are heard late', async (t) => {
      if (context.lane !== 'server') return t.skip('streams are read on a socket')
      const { held, bob, team, stream, notes } = await open(t)
      const members = `/api/notebooks/${team.id}/members/ann`
      held.hold()
      await bob.data('PUT', members, { role: 'viewer' })
      await bob.data('POST', notes, { made: 'while a member' })
      assert.equal((await bob.request('DELETE', members)).statusCode, 204)
      await bob.data('POST', notes, { made: 'while not a member' })
      await bob.data('PUT', members, { role: 'editor' })
      const last = await bob.data('POST', notes, { made: 'once a member again' })
      held.release()
      await stream.events(2, 5_000)
      // The first membership was over when it was heard: nothing of it (a pair heard together).
      assert.deepEqual(named(stream), [
        joined(team.id, 'editor'),
        ['created', { notebook: team.id, note: last }],
      ])
    })

    it('sends the history read after a join only once every change of access before it is heard', async (t) => {
      if (context.lane !== 'server') return t.skip('streams are read on a socket')
      const { held, bob, team, stream, notes } = await open(t)
      const members = `/api/notebooks/${team.id}/members/ann`
      held.hold()
      await bob.data('PUT', members, { role: 'viewer' })
      await bob.data('POST', notes, { made: 'while a member' })
      assert.equal((await bob.request('DELETE', members)).statusCode, 204)
      await bob.data('POST', notes, { made: 'while not a member' })
      await bob.data('PUT', members, { role: 'editor' })
      const last = await bob.data('POST', notes, { made: 'once a member again' })
      // The first join alone is heard: the history after it holds all three notes. The rest is
      // heard once the stream asks to be caught up before it sends that history (or after 1 s).
      const asked = held.asked()
      held.release(1)
      await stream.events(1, 5_000)
      await Promise.race([asked, new Promise((resolve) => setTimeout(resolve, 1_000))])
      held.release()
      await stream.events(4, 5_000)
      const events = named(stream)
      assert.deepEqual(
        events.map(([event]) => event),
        ['joined', 'left', 'joined', 'created'],
        JSON.stringify(events),
      )
      assert.deepEqual(events[3], ['created', { notebook: team.id, note: last }])
    })
  },
)

describeEachNotebooks('notebooks: a resume after leaving a notebook and coming back', (context) => {
  /**
   * Bob follows every notebook, stops, and while he is away loses Team (`go`) and gets it back
   * (`back`), with a note made in between and one after; cat stays a member throughout.
   */
  const away = async (
    t: { after: (fn: () => unknown) => void },
    go: 'removed' | 'left',
    back: 'added' | 'invited',
  ) => {
    const { app } = notebookApp(context)
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    const { port } = app.server.address() as AddressInfo
    const { ann, bob, cat, id: teamId, base } = await team(app)
    const bobDefault = ((await bob.data('GET', '/api/notebooks/me')) as { id: string }).id
    const position = async (user: typeof bob) => {
      const stream = await SseClient.open(port, '/api/events?notebooks=all', user.authorization)
      t.after(() => stream.close())
      await stream.until((client) => client.messages.length >= 1)
      return stream
    }
    const bobs = await position(bob)
    const cats = await position(cat)
    const before = await ann.data('POST', `${base}/note`, { text: 'before' })
    await bobs.events(1)
    await cats.events(1)
    const bobWas = bobs.messages.at(-1)?.id as string
    const catWas = cats.messages.at(-1)?.id as string
    assert.deepEqual(named(bobs), [['created', { notebook: teamId, note: before }]])
    bobs.close()
    cats.close()

    const gone = await (go === 'removed' ? ann : bob).request('DELETE', `${base}/members/bob`)
    assert.equal(gone.statusCode, 204)
    const secret = await ann.data('POST', `${base}/note`, { text: 'secret' })
    if (back === 'added') await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    else {
      const invite = await ann.data('POST', `${base}/invites`, { role: 'viewer' })
      await bob.data('POST', `/api/invites/${String(invite.token)}`)
    }
    const later = await ann.data('POST', `${base}/note`, { text: 'after' })

    const resume = async (user: typeof bob, id: string) => {
      const stream = await SseClient.open(port, '/api/events?notebooks=all', {
        ...user.authorization,
        'last-event-id': id,
      })
      t.after(() => stream.close())
      // Team's last note, or a reset of Team: what came before either is all there is of it.
      await stream.until((client) =>
        named(client).some(
          ([event, data]) =>
            data.notebook === teamId &&
            (event === 'reset' || (event === 'created' && data.note.text === 'after')),
        ),
      )
      return stream
    }
    const bobIs = await resume(bob, bobWas)
    assert.doesNotMatch(bobIs.text, /secret/)
    // Team's events: its changes and resets name it, a joined lists it.
    const teams = named(bobIs).filter(([, data]) => (data.notebook.id ?? data.notebook) === teamId)
    const joined = [
      'joined',
      { notebook: { id: teamId, name: 'Team', role: 'viewer', members: 3 } },
    ]
    const told = [joined, ['created', { notebook: teamId, note: later }]]
    assert.ok(
      JSON.stringify(teams) === JSON.stringify(told) ||
        JSON.stringify(teams) === JSON.stringify([['reset', { notebook: teamId }]]),
      JSON.stringify(named(bobIs)),
    )
    // His own notebook, which he never left, resumes as it was: no reset.
    assert.ok(!named(bobIs).some(([, data]) => data.notebook === bobDefault))
    // Cat was a member throughout: she gets everything she missed.
    const catIs = await resume(cat, catWas)
    assert.deepEqual(named(catIs), [
      ['created', { notebook: teamId, note: secret }],
      ['created', { notebook: teamId, note: later }],
    ])
  }

  it('sends nothing made while the user was removed, once added back', async (t) => {
    if (context.lane !== 'server') return t.skip('streams are read on a socket')
    await away(t, 'removed', 'added')
  })

  it('sends nothing made while the user had left, once back by an invitation', async (t) => {
    if (context.lane !== 'server') return t.skip('streams are read on a socket')
    await away(t, 'left', 'invited')
  })
})

describeEachNotebooks('notebooks: a resume where a membership has no start known', (context) => {
  it("resets that notebook rather than replay it, and resumes the user's own as it was", async (t) => {
    if (context.lane !== 'server') return t.skip('streams are read on a socket')
    const { app } = notebookApp(context, {}, withoutStarts)
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    const { port } = app.server.address() as AddressInfo
    const [ann, bob] = [await as(app, 'ann'), await as(app, 'bob')]
    const own = ((await bob.data('GET', '/api/notebooks/me')) as { id: string }).id
    const team = (await ann.data('POST', '/api/notebooks', { name: 'Team' })) as { id: string }
    await ann.data('PUT', `/api/notebooks/${team.id}/members/bob`, { role: 'viewer' })
    const stream = await SseClient.open(port, '/api/events?notebooks=all', bob.authorization)
    t.after(() => stream.close())
    await stream.until((client) => client.messages.length >= 1)
    const was = stream.messages[0]?.id as string
    stream.close()
    await ann.data('POST', `/api/notebooks/${team.id}/note`, { text: 'made while away' })
    const mine = await bob.data('POST', '/api/note', { text: 'mine' })
    const resumed = await SseClient.open(port, '/api/events?notebooks=all', {
      ...bob.authorization,
      'last-event-id': was,
    })
    t.after(() => resumed.close())
    await resumed.events(2)
    assert.deepEqual(
      named(resumed).sort(([a], [b]) => String(a).localeCompare(String(b))),
      [
        ['created', { notebook: own, note: mine }],
        ['reset', { notebook: team.id }],
      ],
    )
  })
})
