import assert from 'node:assert/strict'
import { createHmac, generateKeyPairSync, sign } from 'node:crypto'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { exportSPKI, type JWTHeaderParameters, type JWTPayload, SignJWT } from 'jose'
import { type TokenRefusal, tokenRefusalHeaders } from '../../src/auth/user-token-refusals.js'
import { type TokenVerdict, UserTokens } from '../../src/auth/user-tokens.js'
import {
  JwksServer,
  type SigningKey,
  signed,
  signingKey,
  unsigned,
} from '../support/jwks-server.js'

const SECRET = 'a-secret-of-32-bytes-or-more-000'
const OTHER_SECRET = 'another-secret-of-32-bytes-00000'
const KEY = Buffer.from(SECRET)
/** The clock of the secret-source tests: 2027-01-15T08:00:00Z. */
const T = 1_800_000_000
const AT_T = { now: () => T * 1000 }
const ISSUER = 'https://idp.example'
const AUDIENCE = 'notes-service'
const URL_PATH = '/api/note'
const JWKS_LIST = 'RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA'

const MISSING = 'This API needs a user token: send Authorization: Bearer <token>.'
const DUPLICATE = 'Send one Authorization header, not several.'
const MALFORMED =
  'The Authorization header must be Bearer <token>: the word Bearer, a space, and the token.'
const IN_QUERY =
  'A token in the URL (access_token) is refused, because URLs end up in logs: send it as Authorization: Bearer <token>, and get a new one if that one was real.'
const TOO_LONG = 'The token is longer than 8192 characters; send a JWT of at most 8192.'
const NOT_JWT =
  'The token is not a JWT: it must be three base64url parts joined by dots (header.payload.signature), the header and the payload each a JSON object.'
const BAD_SIGNATURE =
  'The token signature does not match: it was not signed with the key this service trusts, or it was changed after signing. Get a new token.'
const NO_EXPIRY = 'The token has no expiry time (exp); get a token that expires.'
const NO_SUBJECT = 'The token names no user: it has no subject (sub); get a token with one.'
const EMPTY_SUBJECT = 'The token names no user: its subject (sub) is empty; get a token with one.'
const SUBJECT_NOT_STRING =
  'The token subject (sub) is not a string; get a token whose sub is the user id as a string.'
const LONG_SUBJECT =
  'The token subject (sub) is longer than 255 characters; get a token with a shorter one.'
const UNSTORABLE_SUBJECT =
  'The token subject (sub) holds a NUL character or a lone UTF-16 surrogate; get a token whose sub is plain text.'
const UNAVAILABLE =
  'The keys to check this token cannot be fetched from the identity provider now; try again later (Retry-After).'
const alg = (what: string, list = 'HS256'): string =>
  `The token algorithm (alg) ${what}; get a token signed with one of: ${list}.`
const expiredAt = (iso: string): string =>
  `The token expired at ${iso} (30 s of clock difference allowed); get a new token.`
const notBefore = (iso: string): string =>
  `The token is not valid before ${iso} (30 s of clock difference allowed); use it from then on, or check the clocks.`
const badTime = (claim: string): string =>
  `The token ${claim} is not a number of seconds since 1970-01-01 (a NumericDate); get a new token.`
const WRONG_ISSUER = `The token was not issued by ${ISSUER} (its iss is missing or another); get a token from ${ISSUER}.`
const WRONG_AUDIENCE = `The token is not meant for this service: its audience (aud) is missing or does not include ${AUDIENCE}; get a token for ${AUDIENCE}.`
const unknownKid = (kid: string): string =>
  `The token key id (kid) ${kid} is not in the identity provider's key set; get a new token from the provider.`
const refreshing = (kid: string, retryAfter: number): TokenVerdict => ({
  ok: false,
  status: 503,
  detail: `The token key id (kid) ${kid} is not in the identity provider's key set as last fetched, which may be older than the token: the key set is being refreshed; try again after Retry-After.`,
  retryAfter,
})

const refused = (detail: string): TokenVerdict => ({ ok: false, status: 401, detail })
const user = (name: string, exp: number): TokenVerdict => ({
  ok: true,
  user: name,
  exp,
  readOnly: false,
})
const bearer = (token: string): string => `Bearer ${token}`
const good = (claims: JWTPayload = {}): JWTPayload => ({ sub: 'alice', exp: T + 3600, ...claims })

/** An HS256 token signed here, for headers jose will not sign. */
function handSigned(header: object, claims: JWTPayload): string {
  const input = unsigned(header, claims).slice(0, -1)
  return `${input}.${createHmac('sha256', KEY).update(input).digest('base64url')}`
}

/** Asserts the verdict, and that no refusal holds the token or any of its parts. */
async function assertVerdict(
  tokens: UserTokens,
  token: string,
  expected: TokenVerdict,
  url = URL_PATH,
): Promise<void> {
  const verdict = await tokens.verify(bearer(token), url)
  assert.deepEqual(verdict, expected)
  if (!verdict.ok) {
    const shown = JSON.stringify([verdict, tokenRefusalHeaders(verdict)])
    for (const part of [token, ...token.split('.')].filter((p) => p.length >= 8)) {
      assert.equal(shown.includes(part), false, 'the refusal shows the token')
    }
  }
}

describe('UserTokens with a shared secret (HS256)', () => {
  it('refuses a secret under 32 UTF-8 bytes, without showing it', () => {
    const cases: [string, number | 'ok'][] = [
      ['', 0],
      ['x'.repeat(31), 31],
      ['é'.repeat(15), 30],
      ['x'.repeat(32), 'ok'],
      ['é'.repeat(16), 'ok'],
    ]
    for (const [secret, bytes] of cases) {
      if (bytes === 'ok') {
        assert.doesNotThrow(() => new UserTokens({ secret }))
        continue
      }
      assert.throws(() => new UserTokens({ secret }), {
        name: 'RangeError',
        message: `The token secret must be at least 32 bytes (UTF-8); it has ${bytes}. Make one with: openssl rand -base64 32`,
      })
    }
  })

  it("answers a good token with its sub and exp, the scheme's case and surrounding blanks aside", async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const token = await signed(KEY, { alg: 'HS256' }, good())
    for (const authorization of [
      bearer(token),
      `bearer ${token}`,
      `BEARER ${token}`,
      ` Bearer ${token}\t`,
      [bearer(token)],
    ]) {
      assert.deepEqual(await tokens.verify(authorization, URL_PATH), user('alice', T + 3600))
    }
    const unicode = await signed(KEY, { alg: 'HS256' }, good({ sub: 'zoë 🦊' }))
    await assertVerdict(tokens, unicode, user('zoë 🦊', T + 3600))
  })

  it('refuses a missing, repeated or malformed Authorization header', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const token = await signed(KEY, { alg: 'HS256' }, good())
    const cases: [string | string[] | undefined, string][] = [
      [undefined, MISSING],
      [[], MISSING],
      [[bearer(token), bearer(token)], DUPLICATE],
      [['Basic abc', bearer(token)], DUPLICATE],
      [token, MALFORMED],
      ['Bearer', MALFORMED],
      ['Bearer ', MALFORMED],
      [`Bearer ${token} x`, MALFORMED],
      [`Basic ${Buffer.from(`alice:${token}`).toString('base64')}`, MALFORMED],
      [`Token ${token}`, MALFORMED],
    ]
    for (const [authorization, detail] of cases) {
      assert.deepEqual(
        await tokens.verify(authorization, URL_PATH),
        refused(detail),
        JSON.stringify(authorization),
      )
    }
  })

  it('refuses a token in the query (access_token), even with a good header', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const token = await signed(KEY, { alg: 'HS256' }, good())
    for (const url of [
      `/api/note?access_token=${token}`,
      '/api/note?limit=2&access_token=',
      '/api/note?access%5Ftoken=x',
      'http://localhost:3000/api/note?access_token=x',
    ]) {
      assert.deepEqual(await tokens.verify(bearer(token), url), refused(IN_QUERY), url)
    }
    for (const url of [
      '/api/note?token=access_token',
      '/api/note#access_token=x',
      '/api/access_token',
    ]) {
      assert.deepEqual(await tokens.verify(bearer(token), url), user('alice', T + 3600), url)
    }
  })

  it('takes a token of 8192 characters and refuses one longer', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    // Padding grows the token by one or two characters at a time: a second, shorter padding in
    // the header reaches every length.
    let token = ''
    search: for (let pad = 5900; pad < 6200; pad++) {
      for (const kid of ['', 'x', 'xx']) {
        token = await signed(KEY, { alg: 'HS256', kid }, good({ pad: 'p'.repeat(pad) }))
        if (token.length === 8192) break search
      }
    }
    assert.equal(token.length, 8192)
    await assertVerdict(tokens, token, user('alice', T + 3600))
    const longer = await signed(KEY, { alg: 'HS256' }, good({ pad: 'p'.repeat(6200) }))
    assert.ok(longer.length > 8192)
    await assertVerdict(tokens, longer, refused(TOO_LONG))
    await assertVerdict(tokens, 'x'.repeat(100_000), refused(TOO_LONG))
  })

  it('refuses what is not a JWT', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const token = await signed(KEY, { alg: 'HS256' }, good())
    const [header, payload, signature] = token.split('.') as [string, string, string]
    const b64 = (text: string): string => Buffer.from(text).toString('base64url')
    for (const text of [
      'abc',
      `${header}.${payload}`,
      `${header}.${payload}.${signature}.${signature}`,
      `.${payload}.${signature}`,
      `${header}..${signature}`,
      `${header}=.${payload}.${signature}`,
      `${b64('{"alg":"HS256"')}.${payload}.${signature}`,
      `${b64('["HS256"]')}.${payload}.${signature}`,
      `${b64('null')}.${payload}.${signature}`,
      `${header}.${b64('{"sub":"alice"')}.${signature}`,
      `${header}.${b64('"alice"')}.${signature}`,
      `${header}.${payload}.${signature}!`,
      unsigned({ alg: 'HS256', crit: 'exp' }, good(), signature),
    ]) {
      await assertVerdict(tokens, text, refused(NOT_JWT))
    }
    await assertVerdict(
      tokens,
      handSigned({ alg: 'HS256', crit: ['urn:example:policy'], 'urn:example:policy': 1 }, good()),
      refused(
        'The token header lists a critical extension (crit) this service does not support; get a token without one.',
      ),
    )
  })

  it('refuses alg none, algorithms other than HS256, and a header without alg', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const rsa = await signingKey('RS256', 'r1')
    await assertVerdict(
      tokens,
      unsigned({ alg: 'none' }, good()),
      refused(alg('is none, which is not accepted here')),
    )
    await assertVerdict(
      tokens,
      unsigned({ alg: 'none', typ: 'JWT' }, good(), 'c2lnbmF0dXJl'),
      refused(alg('is none, which is not accepted here')),
    )
    await assertVerdict(
      tokens,
      await signed(rsa.privateKey, { alg: 'RS256' }, good()),
      refused(alg('is RS256, which is not accepted here')),
    )
    await assertVerdict(
      tokens,
      await signed(KEY, { alg: 'HS512' }, good()),
      refused(alg('is HS512, which is not accepted here')),
    )
    for (const header of [
      {},
      { alg: 5 },
      { alg: '' },
      { alg: 'HS"256' },
      { alg: 'x'.repeat(65) },
    ]) {
      await assertVerdict(
        tokens,
        unsigned(header, good(), 'c2lnbmF0dXJl'),
        refused(alg('is missing or not one accepted here')),
      )
    }
  })

  it('refuses a token signed with another secret, or changed after signing', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    await assertVerdict(
      tokens,
      await signed(Buffer.from(OTHER_SECRET), { alg: 'HS256' }, good()),
      refused(BAD_SIGNATURE),
    )
    const token = await signed(KEY, { alg: 'HS256' }, good())
    const [header, , signature] = token.split('.')
    const forged = `${header}.${Buffer.from(JSON.stringify(good({ sub: 'mallory' }))).toString('base64url')}.${signature}`
    await assertVerdict(tokens, forged, refused(BAD_SIGNATURE))
    await assertVerdict(tokens, unsigned({ alg: 'HS256' }, good()), refused(BAD_SIGNATURE))
    await assertVerdict(tokens, token.slice(0, -1), refused(BAD_SIGNATURE))
  })

  it('allows 30 s of clock difference on exp and nbf, and no more', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const cases: [JWTPayload, TokenVerdict][] = [
      [good({ exp: T - 29 }), user('alice', T - 29)],
      [good({ exp: T - 30 }), refused(expiredAt('2027-01-15T07:59:30Z'))],
      [good({ exp: T - 86_400 }), refused(expiredAt('2027-01-14T08:00:00Z'))],
      [good({ nbf: T + 30 }), user('alice', T + 3600)],
      [good({ nbf: T + 31 }), refused(notBefore('2027-01-15T08:00:31Z'))],
      [good({ nbf: T - 100, iat: T - 100 }), user('alice', T + 3600)],
    ]
    for (const [claims, expected] of cases) {
      await assertVerdict(tokens, await signed(KEY, { alg: 'HS256' }, claims), expected)
    }
  })

  it('refuses a token without exp, or with a time claim that is not a number', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const cases: [JWTPayload, string][] = [
      [{ sub: 'alice' }, NO_EXPIRY],
      [good({ exp: '2027-01-16' as unknown as number }), badTime('exp')],
      [good({ nbf: null as unknown as number }), badTime('nbf')],
      [good({ iat: 'now' as unknown as number }), badTime('iat')],
    ]
    for (const [claims, detail] of cases) {
      await assertVerdict(tokens, await signed(KEY, { alg: 'HS256' }, claims), refused(detail))
    }
  })

  it('needs a sub that is a non-empty string of at most 255 characters, without NUL or lone surrogates', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const cases: [unknown, TokenVerdict][] = [
      [undefined, refused(NO_SUBJECT)],
      ['', refused(EMPTY_SUBJECT)],
      [42, refused(SUBJECT_NOT_STRING)],
      [null, refused(SUBJECT_NOT_STRING)],
      [['alice'], refused(SUBJECT_NOT_STRING)],
      [{ id: 'alice' }, refused(SUBJECT_NOT_STRING)],
      ['u'.repeat(256), refused(LONG_SUBJECT)],
      ['u'.repeat(255), user('u'.repeat(255), T + 3600)],
      [' ', user(' ', T + 3600)],
      // Stored as UTF-8, '\ud800' and '\udc00' would both be U+FFFD: one notebook for two users.
      ['a\ud800', refused(UNSTORABLE_SUBJECT)],
      ['\udc00a', refused(UNSTORABLE_SUBJECT)],
      ['a\u0000b', refused(UNSTORABLE_SUBJECT)],
      ['\ud83d\udcdd \ufffd\u0001', user('\ud83d\udcdd \ufffd\u0001', T + 3600)],
    ]
    for (const [sub, expected] of cases) {
      const claims: JWTPayload = { exp: T + 3600 }
      if (sub !== undefined) claims.sub = sub as string
      await assertVerdict(tokens, await signed(KEY, { alg: 'HS256' }, claims), expected)
    }
  })

  it('checks iss and aud when they are configured', async () => {
    const tokens = new UserTokens({ secret: SECRET, issuer: ISSUER, audience: AUDIENCE, ...AT_T })
    const cases: [JWTPayload, TokenVerdict][] = [
      [good({ iss: ISSUER, aud: AUDIENCE }), user('alice', T + 3600)],
      [good({ iss: ISSUER, aud: ['other', AUDIENCE] }), user('alice', T + 3600)],
      [good({ aud: AUDIENCE }), refused(WRONG_ISSUER)],
      [good({ iss: `${ISSUER}/`, aud: AUDIENCE }), refused(WRONG_ISSUER)],
      [good({ iss: ISSUER }), refused(WRONG_AUDIENCE)],
      [good({ iss: ISSUER, aud: ['other'] }), refused(WRONG_AUDIENCE)],
      [good({ iss: ISSUER, aud: 'Notes-Service' }), refused(WRONG_AUDIENCE)],
    ]
    for (const [claims, expected] of cases) {
      await assertVerdict(tokens, await signed(KEY, { alg: 'HS256' }, claims), expected)
    }
  })

  it('reads every Authorization header and the URL of a node:http request', async () => {
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    const token = await signed(KEY, { alg: 'HS256' }, good())
    const app = Fastify()
    app.get('/api/note', (request) => tokens.verifyRequest(request.raw))
    const cases: [string, Record<string, string | string[]>, TokenVerdict][] = [
      ['/api/note', { authorization: bearer(token) }, user('alice', T + 3600)],
      ['/api/note', {}, refused(MISSING)],
      ['/api/note', { authorization: [bearer(token), bearer(token)] }, refused(DUPLICATE)],
      ['/api/note?access_token=x', { authorization: bearer(token) }, refused(IN_QUERY)],
    ]
    for (const [url, headers, expected] of cases) {
      const response = await app.inject({ method: 'GET', url, headers })
      assert.deepEqual(response.json(), expected, url)
    }
    await app.close()
  })

  it('checks against the real clock by default', async () => {
    const tokens = new UserTokens({ secret: SECRET })
    const now = Math.floor(Date.now() / 1000)
    const fresh = await signed(KEY, { alg: 'HS256' }, { sub: 'alice', exp: now + 600 })
    await assertVerdict(tokens, fresh, user('alice', now + 600))
    const old = await signed(KEY, { alg: 'HS256' }, { sub: 'alice', exp: now - 600 })
    const verdict = await tokens.verify(bearer(old), URL_PATH)
    assert.equal(verdict.ok, false)
  })
})

describe('the answer to a refused token', () => {
  const refusal: TokenRefusal = { ok: false, status: 401, detail: NO_EXPIRY }
  const unavailable: TokenRefusal = { ok: false, status: 503, detail: UNAVAILABLE, retryAfter: 30 }

  it('is an RFC 6750 challenge for a 401 and Retry-After for a 503 (the lanes send them with the problem)', () => {
    assert.deepEqual(tokenRefusalHeaders(refusal), {
      'www-authenticate': `Bearer error="invalid_token", error_description="${NO_EXPIRY}"`,
    })
    assert.deepEqual(tokenRefusalHeaders(unavailable), { 'retry-after': '30' })
  })

  it("keeps the challenge's error_description to the characters RFC 6750 allows", () => {
    const odd: TokenRefusal = { ok: false, status: 401, detail: 'a "quoted" \\ zoë\n' }
    assert.deepEqual(tokenRefusalHeaders(odd), {
      'www-authenticate': `Bearer error="invalid_token", error_description="a 'quoted' ? zo??"`,
    })
  })
})

/** A UserTokens on `server`'s key set, with a short timeout and cooldown unless told otherwise. */
/**
 * The cooldown of the tests that check what happens within it and after it: long enough that the
 * steps meant to fall within it do on a machine whose cores other test files keep busy.
 */
const COOLDOWN_MS = 1000

function jwksTokens(
  server: JwksServer,
  options: {
    timeoutMs?: number
    cooldownMs?: number
    maxAgeMs?: number
    tokenTypes?: readonly string[]
  } = {},
): UserTokens {
  return new UserTokens({
    jwksUrl: server.url,
    issuer: ISSUER,
    audience: AUDIENCE,
    jwksTimeoutMs: options.timeoutMs ?? 2000,
    jwksCooldownMs: options.cooldownMs ?? 30_000,
    jwksMaxAgeMs: options.maxAgeMs ?? 600_000,
    ...(options.tokenTypes === undefined ? {} : { tokenTypes: options.tokenTypes }),
  })
}

const now = (): number => Math.floor(Date.now() / 1000)
/** The exp of the identity provider's tokens: an hour after these tests start. */
const EXP = now() + 3600
const idpClaims = (claims: Record<string, unknown> = {}): JWTPayload => ({
  sub: 'alice',
  iss: ISSUER,
  aud: AUDIENCE,
  iat: now(),
  exp: EXP,
  ...claims,
})
/** An access token of the identity provider (typ at+jwt), signed with `key`. */
const idpToken = (key: SigningKey, claims: Record<string, unknown> = {}): Promise<string> =>
  signed(key.privateKey, { alg: key.alg, kid: key.kid, typ: 'at+jwt' }, idpClaims(claims))

/** Waits for `check` to hold, up to 5 s: for what a background fetch does. */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  for (const started = Date.now(); !(await check()); await sleep(20)) {
    assert.ok(Date.now() - started < 5000, 'did not happen within 5 s')
  }
}

describe('UserTokens with keys from a JWKS', () => {
  it('refuses a JWKS address that is not http(s), and a missing issuer or audience', () => {
    const base = { issuer: ISSUER, audience: AUDIENCE }
    assert.throws(() => new UserTokens({ ...base, jwksUrl: new URL('file:///etc/jwks.json') }), {
      name: 'TypeError',
      message: 'The JWKS address must be an http: or https: URL.',
    })
    assert.throws(
      () => new UserTokens({ ...base, issuer: '', jwksUrl: new URL('https://idp.example/jwks') }),
      { name: 'TypeError', message: 'Tokens from a JWKS need an issuer and an audience to check.' },
    )
    assert.throws(
      () => new UserTokens({ ...base, jwksUrl: new URL('https://x/'), jwksTimeoutMs: 0 }),
      { name: 'RangeError', message: 'jwksTimeoutMs must be a positive whole number of ms.' },
    )
  })

  it('verifies tokens of every listed algorithm with one fetch of the set', async () => {
    const keys = await Promise.all(
      [
        'RS256',
        'RS384',
        'RS512',
        'PS256',
        'PS384',
        'PS512',
        'ES256',
        'ES384',
        'ES512',
        'EdDSA',
      ].map((name, i) => signingKey(name, `k${i}`)),
    )
    const server = await JwksServer.start(keys.map((key) => key.jwk))
    try {
      const tokens = jwksTokens(server)
      for (const key of keys) {
        const token = await idpToken(key, { sub: `user-${key.alg}` })
        const verdict = await tokens.verify(bearer(token), URL_PATH)
        assert.equal(verdict.ok && verdict.user, `user-${key.alg}`, key.alg)
      }
      assert.equal(server.requests, 1)
    } finally {
      await server.close()
    }
  })

  it('checks the issuer, the audience, exp and the signature', async () => {
    const key = await signingKey('ES256', 'k1')
    const stranger = await signingKey('ES256', 'k1')
    const server = await JwksServer.start([key.jwk])
    try {
      const tokens = jwksTokens(server)
      const cases: [Promise<string>, TokenVerdict][] = [
        [idpToken(key, { iss: 'https://evil.example' }), refused(WRONG_ISSUER)],
        [idpToken(key, { iss: undefined }), refused(WRONG_ISSUER)],
        [idpToken(key, { aud: 'another-service' }), refused(WRONG_AUDIENCE)],
        [idpToken(key, { aud: undefined }), refused(WRONG_AUDIENCE)],
        [idpToken(key, { exp: undefined }), refused(NO_EXPIRY)],
        [idpToken(key, { sub: undefined }), refused(NO_SUBJECT)],
        [idpToken(key, { exp: 1_700_000_000 }), refused(expiredAt('2023-11-14T22:13:20Z'))],
        [idpToken(stranger), refused(BAD_SIGNATURE)],
        [idpToken(key, { exp: EXP + 60 }), user('alice', EXP + 60)],
      ]
      for (const [token, expected] of cases) await assertVerdict(tokens, await token, expected)
    } finally {
      await server.close()
    }
  })

  it('refuses HS256 signed with the public key (algorithm confusion), and alg none', async () => {
    const key = await signingKey('RS256', 'k1')
    const server = await JwksServer.start([key.jwk])
    try {
      const tokens = jwksTokens(server)
      await assertVerdict(tokens, await idpToken(key), user('alice', EXP))
      const pem = await exportSPKI(key.publicKey)
      const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64')
      for (const secret of [Buffer.from(pem), der, Buffer.from(JSON.stringify(key.jwk))]) {
        const forged = await signed(secret, { alg: 'HS256', kid: 'k1' }, idpClaims())
        await assertVerdict(
          tokens,
          forged,
          refused(alg('is HS256, which is not accepted here', JWKS_LIST)),
        )
      }
      await assertVerdict(
        tokens,
        unsigned({ alg: 'none', kid: 'k1' }, idpClaims()),
        refused(alg('is none, which is not accepted here', JWKS_LIST)),
      )
      assert.equal(server.requests, 1)
    } finally {
      await server.close()
    }
  })

  it('refuses a token whose key in the set cannot be used (RSA under 2048 bits)', async () => {
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 })
    const jwk = { ...small.publicKey.export({ format: 'jwk' }), kid: 'small', alg: 'RS256' }
    const server = await JwksServer.start([jwk])
    try {
      // jose will not sign with such a key either: signed here.
      const input = unsigned({ alg: 'RS256', kid: 'small', typ: 'at+jwt' }, idpClaims()).slice(
        0,
        -1,
      )
      const token = `${input}.${sign('sha256', Buffer.from(input), small.privateKey).toString('base64url')}`
      await assertVerdict(
        jwksTokens(server),
        token,
        refused(
          'The token cannot be checked: the key it names cannot be used for its algorithm. Get a new token.',
        ),
      )
    } finally {
      await server.close()
    }
  })

  it('finds the key of a token without kid among several of its type', async () => {
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((kid) => signingKey('ES256', kid)))
    const [first, second, outsider] = [a, b, c] as [SigningKey, SigningKey, SigningKey]
    const server = await JwksServer.start([first.jwk, second.jwk])
    try {
      const tokens = jwksTokens(server)
      const sign = (key: SigningKey): Promise<string> =>
        signed(key.privateKey, { alg: 'ES256', typ: 'at+jwt' }, idpClaims())
      await assertVerdict(tokens, await sign(second), user('alice', EXP))
      await assertVerdict(tokens, await sign(first), user('alice', EXP))
      await assertVerdict(tokens, await sign(outsider), refused(BAD_SIGNATURE))
    } finally {
      await server.close()
    }
  })

  it('picks up a rotated key without a restart, once the cooldown has passed', async () => {
    const [old, fresh] = await Promise.all([signingKey('ES256', 'old'), signingKey('ES256', 'new')])
    const server = await JwksServer.start([old.jwk])
    try {
      const tokens = jwksTokens(server, { cooldownMs: COOLDOWN_MS })
      await assertVerdict(tokens, await idpToken(old), user('alice', EXP))
      server.keys = [old.jwk, fresh.jwk]
      // Within the cooldown the set may be older than the token: 503 until the next fetch.
      await assertVerdict(tokens, await idpToken(fresh), refreshing('new', 1))
      assert.equal(server.requests, 1)
      await sleep(COOLDOWN_MS + 50)
      await assertVerdict(tokens, await idpToken(fresh, { sub: 'bob' }), user('bob', EXP))
      await assertVerdict(tokens, await idpToken(old), user('alice', EXP))
      assert.equal(server.requests, 2)
    } finally {
      await server.close()
    }
  })

  it('fetches the set at most once per cooldown, however many unknown kids arrive', async () => {
    const key = await signingKey('ES256', 'k1')
    const server = await JwksServer.start([key.jwk])
    try {
      const tokens = jwksTokens(server, { cooldownMs: COOLDOWN_MS })
      const strangers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => signingKey('ES256', `unknown-${i}`)),
      )
      const burst = await Promise.all(strangers.map((stranger) => idpToken(stranger)))
      const all = await Promise.all(burst.map((token) => tokens.verify(bearer(token), URL_PATH)))
      assert.deepEqual(
        all,
        strangers.map((stranger) => refreshing(stranger.kid, 1)),
      )
      assert.equal(server.requests, 1, 'the first fetch, shared by the whole burst')
      await sleep(COOLDOWN_MS + 50)
      const again = await Promise.all(burst.map((token) => tokens.verify(bearer(token), URL_PATH)))
      for (const token of burst) await tokens.verify(bearer(token), URL_PATH)
      assert.deepEqual(again, all)
      assert.equal(server.requests, 2, 'one refetch for the second burst, none for the third')
      await assertVerdict(tokens, await idpToken(key), user('alice', EXP))
      assert.equal(server.requests, 2)
    } finally {
      await server.close()
    }
  })

  it('refuses a made-up kid of an old token at once, and fetches nothing for it', async () => {
    const [key, stranger] = await Promise.all([
      signingKey('ES256', 'k1'),
      signingKey('ES256', 'made-up'),
    ])
    const server = await JwksServer.start([key.jwk])
    try {
      const tokens = jwksTokens(server)
      await assertVerdict(tokens, await idpToken(key), user('alice', EXP))
      assert.equal(server.requests, 1)
      // The set was fetched at least 30 s (the leeway) after these were issued: their key is not
      // coming. No iat counts as old. Within the 30 s cooldown, and no fetch.
      for (const claims of [{ iat: now() - 31 }, { iat: now() - 86_400 }, { iat: undefined }]) {
        await assertVerdict(
          tokens,
          await idpToken(stranger, claims),
          refused(unknownKid('made-up')),
        )
      }
      assert.equal(server.requests, 1)
      // Issued within the leeway of the fetch: the provider's clock may be ahead; 503, retry.
      const recent = await idpToken(stranger, { iat: now() - 20 })
      const verdict = await tokens.verify(bearer(recent), URL_PATH)
      const retryAfter = (verdict as { retryAfter?: number }).retryAfter ?? 0
      assert.ok(retryAfter >= 29 && retryAfter <= 30, `Retry-After ${retryAfter}`)
      assert.deepEqual(verdict, refreshing('made-up', retryAfter))
      assert.equal(server.requests, 1)
    } finally {
      await server.close()
    }
  })

  it('lets no stream of made-up kids hold a new key back beyond one cooldown', async () => {
    const [old, fresh] = await Promise.all([signingKey('ES256', 'old'), signingKey('ES256', 'new')])
    const strangers = await Promise.all(
      Array.from({ length: 5 }, (_, i) => signingKey('ES256', `made-up-${i}`)),
    )
    const server = await JwksServer.start([old.jwk])
    try {
      const tokens = jwksTokens(server, { cooldownMs: COOLDOWN_MS })
      await assertVerdict(tokens, await idpToken(old), user('alice', EXP))
      // Strangers keep sending fresh tokens with made-up kids, without pause, from here on.
      let sending = true
      const stream = (async () => {
        for (let i = 0; sending; i++) {
          const stranger = strangers[i % strangers.length] as SigningKey
          await tokens.verify(bearer(await idpToken(stranger)), URL_PATH)
          await sleep(5)
        }
      })()
      let verdict: TokenVerdict
      let waited: number
      try {
        await sleep(100)
        server.keys = [old.jwk, fresh.jwk]
        const rotated = await idpToken(fresh, { sub: 'bob' })
        const started = Date.now()
        verdict = await tokens.verify(bearer(rotated), URL_PATH)
        assert.deepEqual(verdict, refreshing('new', 1), 'within the cooldown of the last fetch')
        while (!verdict.ok) {
          assert.deepEqual(verdict, refreshing('new', 1))
          await sleep(50)
          verdict = await tokens.verify(bearer(rotated), URL_PATH)
        }
        waited = Date.now() - started
      } finally {
        sending = false
        await stream
      }
      assert.deepEqual(verdict, user('bob', EXP))
      assert.ok(waited <= COOLDOWN_MS + 500, `the new key took ${waited} ms`)
    } finally {
      await server.close()
    }
  })

  it('keeps verifying with cached keys while the endpoint is down; a new kid gets 503', async () => {
    const [known, rotated] = await Promise.all([
      signingKey('ES256', 'k1'),
      signingKey('ES256', 'k2'),
    ])
    const server = await JwksServer.start([known.jwk])
    try {
      const tokens = jwksTokens(server, { cooldownMs: COOLDOWN_MS })
      await assertVerdict(tokens, await idpToken(known), user('alice', EXP))
      server.mode = 'fail'
      server.keys = [known.jwk, rotated.jwk]
      await sleep(COOLDOWN_MS + 50)
      await assertVerdict(tokens, await idpToken(known), user('alice', EXP))
      assert.equal(server.requests, 1, 'a known kid needs no fetch')
      const newcomer = await idpToken(rotated)
      const verdict = await tokens.verify(bearer(newcomer), URL_PATH)
      assert.deepEqual(verdict, { ok: false, status: 503, detail: UNAVAILABLE, retryAfter: 1 })
      assert.equal(server.requests, 2)
      // Within the cooldown after a failure, no new attempt: the same 503 at once.
      assert.deepEqual(await tokens.verify(bearer(newcomer), URL_PATH), verdict)
      assert.equal(server.requests, 2)
      await assertVerdict(tokens, await idpToken(known), user('alice', EXP))
      // Back up: the next fetch, after the cooldown, finds the new key.
      server.mode = 'serve'
      await sleep(COOLDOWN_MS + 50)
      await assertVerdict(tokens, newcomer, user('alice', EXP))
      assert.equal(server.requests, 3)
    } finally {
      await server.close()
    }
  })

  it('answers 503 when no key was ever fetched: the endpoint fails, answers garbage, hangs, stalls or refuses', async () => {
    const key = await signingKey('ES256', 'k1')
    const token = await idpToken(key)
    // Retry-After is the rest of the 30 s cooldown, counted from the fetch's start.
    const unavailable = (verdict: unknown, started: number, mode: string): void => {
      const retryAfter = (verdict as { retryAfter?: number }).retryAfter ?? 0
      const least = Math.max(1, Math.ceil((started + 30_000 - Date.now()) / 1000))
      assert.ok(retryAfter >= least && retryAfter <= 30, `${mode}: Retry-After ${retryAfter}`)
      assert.deepEqual(verdict, { ok: false, status: 503, detail: UNAVAILABLE, retryAfter }, mode)
    }
    for (const mode of ['fail', 'garbage'] as const) {
      const server = await JwksServer.start([key.jwk])
      try {
        server.mode = mode
        const tokens = jwksTokens(server)
        const started = Date.now()
        unavailable(await tokens.verify(bearer(token), URL_PATH), started, mode)
        unavailable(await tokens.verify(bearer(token), URL_PATH), started, mode)
        assert.equal(server.requests, 1, mode)
      } finally {
        await server.close()
      }
    }
    for (const mode of ['hang', 'stall'] as const) {
      const server = await JwksServer.start([key.jwk])
      try {
        server.mode = mode
        const started = Date.now()
        const verdict = await jwksTokens(server, { timeoutMs: 300 }).verify(bearer(token), URL_PATH)
        assert.ok(Date.now() - started < 300 + 2000, `${mode}: took ${Date.now() - started} ms`)
        unavailable(verdict, started, mode)
      } finally {
        await server.close()
      }
    }
    const closed = await JwksServer.start([key.jwk])
    await closed.close()
    const started = Date.now()
    unavailable(await jwksTokens(closed).verify(bearer(token), URL_PATH), started, 'refused')
  })

  it('gives up on a slow endpoint after the timeout, and cached keys stay quick', async () => {
    const [known, rotated] = await Promise.all([
      signingKey('ES256', 'k1'),
      signingKey('ES256', 'k2'),
    ])
    const server = await JwksServer.start([known.jwk])
    try {
      server.mode = 'hang'
      const timeoutMs = 300
      const tokens = jwksTokens(server, { timeoutMs, cooldownMs: 500 })
      let started = Date.now()
      const first = await tokens.verify(bearer(await idpToken(known)), URL_PATH)
      // A generous bound: the point is that the request ends, not how close to the timeout.
      assert.ok(Date.now() - started < timeoutMs + 2000, `took ${Date.now() - started} ms`)
      assert.deepEqual(first, { ok: false, status: 503, detail: UNAVAILABLE, retryAfter: 1 })

      server.mode = 'serve'
      await sleep(550)
      await assertVerdict(tokens, await idpToken(known), user('alice', EXP))
      server.mode = 'hang'
      await sleep(550)
      started = Date.now()
      const rotatedToken = await idpToken(rotated)
      const [cached, fresh] = await Promise.all([
        idpToken(known).then((token) => tokens.verify(bearer(token), URL_PATH)),
        tokens.verify(bearer(rotatedToken), URL_PATH),
      ])
      assert.deepEqual(cached, user('alice', EXP))
      assert.deepEqual(fresh, { ok: false, status: 503, detail: UNAVAILABLE, retryAfter: 1 })
      assert.ok(Date.now() - started < timeoutMs + 2000, `took ${Date.now() - started} ms`)
      assert.equal(server.requests, 3)
    } finally {
      await server.close()
    }
  })

  it('fetches an aged set again in the background: a key dropped from it stops working', async () => {
    const [dropped, kept] = await Promise.all([
      signingKey('ES256', 'k1'),
      signingKey('ES256', 'k2'),
    ])
    const server = await JwksServer.start([dropped.jwk, kept.jwk])
    try {
      const tokens = jwksTokens(server, { cooldownMs: 200, maxAgeMs: 300 })
      // Issued over 30 s before the fetch that drops its key: 401 then, not 503 (the leeway).
      const token = await idpToken(dropped, { iat: now() - 60 })
      await assertVerdict(tokens, token, user('alice', EXP))
      server.keys = [kept.jwk]
      await sleep(350)
      // The aged set still answers this request; the fetch it starts answers the next ones.
      await assertVerdict(tokens, token, user('alice', EXP))
      await eventually(async () => server.requests === 2)
      await eventually(async () => !(await tokens.verify(bearer(token), URL_PATH)).ok)
      await assertVerdict(tokens, token, refused(unknownKid('k1')))
      await assertVerdict(tokens, await idpToken(kept), user('alice', EXP))
    } finally {
      await server.close()
    }
  })
})

describe('UserTokens: access tokens only (the header typ, and ID tokens by their claims)', () => {
  const ID_TOKEN =
    'The token is an ID token, not an access token: it tells an app who signed in (it carries nonce, at_hash, c_hash or s_hash, or typ ID) and grants no access to an API. Send the access token the identity provider issued with it.'
  const TAKES =
    'is not accepted here (accepted: at+jwt): this service takes access tokens (RFC 9068), not ID tokens or other JWTs.'
  const typed = (key: SigningKey, typ: string | undefined, claims: Record<string, unknown> = {}) =>
    signed(
      key.privateKey,
      { alg: key.alg, kid: key.kid, ...(typ === undefined ? {} : { typ }) },
      idpClaims(claims),
    )

  it('takes only at+jwt from a key set by default, in any case, application/ or not', async () => {
    const key = await signingKey('ES256', 'k1')
    const server = await JwksServer.start([key.jwk])
    try {
      const tokens = jwksTokens(server)
      for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt', 'Application/At+Jwt']) {
        await assertVerdict(tokens, await typed(key, typ), user('alice', EXP))
      }
      const cases: [unknown, string][] = [
        [
          'JWT',
          `The token type (typ) is JWT, which ${TAKES} If your identity provider types its access tokens JWT, accept them with AUTH_TOKEN_TYPES=at+jwt,JWT.`,
        ],
        [
          undefined,
          `The token has no type (typ), which ${TAKES} If your identity provider's access tokens have no typ, accept them with AUTH_TOKEN_TYPES=at+jwt,none.`,
        ],
        [
          'application/jwt',
          `The token type (typ) is application/jwt, which ${TAKES} If your identity provider types its access tokens application/jwt, accept them with AUTH_TOKEN_TYPES=at+jwt,application/jwt.`,
        ],
        [
          42,
          `The token type (typ) ${TAKES} If your identity provider types its access tokens otherwise, list its type in AUTH_TOKEN_TYPES.`,
        ],
        [
          'at+jwt ',
          `The token type (typ) ${TAKES} If your identity provider types its access tokens otherwise, list its type in AUTH_TOKEN_TYPES.`,
        ],
      ]
      for (const [typ, detail] of cases) {
        const token = await new SignJWT(idpClaims())
          .setProtectedHeader({
            alg: 'ES256',
            kid: 'k1',
            ...(typ === undefined ? {} : { typ }),
          } as JWTHeaderParameters)
          .sign(key.privateKey)
        await assertVerdict(tokens, token, refused(detail))
      }
      assert.equal(server.requests, 1, 'a refused typ costs no fetch')
    } finally {
      await server.close()
    }
  })

  it('takes the types AUTH_TOKEN_TYPES lists besides at+jwt', async () => {
    const key = await signingKey('ES256', 'k1')
    const server = await JwksServer.start([key.jwk])
    try {
      const tokens = jwksTokens(server, { tokenTypes: ['at+jwt', 'JWT'] })
      for (const typ of ['at+jwt', 'JWT', 'jwt', 'application/JWT']) {
        await assertVerdict(tokens, await typed(key, typ), user('alice', EXP))
      }
      await assertVerdict(
        tokens,
        await typed(key, undefined),
        refused(
          "The token has no type (typ), which is not accepted here (accepted: at+jwt, JWT): this service takes access tokens (RFC 9068), not ID tokens or other JWTs. If your identity provider's access tokens have no typ, accept them with AUTH_TOKEN_TYPES=at+jwt,JWT,none.",
        ),
      )
      // at+jwt stays accepted when the list leaves it out; none stands for no typ.
      const untyped = jwksTokens(server, { tokenTypes: ['none'] })
      await assertVerdict(untyped, await typed(key, undefined), user('alice', EXP))
      await assertVerdict(untyped, await typed(key, 'at+jwt'), user('alice', EXP))
      await assertVerdict(
        untyped,
        await typed(key, 'JWT'),
        refused(
          'The token type (typ) is JWT, which is not accepted here (accepted: at+jwt, no typ): this service takes access tokens (RFC 9068), not ID tokens or other JWTs. If your identity provider types its access tokens JWT, accept them with AUTH_TOKEN_TYPES=at+jwt,none,JWT.',
        ),
      )
    } finally {
      await server.close()
    }
  })

  it('refuses an ID token by its claims, whatever the types accepted', async () => {
    const key = await signingKey('ES256', 'k1')
    const server = await JwksServer.start([key.jwk])
    try {
      const wide = jwksTokens(server, { tokenTypes: ['JWT', 'none'] })
      const idClaims: Record<string, unknown>[] = [
        { nonce: 'n-0S6_WzA2Mj' },
        { at_hash: '77QmUPtjPfzWtF2AnpK9RQ' },
        { c_hash: 'LDktKdoQak3Pk0cnXxCltA' },
        { s_hash: 'hJ9m8lqX0VvU5G2wJt0hUA' },
        { typ: 'ID' },
        { typ: 'id' },
        { nonce: 'n', typ: 'ID' },
      ]
      for (const claims of idClaims) {
        for (const typ of ['at+jwt', 'JWT', undefined]) {
          await assertVerdict(wide, await typed(key, typ, claims), refused(ID_TOKEN))
        }
      }
      // Keycloak (until 2024) copied nonce into its access tokens, whose typ claim is Bearer.
      await assertVerdict(
        wide,
        await typed(key, 'JWT', { nonce: 'n', typ: 'Bearer' }),
        user('alice', EXP),
      )
      await assertVerdict(
        wide,
        await typed(key, 'JWT', { typ: 'Bearer', azp: 'app' }),
        user('alice', EXP),
      )
      assert.equal(server.requests, 1)
    } finally {
      await server.close()
    }
  })

  it("takes an app's own tokens with at+jwt, JWT or no typ, unless AUTH_TOKEN_TYPES is set", async () => {
    const sign = (typ: string | undefined, claims: JWTPayload = {}): Promise<string> =>
      new SignJWT(good(claims))
        .setProtectedHeader({ alg: 'HS256', ...(typ === undefined ? {} : { typ }) })
        .sign(KEY)
    const tokens = new UserTokens({ secret: SECRET, ...AT_T })
    for (const typ of ['at+jwt', 'JWT', undefined]) {
      await assertVerdict(tokens, await sign(typ), user('alice', T + 3600))
      await assertVerdict(tokens, await sign(typ, { at_hash: 'x' }), refused(ID_TOKEN))
    }
    await assertVerdict(
      tokens,
      await sign('id+jwt'),
      refused(
        'The token type (typ) is id+jwt, which is not accepted here (accepted: at+jwt, JWT, no typ): this service takes access tokens (RFC 9068), not ID tokens or other JWTs. If your identity provider types its access tokens id+jwt, accept them with AUTH_TOKEN_TYPES=at+jwt,JWT,none,id+jwt.',
      ),
    )
    const strict = new UserTokens({ secret: SECRET, tokenTypes: ['at+jwt'], ...AT_T })
    await assertVerdict(strict, await sign('at+jwt'), user('alice', T + 3600))
    await assertVerdict(
      strict,
      await sign(undefined),
      refused(
        `The token has no type (typ), which ${TAKES} If your identity provider's access tokens have no typ, accept them with AUTH_TOKEN_TYPES=at+jwt,none.`,
      ),
    )
  })
})
