import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import semver from 'semver'

const { engines } = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
) as { engines: { node: string } }

describe('package.json engines', () => {
  it('admits only the Nodes that require() ES modules without a flag', () => {
    // light-my-request (Fastify's app.inject, which every test and the app's own inject use)
    // requires cookie@2, an ES module: on Node 20.18.3 that is ERR_REQUIRE_ESM. (The /docs page's
    // @fastify/static required content-disposition@3 the same way until the page was served from
    // swagger-ui-dist.) Unflagged require(esm) came in 20.19.0 and 22.12.0.
    const versions = ['20.10.0', '20.18.3', '20.19.0', '20.20.2', '21.7.3', '22.11.0', '22.12.0']
    const admitted = [...versions, '24.0.0', '24.21.0', '26.0.0'].filter((version) =>
      semver.satisfies(version, engines.node),
    )
    assert.deepEqual(admitted, ['20.19.0', '20.20.2', '22.12.0', '24.0.0', '24.21.0', '26.0.0'])
  })
})
