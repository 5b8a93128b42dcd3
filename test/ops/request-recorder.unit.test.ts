import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Metric } from 'prom-client'
import { Registry } from 'prom-client'
import { RequestRecorder } from '../../src/ops/request-recorder.js'

describe('RequestRecorder', () => {
  it('counts each latency in the first bucket whose bound it does not pass, cumulatively', async () => {
    const recorder = new RequestRecorder([0.001, 0.01])
    for (const seconds of [0.0005, 0.001, 0.002, 0.01, 0.5]) {
      recorder.record('GET', '/api/note/:id', 200, seconds)
    }
    recorder.record('POST', '/api/note', 507, 0.003)
    const registry = new Registry()
    registry.registerMetric(recorder.counter('t_requests_total', 'Requests.') as unknown as Metric)
    registry.registerMetric(recorder.histogram('t_seconds', 'Latency.') as unknown as Metric)
    const labels = 'method="GET",route="/api/note/:id",status_code="200"'
    const post = 'method="POST",route="/api/note",status_code="507"'
    assert.equal(
      await registry.metrics(),
      [
        '# HELP t_requests_total Requests.',
        '# TYPE t_requests_total counter',
        `t_requests_total{${labels}} 5`,
        `t_requests_total{${post}} 1`,
        '',
        '# HELP t_seconds Latency.',
        '# TYPE t_seconds histogram',
        `t_seconds_bucket{le="0.001",${labels}} 2`,
        `t_seconds_bucket{le="0.01",${labels}} 4`,
        `t_seconds_bucket{le="+Inf",${labels}} 5`,
        `t_seconds_sum{${labels}} 0.5135`,
        `t_seconds_count{${labels}} 5`,
        `t_seconds_bucket{le="0.001",${post}} 0`,
        `t_seconds_bucket{le="0.01",${post}} 1`,
        `t_seconds_bucket{le="+Inf",${post}} 1`,
        `t_seconds_sum{${post}} 0.003`,
        `t_seconds_count{${post}} 1`,
        '',
      ].join('\n'),
    )
  })

  it('escapes label values as Prometheus requires', async () => {
    const recorder = new RequestRecorder([1])
    recorder.record('GET', '/a"b\\c', 404, 0)
    const registry = new Registry()
    registry.registerMetric(recorder.counter('t_total', 'Requests.') as unknown as Metric)
    assert.match(
      await registry.metrics(),
      /^t_total\{method="GET",route="\/a\\"b\\\\c",status_code="404"\} 1$/m,
    )
  })
})
