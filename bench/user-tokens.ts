/**
 * W1 and W3 with user tokens on against off: the real service (`dist/src/server.js`) started
 * fresh for each leg, the legs alternating in order per round, autocannon (50 connections) in
 * its own process.
 * - W1: GET one note of 1,000; with tokens, one user's 1,000, every request with that user's
 *   token (after the first, the service decides from the verdict it remembered).
 * - W3: GET the list of 10,000 notes; with tokens, one user's 10,000 among 10 users with 10,000
 *   each (each notebook's list is cached as the one list is without tokens).
 * - W4: POST a ~100-byte note to a store that grows; with tokens, to one user's notebook.
 * Tokens are HS256 with AUTH_JWT_SECRET, or ES256 with AUTH_JWKS_URL: a key set this process
 * serves on 127.0.0.1, as an identity provider would.
 *
 * With `postgres` last, every leg's service keeps its notes in a fresh database of one throwaway
 * PostgreSQL cluster (durable commits), removed at the end.
 *
 *   npm run compile && node dist/bench/user-tokens.js [rounds=3] [seconds=8] [W1,W3,W4] \
 *     [HS256|ES256] [memory|postgres]
 */
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { Agent, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { type CryptoKey, exportJWK, generateKeyPair, SignJWT } from 'jose'
import { send } from './http-client.js'
import { BenchCluster } from './postgres-bench.js'
import { spawnService } from './spawn-service.js'

const ROUNDS = Number(process.argv[2] ?? 3)
const SECONDS = Number(process.argv[3] ?? 8)
type Workload = 'W1' | 'W3' | 'W4'
const WORKLOADS = (process.argv[4] ?? 'W1,W3,W4').split(',') as Workload[]
const ALGORITHM = process.argv[5] ?? 'HS256'
if (ALGORITHM !== 'HS256' && ALGORITHM !== 'ES256') {
  throw new Error(`the algorithm is HS256 or ES256, not ${ALGORITHM}`)
}
const STORE = process.argv[6] ?? 'memory'
if (STORE !== 'memory' && STORE !== 'postgres') {
  throw new Error(`the store is memory or postgres, not ${STORE}`)
}
const SECRET = 'bench-secret-of-32-bytes-or-more-000000'
const ISSUER = 'https://id.bench.example'
const AUDIENCE = 'notes-bench'
const KID = 'bench-es256'
/** W4's body: about 100 bytes, as the bench's. */
const SMALL_NOTE = JSON.stringify({ title: 'a note', body: 'x'.repeat(80) })
const AUTOCANNON = fileURLToPath(new URL('../../node_modules/.bin/autocannon', import.meta.url))

interface Leg {
  rps: number
  non2xx: number
}

/**
 * An ES256 key pair, its public half served as `{"keys":[jwk]}` from 127.0.0.1 for the whole
 * run: every leg's fresh service fetches it as it would a provider's `jwks_uri`.
 */
async function keySet(): Promise<{ privateKey: CryptoKey; url: string; close: () => void }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256')
  const jwk = { ...(await exportJWK(publicKey)), kid: KID, alg: 'ES256', use: 'sig' }
  const body = JSON.stringify({ keys: [jwk] })
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' }).end(body)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return { privateKey, url: `http://127.0.0.1:${port}/jwks`, close: () => server.close() }
}

const KEYS = ALGORITHM === 'ES256' ? await keySet() : undefined
const CLUSTER = STORE === 'postgres' ? await BenchCluster.start(undefined) : undefined

/** POSTs `count` small notes with `headers`, 50 at a time over keep-alive; the last one's id. */
async function preload(port: number, count: number, headers: Record<string, string>) {
  const agent = new Agent({ keepAlive: true, maxSockets: 50 })
  let next = 0
  let last = 0
  const worker = async (): Promise<void> => {
    while (next < count) {
      const n = next++
      const answer = await send(port, 'POST', '/api/note', {
        agent,
        headers,
        body: JSON.stringify({ title: `note ${n}`, body: 'x'.repeat(100) }),
      })
      if (answer.status !== 200) throw new Error(`preload answered ${answer.status}`)
      last = Math.max(last, (JSON.parse(answer.body) as { data: { id: number } }).data.id)
    }
  }
  await Promise.all(Array.from({ length: 50 }, worker))
  agent.destroy()
  return last
}

async function leg(workload: Workload, tokens: boolean): Promise<Leg> {
  const service = await spawnService({
    ...(CLUSTER === undefined ? {} : { DATABASE_URL: (await CLUSTER.createDatabase()).url }),
    // A user's caps as the service's, so that W4's notebook grows as the one store does.
    ...(tokens
      ? {
          ...(KEYS === undefined
            ? { AUTH_JWT_SECRET: SECRET }
            : { AUTH_JWKS_URL: KEYS.url, AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE }),
          MAX_NOTES_PER_USER: '1000000',
          MAX_BYTES_PER_USER: '268435456',
        }
      : {}),
  })
  try {
    const { port } = service
    const tokenOf = (sub: string) =>
      KEYS === undefined
        ? new SignJWT({ sub })
            .setProtectedHeader({ alg: 'HS256' })
            .setExpirationTime('2h')
            .sign(Buffer.from(SECRET))
        : new SignJWT({ sub })
            .setProtectedHeader({ alg: 'ES256', kid: KID })
            .setIssuer(ISSUER)
            .setAudience(AUDIENCE)
            .setExpirationTime('2h')
            .sign(KEYS.privateKey)
    const auth: Record<string, string> = tokens
      ? { authorization: `Bearer ${await tokenOf('user-0')}` }
      : {}
    if (tokens) {
      // The token's first request, made here: with ES256 it fetches the key set, which this
      // process could not serve while execFileSync waits for autocannon (W4 has no preload).
      const first = await send(port, 'GET', '/api/note', { headers: auth })
      if (first.status !== 200) throw new Error(`the first request answered ${first.status}`)
    }
    const notes = workload === 'W1' ? 1_000 : workload === 'W3' ? 10_000 : 0
    const id = notes === 0 ? 0 : await preload(port, notes, auth)
    if (tokens && workload === 'W3') {
      for (let user = 1; user < 10; user++) {
        await preload(port, notes, { authorization: `Bearer ${await tokenOf(`user-${user}`)}` })
      }
    }
    const path = workload === 'W1' ? `/api/note/${id}` : '/api/note'
    const args = [
      '-c',
      '50',
      ...(workload === 'W4'
        ? ['-m', 'POST', '-H', 'content-type: application/json', '-b', SMALL_NOTE]
        : []),
      ...Object.entries(auth).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
      `http://127.0.0.1:${port}${path}`,
    ]
    execFileSync(AUTOCANNON, ['-d', '2', ...args], { stdio: 'ignore' })
    const result = JSON.parse(
      execFileSync(AUTOCANNON, ['-d', String(SECONDS), '-j', ...args]).toString(),
    ) as { requests: { average: number }; non2xx: number }
    if (result.non2xx > 0) throw new Error(`${workload}: ${result.non2xx} answers were not 2xx`)
    return { rps: result.requests.average, non2xx: result.non2xx }
  } finally {
    await service.stop()
  }
}

console.log(`user tokens: ${ALGORITHM}, store: ${STORE}`)
try {
  for (const workload of WORKLOADS) {
    const ratios: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const results = new Map<boolean, Leg>()
      for (const tokens of round % 2 === 0 ? [false, true] : [true, false]) {
        results.set(tokens, await leg(workload, tokens))
      }
      const off = results.get(false) as Leg
      const on = results.get(true) as Leg
      ratios.push(on.rps / off.rps)
      console.log(
        `${workload} round ${round + 1}: off ${Math.round(off.rps)} req/s, on ${Math.round(on.rps)} req/s (non-2xx ${off.non2xx + on.non2xx}), on/off ${(on.rps / off.rps).toFixed(3)}`,
      )
    }
    ratios.sort((a, b) => a - b)
    console.log(
      `${workload} median on/off: ${(ratios[Math.floor(ratios.length / 2)] as number).toFixed(3)}`,
    )
  }
} finally {
  KEYS?.close()
  await CLUSTER?.destroy()
}
