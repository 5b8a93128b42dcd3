import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError, DEFAULT_CONFIG } from '../../src/config/config.js'
import { loadConfig } from '../../src/config/load-config.js'

describe('loadConfig: CORS_ORIGIN, METRICS and DOCS', () => {
  it('defaults to CORS, metrics and the docs page off', () => {
    assert.deepEqual(DEFAULT_CONFIG.corsOrigin, [])
    assert.equal(DEFAULT_CONFIG.metrics, false)
    assert.equal(DEFAULT_CONFIG.docs, false)
  })

  const origins: [string, string[]][] = [
    ['*', ['*']],
    ['https://app.example', ['https://app.example']],
    [' https://a.example , http://localhost:5173 ', ['https://a.example', 'http://localhost:5173']],
    ['HTTPS://App.Example:8443', ['https://app.example:8443']],
    ['http://[::1]:3000', ['http://[::1]:3000']],
  ]
  for (const [raw, expected] of origins) {
    it(`reads CORS_ORIGIN ${JSON.stringify(raw)}`, () => {
      assert.deepEqual(loadConfig({ CORS_ORIGIN: raw }, []).corsOrigin, expected)
      assert.deepEqual(loadConfig({}, ['--cors-origin', raw]).corsOrigin, expected)
    })
  }

  for (const raw of [
    'app.example',
    'https://app.example/',
    'https://app.example/path',
    '*,https://a.example',
    'ftp://a.example',
    ',',
  ]) {
    it(`refuses CORS_ORIGIN ${JSON.stringify(raw)} with a one-line message`, () => {
      assert.throws(() => loadConfig({ CORS_ORIGIN: raw }, []), {
        name: 'ConfigError',
        message: `Invalid CORS_ORIGIN ${JSON.stringify(raw)}: expected a comma-separated list of origins such as https://app.example.com, or *.`,
      })
    })
  }

  it('reads METRICS and DOCS from the environment and from flags', () => {
    assert.equal(loadConfig({ METRICS: 'true' }, []).metrics, true)
    assert.equal(loadConfig({}, ['--metrics']).metrics, true)
    assert.equal(loadConfig({ DOCS: 'on' }, []).docs, true)
    assert.equal(loadConfig({ DOCS: 'on' }, ['--docs', 'false']).docs, false)
    assert.throws(() => loadConfig({ METRICS: 'maybe' }, []), ConfigError)
  })
})
