import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { EtagMemory } from '../../src/client/etag-memory.js'
import { EventStreamParser, type StreamEvent } from '../../src/client/event-stream.js'
import { newIdempotencyKey } from '../../src/client/idempotency-key.js'
import { nextLink } from '../../src/client/link-header.js'
import { backoffMs, retryAfterMs } from '../../src/client/retry-policy.js'

/** Every event of `text` fed in the given pieces. */
function parse(pieces: string[], lastId = ''): StreamEvent[] {
  const parser = new EventStreamParser(lastId)
  return pieces.flatMap((piece) => parser.push(piece))
}

const STREAMS: [string, string, StreamEvent[]][] = [
  [
    'named events with ids',
    'event: created\nid: e.2\ndata: {"id":1}\n\nevent: deleted\nid: e.3\ndata: {"id":1}\n\n',
    [
      { type: 'created', id: 'e.2', data: '{"id":1}' },
      { type: 'deleted', id: 'e.3', data: '{"id":1}' },
    ],
  ],
  ['CRLF line ends', 'id: 7\r\ndata: x\r\n\r\n', [{ type: 'message', id: '7', data: 'x' }]],
  ['CR line ends', 'id: 7\rdata: x\r\r', [{ type: 'message', id: '7', data: 'x' }]],
  [
    'comments and retry are skipped',
    ':hi\nretry: 2000\n: again\ndata: x\n\n',
    [{ type: 'message', id: '', data: 'x' }],
  ],
  [
    'multi-line data joins with LF',
    'data: a\ndata:b\ndata:  c\n\n',
    [{ type: 'message', id: '', data: 'a\nb\n c' }],
  ],
  [
    'a field without a colon is an empty value',
    'data\ndata\n\n',
    [{ type: 'message', id: '', data: '\n' }],
  ],
  [
    'no data: no event, but the id counts',
    'id: 9\n\ndata: y\n\n',
    [{ type: 'message', id: '9', data: 'y' }],
  ],
  [
    'an id with NUL is ignored',
    'id: a\0b\ndata: z\n\n',
    [{ type: 'message', id: 'start', data: 'z' }],
  ],
  ['an unfinished event is not dispatched', 'id: 5\ndata: half', []],
]

describe('EventStreamParser', () => {
  for (const [name, text, expected] of STREAMS) {
    it(`${name}, however the text is split`, () => {
      const lastId = name.includes('NUL') ? 'start' : ''
      assert.deepEqual(parse([text], lastId), expected)
      assert.deepEqual(parse([...text], lastId), expected)
      for (let cut = 0; cut <= text.length; cut++) {
        assert.deepEqual(
          parse([text.slice(0, cut), text.slice(cut)], lastId),
          expected,
          `cut at ${cut}`,
        )
      }
    })
  }

  it('counts an id only once its event is complete: a cut stream resumes before that event', () => {
    const parser = new EventStreamParser('e.1')
    parser.push('event: created\nid: e.2\ndata: {"id":1}\n')
    assert.equal(parser.lastId, 'e.1')
    parser.push('\n')
    assert.equal(parser.lastId, 'e.2')
  })

  it('takes linear time over a long line fed a few characters at a time', () => {
    const parser = new EventStreamParser()
    const piece = 'x'.repeat(16)
    const started = performance.now()
    parser.push('data: ')
    for (let i = 0; i < 200_000; i++) parser.push(piece)
    const [event] = parser.push('\n\n')
    assert.equal(event?.data.length, 3_200_000)
    // Quadratic joining would take minutes here; linear takes well under a second (5 s: a busy machine).
    assert.ok(performance.now() - started < 5_000)
  })
})

describe('retryAfterMs', () => {
  const now = Date.parse('Thu, 26 Nov 2026 23:00:00 GMT')
  const cases: [string | null, number | undefined][] = [
    ['3', 3_000],
    [' 0 ', 0],
    ['Thu, 26 Nov 2026 23:00:05 GMT', 5_000],
    ['Thu, 26 Nov 2026 22:00:00 GMT', 0],
    ['soon', undefined],
    ['-1', undefined],
    [null, undefined],
  ]
  for (const [value, expected] of cases) {
    it(`${JSON.stringify(value)} -> ${expected}`, () =>
      assert.equal(retryAfterMs(value, now), expected))
  }
})

describe('backoffMs', () => {
  it('doubles from 200 ms, capped, with a random half of it', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 10].map((attempt) => backoffMs(attempt, 1_000, () => 0)),
      [100, 200, 400, 500, 500],
    )
    assert.deepEqual(
      [0, 1, 2, 3, 10].map((attempt) => backoffMs(attempt, 1_000, () => 1)),
      [200, 400, 800, 1_000, 1_000],
    )
  })
})

describe('nextLink', () => {
  const cases: [string | null, string | undefined][] = [
    ['</api/note?limit=2&after=d2.x>; rel="next"', '/api/note?limit=2&after=d2.x'],
    ['</a>; rel="prev", </b>; rel=next', '/b'],
    ['</a>; rel="prev"', undefined],
    [null, undefined],
  ]
  for (const [value, expected] of cases) {
    it(`${JSON.stringify(value)} -> ${expected}`, () => assert.equal(nextLink(value), expected))
  }
})

describe('EtagMemory', () => {
  it('forgets the note seen longest ago past its limit', () => {
    const memory = new EtagMemory(2)
    memory.remember(1, '"a"')
    memory.remember(2, '"b"')
    memory.remember(1, '"a2"')
    memory.remember(3, '"c"')
    assert.deepEqual(
      [memory.get(1), memory.get(2), memory.get(3), memory.size],
      ['"a2"', undefined, '"c"', 2],
    )
    memory.forget('1')
    assert.equal(memory.get(1), undefined)
  })
})

describe('newIdempotencyKey', () => {
  it('makes a random UUID v4, also where crypto.randomUUID is missing (plain HTTP pages)', (t) => {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
    assert.match(newIdempotencyKey(), uuid)
    const own = Object.getOwnPropertyDescriptor(crypto, 'randomUUID')
    Object.defineProperty(crypto, 'randomUUID', { value: undefined, configurable: true })
    t.after(() => {
      if (own === undefined) Reflect.deleteProperty(crypto, 'randomUUID')
      else Object.defineProperty(crypto, 'randomUUID', own)
    })
    assert.equal(typeof crypto.randomUUID, 'undefined')
    const keys = new Set(Array.from({ length: 1_000 }, () => newIdempotencyKey()))
    assert.equal(keys.size, 1_000)
    for (const key of keys) assert.match(key, uuid)
  })

  it('leaves crypto.randomUUID as it was', () => {
    assert.equal(typeof crypto.randomUUID, 'function')
  })
})
