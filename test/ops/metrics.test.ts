import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { describeEachStore } from '../support/each-store.js'
import { inLane, LANES } from '../support/helpers.js'
import { buildOpsApp } from '../support/ops-app.js'

/** The sample lines of `names` in a Prometheus text exposition, in order. */
function samples(text: string, ...names: string[]): string[] {
  return text
    .split('\n')
    .filter((line) =>
      names.some((name) => line.startsWith(`${name}{`) || line.startsWith(`${name} `)),
    )
}

describe('GET /metrics', () => {
  it('is not served by default, and says which setting turns it on', async () => {
    const { app } = buildOpsApp()
    for (const url of ['/metrics', '/metrics/', '/metrics?name=x']) {
      const response = await app.inject({ method: 'GET', url })
      assert.equal(response.statusCode, 404, url)
      assert.equal(response.headers['content-type'], 'application/problem+json', url)
      assert.deepEqual(
        response.json(),
        {
          type: 'about:blank',
          title: 'Not Found',
          status: 404,
          detail:
            'Prometheus metrics (/metrics) are off: start the service with METRICS=true (or the flag --metrics) to serve them.',
        },
        url,
      )
    }
  })

  for (const lane of LANES) {
    it(`counts requests by method, route pattern and status, with their latency (through ${lane})`, async () => {
      const app = inLane(buildOpsApp({ metrics: true }).app, lane)
      await app.inject({ method: 'POST', url: '/api/note', payload: { title: 'a' } })
      await app.inject({ method: 'GET', url: '/api/note/12' })
      await app.inject({ method: 'GET', url: '/api/note/13' })
      await app.inject({ method: 'PUT', url: '/api/note' })
      await app.inject({ method: 'GET', url: '/healthz' })
      const response = await app.inject({ method: 'GET', url: '/metrics' })
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
      assert.deepEqual(samples(response.body, 'http_requests_total'), [
        'http_requests_total{method="POST",route="/api/note",status_code="200"} 1',
        'http_requests_total{method="GET",route="/api/note/:id",status_code="404"} 2',
        'http_requests_total{method="PUT",route="unmatched",status_code="405"} 1',
        'http_requests_total{method="GET",route="/healthz",status_code="200"} 1',
      ])
      assert.deepEqual(samples(response.body, 'http_request_duration_seconds_count'), [
        'http_request_duration_seconds_count{method="POST",route="/api/note",status_code="200"} 1',
        'http_request_duration_seconds_count{method="GET",route="/api/note/:id",status_code="404"} 2',
        'http_request_duration_seconds_count{method="PUT",route="unmatched",status_code="405"} 1',
        'http_request_duration_seconds_count{method="GET",route="/healthz",status_code="200"} 1',
      ])
      const buckets = samples(response.body, 'http_request_duration_seconds_bucket')
        .filter((line) => line.includes('status_code="404"'))
        .map((line) => line.replace(/,method.*\}/, '}'))
      assert.deepEqual(
        buckets.map((line) => line.replace(/ \d+$/, '')),
        [
          '0.0001',
          '0.00025',
          '0.0005',
          '0.001',
          '0.0025',
          '0.005',
          '0.01',
          '0.025',
          '0.05',
          '0.1',
          '0.25',
          '0.5',
          '1',
          '2.5',
          '5',
          '10',
          '+Inf',
        ].map((le) => `http_request_duration_seconds_bucket{le="${le}"}`),
      )
      assert.equal(buckets.at(-1), 'http_request_duration_seconds_bucket{le="+Inf"} 2')
    })
  }

  it('includes process and Node.js metrics', async () => {
    const { app } = buildOpsApp({ metrics: true })
    const { body } = await app.inject({ method: 'GET', url: '/metrics' })
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_active_handles_total',
      'nodejs_gc_duration_seconds',
    ]) {
      assert.match(body, new RegExp(`^# TYPE ${name} `, 'm'), name)
    }
  })

  it('keeps separate counts for two apps in one process', async () => {
    const first = buildOpsApp({ metrics: true }).app
    const second = buildOpsApp({ metrics: true }).app
    await first.inject({ method: 'GET', url: '/api/note' })
    const { body } = await second.inject({ method: 'GET', url: '/metrics' })
    assert.deepEqual(samples(body, 'http_requests_total'), [])
  })
})

// The store's own counts, read through NoteStore.stats (a promise on PostgreSQL).
describeEachStore(
  'GET /metrics: what the store holds',
  (suite) => {
    it('reports the notes and bytes stored and the capacity left', async () => {
      const { app } = suite.buildApp({ metrics: true, maxNotes: 10, maxStoreBytes: 1000 })
      let bytes = 0
      for (const payload of [{ title: 'a' }, {}]) {
        const created = await app.inject({ method: 'POST', url: '/api/note', payload })
        bytes += Buffer.byteLength(JSON.stringify(created.json().data))
      }
      const response = await app.inject({ method: 'GET', url: '/metrics' })
      assert.deepEqual(
        samples(
          response.body,
          'notes_stored',
          'notes_stored_bytes',
          'notes_capacity_remaining',
          'notes_capacity_remaining_bytes',
        ),
        [
          'notes_stored 2',
          `notes_stored_bytes ${bytes}`,
          'notes_capacity_remaining 8',
          `notes_capacity_remaining_bytes ${1000 - bytes}`,
        ],
      )
    })
  },
  // With user tokens, /metrics needs a service key (test/auth/user-notebooks.unit.test.ts).
  { lanes: false, notebook: false },
)
