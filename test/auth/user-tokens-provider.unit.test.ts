import assert from 'node:assert/strict'
import { it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { decodeJwt, decodeProtectedHeader } from 'jose'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { describeEachLane, type SuiteContext } from '../support/helpers.js'
import {
  AUDIENCE,
  IdentityProvider,
  providerKey,
  WEB_CLIENT,
  WORKER_CLIENT,
} from '../support/identity-provider.js'
import { JwksServer, type SigningKey, signed, signingKey } from '../support/jwks-server.js'

/*
 * User tokens against a real OpenID provider (oidc-provider 9, in this process on 127.0.0.1): its
 * access tokens read the notebook, its ID tokens do not, and a key it rotates in is taken up
 * within one cooldown of the key set, whatever strangers send meanwhile.
 */

const ID_TOKEN =
  'The token is an ID token, not an access token: it tells an app who signed in (it carries nonce, at_hash, c_hash or s_hash, or typ ID) and grants no access to an API. Send the access token the identity provider issued with it.'
const REFRESHING = (kid: string): string =>
  `The token key id (kid) ${kid} is not in the identity provider's key set as last fetched, which may be older than the token: the key set is being refreshed; try again after Retry-After.`
const CHALLENGE = (detail: string): string =>
  `Bearer error="invalid_token", error_description="${detail.replaceAll('"', "'")}"`

interface AppOptions {
  issuer: string
  jwksUrl: URL
  audience?: string
  tokenTypes?: readonly string[]
  cooldownMs?: number
}

/** An app whose user tokens come from the key set at `jwksUrl`, in the suite's lane. */
function providerApp(context: SuiteContext, t: TestContext, options: AppOptions): FastifyInstance {
  const app = context.inLane(
    buildApp({
      notebooks: new MemoryNotebooks({ maxNotes: 1000, maxBytes: 1_000_000 }),
      userTokens: new UserTokens({
        jwksUrl: options.jwksUrl,
        issuer: options.issuer,
        audience: options.audience ?? AUDIENCE,
        ...(options.tokenTypes === undefined ? {} : { tokenTypes: options.tokenTypes }),
        ...(options.cooldownMs === undefined ? {} : { jwksCooldownMs: options.cooldownMs }),
        // Not what this checks: a fetch from this busy process may take a while.
        jwksTimeoutMs: 5000,
      }),
      config: DEFAULT_CONFIG,
    }),
  )
  t.after(() => app.close())
  return app
}

function list(app: FastifyInstance, token: string): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'GET',
    url: '/api/note',
    headers: { authorization: `Bearer ${token}` },
  })
}

async function startProvider(t: TestContext, kid = 'k1'): Promise<IdentityProvider> {
  const provider = await IdentityProvider.start([await providerKey(kid)])
  t.after(() => provider.close())
  return provider
}

function assertOk(response: LightMyRequestResponse): void {
  assert.equal(response.statusCode, 200, response.body)
  assert.deepEqual(response.json(), { data: [] })
}

function assertRefused(response: LightMyRequestResponse, detail: string): void {
  assert.equal(response.statusCode, 401, response.body)
  assert.equal(response.headers['www-authenticate'], CHALLENGE(detail))
  assert.equal(response.headers['content-type'], 'application/problem+json')
  assert.deepEqual(response.json(), {
    type: 'about:blank',
    title: 'Unauthorized',
    status: 401,
    detail,
  })
}

/** 503 saying the key set is being refreshed, with a Retry-After of 1 to `maxSeconds`. */
function assertRefreshing(response: LightMyRequestResponse, kid: string, maxSeconds: number): void {
  assert.equal(response.statusCode, 503, response.body)
  const retryAfter = Number(response.headers['retry-after'])
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= maxSeconds,
    `Retry-After ${response.headers['retry-after']}`,
  )
  assert.equal(response.headers['www-authenticate'], undefined)
  assert.deepEqual(response.json(), {
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: REFRESHING(kid),
  })
}

describeEachLane('user tokens from a real OpenID provider', (context) => {
  it("takes the provider's access tokens: a client's own, and a person's from the code flow", async (t) => {
    const provider = await startProvider(t)
    const app = providerApp(context, t, { issuer: provider.issuer, jwksUrl: provider.jwksUrl })
    const worker = await provider.clientCredentialsToken()
    assert.deepEqual(decodeProtectedHeader(worker), { alg: 'ES256', typ: 'at+jwt', kid: 'k1' })
    assert.equal(decodeJwt(worker).sub, WORKER_CLIENT)
    assertOk(await list(app, worker))
    const { accessToken } = await provider.signIn('alice')
    assert.equal(decodeJwt(accessToken).sub, 'alice')
    const created = await app.inject({
      method: 'POST',
      url: '/api/note',
      headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ title: "alice's" }),
    })
    assert.equal(created.statusCode, 200, created.body)
    const { id } = created.json().data as { id: number }
    const mine = await list(app, accessToken)
    assert.deepEqual(mine.json(), { data: [{ title: "alice's", id }] })
    // The worker (sub notes-worker) has a notebook of its own.
    assertOk(await list(app, worker))
  })

  it("refuses the provider's ID token when the audience is its client id, whatever types are accepted", async (t) => {
    const provider = await startProvider(t)
    const { idToken, accessToken } = await provider.signIn('alice')
    // What made it pass before: aud is the client id, and no typ in its header.
    assert.deepEqual(decodeProtectedHeader(idToken), { alg: 'ES256', kid: 'k1' })
    assert.equal(decodeJwt(idToken).aud, WEB_CLIENT)
    const base = { issuer: provider.issuer, jwksUrl: provider.jwksUrl, audience: WEB_CLIENT }
    for (const tokenTypes of [undefined, ['at+jwt', 'JWT'], ['JWT', 'none']]) {
      const app = providerApp(context, t, { ...base, ...(tokenTypes ? { tokenTypes } : {}) })
      assertRefused(await list(app, idToken), ID_TOKEN)
    }
    // Without a nonce, no claim tells it from an access token: its missing typ does.
    const bare = (await provider.signIn('alice', { nonce: false })).idToken
    assert.equal(decodeJwt(bare).nonce, undefined)
    const app = providerApp(context, t, { ...base, tokenTypes: ['at+jwt', 'JWT'] })
    assertRefused(
      await list(app, bare),
      "The token has no type (typ), which is not accepted here (accepted: at+jwt, JWT): this service takes access tokens (RFC 9068), not ID tokens or other JWTs. If your identity provider's access tokens have no typ, accept them with AUTH_TOKEN_TYPES=at+jwt,JWT,none.",
    )
    // The access token of the same sign-in is for this service, not for the client id.
    assertOk(await list(providerApp(context, t, { ...base, audience: AUDIENCE }), accessToken))
  })

  it('refuses a token typed JWT by default, and takes it with AUTH_TOKEN_TYPES=at+jwt,JWT', async (t) => {
    // oidc-provider always types its access tokens at+jwt; Keycloak, Auth0 and Entra ID write JWT.
    const key = await signingKey('ES256', 'k1')
    const keys = await JwksServer.start([key.jwk])
    t.after(() => keys.close())
    const issuer = 'https://idp.example'
    const now = Math.floor(Date.now() / 1000)
    const claims = { sub: 'alice', iss: issuer, aud: AUDIENCE, iat: now, exp: now + 600 }
    const typedJwt = await signed(key.privateKey, { alg: 'ES256', kid: 'k1', typ: 'JWT' }, claims)
    const strict = providerApp(context, t, { issuer, jwksUrl: keys.url })
    assertRefused(
      await list(strict, typedJwt),
      'The token type (typ) is JWT, which is not accepted here (accepted: at+jwt): this service takes access tokens (RFC 9068), not ID tokens or other JWTs. If your identity provider types its access tokens JWT, accept them with AUTH_TOKEN_TYPES=at+jwt,JWT.',
    )
    const wide = providerApp(context, t, {
      issuer,
      jwksUrl: keys.url,
      tokenTypes: ['at+jwt', 'JWT'],
    })
    assertOk(await list(wide, typedJwt))
    const typedAt = await signed(key.privateKey, { alg: 'ES256', kid: 'k1', typ: 'at+jwt' }, claims)
    assertOk(await list(wide, typedAt))
  })

  it('takes up a rotated key within one cooldown: 503 with Retry-After until then, never 401', async (t) => {
    const cooldownMs = 1500
    const provider = await startProvider(t, 'k1')
    const app = providerApp(context, t, {
      issuer: provider.issuer,
      jwksUrl: provider.jwksUrl,
      cooldownMs,
    })
    assertOk(await list(app, await provider.clientCredentialsToken()))
    assert.equal(provider.jwksRequests, 1)
    const fetchedAt = Date.now()
    provider.rotate([await providerKey('k2'), await providerKey('k1-kept')])
    const rotated = await provider.clientCredentialsToken()
    assert.equal(decodeProtectedHeader(rotated).kid, 'k2')
    assertRefreshing(await list(app, rotated), 'k2', Math.ceil(cooldownMs / 1000))
    assert.equal(provider.jwksRequests, 1, 'within the cooldown, no fetch')
    await sleep(Math.max(0, fetchedAt + cooldownMs + 50 - Date.now()))
    assertOk(await list(app, rotated))
    assert.equal(provider.jwksRequests, 2)
  })

  it('refuses a made-up key id of an old token at once, and lets no stream of made-up key ids hold a new key back past one cooldown', async (t) => {
    const cooldownMs = 1500
    const provider = await startProvider(t, 'k1')
    const app = providerApp(context, t, {
      issuer: provider.issuer,
      jwksUrl: provider.jwksUrl,
      cooldownMs,
    })
    assertOk(await list(app, await provider.clientCredentialsToken()))
    const strangers = await Promise.all(
      Array.from({ length: 4 }, (_, i) => signingKey('ES256', `made-up-${i}`)),
    )
    const forged = (key: SigningKey, iat: number): Promise<string> =>
      signed(
        key.privateKey,
        { alg: 'ES256', kid: key.kid, typ: 'at+jwt' },
        { sub: 'mallory', iss: provider.issuer, aud: AUDIENCE, iat, exp: iat + 3600 },
      )
    // Issued over 30 s before the set was fetched: its key is not coming. 401, and no fetch.
    const old = await forged(strangers[0] as SigningKey, Math.floor(Date.now() / 1000) - 60)
    assertRefused(
      await list(app, old),
      "The token key id (kid) made-up-0 is not in the identity provider's key set; get a new token from the provider.",
    )
    assert.equal(provider.jwksRequests, 1)

    // A stranger keeps sending fresh tokens with made-up key ids, from before the rotation on.
    let sending = true
    const answers = new Set<number>()
    const stream = (async () => {
      for (let i = 0; sending; i++) {
        const stranger = strangers[i % strangers.length] as SigningKey
        answers.add(
          (await list(app, await forged(stranger, Math.floor(Date.now() / 1000)))).statusCode,
        )
        await sleep(10)
      }
    })()
    let response: LightMyRequestResponse
    let waited: number
    try {
      await sleep(cooldownMs / 2)
      provider.rotate([await providerKey('k2'), await providerKey('k1-kept')])
      const rotated = await provider.clientCredentialsToken()
      const started = Date.now()
      response = await list(app, rotated)
      assertRefreshing(response, 'k2', Math.ceil(cooldownMs / 1000))
      while (response.statusCode !== 200) {
        assertRefreshing(response, 'k2', Math.ceil(cooldownMs / 1000))
        await sleep(50)
        response = await list(app, rotated)
      }
      waited = Date.now() - started
    } finally {
      sending = false
      await stream
    }
    assertOk(response)
    assert.ok(waited <= cooldownMs + 500, `the new key took ${waited} ms`)
    assert.deepEqual([...answers], [503], 'the stranger is told to retry, never let in')
  })
})
