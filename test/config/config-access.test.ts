import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { ConfigError, DEFAULT_CONFIG, OPTIONS } from '../../src/config/config.js'
import { formatHelp } from '../../src/config/help.js'
import { loadConfig } from '../../src/config/load-config.js'
import { readPackageInfo } from '../../src/config/package-info.js'

const run = promisify(execFile)
const CLI = join(fileURLToPath(new URL('../../..', import.meta.url)), 'dist/src/cli.js')

const KEYS_EXPECTED =
  'a comma-separated list of keys, each 1 or more visible ASCII characters without spaces'

describe('loadConfig: API_KEYS and API_READ_KEYS', () => {
  it('defaults to no keys: the API is open', () => {
    assert.deepEqual(DEFAULT_CONFIG.apiKeys, [])
    assert.deepEqual(DEFAULT_CONFIG.apiReadKeys, [])
  })

  const accepted: [string, string[]][] = [
    ['k1', ['k1']],
    ['k1,k2', ['k1', 'k2']],
    [' k1 , k2 ', ['k1', 'k2']],
    ['!#$%&()*+-./:;<=>?@[]^_`{|}~"\'\\', ['!#$%&()*+-./:;<=>?@[]^_`{|}~"\'\\']],
    ['x', ['x']],
  ]
  for (const [raw, expected] of accepted) {
    it(`reads ${JSON.stringify(raw)} from the variables and the flags`, () => {
      assert.deepEqual(loadConfig({ API_KEYS: raw }, []).apiKeys, expected)
      assert.deepEqual(loadConfig({ API_READ_KEYS: raw }, []).apiReadKeys, expected)
      assert.deepEqual(loadConfig({}, ['--api-keys', raw]).apiKeys, expected)
      assert.deepEqual(loadConfig({}, [`--api-read-keys=${raw}`]).apiReadKeys, expected)
    })
  }

  const refused = ['k1,,k2', 'k1,', ',k1', ',', 'a b', 'k1,a\tb', 'clé', 'k\u0001', 'k\u007f']
  for (const raw of refused) {
    it(`refuses ${JSON.stringify(raw)} without showing it`, () => {
      for (const [env, argv, name] of [
        [{ API_KEYS: raw }, [], 'API_KEYS'],
        [{ API_READ_KEYS: raw }, [], 'API_READ_KEYS'],
        [{}, ['--api-keys', raw], '--api-keys'],
      ] as const) {
        assert.throws(() => loadConfig(env, argv), {
          name: 'ConfigError',
          message: `Invalid ${name} (value not shown): expected ${KEYS_EXPECTED}.`,
        })
      }
    })
  }

  it('refuses an empty value given as a flag (an empty variable is unset)', () => {
    assert.deepEqual(loadConfig({ API_KEYS: '' }, []).apiKeys, [])
    assert.throws(() => loadConfig({}, ['--api-keys', '']), {
      message: `Invalid --api-keys (value not shown): expected ${KEYS_EXPECTED}.`,
    })
    assert.throws(() => loadConfig({}, ['--api-keys']), {
      message: 'Missing value for --api-keys.',
    })
  })

  it('refuses a key that is in both lists, without showing it', () => {
    assert.throws(() => loadConfig({ API_KEYS: 'w1,shared', API_READ_KEYS: 'shared,r1' }, []), {
      name: 'ConfigError',
      message:
        'Invalid API_READ_KEYS: a key in it is also in API_KEYS; list each key in one of them.',
    })
  })

  it('turns keys on with read keys alone (a read-only API)', () => {
    const config = loadConfig({ API_READ_KEYS: 'r1' }, [])
    assert.deepEqual([config.apiKeys, config.apiReadKeys], [[], ['r1']])
  })
})

describe('loadConfig: RATE_LIMIT and RATE_LIMIT_WINDOW_MS', () => {
  it('defaults to off, with a window of a minute', () => {
    assert.equal(DEFAULT_CONFIG.rateLimit, 0)
    assert.equal(DEFAULT_CONFIG.rateLimitWindowMs, 60_000)
  })

  it('reads both from the variables and the flags', () => {
    const config = loadConfig({ RATE_LIMIT: '100', RATE_LIMIT_WINDOW_MS: '1000' }, [])
    assert.deepEqual([config.rateLimit, config.rateLimitWindowMs], [100, 1000])
    const flags = loadConfig({}, ['--rate-limit', '5', '--rate-limit-window-ms=86400000'])
    assert.deepEqual([flags.rateLimit, flags.rateLimitWindowMs], [5, 86_400_000])
  })

  const invalid: [NodeJS.ProcessEnv, string][] = [
    [{ RATE_LIMIT: 'x' }, 'Invalid RATE_LIMIT "x": expected an integer from 0 to 1000000000.'],
    [{ RATE_LIMIT: '-1' }, 'Invalid RATE_LIMIT "-1": expected an integer from 0 to 1000000000.'],
    [{ RATE_LIMIT: '1.5' }, 'Invalid RATE_LIMIT "1.5": expected an integer from 0 to 1000000000.'],
    [
      { RATE_LIMIT_WINDOW_MS: '0' },
      'Invalid RATE_LIMIT_WINDOW_MS "0": expected an integer from 1 to 86400000.',
    ],
    [
      { RATE_LIMIT_WINDOW_MS: '86400001' },
      'Invalid RATE_LIMIT_WINDOW_MS "86400001": expected an integer from 1 to 86400000.',
    ],
  ]
  for (const [env, message] of invalid) {
    it(`refuses ${JSON.stringify(env)}`, () => {
      assert.throws(
        () => loadConfig(env, []),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError)
          assert.equal(err.message, message)
          return true
        },
      )
    })
  }
})

describe('notes-service with access keys and rate limits', () => {
  it('lists the four options in --help', () => {
    const lines = formatHelp(OPTIONS, readPackageInfo()).split('\n')
    const expected: [string, string][] = [
      ['--api-keys <value>', `env API_KEYS, default none; ${KEYS_EXPECTED}`],
      ['--api-read-keys <value>', `env API_READ_KEYS, default none; ${KEYS_EXPECTED}`],
      ['--rate-limit <value>', 'env RATE_LIMIT, default 0; an integer from 0 to 1000000000'],
      [
        '--rate-limit-window-ms <value>',
        'env RATE_LIMIT_WINDOW_MS, default 60000; an integer from 1 to 86400000',
      ],
    ]
    for (const [flag, details] of expected) {
      const at = lines.indexOf(`  ${flag}`)
      assert.notEqual(at, -1, flag)
      assert.equal(lines[at + 2], `      ${details}`, flag)
    }
  })

  it('stops start-up with exit 2 and one line that does not show the keys', async () => {
    const cases: [NodeJS.ProcessEnv, string][] = [
      [
        { API_KEYS: 'good-key,bad key' },
        `notes-service: Invalid API_KEYS (value not shown): expected ${KEYS_EXPECTED}.\n`,
      ],
      [
        { API_KEYS: 'good-key', API_READ_KEYS: 'good-key' },
        'notes-service: Invalid API_READ_KEYS: a key in it is also in API_KEYS; list each key in one of them.\n',
      ],
      [
        { RATE_LIMIT: 'lots' },
        'notes-service: Invalid RATE_LIMIT "lots": expected an integer from 0 to 1000000000.\n',
      ],
    ]
    for (const [env, stderr] of cases) {
      await assert.rejects(run(process.execPath, [CLI], { env: { ...process.env, ...env } }), {
        code: 2,
        stdout: '',
        stderr,
      })
    }
  })
})
