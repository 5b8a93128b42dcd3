import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { openStores } from '../../src/open-stores.js'
import { isRefusal } from '../../src/store/directory.js'
import type { Notebooks } from '../../src/store/types.js'
import { describeEachNotebooks } from '../support/each-notebooks.js'
import { as, assertProblem, notebookApp, SERVICE_KEY, T } from '../support/notebook-requests.js'

const NO_NOTEBOOK = 'No notebook has this id, or you are not one of its members.'
const ID = /^[A-Za-z0-9_-]{22}$/

describeEachNotebooks('notebooks: make, list, rename, delete', (context) => {
  it('lists the default notebook first, makes, renames and deletes others', async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    const listed = await ann.request('GET', '/api/notebooks')
    assert.equal(listed.statusCode, 200)
    assert.equal(listed.headers['content-type'], 'application/json; charset=utf-8')
    const [mine] = (JSON.parse(listed.body) as { data: { id: string }[] }).data
    assert.match(mine?.id ?? '', ID)
    assert.deepEqual(JSON.parse(listed.body), {
      data: [{ id: mine?.id, name: 'My notes', role: 'owner', members: 1 }],
    })

    const made = await ann.request('POST', '/api/notebooks', { name: 'Trip' })
    assert.equal(made.statusCode, 201)
    const trip = (JSON.parse(made.body) as { data: { id: string } }).data
    assert.match(trip.id, ID)
    assert.equal(made.headers.location, `/api/notebooks/${trip.id}`)
    assert.deepEqual(trip, { id: trip.id, name: 'Trip', role: 'owner', members: 1 })
    assert.deepEqual(await ann.data('PATCH', `/api/notebooks/${trip.id}`, { name: 'Holiday' }), {
      ...trip,
      name: 'Holiday',
    })
    assert.deepEqual(await ann.data('GET', `/api/notebooks/${trip.id}`), {
      ...trip,
      name: 'Holiday',
    })
    assert.deepEqual(await ann.data('GET', '/api/notebooks/me'), {
      id: mine?.id,
      name: 'My notes',
      role: 'owner',
      members: 1,
    })
    const note = await ann.data('POST', `/api/notebooks/${trip.id}/note`, { title: 'pack' })
    assert.equal((await ann.request('DELETE', `/api/notebooks/${trip.id}`)).statusCode, 204)
    assertProblem(await ann.request('GET', `/api/notebooks/${trip.id}`), 404, NO_NOTEBOOK)
    assertProblem(
      await ann.request('GET', `/api/notebooks/${trip.id}/note/${String(note.id)}`),
      404,
      NO_NOTEBOOK,
    )
    assertProblem(
      await ann.request('DELETE', '/api/notebooks/me'),
      409,
      "A user's default notebook is theirs for good: it cannot be deleted, and they cannot leave it or lose its ownership.",
    )
  })

  it('refuses bad names, unknown fields, and past the cap of owned notebooks', async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    for (const body of [
      {},
      { name: '' },
      { name: '   ' },
      { name: 'x'.repeat(201) },
      { name: 7 },
    ]) {
      assertProblem(
        await ann.request('POST', '/api/notebooks', body),
        400,
        'name must be a string of 1 to 200 characters, not only spaces.',
      )
    }
    assertProblem(
      await ann.request('POST', '/api/notebooks', { name: 'a', colour: 'red' }),
      400,
      'Unknown field "colour"; the fields are name.',
    )
    assert.equal(
      (await ann.request('POST', '/api/notebooks', { name: '😀'.repeat(200) })).statusCode,
      201,
    )
    assert.equal((await ann.request('POST', '/api/notebooks', { name: 'Two' })).statusCode, 201)
    assertProblem(
      await ann.request('POST', '/api/notebooks', { name: 'Three' }),
      507,
      'You own the maximum of 3 notebooks (MAX_NOTEBOOKS_PER_USER), your default one included. Delete one to make room.',
    )
  })

  it('tells a service key that notebooks are for users', async () => {
    const { app } = notebookApp(context)
    const service = await as(app, '', SERVICE_KEY)
    assertProblem(
      await service.request('GET', '/api/notebooks'),
      403,
      'Notebooks belong to users: send a user token. A service key acts on the shared notebook at /api/note.',
    )
    // `me` is the shared notebook for a service key, as /api/note is.
    const note = await service.data('POST', '/api/notebooks/me/note', { shared: true })
    assert.deepEqual(await service.data('GET', `/api/note/${String(note.id)}`), note)
  })
})

describeEachNotebooks('notebooks: members and roles', (context) => {
  it('serves a notebook to its members by role, and nothing to anyone else', async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    const bob = await as(app, 'bob')
    const cat = await as(app, 'cat')
    const eve = await as(app, 'eve')
    const team = (await ann.data('POST', '/api/notebooks', { name: 'Team' })) as { id: string }
    const base = `/api/notebooks/${team.id}`
    assert.deepEqual(await ann.data('PUT', `${base}/members/bob`, { role: 'editor' }), {
      user: 'bob',
      role: 'editor',
    })
    await ann.data('PUT', `${base}/members/cat`, { role: 'viewer' })
    assert.deepEqual(await cat.data('GET', `${base}/members`), [
      { user: 'ann', role: 'owner' },
      { user: 'bob', role: 'editor' },
      { user: 'cat', role: 'viewer' },
    ])

    const note = await bob.data('POST', `${base}/note`, { title: 'agenda' })
    const noteUrl = `${base}/note/${String(note.id)}`
    assert.deepEqual(await cat.data('GET', noteUrl), note)
    assert.deepEqual(await ann.data('GET', `${base}/note`), [note])
    assertProblem(
      await cat.request('PATCH', noteUrl, { title: 'mine' }),
      403,
      'This needs the editor role in this notebook; you are a viewer.',
    )
    assertProblem(
      await cat.request('POST', `${base}/note`, {}),
      403,
      'This needs the editor role in this notebook; you are a viewer.',
    )
    assertProblem(
      await cat.request('DELETE', noteUrl),
      403,
      'This needs the editor role in this notebook; you are a viewer.',
    )
    assertProblem(
      await cat.request('PUT', `${base}/members/eve`, { role: 'viewer' }),
      403,
      'Only an owner of this notebook may do this.',
    )
    // The note is not in anyone's default notebook.
    assert.equal((await bob.request('GET', `/api/note/${String(note.id)}`)).statusCode, 404)

    // A stranger, on the notebook and on one that does not exist: the same answer, byte for byte.
    const made = 'A'.repeat(22)
    for (const [method, tail, body] of [
      ['GET', '/note', undefined],
      ['GET', `/note/${String(note.id)}`, undefined],
      ['POST', '/note', { x: 1 }],
      ['PATCH', `/note/${String(note.id)}`, { x: 1 }],
      ['DELETE', `/note/${String(note.id)}`, undefined],
      ['POST', '/batch', { operations: [] }],
      ['GET', '/members', undefined],
      ['GET', '/invites', undefined],
      ['GET', '', undefined],
      ['PATCH', '', { name: 'mine' }],
      ['DELETE', '', undefined],
    ] as const) {
      const real = await eve.request(method, `${base}${tail}`, body)
      const none = await eve.request(method, `/api/notebooks/${made}${tail}`, body)
      assertProblem(real, 404, NO_NOTEBOOK)
      assert.equal(real.body, none.body, `${method} ${tail}`)
      const headersOf = (response: LightMyRequestResponse) => {
        const { date: _date, 'x-request-id': _id, ...rest } = response.headers
        return rest
      }
      assert.deepEqual(headersOf(real), headersOf(none), `${method} ${tail}`)
    }
  })

  it('answers the next request for the new role after a demotion or removal', async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    const bob = await as(app, 'bob')
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Shifting' })) as {
      id: string
    }
    const base = `/api/notebooks/${id}`
    await ann.data('PUT', `${base}/members/bob`, { role: 'editor' })
    const note = await bob.data('POST', `${base}/note`, { v: 1 })
    await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    assertProblem(
      await bob.request('PATCH', `${base}/note/${String(note.id)}`, { v: 2 }),
      403,
      'This needs the editor role in this notebook; you are a viewer.',
    )
    assert.equal((await bob.request('GET', `${base}/note/${String(note.id)}`)).statusCode, 200)
    assert.equal((await ann.request('DELETE', `${base}/members/bob`)).statusCode, 204)
    assertProblem(await bob.request('GET', `${base}/note/${String(note.id)}`), 404, NO_NOTEBOOK)
    assert.deepEqual(
      ((await bob.data('GET', '/api/notebooks')) as unknown as { name: string }[]).map(
        (nb) => nb.name,
      ),
      ['My notes'],
    )
  })

  it('keeps the last owner, and lets members leave', async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    const bob = await as(app, 'bob')
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Owned' })) as { id: string }
    const base = `/api/notebooks/${id}`
    const lastOwner = 'A notebook keeps at least one owner: make another member an owner first.'
    assertProblem(
      await ann.request('PUT', `${base}/members/ann`, { role: 'editor' }),
      409,
      lastOwner,
    )
    assertProblem(await ann.request('DELETE', `${base}/members/ann`), 409, lastOwner)
    await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    assert.equal((await bob.request('DELETE', `${base}/members/bob`)).statusCode, 204)
    assertProblem(await bob.request('GET', `${base}/members`), 404, NO_NOTEBOOK)
    assertProblem(
      await ann.request('PUT', `${base}/members/bob`, { role: 'boss' }),
      400,
      'role must be one of "owner", "editor", "viewer".',
    )
    await ann.data('PUT', `${base}/members/bob`, { role: 'viewer' })
    await ann.data('PUT', `${base}/members/cat`, { role: 'viewer' })
    assertProblem(
      await ann.request('PUT', `${base}/members/dan`, { role: 'viewer' }),
      507,
      'This notebook has its maximum of 3 members (MAX_MEMBERS). Remove a member to make room.',
    )
  })
})

describeEachNotebooks('notebooks: invitations', (context) => {
  it('makes links that join once, hides their tokens, and withdraws them', async () => {
    const { app, advance } = notebookApp(context)
    const ann = await as(app, 'ann')
    const bob = await as(app, 'bob')
    const cat = await as(app, 'cat')
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Club' })) as { id: string }
    const base = `/api/notebooks/${id}`
    const response = await ann.request('POST', `${base}/invites`, { role: 'editor' })
    assert.equal(response.statusCode, 201)
    const invite = (JSON.parse(response.body) as { data: Record<string, string> }).data
    assert.match(invite.token ?? '', /^[A-Za-z0-9_-]{32}$/)
    assert.deepEqual(invite, {
      id: invite.id,
      role: 'editor',
      expires: new Date((T + 7 * 86_400) * 1000).toISOString(),
      uses: 1,
      token: invite.token,
    })
    assert.deepEqual(await ann.data('GET', `${base}/invites`), [
      { id: invite.id, role: 'editor', expires: invite.expires, uses: 1 },
    ])
    assert.deepEqual(await bob.data('POST', `/api/invites/${invite.token}`), {
      id,
      name: 'Club',
      role: 'editor',
      members: 2,
    })
    const spent = 'This invitation is unknown, expired, used up or withdrawn; ask for a new link.'
    assertProblem(await cat.request('POST', `/api/invites/${invite.token}`), 404, spent)

    const later = (await ann.data('POST', `${base}/invites`, {
      role: 'viewer',
      expires_in: 60,
      uses: 5,
    })) as { id: string; token: string }
    assert.equal((await ann.request('DELETE', `${base}/invites/${later.id}`)).statusCode, 204)
    assertProblem(await cat.request('POST', `/api/invites/${later.token}`), 404, spent)
    const short = (await ann.data('POST', `${base}/invites`, {
      role: 'viewer',
      expires_in: 60,
    })) as {
      token: string
    }
    advance(60_000)
    assertProblem(await cat.request('POST', `/api/invites/${short.token}`), 404, spent)
    assertProblem(
      await ann.request('POST', `${base}/invites`, { role: 'viewer', expires_in: 31 * 86_400 }),
      400,
      'expires_in must be a whole number of seconds from 1 to 2592000 (30 days); it is 7 days when left out.',
    )
    assertProblem(
      await bob.request('POST', `${base}/invites`, { role: 'viewer' }),
      403,
      'Only an owner of this notebook may do this.',
    )
  })

  it('limits redemptions to 20 a minute per user', async () => {
    const { app, advance } = notebookApp(context)
    const eve = await as(app, 'eve')
    for (let i = 0; i < 20; i++) {
      assert.equal((await eve.request('POST', `/api/invites/guess${i}`)).statusCode, 404)
    }
    const limited = await eve.request('POST', '/api/invites/guess20')
    assertProblem(limited, 429, 'At most 20 invitations may be tried per minute; retry in 60 s.')
    assert.equal(limited.headers['retry-after'], '60')
    // Another user is not held back by eve.
    assert.equal((await (await as(app, 'bob')).request('POST', '/api/invites/x')).statusCode, 404)
    advance(60_000)
    assert.equal((await eve.request('POST', '/api/invites/guess21')).statusCode, 404)
  })
})

describeEachNotebooks('notebooks: pages', (context) => {
  it("links a notebook's next page to that notebook's path", async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Paged' })) as { id: string }
    for (const n of [1, 2, 3]) {
      await ann.data('POST', `/api/notebooks/${id}/note`, { n })
      await ann.data('POST', '/api/note', { n })
    }
    const first = await ann.request('GET', `/api/notebooks/${id}/note?limit=2`)
    assert.equal(first.statusCode, 200)
    const next = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link))?.[1] ?? ''
    assert.match(next, new RegExp(`^/api/notebooks/${id}/note\\?`))
    const second = await ann.data('GET', next)
    assert.deepEqual(
      (second as unknown as { n: number }[]).map((note) => note.n),
      [3],
    )
    // The same notebook at `me` and at /api/note: each link names the path it was listed at.
    const mine = await ann.request('GET', '/api/notebooks/me/note?limit=2')
    assert.match(String(mine.headers.link), /^<\/api\/notebooks\/me\/note\?/)
    const plain = await ann.request('GET', '/api/note?limit=2')
    assert.match(String(plain.headers.link), /^<\/api\/note\?/)
  })
})

describeEachNotebooks('notebooks: an invitation into a full notebook', (context) => {
  it('answers 507 naming the cap, and spends nothing', async () => {
    const { app } = notebookApp(context)
    const ann = await as(app, 'ann')
    const { id } = (await ann.data('POST', '/api/notebooks', { name: 'Full' })) as { id: string }
    await ann.data('PUT', `/api/notebooks/${id}/members/bob`, { role: 'viewer' })
    const invite = (await ann.data('POST', `/api/notebooks/${id}/invites`, {
      role: 'viewer',
      uses: 2,
    })) as { token: string; id: string }
    await ann.data('PUT', `/api/notebooks/${id}/members/cat`, { role: 'viewer' })
    assertProblem(
      await (await as(app, 'dan')).request('POST', `/api/invites/${invite.token}`),
      507,
      'This notebook has its maximum of 3 members (MAX_MEMBERS). Remove a member to make room.',
    )
    assert.deepEqual(
      (
        (await ann.data('GET', `/api/notebooks/${id}/invites`)) as unknown as { uses: number }[]
      ).map((listed) => listed.uses),
      [2],
    )
  })
})

describe('MAX_NOTEBOOKS_PER_USER and MAX_MEMBERS reach every store', () => {
  it('caps notebooks and members on memory and DATA_FILE as configured', async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'notes-caps-'))
    t.after(() => rmSync(root, { recursive: true, force: true }))
    for (const dataFile of ['', join(root, 'caps.journal')]) {
      const config = { ...DEFAULT_CONFIG, dataFile, maxNotebooksPerUser: 2, maxMembers: 2 }
      const opened = openStores(config, { perUser: true })
      t.after(() => opened.close())
      const { directory } = (opened.stores as { notebooks: Notebooks }).notebooks
      const made = await directory.create('ann', 'One')
      assert.ok(!isRefusal(made))
      assert.equal(isRefusal(await directory.create('ann', 'Two')), true, dataFile)
      assert.equal(isRefusal(await directory.setRole('ann', made.id, 'bob', 'viewer')), false)
      assert.deepEqual(await directory.setRole('ann', made.id, 'cat', 'viewer'), {
        refused: 'full',
        detail:
          'This notebook has its maximum of 2 members (MAX_MEMBERS). Remove a member to make room.',
      })
    }
  })
})
