/**
 * What `UserTokens.verify` costs per call, for a token signed with a shared secret (HS256) and for
 * tokens checked with keys from a JWKS that is already cached (ES256, RS256, EdDSA): one token
 * verified over and over, one call at a time and 64 at a time, in one process, without HTTP.
 * Medians of 5 rounds of `iterations` (default 20,000) verifies after a warm-up round.
 *
 *   npm run compile && node dist/bench/user-token-verify.js [iterations]
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { UserTokens } from '../src/auth/user-tokens.js'

const ITERATIONS = Number(process.argv[2] ?? 20_000)
const SECRET = 'bench-secret-bench-secret-bench-secret!'
const ISSUER = 'https://idp.example'
const AUDIENCE = 'notes-service'

/**
 * Verifies `token` ITERATIONS times, 5 rounds after a warm-up, `inFlight` calls at a time, and
 * prints the median per verify of the wall time and of the CPU time (all threads: WebCrypto runs
 * its work on libuv's pool).
 */
async function measure(name: string, tokens: UserTokens, token: string): Promise<void> {
  const authorization = `Bearer ${token}`
  const url = '/api/note?limit=10'
  const first = await tokens.verify(authorization, url)
  if (!first.ok) throw new Error(`${name}: ${first.detail}`)
  for (const inFlight of [1, 64]) {
    const batch = async (): Promise<void> => {
      for (let i = 0; i < ITERATIONS / inFlight; i++) {
        await Promise.all(Array.from({ length: inFlight }, () => tokens.verify(authorization, url)))
      }
    }
    await batch()
    const wall: number[] = []
    const cpu: number[] = []
    for (let round = 0; round < 5; round++) {
      const cpuBefore = process.cpuUsage()
      const started = process.hrtime.bigint()
      await batch()
      wall.push(Number(process.hrtime.bigint() - started) / ITERATIONS / 1000)
      const { user, system } = process.cpuUsage(cpuBefore)
      cpu.push((user + system) / ITERATIONS)
    }
    const median = (values: number[]): string =>
      (values.sort((a, b) => a - b)[2] as number).toFixed(1)
    console.log(
      `${name.padEnd(22)} ${String(inFlight).padStart(2)} at a time: ${median(wall)} µs wall, ${median(cpu)} µs CPU per verify`,
    )
  }
}

const now = Math.floor(Date.now() / 1000)
const claims = (sign: SignJWT): SignJWT =>
  sign
    .setSubject('alice')
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)

const hs256 = await claims(new SignJWT({}).setProtectedHeader({ alg: 'HS256' })).sign(
  Buffer.from(SECRET),
)
await measure('HS256 (secret)', new UserTokens({ secret: SECRET }), hs256)

const algorithms = ['ES256', 'RS256', 'EdDSA'] as const
const pairs = await Promise.all(algorithms.map((alg) => generateKeyPair(alg)))
const keys = await Promise.all(
  pairs.map(async ({ publicKey }, i) => ({
    ...(await exportJWK(publicKey)),
    kid: `k${i}`,
    alg: algorithms[i],
    use: 'sig',
  })),
)
const server = createServer((_request, response) => {
  response.setHeader('content-type', 'application/json')
  response.end(JSON.stringify({ keys }))
})
server.listen(0, '127.0.0.1')
await once(server, 'listening')
const { port } = server.address() as AddressInfo
const jwksUrl = new URL(`http://127.0.0.1:${port}/jwks`)
for (const [i, alg] of algorithms.entries()) {
  const token = await claims(
    new SignJWT({})
      .setProtectedHeader({ alg, kid: `k${i}` })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE),
  ).sign((pairs[i] as (typeof pairs)[number]).privateKey)
  await measure(
    `${alg} (cached JWKS)`,
    new UserTokens({ jwksUrl, issuer: ISSUER, audience: AUDIENCE }),
    token,
  )
}
server.close()
