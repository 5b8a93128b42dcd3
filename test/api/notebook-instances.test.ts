import assert from 'node:assert/strict'
import { it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { NO_NOTEBOOK } from '../../src/api/notebook-access.js'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import type { Notebooks } from '../../src/store/types.js'
import { describeEachNotebooks, type NotebooksSuite } from '../support/each-notebooks.js'
import { signed } from '../support/jwks-server.js'

const SECRET = 'a-secret-of-32-bytes-or-more-000'
/** The clock of these tests, in seconds: 2027-01-15T08:00:00Z. */
const T = 1_800_000_000
const OPTIONS = { maxNotes: 1000, maxBytes: 1 << 20 }
const VIEWER_WRITE = 'This needs the editor role in this notebook; you are a viewer.'

function appOn(context: NotebooksSuite, notebooks: Notebooks): FastifyInstance {
  return context.inLane(
    buildApp({
      notebooks,
      userTokens: new UserTokens({ secret: SECRET, now: () => T * 1000 }),
      now: () => T * 1000,
      config: DEFAULT_CONFIG,
    }),
  )
}

/** What `sub` sends to `app`: the status and body of each answer. */
async function as(app: FastifyInstance, sub: string) {
  const token = await signed(Buffer.from(SECRET), { alg: 'HS256' }, { sub, iat: T, exp: T + 3600 })
  return async (
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
  ) => {
    const response = await app.inject({
      method,
      url,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    })
    return { status: response.statusCode, body: response.body }
  }
}

const detailOf = (body: string) => (JSON.parse(body) as { detail?: string }).detail

/** Two instances on one database, ann's notebook with one note, bob's requests on the second. */
async function twoInstances(context: NotebooksSuite) {
  const another = context.another as NonNullable<NotebooksSuite['another']>
  const notebooks = context.make(OPTIONS)
  const first = appOn(context, notebooks)
  const second = appOn(context, another(notebooks, OPTIONS))
  const ann = await as(first, 'ann')
  const bob = await as(second, 'bob')
  const made = await ann('POST', '/api/notebooks', { name: 'Shared' })
  const { id } = (JSON.parse(made.body) as { data: { id: string } }).data
  const base = `/api/notebooks/${id}`
  const note = await ann('POST', `${base}/note`, { by: 'ann' })
  const noteUrl = `${base}/note/${(JSON.parse(note.body) as { data: { id: number } }).data.id}`
  return { ann, bob, base, noteUrl }
}

describeEachNotebooks(
  'notebooks: a change of access made on one instance, the next request on another',
  (context) => {
    it('answers for the new role at once, round after round, though it answered for the old one a moment before', async (t) => {
      if (context.another === undefined) return t.skip('one process holds memory and the journal')
      const { ann, bob, base, noteUrl } = await twoInstances(context)
      const wrong: string[] = []
      const expect = (
        round: number,
        what: string,
        got: { status: number; body: string },
        status: number,
        detail?: string,
      ) => {
        if (got.status !== status || (detail !== undefined && detailOf(got.body) !== detail)) {
          wrong.push(`round ${round}, ${what}: ${got.status} ${got.body}`)
        }
      }
      for (let round = 0; round < 40; round++) {
        assert.equal((await ann('PUT', `${base}/members/bob`, { role: 'editor' })).status, 200)
        // Read twice as an editor (the second from what the instance kept), and written.
        expect(round, 'read as an editor', await bob('GET', noteUrl), 200)
        expect(round, 'read again', await bob('GET', noteUrl), 200)
        expect(round, 'write as an editor', await bob('PATCH', noteUrl, { round }), 200)
        assert.equal((await ann('PUT', `${base}/members/bob`, { role: 'viewer' })).status, 200)
        expect(
          round,
          'write after the demotion',
          await bob('PATCH', noteUrl, { round }),
          403,
          VIEWER_WRITE,
        )
        expect(round, 'read as a viewer', await bob('GET', noteUrl), 200)
        expect(
          round,
          'write as a viewer',
          await bob('PATCH', noteUrl, { round }),
          403,
          VIEWER_WRITE,
        )
        assert.equal((await ann('DELETE', `${base}/members/bob`)).status, 204)
        expect(round, 'read after the removal', await bob('GET', noteUrl), 404, NO_NOTEBOOK)
        expect(round, 'list after the removal', await bob('GET', `${base}/note`), 404, NO_NOTEBOOK)
      }
      assert.deepEqual(wrong, [])
    })

    it('answers every request sent after the acknowledgement for the new role, with requests of the old one in flight', async (t) => {
      if (context.another === undefined) return t.skip('one process holds memory and the journal')
      const { ann, bob, base, noteUrl } = await twoInstances(context)
      const wrong: string[] = []
      for (let round = 0; round < 30; round++) {
        const demote = round % 2 === 0
        assert.equal((await ann('PUT', `${base}/members/bob`, { role: 'editor' })).status, 200)
        assert.equal((await bob('GET', noteUrl)).status, 200)
        /** Set once the change is acknowledged: every request sent after it must see it. */
        let acknowledged = false
        let running = true
        const loops = Array.from({ length: 6 }, async (_, loop) => {
          while (running) {
            const after = acknowledged
            const write = demote && loop % 2 === 1
            const got = write
              ? await bob('PATCH', noteUrl, { round, loop })
              : await bob('GET', noteUrl)
            const expected = !after ? [got.status] : demote ? [write ? 403 : 200] : [404]
            if (!expected.includes(got.status)) {
              wrong.push(
                `round ${round}, ${write ? 'write' : 'read'} sent after the change: ${got.status}`,
              )
            }
          }
        })
        await sleep(round % 4)
        const change = demote
          ? await ann('PUT', `${base}/members/bob`, { role: 'viewer' })
          : await ann('DELETE', `${base}/members/bob`)
        acknowledged = true
        assert.equal(change.status, demote ? 200 : 204)
        // Each loop sends a few more after the acknowledgement.
        await sleep(20)
        running = false
        await Promise.all(loops)
      }
      assert.deepEqual(wrong, [])
    })
  },
)
