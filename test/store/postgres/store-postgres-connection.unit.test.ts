import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  describeFailure,
  endpointOf,
  openFailure,
  retryUntilConnected,
  unavailableOr,
} from '../../../src/store/postgres/connection.js'
import { StoreUnavailableError } from '../../../src/store/types.js'

/** An error as node:net or pg raises it: a message and the fields that go with it. */
function failure(message: string, fields: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), fields)
}

describe('describeFailure', () => {
  const refused = failure('connect ECONNREFUSED 127.0.0.1:5499', {
    code: 'ECONNREFUSED',
    address: '127.0.0.1',
    port: 5499,
  })
  const cases: [string, unknown, string][] = [
    ['a refused connection', refused, 'connection refused at 127.0.0.1:5499'],
    [
      'every address of a name refused (localhost: ::1, then 127.0.0.1)',
      Object.assign(
        new AggregateError(
          [
            failure('connect ECONNREFUSED ::1:5499', {
              code: 'ECONNREFUSED',
              address: '::1',
              port: 5499,
            }),
            refused,
          ],
          '',
        ),
        { code: 'ECONNREFUSED' },
      ),
      'connection refused at ::1:5499; connection refused at 127.0.0.1:5499',
    ],
    [
      'a host name that does not resolve',
      failure('getaddrinfo ENOTFOUND db.example', { code: 'ENOTFOUND', hostname: 'db.example' }),
      'host not found: db.example',
    ],
    [
      'a reset without an address',
      failure('read ECONNRESET', { code: 'ECONNRESET' }),
      'connection reset at db.example:5432',
    ],
    [
      "pg's connect timeout",
      failure('timeout expired'),
      'no answer within the connect timeout at db.example:5432',
    ],
    [
      "pg-pool's connect timeout, which is not the server closing",
      failure('Connection terminated due to connection timeout'),
      'no answer within the connect timeout at db.example:5432',
    ],
    [
      'a connection the server closed',
      failure('Connection terminated unexpectedly'),
      'the database closed the connection at db.example:5432',
    ],
    [
      'a server error: its own words',
      failure('password authentication failed for user "x"', { code: '28P01' }),
      'password authentication failed for user "x"',
    ],
    [
      'the statement timeout',
      failure('canceling statement due to statement timeout', { code: '57014' }),
      'canceling statement due to statement timeout',
    ],
    ['not an Error', 'boom', 'boom'],
  ]
  for (const [name, err, expected] of cases) {
    it(`${name} -> ${expected}`, () => {
      assert.equal(describeFailure(err, 'db.example:5432'), expected)
    })
  }
})

describe('endpointOf', () => {
  const cases: [string, string][] = [
    ['postgres://u:secret@db.example/notes', 'db.example:5432'],
    ['postgres://u@127.0.0.1:5499/notes', '127.0.0.1:5499'],
    ['postgresql://[::1]:6000/notes', '[::1]:6000'],
    ['postgres://u@localhost/notes?host=/run/postgresql', '/run/postgresql:5432'],
    ['not a url', '(unparsable URL)'],
  ]
  for (const [url, expected] of cases) {
    it(`${url} -> ${expected}`, () => {
      assert.equal(endpointOf(url), expected)
    })
  }
})

describe('unavailableOr', () => {
  it('turns a connection failure into a 503 whose cause, for the log only, says what and where', () => {
    assert.throws(
      () => unavailableOr(failure('connect ECONNREFUSED', { code: 'ECONNREFUSED' }), 'h:1'),
      (err: unknown) => {
        assert.ok(err instanceof StoreUnavailableError)
        assert.equal(err.message, 'The database cannot be reached right now.')
        assert.equal(err.retryAfterSeconds, 1)
        assert.equal(err.cause, 'connection refused at h:1')
        return true
      },
    )
  })

  it('rethrows anything else as it is', () => {
    const bug = new TypeError('x is not a function')
    assert.throws(
      () => unavailableOr(bug, 'h:1'),
      (err: unknown) => err === bug,
    )
  })
})

describe('retryUntilConnected', () => {
  const refused = () => failure('connect ECONNREFUSED 127.0.0.1:9', { code: 'ECONNREFUSED' })

  /** Runs it on an attempt that always fails: when each attempt came and what it was given. */
  async function attempts(
    timeoutMs: number,
    retryMs: number,
    error: () => Error = refused,
  ): Promise<{ at: number[]; left: number[]; gaveUpAt: number; error: unknown }> {
    const started = Date.now()
    const at: number[] = []
    const left: number[] = []
    let thrown: unknown
    try {
      await retryUntilConnected(
        async (leftMs) => {
          at.push(Date.now() - started)
          left.push(leftMs)
          throw error()
        },
        { timeoutMs, retryMs },
      )
    } catch (err) {
      thrown = err
    }
    return { at, left, gaveUpAt: Date.now() - started, error: thrown }
  }

  it('tries every retryMs and gives up timeoutMs after the start, not at the last attempt', async () => {
    // 3000 and 1200: attempts at 0, 1200 and 2400; the next would be at 3600, so it waits to
    // 3000. The gaps are wide so that a busy machine's late timers (a few hundred ms) change
    // nothing.
    const { at, left, gaveUpAt, error } = await attempts(3000, 1200)
    assert.equal(at.length, 3, `attempts at ${at.join(', ')} ms`)
    assert.ok(gaveUpAt >= 3000 && gaveUpAt < 4500, `gave up at ${gaveUpAt} ms`)
    assert.match(String(error), /ECONNREFUSED/)
    // Each attempt is given the time left, to bound its connecting by.
    assert.equal(left[0], 3000)
    for (const [i, ms] of left.entries()) {
      const expected = 3000 - (at[i] as number)
      assert.ok(Math.abs(ms - expected) <= 5, `attempt ${i}: ${ms} ms left, about ${expected}`)
    }
  })

  it('tries once, with no bound of its own, when timeoutMs is 0', async () => {
    const { left, gaveUpAt } = await attempts(0, 500)
    assert.deepEqual(left, [Number.POSITIVE_INFINITY])
    assert.ok(gaveUpAt < 1000, `gave up at ${gaveUpAt} ms`)
  })

  it('throws at once what is not about reaching the database', async () => {
    const wrong = () => failure('password authentication failed for user "x"', { code: '28P01' })
    const { at, gaveUpAt, error } = await attempts(2000, 100, wrong)
    assert.equal(at.length, 1)
    assert.ok(gaveUpAt < 1000, `gave up at ${gaveUpAt} ms`)
    assert.equal((error as Error).message, 'password authentication failed for user "x"')
  })
})

describe('openFailure', () => {
  const unreachable = new StoreUnavailableError('The database cannot be reached right now.', 1, {
    cause: 'connection refused at 127.0.0.1:9',
  })
  const cases: [string, unknown, { waitedMs: number; timeoutMs: number | undefined }, string][] = [
    [
      'retried, the timeout its default',
      unreachable,
      { waitedMs: 30_040, timeoutMs: undefined },
      'gave up after 30 s: connection refused at 127.0.0.1:9',
    ],
    [
      'retried, the timeout set',
      unreachable,
      { waitedMs: 640, timeoutMs: 600 },
      'gave up after 0.6 s (DATABASE_CONNECT_TIMEOUT_MS=600): connection refused at 127.0.0.1:9',
    ],
    [
      'failed at once (a wrong password)',
      new Error('password authentication failed for user "x"'),
      { waitedMs: 12, timeoutMs: 2000 },
      'password authentication failed for user "x"',
    ],
  ]
  for (const [name, err, waited, expected] of cases) {
    it(`${name} -> ${expected}`, () => {
      assert.equal(openFailure(err, waited), expected)
    })
  }
})
