import assert from 'node:assert/strict'
import { it } from 'node:test'
import { describeEachNotebooks } from '../support/each-notebooks.js'
import { assertProblem, notebookApp, team } from '../support/notebook-requests.js'

const NO_NOTEBOOK = 'No notebook has this id, or you are not one of its members.'
const EDITOR_NEEDED = 'This needs the editor role in this notebook; you are a viewer.'

describeEachNotebooks('notebooks: history and trash by role', (context) => {
  it("serves a notebook's revisions and trash to its members, restores to editors, nothing to others", async () => {
    const { app } = notebookApp(context)
    const { ann, bob, cat, eve, base } = await team(app)
    const note = await bob.data('POST', `${base}/note`, { title: 'agenda' })
    const id = String(note.id)
    await bob.data('PATCH', `${base}/note/${id}`, { title: 'agenda, edited' })
    const revisions = (await cat.data('GET', `${base}/note/${id}/revisions`)) as unknown as {
      version: string
    }[]
    assert.equal(revisions.length, 2)
    const first = revisions[1]?.version ?? ''
    assert.deepEqual(
      ((await cat.data('GET', `${base}/note/${id}/revisions/${first}`)) as { note: unknown }).note,
      note,
    )
    assertProblem(
      await cat.request('POST', `${base}/note/${id}/restore`, { version: first }),
      403,
      EDITOR_NEEDED,
    )
    assert.deepEqual(await bob.data('POST', `${base}/note/${id}/restore`, { version: first }), note)

    await bob.request('DELETE', `${base}/note/${id}`)
    const trash = (await cat.data('GET', `${base}/trash`)) as unknown as { note: unknown }[]
    assert.deepEqual(
      trash.map((item) => item.note),
      [note],
    )
    for (const [method, url] of [
      ['POST', `${base}/trash/${id}/restore`],
      ['DELETE', `${base}/trash/${id}`],
      ['DELETE', `${base}/trash`],
    ] as const) {
      assertProblem(await cat.request(method, url), 403, EDITOR_NEEDED)
    }
    // Someone who is not a member learns nothing, whatever they ask for.
    for (const [method, url] of [
      ['GET', `${base}/note/${id}/revisions`],
      ['GET', `${base}/note/${id}/revisions/${first}`],
      ['GET', `${base}/trash`],
      ['POST', `${base}/trash/${id}/restore`],
      ['DELETE', `${base}/trash`],
    ] as const) {
      assertProblem(await eve.request(method, url), 404, NO_NOTEBOOK)
    }
    // Nor does their own notebook hold anything of this one.
    assert.deepEqual(await eve.data('GET', '/api/trash'), [])
    assert.equal((await eve.request('GET', `/api/note/${id}/revisions`)).statusCode, 404)
    assert.equal((await eve.request('POST', `/api/trash/${id}/restore`)).statusCode, 404)
    assert.deepEqual(await bob.data('POST', `${base}/trash/${id}/restore`), note)
    assert.deepEqual(await ann.data('GET', `${base}/note/${id}`), note)
  })
})
