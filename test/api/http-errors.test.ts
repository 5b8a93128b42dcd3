import assert from 'node:assert/strict'
import { it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import type { NoteStore } from '../../src/store/types.js'
import { describeEachStore } from '../support/each-store.js'
import { type buildTestApp, describeEachLane, fakeClock, postNote } from '../support/helpers.js'
import { PromisedNoteStore } from '../support/promised-store.js'

function assertProblem(
  response: LightMyRequestResponse,
  status: number,
  detail: string | RegExp,
): void {
  assert.equal(response.statusCode, status, response.body)
  assert.equal(response.headers['content-type'], 'application/problem+json')
  const body = JSON.parse(response.body) as Record<string, unknown>
  assert.deepEqual(Object.keys(body), ['type', 'title', 'status', 'detail'])
  assert.equal(body.type, 'about:blank')
  assert.equal(body.status, status)
  assert.equal(typeof body.title, 'string')
  if (typeof detail === 'string') assert.equal(body.detail, detail)
  else assert.match(String(body.detail), detail)
}

function post(contentType: string | undefined, payload: string | Buffer) {
  return {
    method: 'POST' as const,
    url: '/api/note',
    headers: contentType === undefined ? {} : { 'content-type': contentType },
    payload,
  }
}

async function assertStoreEmpty(app: ReturnType<typeof buildTestApp>['app']): Promise<void> {
  assert.equal((await app.inject('/api/note')).body, '{"data":[]}')
}

describeEachStore('request bodies', (suite) => {
  for (const contentType of [
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset="UTF-8"',
    'Application/JSON',
    'application/merge-patch+json',
    'application/vnd.notes+json; charset=utf8',
  ]) {
    it(`accepts ${contentType}`, async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      const response = await app.inject(post(contentType, '{"a":1}'))
      assert.equal(response.body, '{"data":{"a":1,"id":1}}')
    })
  }

  for (const contentType of [
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonx',
    'application/json; charset=latin1',
    'application/json; charset=utf-16',
    'json',
  ]) {
    it(`answers 415 for ${contentType}, storing nothing`, async () => {
      const { app } = suite.buildApp()
      const response = await app.inject(post(contentType, '{"a":1}'))
      assertProblem(response, 415, /UTF-8/)
      await assertStoreEmpty(app)
    })
  }

  it('answers 415 for a body without a Content-Type', async () => {
    const { app } = suite.buildApp()
    assertProblem(
      await app.inject(post(undefined, '{"a":1}')),
      415,
      /Content-Type application\/json/,
    )
    await assertStoreEmpty(app)
  })

  for (const [name, payload] of [
    ['truncated JSON', '{"a":'],
    ['a trailing comma', '{"a":1,}'],
    ['single quotes', "{'a':1}"],
    ['whitespace only', '   '],
    ['two values', '{}{}'],
  ] as const) {
    it(`answers 400 for ${name}`, async () => {
      const { app } = suite.buildApp()
      assertProblem(
        await app.inject(post('application/json', payload)),
        400,
        /^The request body is not valid JSON: /,
      )
      await assertStoreEmpty(app)
    })
  }

  for (const [payload, kind] of [
    ['[]', 'an array'],
    ['[{"a":1}]', 'an array'],
    ['"text"', 'a string'],
    ['12', 'a number'],
    ['null', 'null'],
    ['true', 'a boolean'],
  ] as const) {
    it(`answers 400 for a body that is ${payload}, on POST and PATCH`, async () => {
      const { app } = suite.buildApp({}, { now: fakeClock(1) })
      const detail = `The request body must be a JSON object, not ${kind}.`
      assertProblem(await app.inject(post('application/json', payload)), 400, detail)
      await postNote(app, { keep: 1 })
      const patch = {
        ...post('application/json', payload),
        method: 'PATCH' as const,
        url: '/api/note/1',
      }
      assertProblem(await app.inject(patch), 400, detail)
      assert.equal((await app.inject('/api/note')).body, '{"data":[{"keep":1,"id":1}]}')
    })
  }

  it('answers 400 for a body that is not UTF-8', async () => {
    const { app } = suite.buildApp()
    const payload = Buffer.concat([
      Buffer.from('{"a":"'),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"}'),
    ])
    assertProblem(
      await app.inject(post('application/json', payload)),
      400,
      'The request body is not valid UTF-8.',
    )
    await assertStoreEmpty(app)
  })

  it('answers 413 for a body over the limit and stores nothing', async () => {
    const { app } = suite.buildApp({ bodyLimit: 100 })
    const payload = JSON.stringify({ t: 'x'.repeat(100) })
    assertProblem(
      await app.inject(post('application/json', payload)),
      413,
      'The request body is larger than the limit of 100 bytes.',
    )
    await assertStoreEmpty(app)
  })

  it('accepts a body exactly at the limit', async () => {
    const { app } = suite.buildApp({ bodyLimit: 100 }, { now: fakeClock(1) })
    const payload = JSON.stringify({ t: 'x'.repeat(92) })
    assert.equal(payload.length, 100)
    assert.equal((await app.inject(post('application/json', payload))).statusCode, 200)
  })

  it('answers 400 for a field nested past MAX_DEPTH and stores nothing', async () => {
    const { app } = suite.buildApp({ maxDepth: 4 }, { now: fakeClock(1) })
    assertProblem(
      await app.inject(post('application/json', '{"a":{"b":{"c":{"d":{"e":[]}}}}}')),
      400,
      'A field of the request body nests objects and arrays deeper than the limit of 4 levels.',
    )
    await assertStoreEmpty(app)
    assert.equal(
      (await app.inject(post('application/json', '{"a":{"b":{"c":{"d":[]}}}}'))).statusCode,
      200,
    )
  })

  // serde_json's default recursion limit is 128; a note from a client that nests that deep fits.
  it('accepts a field nested exactly 128 levels by default, and round-trips it through POST, GET and the list', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    const deepest = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`
    const fields = `{"a":${deepest(64)},"deep":${'{"k":'.repeat(127)}[]${'}'.repeat(127)}}`
    const created = await app.inject(post('application/json', fields))
    assert.equal(created.statusCode, 200)
    const note = `${fields.slice(0, -1)},"id":1}`
    assert.equal(created.body, `{"data":${note}}`)
    assert.equal((await app.inject('/api/note/1')).body, `{"data":${note}}`)
    assert.equal((await app.inject('/api/note')).body, `{"data":[${note}]}`)
    const patched = await app.inject({
      method: 'PATCH',
      url: '/api/note/1',
      headers: { 'content-type': 'application/json' },
      payload: `{"b":${deepest(128)}}`,
    })
    assert.equal(patched.statusCode, 200)
    const after = `${note.slice(0, -1)},"b":${deepest(128)}}`
    assert.equal(patched.body, `{"data":${after}}`)
    assert.equal((await app.inject('/api/note')).body, `{"data":[${after}]}`)

    for (const tooDeep of [
      `{"a":${deepest(129)}}`,
      `{"deep":${'{"k":'.repeat(128)}[]${'}'.repeat(128)}}`,
    ]) {
      assertProblem(
        await app.inject(post('application/json', tooDeep)),
        400,
        'A field of the request body nests objects and arrays deeper than the limit of 128 levels.',
      )
      assertProblem(
        await app.inject({
          method: 'PATCH',
          url: '/api/note/1',
          headers: { 'content-type': 'application/json' },
          payload: tooDeep,
        }),
        400,
        'A field of the request body nests objects and arrays deeper than the limit of 128 levels.',
      )
    }
    assert.equal((await app.inject('/api/note')).body, `{"data":[${after}]}`)
  })

  it('refuses a body nested 100,000 deep without crashing, and still serves the list', async () => {
    const { app } = suite.buildApp({}, { now: fakeClock(1) })
    const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    assertProblem(await app.inject(post('application/json', deep)), 400, /the limit of 128 levels/)
    await postNote(app, { ok: true })
    assert.equal((await app.inject('/api/note')).body, '{"data":[{"ok":true,"id":1}]}')
  })

  it('serves notes nested at MAX_DEPTH 512, its highest setting', async () => {
    const { app } = suite.buildApp({ maxDepth: 512 }, { now: fakeClock(1) })
    const fields = `{"a":${'['.repeat(512)}${']'.repeat(512)}}`
    assert.equal((await app.inject(post('application/json', fields))).statusCode, 200)
    const note = `${fields.slice(0, -1)},"id":1}`
    assert.equal((await app.inject('/api/note')).body, `{"data":[${note}]}`)
    const patched = await app.inject({
      method: 'PATCH',
      url: '/api/note/1',
      headers: { 'content-type': 'application/json' },
      payload: fields,
    })
    assert.equal(patched.body, `{"data":${note}}`)
  })
})

// On the memory store only: routing, before any store is asked.
describeEachLane('methods and paths', (suite) => {
  it('answers 404 problem JSON for a path that is not ours', async () => {
    const { app } = suite.buildApp()
    for (const url of ['/nowhere', '/api', '/api/notes', '/api/note/1/2', '/API/note']) {
      assertProblem(
        await app.inject(url),
        404,
        'Nothing is served at this path; the notes are at /api/note.',
      )
    }
  })

  it('reads /api/note// as an empty :id, which matches no note', async () => {
    const { app } = suite.buildApp()
    const response = await app.inject('/api/note//')
    assert.equal(response.statusCode, 404)
    assert.equal(response.body, '')
  })

  it('answers 405 with Allow for a method the collection does not take', async () => {
    const { app } = suite.buildApp()
    for (const method of ['PUT', 'DELETE', 'PATCH'] as const) {
      const response = await app.inject({ method, url: '/api/note' })
      assertProblem(response, 405, `${method} is not allowed here; use GET, HEAD, OPTIONS, POST.`)
      assert.equal(response.headers.allow, 'GET, HEAD, OPTIONS, POST')
    }
  })

  it('answers 405 with Allow for a method a note does not take, whatever the id', async () => {
    const { app } = suite.buildApp()
    for (const url of ['/api/note/1', '/api/note/abc', '/api/note/1/']) {
      for (const method of ['POST', 'PROPFIND'] as const) {
        const response = await app.inject({ method, url })
        assertProblem(
          response,
          405,
          `${method} is not allowed here; use DELETE, GET, HEAD, OPTIONS, PATCH, PUT.`,
        )
        assert.equal(response.headers.allow, 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT')
      }
    }
  })

  it('answers OPTIONS with 204 and Allow', async () => {
    const { app } = suite.buildApp()
    const collection = await app.inject({ method: 'OPTIONS', url: '/api/note' })
    assert.equal(collection.statusCode, 204)
    assert.equal(collection.headers.allow, 'GET, HEAD, OPTIONS, POST')
    assert.equal(collection.body, '')
    const note = await app.inject({ method: 'OPTIONS', url: '/api/note/5' })
    assert.equal(note.statusCode, 204)
    assert.equal(note.headers.allow, 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT')
  })

  it('answers 400 problem JSON for a malformed percent-encoding', async () => {
    const { app } = suite.buildApp()
    assertProblem(
      await app.inject('/api/note/%zz'),
      400,
      'The URL has a malformed percent-encoding.',
    )
  })
})

describeEachStore('capacity', (suite) => {
  it('answers 507 past the note cap, keeps every note, serves reads and frees room once a deleted note leaves the trash', async () => {
    const { app } = suite.buildApp({ maxNotes: 2 }, { now: fakeClock(1) })
    await postNote(app, { n: 1 })
    await postNote(app, { n: 2 })
    assertProblem(
      await postNote(app, { n: 3 }),
      507,
      `${suite.full} holds its maximum of 2 notes. Delete notes to make room.`,
    )
    assert.equal((await app.inject('/api/note')).body, '{"data":[{"n":1,"id":1},{"n":2,"id":2}]}')
    assert.equal((await app.inject({ method: 'DELETE', url: '/api/note/1' })).statusCode, 200)
    // The deleted note is in the trash, which counts toward the cap: the refusal says so.
    assertProblem(
      await postNote(app, { n: 3 }),
      507,
      `${suite.full} holds its maximum of 2 notes. Delete notes, or empty the trash, to make room: deleted notes count until they leave it.`,
    )
    assert.equal((await app.inject({ method: 'DELETE', url: '/api/trash/1' })).statusCode, 204)
    assert.equal((await postNote(app, { n: 3 })).body, '{"data":{"n":3,"id":3}}')
  })

  it('answers 507 when a create or patch would pass the byte cap', async () => {
    const { app } = suite.buildApp({ maxStoreBytes: 1024 }, { now: fakeClock(1) })
    await postNote(app, { t: 'x'.repeat(900) })
    assertProblem(await postNote(app, { t: 'x'.repeat(200) }), 507, /maximum of 1024 bytes/)
    assertProblem(
      await app.inject({ method: 'PATCH', url: '/api/note/1', payload: { more: 'y'.repeat(200) } }),
      507,
      /maximum of 1024 bytes/,
    )
    const stored = `{"t":"${'x'.repeat(900)}","id":1}`
    assert.equal((await app.inject('/api/note')).body, `{"data":[${stored}]}`)
  })
})

// On the memory store only: a memory store made to fail stands for a broken backend.
describeEachLane('server errors', (suite) => {
  const failing: NoteStore = Object.assign(new MemoryNoteStore({ maxNotes: 1, maxBytes: 1 }), {
    create: () => {
      throw new Error('database password is hunter2')
    },
    list: () => Promise.reject(new Error('secret internals')),
  })

  it('answers 500 problem JSON without revealing the error, thrown or rejected', async () => {
    const app = suite.inLane(buildApp({ store: failing, config: DEFAULT_CONFIG }))
    for (const response of [await postNote(app, {}), await app.inject('/api/note')]) {
      assertProblem(response, 500, 'The server failed to answer this request; it has been logged.')
      assert.doesNotMatch(response.body, /hunter2|secret/)
    }
  })

  it('logs a 500 with the request id', async () => {
    const lines: string[] = []
    const stream = { write: (line: string) => lines.push(line) }
    const app = suite.inLane(
      buildApp({
        store: failing,
        config: DEFAULT_CONFIG,
        logger: { level: 'error', stream },
      }),
    )
    await postNote(app, {})
    assert.equal(lines.length, 1)
    const entry = JSON.parse(lines[0] as string) as {
      reqId: string
      msg: string
      err: { message: string }
    }
    assert.equal(entry.msg, 'request failed')
    assert.equal(entry.err.message, 'database password is hunter2')
    assert.equal(typeof entry.reqId, 'string')
  })
})

// A memory store behind promises; the PostgreSQL store is asynchronous itself, and runs the
// suites above.
describeEachLane('an asynchronous store', (suite) => {
  it('serves every operation through promises', async () => {
    const store = new PromisedNoteStore({ maxNotes: 1, maxBytes: 1 << 20, now: fakeClock(1) })
    const app = suite.inLane(buildApp({ store, config: DEFAULT_CONFIG }))
    assert.equal((await postNote(app, { a: 1 })).body, '{"data":{"a":1,"id":1}}')
    assert.equal((await postNote(app, { a: 2 })).statusCode, 507)
    assert.equal((await app.inject('/api/note')).body, '{"data":[{"a":1,"id":1}]}')
    assert.equal((await app.inject('/api/note/1')).body, '{"data":{"a":1,"id":1}}')
    assert.equal(
      (await app.inject({ method: 'PATCH', url: '/api/note/1', payload: { b: 2 } })).body,
      '{"data":{"a":1,"id":1,"b":2}}',
    )
    assert.equal((await app.inject({ method: 'DELETE', url: '/api/note/1' })).body, '{"data":"1"}')
    assert.equal((await app.inject('/api/note/1')).statusCode, 404)
  })
})
