/**
 * W1 (GET one note of 1,000 over 50 keep-alive connections) with user tokens on against off: the
 * real service (`dist/src/server.js`) started fresh for each leg, the legs alternating in order
 * per round, autocannon in its own process. With tokens on, every request carries the same user
 * token, so after the first the service decides from the verdict it remembered.
 *
 *   npm run compile && node dist/bench/user-tokens-w1.js [rounds=3] [seconds=8]
 */
import { execFileSync, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { SignJWT } from 'jose'

const ROUNDS = Number(process.argv[2] ?? 3)
const SECONDS = Number(process.argv[3] ?? 8)
const SECRET = 'bench-secret-of-32-bytes-or-more-000000'
const SERVER = fileURLToPath(new URL('../src/server.js', import.meta.url))
const AUTOCANNON = fileURLToPath(new URL('../../node_modules/.bin/autocannon', import.meta.url))

interface Leg {
  rps: number
  non2xx: number
}

async function leg(tokens: boolean): Promise<Leg> {
  const child = spawn(process.execPath, [SERVER], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      ...(tokens ? { AUTH_JWT_SECRET: SECRET } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let text = ''
      child.stdout.on('data', (chunk: Buffer) => {
        text += chunk.toString()
        const found = /listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(text)
        if (found !== null) resolve(Number(found[1]))
      })
      child.once('exit', () => reject(new Error('the service exited before it listened')))
    })
    const token = await new SignJWT({ sub: 'bench' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('2h')
      .sign(Buffer.from(SECRET))
    const auth: Record<string, string> = tokens ? { authorization: `Bearer ${token}` } : {}
    let id = 0
    for (let i = 0; i < 1000; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/api/note`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ title: `note ${i}`, body: 'x'.repeat(100) }),
      })
      id = ((await response.json()) as { data: { id: number } }).data.id
    }
    const args = [
      '-c',
      '50',
      ...Object.entries(auth).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
      `http://127.0.0.1:${port}/api/note/${id}`,
    ]
    execFileSync(AUTOCANNON, ['-d', '2', ...args], { stdio: 'ignore' })
    const result = JSON.parse(
      execFileSync(AUTOCANNON, ['-d', String(SECONDS), '-j', ...args]).toString(),
    ) as { requests: { average: number }; non2xx: number }
    return { rps: result.requests.average, non2xx: result.non2xx }
  } finally {
    child.kill('SIGTERM')
  }
}

const ratios: number[] = []
for (let round = 0; round < ROUNDS; round++) {
  const results = new Map<boolean, Leg>()
  for (const tokens of round % 2 === 0 ? [false, true] : [true, false]) {
    results.set(tokens, await leg(tokens))
  }
  const off = results.get(false) as Leg
  const on = results.get(true) as Leg
  ratios.push(on.rps / off.rps)
  console.log(
    `round ${round + 1}: off ${Math.round(off.rps)} req/s, on ${Math.round(on.rps)} req/s (non-2xx ${off.non2xx + on.non2xx}), on/off ${(on.rps / off.rps).toFixed(3)}`,
  )
}
ratios.sort((a, b) => a - b)
console.log(`median on/off: ${(ratios[Math.floor(ratios.length / 2)] as number).toFixed(3)}`)
