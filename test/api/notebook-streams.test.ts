import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { it } from 'node:test'
import { describeEachNotebooks } from '../support/each-notebooks.js'
import { as, notebookApp, team } from '../support/notebook-requests.js'
import { SseClient } from '../support/sse-client.js'
import { withoutStarts } from '../support/unknown-starts.js'

/*
 * GET /api/notebooks/:nb/events: a notebook's own stream, for any of its members, ended for one
 * who loses read access, and never resumed into what was made while its member was away.
 */

describeEachNotebooks('notebooks: streams of members', (context) => {
  it("sends a removed member's stream `revoked` and ends it; others' streams stay", async (t) => {
    if (context.lane !== 'server') return t.skip('streams are read on a socket')
    const { app } = notebookApp(context)
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    const { port } = app.server.address() as AddressInfo
    const { ann, bob, cat, id, base } = await team(app, 'Live')
    const bobStream = await SseClient.open(port, `${base}/events`, bob.authorization)
    const catStream = await SseClient.open(port, `${base}/events`, cat.authorization)
    t.after(() => {
      bobStream.close()
      catStream.close()
    })
    const opened = (client: SseClient) => client.text.startsWith('retry:')
    await bobStream.until(opened)
    await catStream.until(opened)
    const note = await ann.data('POST', `${base}/note`, { n: 1 })
    assert.equal((await bobStream.events(1))[0]?.event, 'created')
    await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    assert.equal((await ann.request('DELETE', `${base}/members/bob`)).statusCode, 204)
    const started = Date.now()
    await bobStream.closed(1000)
    assert.ok(Date.now() - started < 1000)
    const events = await bobStream.events(2)
    assert.deepEqual(
      { event: events[1]?.event, data: events[1]?.data },
      { event: 'revoked', data: JSON.stringify({ notebook: id }) },
    )
    await ann.data('PATCH', `${base}/note/${String(note.id)}`, { n: 2 })
    assert.equal((await catStream.events(2))[1]?.event, 'updated')
    // Deleting the notebook revokes every member's stream, the viewer's too.
    assert.equal((await ann.request('DELETE', base)).statusCode, 204)
    await catStream.closed(1000)
    assert.equal((await catStream.events(3))[2]?.event, 'revoked')
  })
})

describeEachNotebooks('notebooks: a stream resumed after leaving and coming back', (context) => {
  it('sends nothing made while the member was away from the notebook: a reset, or what came after', async (t) => {
    if (context.lane !== 'server') return t.skip('streams are read on a socket')
    const { app } = notebookApp(context)
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    const { port } = app.server.address() as AddressInfo
    const { ann, bob, cat, base } = await team(app, 'Away')
    const follow = async (user: typeof bob, headers: Record<string, string> = {}) => {
      const stream = await SseClient.open(port, `${base}/events`, {
        ...user.authorization,
        ...headers,
      })
      t.after(() => stream.close())
      return stream
    }
    const bobs = await follow(bob)
    const cats = await follow(cat)
    await bobs.until((client) => client.messages.length >= 1)
    await cats.until((client) => client.messages.length >= 1)
    await ann.data('POST', `${base}/note`, { text: 'before' })
    await bobs.events(1)
    await cats.events(1)
    const bobWas = bobs.messages.at(-1)?.id as string
    const catWas = cats.messages.at(-1)?.id as string
    bobs.close()
    cats.close()

    assert.equal((await ann.request('DELETE', `${base}/members/bob`)).statusCode, 204)
    const secret = await ann.data('POST', `${base}/note`, { text: 'secret' })
    await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    const later = await ann.data('POST', `${base}/note`, { text: 'after' })

    const bobIs = await follow(bob, { 'last-event-id': bobWas })
    await bobIs.until((client) =>
      client.messages.some(
        (message) =>
          message.event === 'reset' ||
          (message.event === 'created' && message.data?.includes('"after"') === true),
      ),
    )
    assert.doesNotMatch(bobIs.text, /secret/)
    const [first] = await bobIs.events(1)
    if (first?.event === 'reset') {
      assert.deepEqual(JSON.parse(first.data ?? 'null'), { version: bobWas })
    } else {
      assert.deepEqual(
        { event: first?.event, data: JSON.parse(first?.data ?? 'null') },
        { event: 'created', data: later },
      )
    }
    // Cat was a member throughout: her stream resumes where it was.
    const catIs = await follow(cat, { 'last-event-id': catWas })
    const events = await catIs.events(2)
    assert.deepEqual(
      events.map((message) => [message.event, JSON.parse(message.data ?? 'null')]),
      [
        ['created', secret],
        ['created', later],
      ],
    )
  })
})

describeEachNotebooks(
  'notebooks: a stream resumed where a membership has no start known',
  (context) => {
    it('starts with a reset rather than replay what came after the token', async (t) => {
      if (context.lane !== 'server') return t.skip('streams are read on a socket')
      const { app } = notebookApp(context, {}, withoutStarts)
      await app.listen({ port: 0, host: '127.0.0.1' })
      t.after(() => app.close())
      const { port } = app.server.address() as AddressInfo
      const [ann, bob] = [await as(app, 'ann'), await as(app, 'bob')]
      const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Old' })) as { id: string }
      const base = `/api/notebooks/${id}`
      await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
      const stream = await SseClient.open(port, `${base}/events`, bob.authorization)
      t.after(() => stream.close())
      await stream.until((client) => client.messages.some((message) => message.id !== undefined))
      const was = stream.messages.find((message) => message.id !== undefined)?.id as string
      stream.close()
      await ann.data('POST', `${base}/note`, { text: 'made while away' })
      const resumed = await SseClient.open(port, `${base}/events`, {
        ...bob.authorization,
        'last-event-id': was,
      })
      t.after(() => resumed.close())
      const [reset] = await resumed.events(1)
      assert.deepEqual(
        { event: reset?.event, data: JSON.parse(reset?.data ?? 'null') },
        { event: 'reset', data: { version: was } },
      )
      // Then on from where the notebook is now.
      const later = await ann.data('POST', `${base}/note`, { text: 'after the reset' })
      assert.deepEqual(JSON.parse((await resumed.events(2))[1]?.data ?? 'null'), later)
    })
  },
)
