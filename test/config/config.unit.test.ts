import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError, DEFAULT_CONFIG, OPTIONS } from '../../src/config/config.js'
import { loadConfig } from '../../src/config/load-config.js'

const HOST_EXPECTED =
  'an IP address (127.0.0.1, ::1, 0.0.0.0 for every interface) or a host name (localhost)'

describe('loadConfig', () => {
  it('returns the documented defaults with no environment and no flags', () => {
    assert.deepEqual(loadConfig({}, []), {
      port: 3000,
      host: '127.0.0.1',
      bodyLimit: 1_048_576,
      maxDepth: 128,
      maxNotes: 1_000_000,
      maxStoreBytes: 268_435_456,
      logLevel: 'info',
      logRequests: false,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      socketTimeoutMs: 60_000,
      shutdownTimeoutMs: 10_000,
      corsOrigin: [],
      metrics: false,
      docs: false,
      ui: true,
      maxEventLoopDelayMs: 0,
      apiKeys: [],
      apiReadKeys: [],
      rateLimit: 0,
      rateLimitWindowMs: 60_000,
      changeHistory: 10_000,
      maxEventStreams: 1_000,
      noteHistory: 100,
      historyDays: 90,
      maxHistoryBytes: 1024 * 1024 * 1024,
      trashDays: 30,
      maxFileBytes: 100 * 1024 * 1024,
      maxFilesBytesPerUser: 1024 * 1024 * 1024,
      maxFilesBytes: 16 * 1024 * 1024 * 1024,
      fileGraceHours: 24,
      authJwtSecret: '',
      authJwksUrl: '',
      authIssuer: '',
      authAudience: '',
      authPageClientId: '',
      authPageScope: 'openid',
      authTokenTypes: [],
      authWriteScope: '',
      maxNotesPerUser: 10_000,
      maxBytesPerUser: 16_777_216,
      maxNotebooksPerUser: 100,
      maxMembers: 100,
      databaseUrl: '',
      databasePoolSize: 10,
      databaseStatementTimeoutMs: 5000,
      databaseConnectTimeoutMs: 30_000,
      databaseConnectRetryMs: 500,
      dataFile: '',
      given: new Set(),
    })
    assert.deepEqual(loadConfig({}, []), DEFAULT_CONFIG)
  })

  it('records which settings the environment or a flag gave, and no default', () => {
    const config = loadConfig({ PORT: '4000', HOST: '', LOG_LEVEL: 'warn' }, [
      '--database-connect-timeout-ms=2000',
      '--port',
      '4001',
    ])
    assert.deepEqual(config.given, new Set(['port', 'logLevel', 'databaseConnectTimeoutMs']))
    assert.equal(config.port, 4001)
    assert.deepEqual(loadConfig({}, []).given, new Set())
  })

  it('reads every option from its environment variable', () => {
    const config = loadConfig(
      {
        PORT: '4000',
        HOST: '0.0.0.0',
        BODY_LIMIT: '2048',
        MAX_DEPTH: '10',
        MAX_NOTES: '5',
        MAX_STORE_BYTES: '4096',
        LOG_LEVEL: 'WARN',
        LOG_REQUESTS: 'true',
        HEADERS_TIMEOUT_MS: '1000',
        REQUEST_TIMEOUT_MS: '2000',
        KEEP_ALIVE_TIMEOUT_MS: '3000',
        SOCKET_TIMEOUT_MS: '4000',
        SHUTDOWN_TIMEOUT_MS: '5000',
        CORS_ORIGIN: 'https://a.example, https://b.example',
        METRICS: 'on',
        DOCS: 'true',
        UI: 'false',
        MAX_EVENT_LOOP_DELAY_MS: '250',
        API_KEYS: 'write-1,write-2',
        API_READ_KEYS: 'read-1',
        RATE_LIMIT: '100',
        RATE_LIMIT_WINDOW_MS: '1000',
        CHANGE_HISTORY: '50',
        MAX_EVENT_STREAMS: '7',
        NOTE_HISTORY: '5',
        HISTORY_DAYS: '0.5',
        MAX_HISTORY_BYTES: '1000',
        TRASH_DAYS: '0',
        MAX_FILE_BYTES: '1000',
        MAX_FILES_BYTES_PER_USER: '2000',
        MAX_FILES_BYTES: '3000',
        FILE_GRACE_HOURS: '0.001',
        AUTH_ISSUER: 'https://idp.example',
        AUTH_AUDIENCE: 'notes',
        AUTH_PAGE_SCOPE: 'openid offline_access',
        AUTH_TOKEN_TYPES: 'at+jwt, JWT',
        AUTH_WRITE_SCOPE: 'notes:write',
        MAX_NOTES_PER_USER: '3',
        MAX_BYTES_PER_USER: '8192',
        MAX_NOTEBOOKS_PER_USER: '4',
        MAX_MEMBERS: '6',
        DATABASE_URL: 'postgres://notes:pw@db.example:5432/notes',
        DATABASE_POOL_SIZE: '20',
        DATABASE_STATEMENT_TIMEOUT_MS: '2000',
        DATABASE_CONNECT_TIMEOUT_MS: '0',
        DATABASE_CONNECT_RETRY_MS: '100',
      },
      [],
    )
    const { given, ...settings } = config
    assert.deepEqual(settings, {
      port: 4000,
      host: '0.0.0.0',
      bodyLimit: 2048,
      maxDepth: 10,
      maxNotes: 5,
      maxStoreBytes: 4096,
      logLevel: 'warn',
      logRequests: true,
      headersTimeoutMs: 1000,
      requestTimeoutMs: 2000,
      keepAliveTimeoutMs: 3000,
      socketTimeoutMs: 4000,
      shutdownTimeoutMs: 5000,
      corsOrigin: ['https://a.example', 'https://b.example'],
      metrics: true,
      docs: true,
      ui: false,
      maxEventLoopDelayMs: 250,
      apiKeys: ['write-1', 'write-2'],
      apiReadKeys: ['read-1'],
      rateLimit: 100,
      rateLimitWindowMs: 1000,
      changeHistory: 50,
      maxEventStreams: 7,
      noteHistory: 5,
      historyDays: 0.5,
      maxHistoryBytes: 1000,
      trashDays: 0,
      maxFileBytes: 1000,
      maxFilesBytesPerUser: 2000,
      maxFilesBytes: 3000,
      fileGraceHours: 0.001,
      authJwtSecret: '',
      authJwksUrl: '',
      authIssuer: 'https://idp.example',
      authAudience: 'notes',
      authPageClientId: '',
      authPageScope: 'openid offline_access',
      authTokenTypes: ['at+jwt', 'JWT'],
      authWriteScope: 'notes:write',
      maxNotesPerUser: 3,
      maxBytesPerUser: 8192,
      maxNotebooksPerUser: 4,
      maxMembers: 6,
      databaseUrl: 'postgres://notes:pw@db.example:5432/notes',
      databasePoolSize: 20,
      databaseStatementTimeoutMs: 2000,
      databaseConnectTimeoutMs: 0,
      databaseConnectRetryMs: 100,
      // DATA_FILE is refused beside DATABASE_URL: read on its own below.
      dataFile: '',
    })
    // Every variable given a value, and none of the four left empty or unset.
    assert.deepEqual(
      [...given].sort(),
      OPTIONS.map((option) => option.key)
        .filter(
          (key) => !['authJwtSecret', 'authJwksUrl', 'authPageClientId', 'dataFile'].includes(key),
        )
        .sort(),
    )
  })

  it('reads DATA_FILE, and refuses it beside DATABASE_URL or user tokens, in one line', () => {
    assert.equal(
      loadConfig({ DATA_FILE: '/var/lib/notes/journal' }, []).dataFile,
      '/var/lib/notes/journal',
    )
    assert.equal(loadConfig({}, ['--data-file', 'notes.journal']).dataFile, 'notes.journal')
    const refusals: [NodeJS.ProcessEnv, string][] = [
      [
        { DATA_FILE: 'n', DATABASE_URL: 'postgres://db.example/notes' },
        'DATA_FILE and DATABASE_URL are both set: the notes live in one of them; unset the other.',
      ],
      [
        { DATA_FILE: 'a\nb' },
        'Invalid DATA_FILE "a\\nb": expected text without control characters.',
      ],
    ]
    for (const [env, message] of refusals) {
      assert.throws(() => loadConfig(env, []), { name: 'ConfigError', message })
    }
  })

  it("reads the page's sign-in client, and refuses it without a key set or with an issuer it cannot discover", () => {
    const provider = {
      AUTH_JWKS_URL: 'https://idp.example/jwks',
      AUTH_ISSUER: 'https://idp.example/realms/notes',
      AUTH_AUDIENCE: 'notes',
    }
    const config = loadConfig({ ...provider, AUTH_PAGE_CLIENT_ID: 'notes-page' }, [])
    assert.deepEqual([config.authPageClientId, config.authPageScope], ['notes-page', 'openid'])
    assert.equal(DEFAULT_CONFIG.authPageScope, 'openid')
    for (const issuer of [
      'http://127.0.0.1:8080',
      'http://localhost:8080/realms/x',
      'http://[::1]:1',
    ]) {
      const local = { ...provider, AUTH_ISSUER: issuer, AUTH_PAGE_CLIENT_ID: 'p' }
      assert.equal(loadConfig(local, []).authIssuer, issuer)
    }
    const message =
      'AUTH_PAGE_CLIENT_ID needs AUTH_JWKS_URL and an AUTH_ISSUER that is an https: URL (http: only on 127.0.0.1, ::1 or localhost): the page discovers the provider from it.'
    const refusals: NodeJS.ProcessEnv[] = [
      { AUTH_PAGE_CLIENT_ID: 'p' },
      { AUTH_PAGE_CLIENT_ID: 'p', AUTH_JWT_SECRET: 'a-secret-of-32-bytes-or-more-000' },
      { ...provider, AUTH_ISSUER: 'http://idp.example', AUTH_PAGE_CLIENT_ID: 'p' },
      { ...provider, AUTH_ISSUER: 'idp.example', AUTH_PAGE_CLIENT_ID: 'p' },
    ]
    for (const env of refusals) {
      assert.throws(
        () => loadConfig(env, []),
        { name: 'ConfigError', message },
        String(env.AUTH_ISSUER),
      )
    }
  })

  it('reads the user-token sources, and refuses them half set, both at once, or with PostgreSQL', () => {
    const secret = 'a-secret-of-32-bytes-or-more-000'
    assert.equal(loadConfig({ AUTH_JWT_SECRET: ` ${secret} ` }, []).authJwtSecret, secret)
    const jwks = loadConfig(
      {
        AUTH_JWKS_URL: 'https://idp.example/jwks.json',
        AUTH_ISSUER: 'https://idp.example',
        AUTH_AUDIENCE: 'notes',
      },
      [],
    )
    assert.equal(jwks.authJwksUrl, 'https://idp.example/jwks.json')
    const refusals: [NodeJS.ProcessEnv, RegExp][] = [
      [
        { AUTH_JWT_SECRET: 'short' },
        /^Invalid AUTH_JWT_SECRET \(value not shown\): expected at least 32 bytes/,
      ],
      [
        { AUTH_JWKS_URL: 'idp.example/jwks' },
        /^Invalid AUTH_JWKS_URL "idp.example\/jwks": expected an http: or https: URL/,
      ],
      [{ AUTH_JWKS_URL: 'https://idp.example/jwks' }, /needs AUTH_ISSUER and AUTH_AUDIENCE/],
      [
        {
          AUTH_JWKS_URL: 'https://idp.example/jwks',
          AUTH_ISSUER: 'i',
          AUTH_AUDIENCE: 'a',
          AUTH_JWT_SECRET: secret,
        },
        /both set/,
      ],
      [{ AUTH_ISSUER: 'a\u0007b' }, /text without control characters/],
    ]
    const types = (raw: string) => loadConfig({ AUTH_TOKEN_TYPES: raw }, []).authTokenTypes
    assert.deepEqual(types('at+jwt'), ['at+jwt'])
    assert.deepEqual(types(' application/at+jwt , JWT,none '), [
      'application/at+jwt',
      'JWT',
      'none',
    ])
    assert.deepEqual(loadConfig({}, ['--auth-token-types=at+jwt,JWT']).authTokenTypes, [
      'at+jwt',
      'JWT',
    ])
    for (const raw of ['at+jwt,,JWT', 'at+jwt,', 'a b', 'a/b/c', '/jwt', 'x'.repeat(65), 'jwt"']) {
      assert.throws(() => loadConfig({ AUTH_TOKEN_TYPES: raw }, []), {
        name: 'ConfigError',
        message: `Invalid AUTH_TOKEN_TYPES ${JSON.stringify(raw)}: expected a comma-separated list of token types (the typ of a JWT header) such as at+jwt,JWT; none stands for a header without typ.`,
      })
    }
    for (const [env, message] of refusals) {
      assert.throws(
        () => loadConfig(env, []),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError)
          assert.match(err.message, message)
          assert.ok(!err.message.includes('short'), 'a secret is never shown')
          return true
        },
      )
    }
  })

  it('lets flags override the environment, in both spellings', () => {
    const config = loadConfig({ PORT: '4000', HOST: 'a' }, [
      '--port',
      '5000',
      '--host=::1',
      '--log-requests',
    ])
    assert.equal(config.port, 5000)
    assert.equal(config.host, '::1')
    assert.equal(config.logRequests, true)
  })

  it('reads a boolean flag followed by another flag as true', () => {
    const config = loadConfig({}, ['--log-requests', '--port', '1'])
    assert.equal(config.logRequests, true)
    assert.equal(config.port, 1)
  })

  it('ignores empty environment variables', () => {
    assert.equal(loadConfig({ PORT: '' }, []).port, 3000)
  })

  const invalid: [NodeJS.ProcessEnv, string[], string][] = [
    [{ PORT: 'abc' }, [], 'Invalid PORT "abc": expected an integer from 0 to 65535.'],
    [{ PORT: '70000' }, [], 'Invalid PORT "70000": expected an integer from 0 to 65535.'],
    [{ PORT: '-1' }, [], 'Invalid PORT "-1": expected an integer from 0 to 65535.'],
    [{ PORT: '3e3' }, [], 'Invalid PORT "3e3": expected an integer from 0 to 65535.'],
    [{ BODY_LIMIT: '1' }, [], 'Invalid BODY_LIMIT "1": expected an integer from 2 to 67108864.'],
    [{ MAX_NOTES: '0' }, [], 'Invalid MAX_NOTES "0": expected an integer from 1 to 5000000.'],
    [
      { MAX_STORE_BYTES: '999999999999' },
      [],
      'Invalid MAX_STORE_BYTES "999999999999": expected an integer from 1024 to 469762048.',
    ],
    [
      { LOG_LEVEL: 'loud' },
      [],
      'Invalid LOG_LEVEL "loud": expected one of fatal, error, warn, info, debug, trace, silent.',
    ],
    [
      { LOG_REQUESTS: 'maybe' },
      [],
      'Invalid LOG_REQUESTS "maybe": expected true/false, 1/0, yes/no or on/off, in any case.',
    ],
    ...['a b', 'host_1', '-a.example', 'a..b', '1.2.3', '300.1.1.1', 'http://a', '[localhost]'].map(
      (host): [NodeJS.ProcessEnv, string[], string] => [
        { HOST: host },
        [],
        `Invalid HOST ${JSON.stringify(host)}: expected ${HOST_EXPECTED}.`,
      ],
    ),
    [
      {},
      ['--host', `${'a'.repeat(64)}.example`],
      `Invalid --host "${'a'.repeat(64)}.example": expected ${HOST_EXPECTED}.`,
    ],
    [{}, ['--port', 'x'], 'Invalid --port "x": expected an integer from 0 to 65535.'],
    [{}, ['--port'], 'Missing value for --port.'],
    [{}, ['--prot', '1'], 'Unknown option --prot; see --help.'],
    [
      { HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '1000' },
      [],
      'Invalid HEADERS_TIMEOUT_MS 5000: it must not exceed REQUEST_TIMEOUT_MS (1000).',
    ],
  ]
  for (const [env, argv, message] of invalid) {
    it(`refuses ${JSON.stringify(env)} ${argv.join(' ')} with one line naming it`, () => {
      assert.throws(
        () => loadConfig(env, argv),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError)
          assert.equal(err.message, message)
          assert.doesNotMatch(err.message, /\n/)
          return true
        },
      )
    })
  }

  const hosts: [string, string][] = [
    ['0.0.0.0', '0.0.0.0'],
    ['127.0.0.1', '127.0.0.1'],
    ['::', '::'],
    ['::1', '::1'],
    ['[::1]', '::1'],
    ['fe80::1%eth0', 'fe80::1%eth0'],
    ['localhost', 'localhost'],
    ['api.example.com', 'api.example.com'],
    ['api.example.com.', 'api.example.com.'],
    ['xn--bcher-kva.example', 'xn--bcher-kva.example'],
    [`${'a'.repeat(63)}.example`, `${'a'.repeat(63)}.example`],
  ]
  for (const [raw, host] of hosts) {
    it(`reads HOST ${raw} as ${host}`, () => {
      assert.equal(loadConfig({ HOST: raw }, []).host, host)
    })
  }

  it('has a flag for every environment variable', () => {
    for (const option of OPTIONS) {
      assert.equal(option.flag, `--${option.env.toLowerCase().replaceAll('_', '-')}`)
    }
  })
})
