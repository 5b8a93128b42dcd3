import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { dataOf, describeEachLane, MEMORY, type SuiteContext } from '../support/helpers.js'
import {
  JwksServer,
  type SigningKey,
  signed,
  signingKey,
  unsigned,
} from '../support/jwks-server.js'
import { SseClient } from '../support/sse-client.js'

const SECRET = 'a-secret-of-32-bytes-or-more-000'
const KEY = Buffer.from(SECRET)
const SERVICE_KEY = 'service-key-1'
const READ_KEY = 'read-key-1'
/** The clock of these tests, in seconds: 2027-01-15T08:00:00Z. */
const T = 1_800_000_000

interface UserApp {
  app: FastifyInstance
  /** Moves the app's clock (and its token checks') to `seconds`. */
  setClock: (seconds: number) => void
}

function userApp(
  context: SuiteContext,
  overrides: Partial<Config> = {},
  options: { keys?: boolean; logs?: string[]; writeScope?: string } = {},
): UserApp {
  let now = T * 1000
  const clock = (): number => now
  const config: Config = {
    ...DEFAULT_CONFIG,
    ...(options.keys === false ? {} : { apiKeys: [SERVICE_KEY], apiReadKeys: [READ_KEY] }),
    ...overrides,
  }
  const notebooks = new MemoryNotebooks({
    maxNotes: config.maxNotes,
    maxBytes: config.maxStoreBytes,
    maxNotesPerNotebook: config.maxNotesPerUser,
    maxBytesPerNotebook: config.maxBytesPerUser,
    historyLimit: config.changeHistory,
  })
  const logs = options.logs
  const app = buildApp({
    notebooks,
    userTokens: new UserTokens({
      secret: SECRET,
      now: clock,
      ...(options.writeScope === undefined ? {} : { writeScope: options.writeScope }),
    }),
    now: clock,
    config,
    ...(logs === undefined
      ? {}
      : {
          logger: {
            level: 'info',
            stream: new Writable({
              write(chunk: Buffer, _encoding, done) {
                logs.push(chunk.toString())
                done()
              },
            }),
          },
        }),
  })
  return {
    app: context.inLane(app),
    setClock: (seconds) => {
      now = seconds * 1000
    },
  }
}

/** A user token for `sub`, signed with the app's secret, valid for an hour from T. */
function tokenFor(sub: unknown, claims: Record<string, unknown> = {}): Promise<string> {
  return signed(KEY, { alg: 'HS256' }, { sub: sub as string, iat: T, exp: T + 3600, ...claims })
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** A client of one app with one Authorization: the requests of one user. */
function as(app: FastifyInstance, authorization: Record<string, string>) {
  const request = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<LightMyRequestResponse> =>
    app.inject({
      method,
      url,
      headers: {
        ...authorization,
        ...headers,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    })
  return {
    request,
    create: async (fields: object, headers: Record<string, string> = {}) =>
      dataOf(await request('POST', '/api/note', fields, headers)) as { id: number },
    list: async (query = '') => dataOf(await request('GET', `/api/note${query}`)) as object[],
  }
}

function assertRefused(response: LightMyRequestResponse, status: number, detail: RegExp): void {
  assert.equal(response.statusCode, status, response.body)
  assert.equal(response.headers['content-type'], 'application/problem+json')
  const problem = JSON.parse(response.body) as { status: number; detail: string }
  assert.equal(problem.status, status)
  assert.match(problem.detail, detail)
  if (status === 401) {
    assert.match(String(response.headers['www-authenticate']), /^Bearer/)
  }
}

describeEachLane('user notebooks', (context) => {
  it('with a write scope set, lets a token whose scope lacks it only read, on its first request and after', async () => {
    const { app } = userApp(context, {}, { writeScope: 'notes:write' })
    const writer = as(
      app,
      bearer(await tokenFor('alice', { scope: 'openid notes:read notes:write' })),
    )
    const listed = as(app, bearer(await tokenFor('alice', { scp: ['notes:read', 'notes:write'] })))
    const reader = as(app, bearer(await tokenFor('alice', { scope: 'openid notes:read' })))
    const bare = as(app, bearer(await tokenFor('alice')))
    // Scopes are whole words: a prefix or a longer one is not the scope.
    const near = as(app, bearer(await tokenFor('alice', { scope: 'notes:writer notes:writ' })))
    const note = await writer.create({ title: 'by the writer' })
    assert.equal(
      (await listed.request('PATCH', `/api/note/${note.id}`, { by: 'scp' })).statusCode,
      200,
    )
    for (const client of [reader, bare, near]) {
      // The first request of a token is a read (verified then remembered), or a write.
      for (const order of [0, 1]) {
        if (order === 1) assert.equal((await client.request('GET', '/api/note')).statusCode, 200)
        for (const [method, url, body] of [
          ['POST', '/api/note', { title: 'no' }],
          ['PATCH', `/api/note/${note.id}`, { title: 'no' }],
          ['DELETE', `/api/note/${note.id}`, undefined],
          ['POST', '/api/batch', [{ method: 'POST', path: '/api/note', body: {} }]],
        ] as const) {
          const refused = await client.request(method, url, body)
          assertRefused(
            refused,
            403,
            /^This token may only read \(GET, HEAD\): its scope lacks notes:write/,
          )
          assert.equal(
            refused.headers['www-authenticate'],
            'Bearer error="insufficient_scope", scope="notes:write"',
          )
        }
      }
      const read = await client.request('GET', `/api/note/${note.id}`)
      assert.equal(read.statusCode, 200)
    }
    assert.deepEqual(await writer.list(), [{ id: note.id, title: 'by the writer', by: 'scp' }])
    // Without a write scope, a token with no scope writes as before.
    const open = userApp(context).app
    assert.equal(
      (await as(open, bearer(await tokenFor('bob'))).request('POST', '/api/note', {})).statusCode,
      200,
    )
    assert.throws(() => new UserTokens({ secret: SECRET, writeScope: 'notes "write"' }), RangeError)
  })

  it("acts on the caller's notebook alone: another user's note is the empty 404 for every operation, and ids stay unique", async () => {
    const { app } = userApp(context)
    const alice = as(app, bearer(await tokenFor('alice')))
    const bob = as(app, bearer(await tokenFor('bob')))
    const note = await alice.create({ title: 'alice only' })
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { title: 'taken' }],
      ['DELETE', undefined],
    ] as const) {
      const response = await bob.request(method, `/api/note/${note.id}`, body)
      assert.equal(response.statusCode, 404, `${method} of another user's note`)
      assert.equal(response.body, '')
      assert.equal(response.headers['content-length'], '0')
    }
    assert.deepEqual(await alice.list(), [{ title: 'alice only', id: note.id }])
    const listed = await bob.request('GET', '/api/note')
    assert.deepEqual(dataOf(listed), [])
    assert.equal(listed.headers['x-total-count'], '0')
    const own = await bob.create({ title: 'bob only' })
    assert.ok(own.id > note.id, 'ids are unique over the whole service')
    assert.deepEqual(await bob.list(), [{ title: 'bob only', id: own.id }])
    assert.deepEqual(await alice.list(), [{ title: 'alice only', id: note.id }])
  })

  it('keeps versions, ETags, counts, q, pages and idempotency keys per notebook', async () => {
    const { app } = userApp(context)
    const alice = as(app, bearer(await tokenFor('alice')))
    const bob = as(app, bearer(await tokenFor('bob')))
    for (let n = 0; n < 3; n++) await alice.create({ word: 'shared-word', n })
    const before = await alice.request('GET', '/api/note')
    // Bob writes: Alice's version and list ETag stay as they were.
    await bob.create({ word: 'shared-word', n: 'b' })
    const after = await alice.request('GET', '/api/note')
    assert.equal(after.headers['notes-version'], before.headers['notes-version'])
    assert.equal(after.headers.etag, before.headers.etag)
    const unchanged = await alice.request('GET', '/api/note', undefined, {
      'if-none-match': String(before.headers.etag),
    })
    assert.equal(unchanged.statusCode, 304)
    // Bob's list ETag and version never validate Alice's.
    const bobs = await bob.request('GET', '/api/note')
    assert.notEqual(bobs.headers.etag, before.headers.etag)
    assert.notEqual(bobs.headers['notes-version'], before.headers['notes-version'])
    const notMine = await alice.request('GET', '/api/note', undefined, {
      'if-none-match': String(bobs.headers.etag),
    })
    assert.equal(notMine.statusCode, 200)
    // q and X-Total-Count.
    const found = await bob.request('GET', '/api/note?q=shared-word')
    assert.deepEqual(
      (dataOf(found) as { n: unknown }[]).map((n) => n.n),
      ['b'],
    )
    assert.equal(found.headers['x-total-count'], '1')
    // A cursor of Alice's walk, used by Bob, shows Bob's notes or nothing, never hers.
    const page = await alice.request('GET', '/api/note?limit=1')
    const next = /<([^>]+)>; rel="next"/.exec(String(page.headers.link))?.[1] as string
    assert.ok(next !== undefined, 'a next link')
    const bobsPage = await bob.request('GET', next)
    if (bobsPage.statusCode === 200) {
      for (const n of dataOf(bobsPage) as { n: unknown }[]) assert.equal(n.n, 'b')
    } else {
      assert.equal(bobsPage.statusCode, 400)
    }
    // One Idempotency-Key, one body, two users: two notes, neither a replay of the other.
    const key = { 'idempotency-key': 'same-key-for-both' }
    const a = await alice.request('POST', '/api/note', { same: true }, key)
    const b = await bob.request('POST', '/api/note', { same: true }, key)
    assert.equal(a.statusCode, 200)
    assert.equal(b.statusCode, 200)
    assert.equal(b.headers['idempotent-replayed'], undefined)
    assert.notEqual((dataOf(a) as { id: number }).id, (dataOf(b) as { id: number }).id)
    const replay = await alice.request('POST', '/api/note', { same: true }, key)
    assert.equal(replay.headers['idempotent-replayed'], 'true')
    assert.deepEqual(dataOf(replay), dataOf(a))
  })

  it('gives service keys a shared notebook of their own, which no user token sees, and refuses a caller with neither', async () => {
    const { app } = userApp(context)
    const service = as(app, bearer(SERVICE_KEY))
    const reader = as(app, bearer(READ_KEY))
    const alice = as(app, bearer(await tokenFor('alice')))
    // A user whose sub spells the shared notebook's name does not reach it.
    const named = as(app, bearer(await tokenFor('shared')))
    const note = await service.create({ title: 'for the service' })
    await alice.create({ title: 'alice' })
    assert.deepEqual(await service.list(), [{ title: 'for the service', id: note.id }])
    assert.deepEqual(await reader.list(), [{ title: 'for the service', id: note.id }])
    assert.equal((await alice.request('GET', `/api/note/${note.id}`)).statusCode, 404)
    assert.deepEqual(await named.list(), [])
    assert.equal((await named.request('GET', `/api/note/${note.id}`)).statusCode, 404)
    assertRefused(await reader.request('POST', '/api/note', { x: 1 }), 403, /may only read/)
    const anonymous = as(app, {})
    assertRefused(await anonymous.request('GET', '/api/note'), 401, /needs a service key/)
    assertRefused(await anonymous.request('GET', `/api/note/${note.id}`), 401, /or a user token/)
    // What needs no token stays open.
    assert.equal((await anonymous.request('GET', '/healthz')).statusCode, 200)
    assert.equal((await anonymous.request('GET', '/api/openapi.json')).statusCode, 200)
  })

  it('refuses every bad token with 401, the reason, and WWW-Authenticate: Bearer error="invalid_token", on every path', async () => {
    const { app } = userApp(context)
    const cases: [string, Record<string, string>, RegExp, string?][] = [
      ['expired', bearer(await tokenFor('alice', { exp: T - 31 })), /expired at/],
      ['not yet valid', bearer(await tokenFor('alice', { nbf: T + 60 })), /not valid before/],
      [
        'forged',
        bearer(
          await signed(
            Buffer.from('another-secret-of-32-bytes-00000'),
            { alg: 'HS256' },
            {
              sub: 'alice',
              exp: T + 60,
            },
          ),
        ),
        /signature does not match/,
      ],
      ['alg none', bearer(unsigned({ alg: 'none' }, { sub: 'alice', exp: T + 60 })), /algorithm/],
      ['not a JWT', bearer('not.a.jwt'), /neither a service key nor a valid user token/],
      ['too long', bearer('a'.repeat(8193)), /longer than 8192/],
      ['empty sub', bearer(await tokenFor('')), /subject \(sub\) is empty/],
      ['sub not a string', bearer(await tokenFor(42)), /not a string/],
      ['no sub', bearer(await tokenFor(undefined)), /no subject/],
      ['not Bearer', { authorization: 'Basic YWxpY2U6eA==' }, /must be Bearer/],
      ['none', {}, /needs a service key \(one of API_KEYS or API_READ_KEYS\) or a user token/],
      ['in the query', {}, /in the URL/, '?access_token=abc'],
    ]
    for (const [name, headers, detail, query = ''] of cases) {
      for (const [method, url] of [
        ['GET', `/api/note${query}`],
        ['POST', `/api/note${query}`],
        ['GET', `/api/note/1${query}`],
        ['PATCH', `/api/note/1${query}`],
        ['DELETE', `/api/note/1${query}`],
        ['GET', `/api/events${query}`],
      ] as const) {
        const response = await app.inject({
          method,
          url,
          headers: {
            ...headers,
            ...(method === 'POST' || method === 'PATCH'
              ? { 'content-type': 'application/json' }
              : {}),
          },
          ...(method === 'POST' || method === 'PATCH' ? { payload: '{"x":1}' } : {}),
        })
        assertRefused(response, 401, detail)
        assert.match(
          String(response.headers['www-authenticate']),
          /^Bearer error="invalid_token", error_description="/,
          `${name}: ${method} ${url}`,
        )
      }
    }
    // Two Authorization headers: which would count is ambiguous.
    const token = await tokenFor('alice')
    const twice = await app.inject({
      method: 'GET',
      url: '/api/note',
      headers: { authorization: [`Bearer ${token}`, `Bearer ${token}`] as unknown as string },
    })
    assertRefused(twice, 401, /one Authorization header/)
  })

  it('tells a caller with no credential, a wrong service key or a malformed header, with keys on too, of both kinds, never echoing what was sent', async () => {
    const { app } = userApp(context)
    const cases: [Record<string, string>, string][] = [
      [
        {},
        'This API needs a service key (one of API_KEYS or API_READ_KEYS) or a user token (a JWT): send Authorization: Bearer <key or token>.',
      ],
      [
        bearer('service-key-2'),
        'The credential is neither a service key nor a valid user token: a service key is one of API_KEYS or API_READ_KEYS exactly as set, a user token a JWT (three base64url parts joined by dots: header.payload.signature). Send one of them as Authorization: Bearer <key or token>.',
      ],
      [
        { authorization: 'service-key-2' },
        'The Authorization header must be Bearer <key or token>: the word Bearer, a space, and a service key or a user token.',
      ],
    ]
    for (const [headers, detail] of cases) {
      const response = await app.inject({ method: 'GET', url: '/api/note', headers })
      const where = JSON.stringify(headers)
      assert.equal(response.statusCode, 401, where)
      assert.equal(response.headers['content-type'], 'application/problem+json', where)
      assert.equal(
        response.headers['www-authenticate'],
        `Bearer error="invalid_token", error_description="${detail}"`,
        where,
      )
      assert.deepEqual(
        response.json(),
        { type: 'about:blank', title: 'Unauthorized', status: 401, detail },
        where,
      )
      assert.doesNotMatch(JSON.stringify([response.headers, response.body]), /service-key-2/)
    }
  })

  it('tells a caller of user tokens alone, without service keys, of tokens only', async () => {
    const { app } = userApp(context, {}, { keys: false })
    const cases: [Record<string, string>, string][] = [
      [{}, 'This API needs a user token: send Authorization: Bearer <token>.'],
      [
        bearer('service-key-1'),
        'The token is not a JWT: it must be three base64url parts joined by dots (header.payload.signature), the header and the payload each a JSON object.',
      ],
      [
        { authorization: 'service-key-1' },
        'The Authorization header must be Bearer <token>: the word Bearer, a space, and the token.',
      ],
    ]
    for (const [headers, detail] of cases) {
      const response = await app.inject({ method: 'GET', url: '/api/note', headers })
      assert.equal(response.statusCode, 401)
      assert.deepEqual(
        response.json(),
        { type: 'about:blank', title: 'Unauthorized', status: 401, detail },
        JSON.stringify(headers),
      )
    }
  })

  it('refuses a token in the URL even when the one in the header is remembered', async () => {
    const { app } = userApp(context)
    const token = await tokenFor('alice')
    const alice = as(app, bearer(token))
    assert.equal((await alice.request('GET', '/api/note')).statusCode, 200)
    for (const url of [`/api/note?access_token=${token}`, '/api/note/1?access_token=x']) {
      assertRefused(await alice.request('GET', url), 401, /in the URL/)
    }
  })

  it('stops taking a token once it expires, though its verdict was remembered', async () => {
    const { app, setClock } = userApp(context)
    const alice = as(app, bearer(await tokenFor('alice', { exp: T + 60 })))
    await alice.create({ n: 1 })
    // Remembered now: these may be served without checking the token again.
    assert.equal((await alice.request('GET', '/api/note')).statusCode, 200)
    setClock(T + 60 + 29)
    assert.equal((await alice.request('GET', '/api/note')).statusCode, 200)
    setClock(T + 60 + 31)
    for (const [method, url] of [
      ['GET', '/api/note'],
      ['GET', '/api/note/1'],
      ['POST', '/api/note'],
    ] as const) {
      assertRefused(
        await alice.request(method, url, method === 'POST' ? {} : undefined),
        401,
        /expired/,
      )
    }
  })

  it("caps each user's notebook: a user past the cap gets 507, and nobody else is affected", async () => {
    const { app } = userApp(context, { maxNotesPerUser: 2 })
    const alice = as(app, bearer(await tokenFor('alice')))
    const bob = as(app, bearer(await tokenFor('bob')))
    await alice.create({ n: 1 })
    await alice.create({ n: 2 })
    const full = await alice.request('POST', '/api/note', { n: 3 })
    assert.equal(full.statusCode, 507)
    assert.match((JSON.parse(full.body) as { detail: string }).detail, /notebook/)
    await bob.create({ n: 1 })
    await bob.create({ n: 2 })
    assert.equal((await alice.list()).length, 2)
  })

  it('keeps /metrics, whose figures cover every notebook, for service keys', async () => {
    const { app } = userApp(context, { metrics: true })
    const alice = as(app, bearer(await tokenFor('alice')))
    assertRefused(await alice.request('GET', '/metrics'), 401, /service key/)
    assert.equal((await as(app, bearer(SERVICE_KEY)).request('GET', '/metrics')).statusCode, 200)
  })

  it('never writes a token to a log line, accepted or refused', async () => {
    const logs: string[] = []
    const { app } = userApp(context, { logRequests: true }, { logs })
    const good = await tokenFor('alice')
    const expired = await tokenFor('alice', { exp: T - 3600 })
    await as(app, bearer(good)).create({ n: 1 })
    await as(app, bearer(expired)).request('GET', '/api/note')
    await app.inject({ method: 'GET', url: `/api/note?access_token=${good}` })
    await as(app, bearer(good)).request('GET', `/api/note/${good}`)
    await as(app, bearer(good)).request('GET', `/nothing/${expired}?since=${good}`)
    assert.ok(logs.length > 0, 'something was logged')
    for (const token of [good, expired]) {
      for (const part of token.split('.')) {
        for (const line of logs)
          assert.ok(!line.includes(part), `a log line holds a token part: ${line}`)
      }
    }
  })
})

describe('user notebooks: the change feed', () => {
  const context = MEMORY
  /** The app, listening on a port of 127.0.0.1. */
  async function listening(t: TestContext): Promise<{ port: number; app: FastifyInstance }> {
    const { app } = userApp(context)
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    return { app, port: (app.server.address() as AddressInfo).port }
  }

  it("streams each user their own notebook's changes alone, and an id from another stream reveals nothing", async (t) => {
    const { port } = await listening(t)
    const base = `http://127.0.0.1:${port}`
    const aliceToken = await tokenFor('alice')
    const bobToken = await tokenFor('bob')
    const create = async (token: string, fields: object) => {
      const response = await fetch(`${base}/api/note`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify(fields),
      })
      assert.equal(response.status, 200)
      return response
    }
    const aliceStream = await SseClient.open(port, '/api/events', bearer(aliceToken))
    t.after(() => aliceStream.close())
    assert.equal(aliceStream.status, 200)
    const bobStream = await SseClient.open(port, '/api/events', bearer(bobToken))
    t.after(() => bobStream.close())
    await aliceStream.until((c) => c.messages.length === 1)
    await bobStream.until((c) => c.messages.length === 1)
    await create(bobToken, { who: 'bob', n: 1 })
    await create(aliceToken, { who: 'alice', n: 1 })
    await create(bobToken, { who: 'bob', n: 2 })
    const aliceEvents = await aliceStream.events(1)
    const bobEvents = await bobStream.events(2)
    await create(aliceToken, { who: 'alice', n: 2 })
    await aliceStream.events(2)
    for (const event of aliceStream.messages.filter((m) => m.event !== undefined)) {
      assert.match(String(event.data), /"who":"alice"/)
    }
    for (const event of bobStream.messages.filter((m) => m.event !== undefined)) {
      assert.match(String(event.data), /"who":"bob"/)
    }
    assert.equal(aliceEvents.length >= 1, true)
    // Bob's last event id, sent by Alice: her history does not know it (a reset to her own
    // version), and nothing of Bob's follows.
    const bobsId = bobEvents.at(-1)?.id as string
    const resumed = await SseClient.open(port, '/api/events', {
      ...bearer(aliceToken),
      'last-event-id': bobsId,
    })
    t.after(() => resumed.close())
    await resumed.until((c) => c.messages.some((m) => m.event !== undefined))
    const first = resumed.messages.find((m) => m.event !== undefined)
    assert.equal(first?.event, 'reset')
    // The reset names Alice's own version, and echoes only the id she sent.
    assert.notEqual(first?.id, bobsId)
    assert.deepEqual(JSON.parse(String(first?.data)), { version: bobsId })
    await create(bobToken, { who: 'bob', n: 3 })
    await create(aliceToken, { who: 'alice', n: 3 })
    await resumed.until((c) => c.messages.some((m) => m.event === 'created'))
    for (const event of resumed.messages.filter((m) => m.event === 'created')) {
      assert.match(String(event.data), /"who":"alice"/)
    }
    assert.ok(!resumed.text.includes('"who":"bob"'))
  })

  it('lets one user follow at most a tenth of MAX_EVENT_STREAMS, whatever the others hold', async (t) => {
    const { app } = userApp(context, { maxEventStreams: 20 })
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => app.close())
    const port = (app.server.address() as AddressInfo).port
    const open = async (token: string) => {
      const client = await SseClient.open(port, '/api/events', bearer(token))
      t.after(() => client.close())
      return client
    }
    const alice = await tokenFor('alice')
    for (let i = 0; i < 2; i++) assert.equal((await open(alice)).status, 200)
    const third = await open(alice)
    await third.closed()
    assert.equal(third.status, 503)
    assert.equal(third.headers['retry-after'], '10')
    assert.match(third.text, /A notebook may follow at most 2 event streams at once/)
    assert.equal((await open(await tokenFor('bob'))).status, 200)
  })

  it('refuses a stream without a valid token, and with a service key follows the shared notebook alone', async (t) => {
    const { port } = await listening(t)
    const refused = await SseClient.open(port, '/api/events')
    await refused.closed()
    assert.equal(refused.status, 401)
    const service = await SseClient.open(port, '/api/events', bearer(SERVICE_KEY))
    t.after(() => service.close())
    await service.until((c) => c.messages.length === 1)
    const base = `http://127.0.0.1:${port}`
    for (const authorization of [bearer(await tokenFor('alice')), bearer(SERVICE_KEY)]) {
      await fetch(`${base}/api/note`, {
        method: 'POST',
        headers: { ...authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ by: authorization.authorization === `Bearer ${SERVICE_KEY}` }),
      })
    }
    const events = await service.events(1)
    assert.equal(events.length, 1)
    assert.match(String(events[0]?.data), /"by":true/)
  })
})

describeEachLane('user notebooks with an identity provider', (context) => {
  const ISSUER = 'https://idp.example'
  const AUDIENCE = 'notes-service'

  it('takes ES256 tokens from a key set over HTTP, rotates keys without a restart, and keeps working while the provider is down', async (t) => {
    const first = await signingKey('ES256', 'key-1')
    const provider = await JwksServer.start([first.jwk])
    t.after(() => provider.close())
    const notebooks = new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1_000_000 })
    const app = context.inLane(
      buildApp({
        notebooks,
        userTokens: new UserTokens({
          jwksUrl: provider.url,
          issuer: ISSUER,
          audience: AUDIENCE,
          jwksCooldownMs: 50,
          // Not what this checks: a fetch from this busy process may take a while.
          jwksTimeoutMs: 5000,
        }),
        config: DEFAULT_CONFIG,
      }),
    )
    const exp = Math.floor(Date.now() / 1000) + 600
    const tokenOf = (key: SigningKey, sub: string, iat = Math.floor(Date.now() / 1000)) =>
      signed(
        key.privateKey,
        { alg: 'ES256', kid: key.kid, typ: 'at+jwt' },
        { sub, iss: ISSUER, aud: AUDIENCE, iat, exp },
      )
    const alice = as(app, bearer(await tokenOf(first, 'alice')))
    const note = await alice.create({ title: 'signed by key-1' })
    // HS256 made with the public key as its secret: refused (the list is fixed per source).
    const forged = await signed(
      Buffer.from(JSON.stringify(first.jwk)),
      { alg: 'HS256' },
      {
        sub: 'alice',
        iss: ISSUER,
        aud: AUDIENCE,
        exp,
      },
    )
    assertRefused(await as(app, bearer(forged)).request('GET', '/api/note'), 401, /algorithm/)
    // A key rotated in while the service runs.
    const second = await signingKey('ES256', 'key-2')
    provider.keys = [first.jwk, second.jwk]
    await sleep(60)
    const rotated = as(app, bearer(await tokenOf(second, 'alice')))
    assert.deepEqual(await rotated.list(), [{ title: 'signed by key-1', id: note.id }])
    // A kid a set fetched after the token was issued does not have: 401 saying so.
    const unknown = await signingKey('ES256', 'key-9')
    const old = Math.floor(Date.now() / 1000) - 60
    assertRefused(
      await as(app, bearer(await tokenOf(unknown, 'alice', old))).request('GET', '/api/note'),
      401,
      /key id \(kid\) key-9/,
    )
    // The provider goes down: keys already fetched keep working; a new key cannot be had (503).
    provider.mode = 'fail'
    const bob = as(app, bearer(await tokenOf(second, 'bob')))
    assert.deepEqual(await bob.list(), [])
    await sleep(60)
    const third = await signingKey('ES256', 'key-3')
    const waiting = await as(app, bearer(await tokenOf(third, 'carol'))).request('GET', '/api/note')
    assert.equal(waiting.statusCode, 503, waiting.body)
    assert.ok(Number(waiting.headers['retry-after']) >= 1)
  })

  it('answers a token whose key may be new 503 with Retry-After, on the notes and the change feed, until the next fetch brings its key', async (t) => {
    const first = await signingKey('ES256', 'key-1')
    const provider = await JwksServer.start([first.jwk])
    t.after(() => provider.close())
    const cooldownMs = 1000
    const app = context.inLane(
      buildApp({
        notebooks: new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1_000_000 }),
        userTokens: new UserTokens({
          jwksUrl: provider.url,
          issuer: ISSUER,
          audience: AUDIENCE,
          jwksCooldownMs: cooldownMs,
          jwksTimeoutMs: 5000,
        }),
        config: DEFAULT_CONFIG,
      }),
    )
    const now = Math.floor(Date.now() / 1000)
    const tokenOf = (key: SigningKey) =>
      signed(
        key.privateKey,
        { alg: 'ES256', kid: key.kid, typ: 'at+jwt' },
        { sub: 'alice', iss: ISSUER, aud: AUDIENCE, iat: now, exp: now + 600 },
      )
    assert.deepEqual(await as(app, bearer(await tokenOf(first))).list(), [])
    const second = await signingKey('ES256', 'key-2')
    provider.keys = [first.jwk, second.jwk]
    const rotated = as(app, bearer(await tokenOf(second)))
    const detail =
      "The token key id (kid) key-2 is not in the identity provider's key set as last fetched, which may be older than the token: the key set is being refreshed; try again after Retry-After."
    for (const url of ['/api/note', '/api/events', '/api/note/1']) {
      const response = await rotated.request('GET', url)
      assert.equal(response.statusCode, 503, `${url}: ${response.body}`)
      assert.equal(response.headers['retry-after'], '1', url)
      assert.equal(response.headers['content-type'], 'application/problem+json')
      assert.equal(response.headers['www-authenticate'], undefined)
      assert.deepEqual(response.json(), {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail,
      })
    }
    assert.equal(provider.requests, 1)
    await sleep(cooldownMs + 50)
    assert.deepEqual(await rotated.list(), [])
    assert.equal(provider.requests, 2)
  })
})
