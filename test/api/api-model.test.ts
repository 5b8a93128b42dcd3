import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { parseNoteId } from '../../src/api/note-id.js'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import type { NoteStore } from '../../src/store/types.js'
import { apiOperations, pickId, type WriteOperation } from '../support/arbitraries.js'
import { describeEachStore } from '../support/each-store.js'
import { NoteModel } from '../support/note-model.js'

/** The method and media type each kind of update is sent as. */
const UPDATE_REQUESTS = {
  merge: { method: 'PATCH', type: 'application/json' },
  'merge-patch': { method: 'PATCH', type: 'application/merge-patch+json' },
  replace: { method: 'PUT', type: 'application/json' },
} as const

import { PromisedNoteStore } from '../support/promised-store.js'

/** How a path can spell an id: '7', '007', '%37' all name note 7. */
function spell(id: number, style: number): string {
  const digits = String(Math.abs(id))
  const sign = id < 0 ? '-' : ''
  switch (style % 3) {
    case 0:
      return `${sign}${digits}`
    case 1:
      return `${sign}00${digits}`
    default:
      // Only digits are encoded: '5e-324' (a patched id no path can name) stays readable.
      return `${sign}${[...digits].map((d) => (d >= '0' && d <= '9' ? `%3${d}` : d)).join('')}`
  }
}

function decoded(segment: string): string {
  return decodeURIComponent(segment)
}

/** The segment, url and id (NaN: none a path can name) a write aims at, among `ids`. */
function aim(ids: readonly number[], pick: number): { segment: string; url: string; id: number } {
  const segment = spell(pickId(ids, pick), pick)
  // A note whose id is not an integer written in decimal (-5e-324, 1e21) cannot be named by a
  // path: its spelling parses to no id, and the answer is 404.
  return {
    segment,
    url: `/api/note/${segment}`,
    id: parseNoteId(decoded(segment)) ?? Number.NaN,
  }
}

/**
 * POST /api/batch of `writes`, against the model: it applies them in order to a
 * copy of itself, kept only when every one succeeds; then the answer is 200 with each one's
 * answer as alone (its ETag the copy's version then), else the first failure's 404 naming it,
 * and the model is as it was. Each write aims among the notes the ones before it left.
 */
async function batchAgainstTheModel(
  app: ReturnType<typeof buildApp>,
  model: NoteModel,
  writes: readonly WriteOperation[],
): Promise<void> {
  const copy = model.copy()
  const requests: {
    method: string
    url: string
    headers?: Record<string, string>
    body?: unknown
  }[] = []
  /** Each answer's body, and the version its write made the note's (none for a delete). */
  const expected: { body: string; version: number | undefined }[] = []
  let failing: number | undefined
  for (const [i, write] of writes.entries()) {
    if (write.kind === 'create') {
      requests.push({ method: 'POST', url: '/api/note', body: write.fields })
      expected.push({ body: `{"data":${copy.create(write.fields)}}`, version: copy.version })
      continue
    }
    const { segment, url, id } = aim(copy.ids(), write.pick)
    if (write.kind === 'update') {
      const { method, type } = UPDATE_REQUESTS[write.patch]
      requests.push({ method, url, headers: { 'content-type': type }, body: write.fields })
      const json = copy.update(id, write.fields, write.patch)
      if (json === undefined) failing ??= i
      else expected.push({ body: `{"data":${json}}`, version: copy.version })
    } else {
      requests.push({ method: 'DELETE', url })
      if (!copy.delete(id)) failing ??= i
      else expected.push({ body: `{"data":"${decoded(segment)}"}`, version: undefined })
    }
    if (failing !== undefined) break
  }
  const response = await app.inject({
    method: 'POST',
    url: '/api/batch',
    payload: { requests },
  })
  if (failing !== undefined) {
    const { method, url } = requests[failing] as { method: string; url: string }
    assert.equal(response.statusCode, 404)
    assert.deepEqual(JSON.parse(response.body), {
      type: 'about:blank',
      title: 'Not Found',
      status: 404,
      detail: `requests[${failing}] (${method} ${url}): No note has this id. Nothing in the batch was applied.`,
    })
    return
  }
  // The service's epoch (the first part of every ETag), from the first ETag if need be.
  const epoch = model.epoch ?? /"etag":"\\"([0-9a-z]+)\./.exec(response.body)?.[1]
  const answers = expected.map(({ body, version }) => {
    const headers =
      version === undefined
        ? '{}'
        : `{"etag":${JSON.stringify(`"${epoch}.${version.toString(36)}"`)}}`
    return `{"status":200,"headers":${headers},"body":${body}}`
  })
  assert.equal(response.body, `{"data":[${answers.join(',')}]}`)
  model.adopt(copy)
}

/** Defines the property for the stores `makeStore` gives. */
function againstTheModel(makeStore: (now: () => number) => NoteStore, numRuns: number): void {
  it('answers every random sequence of requests exactly as the model does', async () => {
    await fc.assert(
      fc.asyncProperty(apiOperations(), async (ops) => {
        let t = 1000
        const now = () => t
        const app = buildApp({ store: makeStore(now), config: DEFAULT_CONFIG })
        const model = new NoteModel(undefined, now)
        const expectBody = (json: string | undefined) =>
          json === undefined ? '' : `{"data":${json}}`
        for (const op of ops) {
          if (op.kind === 'create') {
            t += op.tick
            const response = await app.inject({
              method: 'POST',
              url: '/api/note',
              payload: op.fields,
            })
            assert.equal(response.body, expectBody(model.create(op.fields)))
          } else if (op.kind === 'batch') {
            await batchAgainstTheModel(app, model, op.writes)
          } else if (op.kind === 'list') {
            assert.equal((await app.inject('/api/note')).body, expectBody(model.list()))
          } else {
            const picked = pickId(model.ids(), op.pick)
            const segment = spell(picked, op.pick)
            const url = `/api/note/${segment}`
            // A note whose id is not an integer written in decimal (-5e-324, 1e21) cannot be
            // named by a path: its spelling parses to no id, and the answer is 404.
            const id = parseNoteId(decoded(segment)) ?? Number.NaN
            if (op.kind === 'get') {
              const response = await app.inject(url)
              assert.equal(response.body, expectBody(model.get(id)))
            } else if (op.kind === 'update') {
              const response = await app.inject({
                method: UPDATE_REQUESTS[op.patch].method,
                url,
                headers: { 'content-type': UPDATE_REQUESTS[op.patch].type },
                payload: JSON.stringify(op.fields),
              })
              assert.equal(response.body, expectBody(model.update(id, op.fields, op.patch)))
            } else {
              const response = await app.inject({ method: 'DELETE', url })
              const expected = model.delete(id) ? `"${decoded(segment)}"` : undefined
              assert.equal(response.body, expectBody(expected))
            }
          }
        }
        assert.equal((await app.inject('/api/note')).body, expectBody(model.list()))
      }),
      { numRuns },
    )
  })
}

describeEachStore(
  'the HTTP API against the model',
  (suite) => {
    // A fresh PostgreSQL schema per run costs ~0.1 s: half the runs there.
    againstTheModel(
      (now) => suite.buildStore({ maxNotes: 1000, maxBytes: 1 << 24, now }),
      suite.store === 'postgres' ? 30 : 60,
    )
  },
  { lanes: false },
)

describe('the HTTP API over PromisedNoteStore, against the model', () => {
  againstTheModel((now) => new PromisedNoteStore({ maxNotes: 1000, maxBytes: 1 << 24, now }), 60)
})
