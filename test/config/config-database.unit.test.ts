import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError } from '../../src/config/config.js'
import { loadConfig } from '../../src/config/load-config.js'
import { redactUrl } from '../../src/store/postgres/connection.js'

const EXPECTED = 'a PostgreSQL URL: postgres://user:password@host:5432/database'

describe('DATABASE_URL', () => {
  for (const url of [
    'postgres://notes:secret@db.example:5432/notes',
    'postgresql://localhost/notes',
    'postgres://127.0.0.1/notes?sslmode=require',
  ]) {
    it(`accepts ${url}`, () => {
      assert.equal(loadConfig({ DATABASE_URL: url }, []).databaseUrl, url)
    })
  }

  for (const url of ['mysql://u:secret@h/db', 'postgres://', 'db.example', 'postgres:secret@h']) {
    it(`refuses ${url} without showing it`, () => {
      assert.throws(() => loadConfig({ DATABASE_URL: url }, []), {
        name: 'ConfigError',
        message: `Invalid DATABASE_URL (value not shown): expected ${EXPECTED}.`,
      })
    })
  }

  it('is off (memory) by default', () => {
    assert.equal(loadConfig({}, []).databaseUrl, '')
  })

  it('validates the pool size and the timeouts like every other number', () => {
    assert.throws(() => loadConfig({ DATABASE_POOL_SIZE: '0' }, []), ConfigError)
    assert.throws(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: 'soon' }, []), ConfigError)
    assert.throws(() => loadConfig({ DATABASE_CONNECT_RETRY_MS: '5' }, []), ConfigError)
    assert.equal(loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '0' }, []).databaseConnectTimeoutMs, 0)
  })
})

describe('redactUrl', () => {
  for (const [url, shown] of [
    ['postgres://notes:secret@db.example:5432/notes', 'postgres://notes:***@db.example:5432/notes'],
    ['postgres://notes@db.example/notes', 'postgres://notes@db.example/notes'],
    ['not a url secret', 'postgres://(unparsable URL)'],
  ] as const) {
    it(`${url} -> ${shown}`, () => {
      assert.equal(redactUrl(url), shown)
    })
  }
})
