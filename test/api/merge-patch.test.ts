import assert from 'node:assert/strict'
import { it } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { patchKind } from '../../src/api/note-routes.js'
import { describeEachStore } from '../support/each-store.js'
import { fakeClock } from '../support/helpers.js'
import { NON_OBJECT_PATCHES, RFC7396_EXAMPLES, withIdJson } from '../support/merge-patch-cases.js'

const MERGE_PATCH = 'application/merge-patch+json'
const JSON_UTF8 = 'application/json; charset=utf-8'

function patch(
  app: FastifyInstance,
  body: string,
  contentType: string = MERGE_PATCH,
  id = 1,
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'PATCH',
    url: `/api/note/${id}`,
    headers: { 'content-type': contentType },
    payload: body,
  })
}

function create(app: FastifyInstance, body: string, contentType = 'application/json') {
  return app.inject({
    method: 'POST',
    url: '/api/note',
    headers: { 'content-type': contentType },
    payload: body,
  })
}

function assertNote(response: LightMyRequestResponse, json: string): void {
  assert.equal(response.statusCode, 200, response.body)
  assert.equal(response.headers['content-type'], JSON_UTF8)
  assert.equal(response.body, `{"data":${json}}`)
}

function assertProblem(response: LightMyRequestResponse, status: number, detail: string): void {
  assert.equal(response.statusCode, status, response.body)
  assert.equal(response.headers['content-type'], 'application/problem+json')
  const { title, ...rest } = JSON.parse(response.body) as Record<string, unknown>
  assert.equal(typeof title, 'string')
  assert.deepEqual(rest, { type: 'about:blank', status, detail })
}

async function listBody(app: FastifyInstance): Promise<string> {
  return (await app.inject('/api/note')).body
}

describeEachStore('PATCH with application/merge-patch+json (RFC 7396)', (suite) => {
  for (const { target, patch: body, result } of RFC7396_EXAMPLES) {
    it(`turns ${target} patched with ${body} into ${result}`, async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await create(app, target)
      const response = await patch(app, body)
      assert.equal(response.statusCode, 200, response.body)
      assert.equal(response.headers['content-type'], JSON_UTF8)
      const note = (JSON.parse(response.body) as { data: unknown }).data
      assert.deepEqual(note, JSON.parse(withIdJson(result, 1)))
      assert.equal(await listBody(app), `{"data":[${JSON.stringify(note)}]}`)
    })
  }

  for (const { patch: body, detail } of NON_OBJECT_PATCHES) {
    it(`answers 400 for the non-object patch ${body} and changes nothing`, async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await create(app, '{"a":"foo"}')
      assertProblem(await patch(app, body), 400, detail)
      assert.equal(await listBody(app), '{"data":[{"a":"foo","id":1}]}')
    })
  }

  it('answers the exact bytes: kept keys in place, new keys at the end', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"title":"t","tags":["a","b"],"meta":{"x":1,"y":{"z":2}},"gone":true}')
    assertNote(
      await patch(app, '{"gone":null,"meta":{"y":{"z":null,"w":[null]},"x":0},"tags":["c"],"n":1}'),
      '{"title":"t","tags":["c"],"meta":{"x":0,"y":{"w":[null]}},"id":1,"n":1}',
    )
  })

  it('is a case-insensitive media type, with or without charset=utf-8', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1,"b":2,"c":3}')
    assertNote(
      await patch(app, '{"a":null}', 'Application/Merge-Patch+JSON'),
      '{"b":2,"c":3,"id":1}',
    )
    assertNote(
      await patch(app, '{"b":null}', 'application/merge-patch+json; charset=UTF-8'),
      '{"c":3,"id":1}',
    )
    assertNote(
      await patch(app, '{"c":null}', 'application/merge-patch+json ; charset="utf-8"'),
      '{"id":1}',
    )
  })

  it('keeps the shallow merge for application/json and every other +json type', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":{"x":1,"y":2},"b":1}')
    for (const type of ['application/json', 'application/problem+json', 'application/x.y+json']) {
      assertNote(
        await patch(app, '{"a":{"x":null},"b":null}', type),
        '{"a":{"x":null},"b":null,"id":1}',
      )
    }
  })

  it('treats an empty body as {}: the note unchanged', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1}')
    assertNote(await patch(app, ''), '{"a":1,"id":1}')
  })

  it('answers 404 for a missing note', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    const response = await patch(app, '{"a":1}', MERGE_PATCH, 7)
    assert.equal(response.statusCode, 404)
    assert.equal(response.body, '')
  })

  it('keeps __proto__ and constructor as plain data at any depth', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"deep":{"__proto__":{"keep":1,"drop":2}}}')
    assertNote(
      await patch(
        app,
        '{"__proto__":{"polluted":true},"deep":{"__proto__":{"drop":null,"again":1},"constructor":{"prototype":{"x":1}}},"n":{"m":{"__proto__":{"k":null,"c":true}}}}',
      ),
      '{"deep":{"__proto__":{"keep":1,"again":1},"constructor":{"prototype":{"x":1}}},"id":1,"__proto__":{"polluted":true},"n":{"m":{"__proto__":{"c":true}}}}',
    )
    assert.equal(({} as Record<string, unknown>).polluted, undefined)
    assert.equal(({} as Record<string, unknown>).again, undefined)
    assert.equal(({} as Record<string, unknown>).c, undefined)
    assertNote(
      await patch(app, '{"__proto__":null,"n":{"m":{"__proto__":null}}}'),
      '{"deep":{"__proto__":{"keep":1,"again":1},"constructor":{"prototype":{"x":1}}},"id":1,"n":{"m":{}}}',
    )
  })

  it('answers 400 for a field nested past MAX_DEPTH (counted on the patch as sent) and changes nothing', async () => {
    const { app } = suite.buildApp({ maxDepth: 4 }, { now: fakeClock(1) })
    await create(app, '{"a":{"b":{"c":{"d":[]}}}}')
    assertProblem(
      await patch(app, '{"a":{"b":{"c":{"d":{"e":{"f":null}}}}}}'),
      400,
      'A field of the request body nests objects and arrays deeper than the limit of 4 levels.',
    )
    assert.equal(await listBody(app), '{"data":[{"a":{"b":{"c":{"d":[]}}},"id":1}]}')
    // At the limit: d is not an object, so the patch object merges over {} and its null vanishes.
    assertNote(
      await patch(app, '{"a":{"b":{"c":{"d":{"e":null}}}}}'),
      '{"a":{"b":{"c":{"d":{}}}},"id":1}',
    )
  })

  it('answers 413 past the body limit and changes nothing', async () => {
    const { app } = suite.buildApp({ bodyLimit: 100 }, { now: fakeClock(1) })
    await create(app, '{"a":1}')
    const response = await patch(app, JSON.stringify({ t: 'x'.repeat(93) }))
    assert.equal(response.statusCode, 413)
    assert.equal(await listBody(app), '{"data":[{"a":1,"id":1}]}')
  })

  for (const type of [
    'application/merge-patch+json; charset=latin1',
    'application/merge-patch+json; charset=utf-16',
    'application/merge-patch+json; charset=ascii',
  ]) {
    it(`answers 415 for ${type} and changes nothing`, async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      await create(app, '{"a":1}')
      const charset = /charset=(.*)$/.exec(type)?.[1]
      assertProblem(
        await patch(app, '{"a":null}', type),
        415,
        `Charset "${charset}" is not supported; send the body as UTF-8.`,
      )
      assert.equal(await listBody(app), '{"data":[{"a":1,"id":1}]}')
    })
  }

  it('answers 507 when the merged note would pass MAX_STORE_BYTES, changing nothing, and applies a patch that shrinks it', async () => {
    const { app, store } = suite.buildApp({ maxStoreBytes: 1024 }, { now: fakeClock(1) })
    await create(app, `{"t":"${'x'.repeat(900)}","o":{"a":1}}`)
    const stored = `{"t":"${'x'.repeat(900)}","o":{"a":1},"id":1}`
    assertProblem(
      await patch(app, `{"o":{"b":"${'y'.repeat(200)}"}}`),
      507,
      `${suite.full} holds its maximum of 1024 bytes of notes. Delete notes to make room.`,
    )
    assert.equal(await listBody(app), `{"data":[${stored}]}`)
    assert.equal((await store.stats()).bytes, Buffer.byteLength(stored))
    // The cap applies to the merged result: removing t makes room for the same growth.
    assertNote(
      await patch(app, `{"t":null,"o":{"b":"${'y'.repeat(200)}"}}`),
      `{"o":{"a":1,"b":"${'y'.repeat(200)}"},"id":1}`,
    )
  })

  it('moves the note to a patched id; removing id leaves it listed but unreachable', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    await create(app, '{"a":1}')
    await create(app, '{"b":2}')
    assertNote(await patch(app, '{"id":50}'), '{"a":1,"id":50}')
    assert.equal((await app.inject('/api/note/1')).statusCode, 404)
    assertNote(await patch(app, '{"id":null,"a":2}', MERGE_PATCH, 50), '{"a":2}')
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const response = await app.inject({ method, url: '/api/note/50' })
      assert.equal(response.statusCode, 404, method)
    }
    assert.equal(await listBody(app), '{"data":[{"a":2},{"b":2,"id":2}]}')
    // The shallow merge stores a null id instead: listed, unreachable too.
    assertNote(await patch(app, '{"id":null}', 'application/json', 2), '{"b":2,"id":null}')
    assert.equal(await listBody(app), '{"data":[{"a":2},{"b":2,"id":null}]}')
  })

  it('leaves POST as it is: a merge-patch body creates a note with its nulls kept', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    assertNote(
      await create(app, '{"a":null,"b":{"c":null}}', MERGE_PATCH),
      '{"a":null,"b":{"c":null},"id":1}',
    )
  })
})

it('patchKind reads the media type as Fastify does', () => {
  assert.equal(patchKind(undefined), 'merge')
  assert.equal(patchKind('application/json'), 'merge')
  assert.equal(patchKind('application/merge-patch+jsonx'), 'merge')
  assert.equal(patchKind('application/problem+json'), 'merge')
  assert.equal(patchKind('application/merge-patch+json'), 'merge-patch')
  assert.equal(patchKind(' APPLICATION/MERGE-PATCH+JSON ;charset=utf-8'), 'merge-patch')
})
