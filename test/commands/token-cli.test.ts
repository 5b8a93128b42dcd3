import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { decodeJwt, decodeProtectedHeader } from 'jose'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { TOKEN_HELP, ttlSeconds } from '../../src/commands/token-command.js'

const run = promisify(execFile)
const CLI = join(fileURLToPath(new URL('../../..', import.meta.url)), 'dist/src/cli.js')
const SECRET = 'a-secret-of-32-bytes-or-more-000'
const USAGE = 'notes-service token --sub NAME [--ttl 1h]'

/** The environment of the tests' runner, with AUTH_JWT_SECRET set to `secret` or (null) unset. */
function envWith(secret: string | null): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.AUTH_JWT_SECRET
  if (secret !== null) env.AUTH_JWT_SECRET = secret
  return env
}

/** `notes-service token ...args` as a child process: its exit code, stdout and stderr. */
async function token(
  args: string[],
  secret: string | null = SECRET,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, 'token', ...args], {
      env: envWith(secret),
    })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const { code, stdout, stderr } = error as { code: number; stdout: string; stderr: string }
    return { code, stdout, stderr }
  }
}

describe('notes-service token', () => {
  it('prints an HS256 token for the sub, valid for an hour, that UserTokens accepts', async () => {
    const before = Math.floor(Date.now() / 1000)
    const { code, stdout, stderr } = await token(['--sub', 'alice'])
    const after = Math.floor(Date.now() / 1000)
    assert.equal(code, 0)
    assert.equal(stderr, '')
    assert.match(stdout, /^[\w-]+\.[\w-]+\.[\w-]+\n$/)
    const jwt = stdout.trimEnd()
    assert.deepEqual(decodeProtectedHeader(jwt), { alg: 'HS256', typ: 'at+jwt' })
    const claims = decodeJwt(jwt)
    assert.deepEqual(Object.keys(claims).sort(), ['exp', 'iat', 'sub'])
    const iat = claims.iat as number
    assert.ok(iat >= before && iat <= after, `iat ${iat} not in [${before}, ${after}]`)
    assert.equal(claims.exp, iat + 3600)
    const verdict = await new UserTokens({ secret: SECRET }).verify(`Bearer ${jwt}`, '/api/note')
    assert.deepEqual(verdict, { ok: true, user: 'alice', exp: iat + 3600, readOnly: false })
    // Typed at+jwt, it stays accepted whatever AUTH_TOKEN_TYPES lists.
    const typed = await new UserTokens({ secret: SECRET, tokenTypes: ['none'] }).verify(
      `Bearer ${jwt}`,
      '/api/note',
    )
    assert.deepEqual(typed, verdict)
    const other = await new UserTokens({ secret: SECRET.replace('a', 'b') }).verify(
      `Bearer ${jwt}`,
      '/api/note',
    )
    assert.equal(other.ok, false)
  })

  it('takes --ttl in s, m, h or d, and --flag=value', async () => {
    const cases: [string[], string, number][] = [
      [['--sub', 'bob', '--ttl', '30s'], 'bob', 30],
      [['--ttl', '15m', '--sub', 'bob'], 'bob', 900],
      [['--sub=carol', '--ttl=7d'], 'carol', 604_800],
      [['--sub', 'zoë 🦊', '--ttl', '2h'], 'zoë 🦊', 7200],
    ]
    const tokens = new UserTokens({ secret: SECRET })
    for (const [args, sub, ttl] of cases) {
      const { code, stdout } = await token(args)
      assert.equal(code, 0, args.join(' '))
      const claims = decodeJwt(stdout.trimEnd())
      assert.equal(claims.exp, (claims.iat as number) + ttl, args.join(' '))
      const verdict = await tokens.verify(`Bearer ${stdout.trimEnd()}`, '/api/note')
      assert.deepEqual(
        verdict,
        { ok: true, user: sub, exp: claims.exp, readOnly: false },
        args.join(' '),
      )
    }
  })

  it('keys with the secret as the service does: surrounding blanks are not part of it', async () => {
    const { code, stdout } = await token(['--sub', 'alice'], ` ${SECRET}\n`)
    assert.equal(code, 0)
    const verdict = await new UserTokens({ secret: SECRET }).verify(
      `Bearer ${stdout.trimEnd()}`,
      '/api/note',
    )
    assert.equal(verdict.ok && verdict.user, 'alice')
  })

  it('exits 2 with one line on stderr for a missing or short secret, sub or ttl', async () => {
    const noSecret =
      'notes-service token: AUTH_JWT_SECRET is not set: set it to the secret the service checks tokens with (at least 32 bytes).\n'
    const cases: [string[], string | null, string][] = [
      [['--sub', 'alice'], null, noSecret],
      [['--sub', 'alice'], '', noSecret],
      [['--sub', 'alice'], '   ', noSecret],
      [
        ['--sub', 'alice'],
        'x'.repeat(31),
        'notes-service token: AUTH_JWT_SECRET has 31 bytes; it needs at least 32 (UTF-8). Make one with: openssl rand -base64 32\n',
      ],
      [
        ['--sub', 'alice'],
        'é'.repeat(15),
        'notes-service token: AUTH_JWT_SECRET has 30 bytes; it needs at least 32 (UTF-8). Make one with: openssl rand -base64 32\n',
      ],
      [
        [],
        SECRET,
        `notes-service token: Missing --sub, the user the token is for; usage: ${USAGE}\n`,
      ],
      [
        ['--ttl', '1h'],
        SECRET,
        `notes-service token: Missing --sub, the user the token is for; usage: ${USAGE}\n`,
      ],
      [['--sub'], SECRET, `notes-service token: Missing value for --sub; usage: ${USAGE}\n`],
      [
        ['--sub', '--ttl', '1h'],
        SECRET,
        `notes-service token: Missing value for --sub; usage: ${USAGE}\n`,
      ],
      [
        ['--sub', ''],
        SECRET,
        'notes-service token: Empty --sub: give the user the token is for, as --sub alice.\n',
      ],
      [
        ['--sub='],
        SECRET,
        'notes-service token: Empty --sub: give the user the token is for, as --sub alice.\n',
      ],
      [
        ['--sub', 'u'.repeat(256)],
        SECRET,
        'notes-service token: --sub is longer than 255 characters.\n',
      ],
      [
        ['--sub', 'alice', '--ttl', '1w'],
        SECRET,
        'notes-service token: Invalid --ttl "1w": expected a whole number of s, m, h or d (30s, 15m, 1h, 7d), at most 365d.\n',
      ],
      [
        ['--sub', 'alice', '--ttl', '0s'],
        SECRET,
        'notes-service token: Invalid --ttl "0s": expected a whole number of s, m, h or d (30s, 15m, 1h, 7d), at most 365d.\n',
      ],
      [
        ['--sub', 'alice', '--ttl'],
        SECRET,
        `notes-service token: Missing value for --ttl; usage: ${USAGE}\n`,
      ],
      [['alice'], SECRET, `notes-service token: Unknown argument "alice"; usage: ${USAGE}\n`],
      [
        ['--user', 'alice'],
        SECRET,
        `notes-service token: Unknown argument "--user"; usage: ${USAGE}\n`,
      ],
    ]
    for (const [args, secret, stderr] of cases) {
      assert.deepEqual(await token(args, secret), { code: 2, stdout: '', stderr }, args.join(' '))
    }
  })

  it('reads a ttl as a whole number of seconds, minutes, hours or days, up to 365 days', () => {
    const cases: [string, number | undefined][] = [
      ['30s', 30],
      ['1s', 1],
      ['15m', 900],
      ['1h', 3600],
      ['24h', 86_400],
      ['7d', 604_800],
      ['365d', 31_536_000],
      ['8760h', 31_536_000],
      ['366d', undefined],
      ['31536001s', undefined],
      ['0s', undefined],
      ['0d', undefined],
      ['1.5h', undefined],
      ['-1h', undefined],
      ['+1h', undefined],
      ['1H', undefined],
      ['1 h', undefined],
      [' 1h', undefined],
      ['1w', undefined],
      ['1', undefined],
      ['h', undefined],
      ['', undefined],
      ['9999999999d', undefined],
    ]
    for (const [text, seconds] of cases) assert.equal(ttlSeconds(text), seconds, text)
  })

  it('prints its help on stdout and exits 0 with --help or -h, wherever it is, secret or not', async () => {
    for (const [args, secret] of [
      [['--help'], SECRET],
      [['-h'], null],
      [['--sub', 'alice', '--help'], SECRET],
      [['--user', 'alice', '-h'], null],
    ] as const) {
      const answer = await token([...args], secret)
      assert.deepEqual(answer, { code: 0, stdout: TOKEN_HELP, stderr: '' }, args.join(' '))
    }
    const lines = TOKEN_HELP.split('\n')
    assert.equal(lines[0], `Usage: ${USAGE}`)
    for (const flag of ['--sub NAME', '--ttl 1h', '--help, -h']) {
      assert.ok(
        lines.some((line) => line.startsWith(`  ${flag}`)),
        flag,
      )
    }
    assert.match(TOKEN_HELP, /AUTH_JWT_SECRET from the environment/)
  })

  it('is named by --help', async () => {
    const { stdout } = await run(process.execPath, [CLI, '--help'], { env: envWith(null) })
    assert.match(stdout, /notes-service token --sub NAME \[--ttl 1h\]/)
  })
})
