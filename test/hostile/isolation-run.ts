import assert from 'node:assert/strict'
import { Agent, request } from 'node:http'
import { parseJson } from '../../src/client/parse-json.js'
import { signed } from '../support/jwks-server.js'
import { SseClient } from '../support/sse-client.js'
import { createRandom, type Random } from './prng.js'

/** The secret the isolation run's service checks user tokens with. */
export const ISOLATION_SECRET = 'isolation-run-secret-of-32-bytes-or-more'
/** The service key of the run: it acts on the shared notebook. */
export const ISOLATION_SERVICE_KEY = 'isolation-run-service-key'

export interface IsolationOptions {
  host: string
  /** Instances of the service on one store: each request goes to one of them. */
  ports: readonly number[]
  seed: number
  /** Requests to send (the checks of each caller's list and stream at the end not counted). */
  requests: number
  /** Users, each with a token of their own; a service key is a caller too. */
  users: number
}

export interface IsolationStats {
  seed: number
  requests: number
  byStatus: Record<string, number>
  byKind: Record<string, number>
  /** Answers to a request that named another caller's note, cursor, ETag, key or event id. */
  crossings: number
  notesAtEnd: number
}

/** An answer broke the rule; the message says which request, so a seed replays it. */
export class IsolationFailure extends Error {
  constructor(seed: number, index: number, message: string) {
    super(`isolation request #${index} (seed ${seed}): ${message}`)
    this.name = 'IsolationFailure'
  }
}

interface Note {
  id: number
  owner: string
  mark: string
  n: number
}

/** One caller: a user with a token, or the service key, and what its notebook holds. */
interface Caller {
  name: string
  authorization: string
  /** Its notebook, as the model says it must be: id -> note. */
  notes: Map<number, Note>
  /**
   * The epochs of the version tokens its answers gave (in every ETag and version): one per
   * notebook, and no other caller's answer may hold it.
   */
  epochs: Set<string>
  etags: string[]
  versions: string[]
  cursors: string[]
  /** Idempotency keys it used, with the note each made. */
  keys: Map<string, Note>
  /** Idempotency keys it used on batches, with the document and the answer's body. */
  batchKeys: Map<string, { document: BatchDocument; body: string }>
  stream: SseClient | undefined
}

/** A note's mark, which names its owner: 'mark-user-2-17-4411' -> 'user-2'. */
const MARK = /mark-(user-\d+|service)-\d+-\d+/g

/** A batch document. */
interface BatchDocument {
  requests: { method: string; url: string; body?: Record<string, unknown> }[]
}

/** One answer of a kept batch. */
interface SubAnswer {
  status: number
  body: { data: unknown }
}

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/**
 * The randomized isolation run: several users and a service key send a mix of
 * creates, reads, updates, deletes, lists, pages and searches against a real service, over their
 * own notes and over everybody else's ids, cursors, ETags, version tokens, idempotency keys and
 * event ids, and batches that name other callers' notes or reuse their keys. A model per notebook
 * says every status and body; and no answer, header or event
 * that one caller gets may hold anything of another's notebook (each note carries a mark unique to
 * its owner, and every ETag, version and cursor an answer gave is known to be its caller's).
 */
export async function runIsolation(options: IsolationOptions): Promise<IsolationStats> {
  const { host, ports, seed } = options
  const rng = createRandom(seed)
  const agent = new Agent({ keepAlive: true, maxSockets: 4 })
  const exp = Math.floor(Date.now() / 1000) + 24 * 3600
  const callers: Caller[] = []
  const caller = (name: string, authorization: string): Caller => ({
    name,
    authorization,
    notes: new Map(),
    epochs: new Set(),
    etags: [],
    versions: [],
    cursors: [],
    keys: new Map(),
    batchKeys: new Map(),
    stream: undefined,
  })
  for (let u = 0; u < options.users; u++) {
    const name = `user-${u}`
    const token = await signed(Buffer.from(ISOLATION_SECRET), { alg: 'HS256' }, { sub: name, exp })
    callers.push(caller(name, `Bearer ${token}`))
  }
  callers.push(caller('service', `Bearer ${ISOLATION_SERVICE_KEY}`))
  const stats: IsolationStats = {
    seed,
    requests: 0,
    byStatus: {},
    byKind: {},
    crossings: 0,
    notesAtEnd: 0,
  }
  let index = 0
  const fail = (message: string): never => {
    throw new IsolationFailure(seed, index, message)
  }

  const send = (
    who: Caller,
    method: string,
    path: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ): Promise<Answer> => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body))
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host,
          port: rng.pick(ports),
          method,
          path,
          agent,
          headers: {
            authorization: who.authorization,
            ...(payload === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': payload.length }),
            ...extra,
          },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          )
          res.on('error', reject)
        },
      )
      req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${path}`)))
      req.on('error', reject)
      req.end(payload)
    })
  }

  /**
   * Nothing of another caller's notebook in this answer (body and every header): no note marked
   * with another caller's name, and no version token of another notebook.
   */
  const nothingOfOthers = (who: Caller, text: string, what: string): void => {
    for (const match of text.matchAll(MARK)) {
      if (match[1] !== who.name)
        fail(`${who.name} got ${match[0]} in ${what}: ${text.slice(0, 300)}`)
    }
    for (const other of callers) {
      if (other === who) continue
      for (const epoch of other.epochs) {
        if (text.includes(`${epoch}.`)) {
          fail(
            `${who.name} got ${other.name}'s version ${epoch}.* in ${what}: ${text.slice(0, 300)}`,
          )
        }
      }
    }
  }
  const checkAnswer = (who: Caller, answer: Answer, what: string): void => {
    nothingOfOthers(who, answer.body, `the body of ${what}`)
    nothingOfOthers(who, JSON.stringify(answer.headers), `the headers of ${what}`)
  }
  /** Records what an answer gave its caller, so that another caller's answer may not hold it. */
  const learn = (who: Caller, answer: Answer): void => {
    const etag = answer.headers.etag
    if (typeof etag === 'string') who.etags.push(etag)
    const version = answer.headers['notes-version']
    if (typeof version === 'string') {
      who.versions.push(version)
      who.epochs.add(version.slice(0, version.lastIndexOf('.')))
    }
    // A cursor is a position in the caller's own list (the same in any list): no secret, but
    // another caller's, sent, must still bring its sender's notes alone.
    const next = /<([^>]+)>; rel="next"/.exec(String(answer.headers.link ?? ''))?.[1]
    if (next !== undefined) who.cursors.push(next)
  }
  const ownList = (who: Caller): Note[] => [...who.notes.values()].sort((a, b) => a.id - b.id)
  const anyId = (who: Caller): { id: number; owner: Caller } | undefined => {
    const owner = rng.chance(0.7) ? who : rng.pick(callers)
    const ids = [...owner.notes.keys()]
    return ids.length === 0 ? undefined : { id: rng.pick(ids), owner }
  }
  const other = (who: Caller): Caller => {
    let picked = rng.pick(callers)
    while (picked === who && callers.length > 1) picked = rng.pick(callers)
    return picked
  }
  const count = (kind: string, answer: Answer): void => {
    stats.byKind[kind] = (stats.byKind[kind] ?? 0) + 1
    stats.byStatus[answer.status] = (stats.byStatus[answer.status] ?? 0) + 1
  }

  /** A refused batch: that status, a problem naming the request, and nothing applied. */
  const refusedBatch = (answer: Answer, status: number, prefix: string): void => {
    if (answer.status !== status)
      fail(`a batch answered ${answer.status}, not ${status}: ${answer.body}`)
    const { detail } = parseJson(answer.body) as { detail: string }
    if (!detail.startsWith(prefix) || !detail.endsWith('Nothing in the batch was applied.')) {
      fail(`the refused batch's detail: ${detail}`)
    }
  }
  /** A kept batch's answers, one 200 per request; each created id is new to every notebook. */
  const keptBatch = (who: Caller, answer: Answer, document: BatchDocument): SubAnswer[] => {
    if (answer.status !== 200) fail(`${who.name}'s batch answered ${answer.status}: ${answer.body}`)
    const { data } = parseJson(answer.body) as { data: SubAnswer[] }
    assert.equal(data.length, document.requests.length)
    for (const [i, got] of data.entries()) {
      if (got.status !== 200) fail(`requests[${i}] of a kept batch answered ${got.status}`)
      if (document.requests[i]?.method !== 'POST') continue
      const { id } = got.body.data as Note
      for (const c of callers) {
        if (c.notes.has(id)) fail(`id ${id} was given twice (${c.name} has it)`)
      }
    }
    return data
  }

  try {
    // Every caller follows its own change feed from the start.
    for (const who of callers) {
      const port = rng.pick(ports)
      who.stream = await SseClient.open(port, '/api/events', { authorization: who.authorization })
      assert.equal(who.stream.status, 200)
    }
    for (; index < options.requests; index++) {
      const who = rng.pick(callers)
      const kind = rng.weighted<string>([
        [5, 'create'],
        [2, 'idempotent-create'],
        [4, 'get'],
        [3, 'patch'],
        [6, 'delete'],
        [3, 'list'],
        [2, 'page'],
        [1, 'search'],
        [1, 'foreign-cursor'],
        [1, 'foreign-etag'],
        [1, 'foreign-version'],
        [3, 'batch'],
        [2, 'keyed-batch'],
      ])
      let answer: Answer
      let crossing = false
      /** The kind, told more finely where the run wants to show that each case came up. */
      let label = kind
      if (kind === 'create' || kind === 'idempotent-create') {
        const mark = `mark-${who.name}-${index}-${rng.int(1e9)}`
        const body = { owner: who.name, mark, n: index }
        let key: string | undefined
        if (kind === 'idempotent-create') {
          // A key some caller used, or a new one: the same key in two notebooks is two keys.
          const used = rng.pick(callers).keys
          key = used.size > 0 && rng.chance(0.6) ? rng.pick([...used.keys()]) : `key-${index}`
        }
        answer = await send(
          who,
          'POST',
          '/api/note',
          body,
          key === undefined ? {} : { 'idempotency-key': key },
        )
        const earlier = key === undefined ? undefined : who.keys.get(key)
        if (earlier !== undefined || (key !== undefined && who.batchKeys.has(key))) {
          // Its own key again with another body: 422; never another caller's note.
          if (answer.status !== 422) fail(`a reused key answered ${answer.status}: ${answer.body}`)
        } else {
          if (answer.status !== 200) fail(`create answered ${answer.status}: ${answer.body}`)
          const note = (parseJson(answer.body) as { data: Note }).data
          assert.deepEqual({ ...note, id: 0 }, { ...body, id: 0 })
          for (const c of callers) {
            if (c.notes.has(note.id)) fail(`id ${note.id} was given twice (${c.name} has it)`)
          }
          who.notes.set(note.id, note)
          if (key !== undefined) who.keys.set(key, note)
          crossing = key !== undefined && callers.some((c) => c !== who && c.keys.has(key))
        }
      } else if (kind === 'get' || kind === 'patch' || kind === 'delete') {
        const target = anyId(who)
        if (target === undefined) continue
        crossing = target.owner !== who
        const mine = who.notes.get(target.id)
        const path = `/api/note/${target.id}`
        if (kind === 'get') answer = await send(who, 'GET', path)
        else if (kind === 'patch') {
          const n = rng.int(1e6)
          answer = await send(who, 'PATCH', path, { n })
          if (mine !== undefined) mine.n = n
        } else {
          answer = await send(who, 'DELETE', path)
          if (mine !== undefined) who.notes.delete(target.id)
        }
        if (mine === undefined) {
          if (answer.status !== 404 || answer.body !== '') {
            fail(
              `${kind} of ${target.owner.name}'s ${target.id} by ${who.name} answered ${answer.status} ${answer.body}`,
            )
          }
        } else if (answer.status !== 200) {
          fail(`${kind} of its own ${target.id} answered ${answer.status}: ${answer.body}`)
        } else if (kind !== 'delete') {
          assert.deepEqual(parseJson(answer.body), { data: mine }, `${kind} ${path}`)
        }
      } else if (kind === 'batch') {
        // Creates, patches and deletes, some of other callers' notes: one of those (or a note the
        // batch deleted already) refuses the batch whole with a 404 naming it.
        const count = rng.between(1, 6)
        const document: BatchDocument = { requests: [] }
        const targets: ({ id: number; owner: Caller } | undefined)[] = []
        for (let i = 0; i < count; i++) {
          const target = rng.chance(0.4) ? undefined : anyId(who)
          targets.push(target)
          if (target === undefined) {
            const mark = `mark-${who.name}-${index}-${rng.int(1e9)}`
            document.requests.push({
              method: 'POST',
              url: '/api/note',
              body: { owner: who.name, mark, n: index },
            })
          } else if (rng.chance(0.5)) {
            document.requests.push({
              method: 'PATCH',
              url: `/api/note/${target.id}`,
              body: { n: rng.int(1e6) },
            })
          } else {
            document.requests.push({ method: 'DELETE', url: `/api/note/${target.id}` })
          }
        }
        crossing = targets.some((t) => t !== undefined && t.owner !== who)
        answer = await send(who, 'POST', '/api/batch', document)
        // The notebook as the batch leaves it, if kept; the first request that fails, if not.
        const after = new Map([...who.notes].map(([id, note]) => [id, { ...note }]))
        let failing = -1
        // What each patch or delete answers: the note as it stands at that point of the batch.
        const expected: unknown[] = []
        for (let i = 0; i < count && failing === -1; i++) {
          const target = targets[i]
          const request = document.requests[i] as BatchDocument['requests'][number]
          if (target === undefined) continue
          const note = after.get(target.id)
          if (note === undefined) failing = i
          else if (request.method === 'PATCH') {
            note.n = request.body?.n as number
            expected[i] = { data: { ...note } }
          } else {
            after.delete(target.id)
            expected[i] = { data: String(target.id) }
          }
        }
        label = `batch (${failing === -1 ? 'kept' : 'refused'}${crossing ? ', naming foreign notes' : ''})`
        if (failing !== -1) {
          const request = document.requests[failing] as BatchDocument['requests'][number]
          refusedBatch(answer, 404, `requests[${failing}] (${request.method} ${request.url}): `)
        } else {
          const data = keptBatch(who, answer, document)
          for (let i = 0; i < count; i++) {
            const target = targets[i]
            const request = document.requests[i] as BatchDocument['requests'][number]
            const got = data[i] as SubAnswer
            if (target === undefined) {
              const note = got.body.data as Note
              assert.deepEqual({ ...note, id: 0 }, { ...request.body, id: 0 })
              after.set(note.id, note)
            } else {
              assert.deepEqual(got.body, expected[i], `requests[${i}]`)
            }
          }
          who.notes = after
        }
        // Nothing of another notebook changed: each named foreign note is as its owner had it.
        for (const target of targets) {
          if (target === undefined || target.owner === who) continue
          const owned = target.owner.notes.get(target.id)
          const seen = await send(target.owner, 'GET', `/api/note/${target.id}`)
          if (owned === undefined ? seen.status !== 404 : seen.status !== 200) {
            fail(
              `${target.owner.name}'s ${target.id} answers ${seen.status} after ${who.name}'s batch`,
            )
          }
          if (owned !== undefined) assert.deepEqual(parseJson(seen.body), { data: owned })
        }
      } else if (kind === 'keyed-batch') {
        // A batch under an Idempotency-Key: a new one, its own again (replayed), or one another
        // caller used, on a batch (the very same document) or a create: keys are per notebook.
        let key: string
        let document: BatchDocument
        const source = rng.next()
        const lender = other(who)
        const lent = [...lender.batchKeys.entries()]
        const own = [...who.batchKeys.entries()]
        if (source < 0.3 && lender !== who && lent.length > 0) {
          ;[key, { document }] = rng.pick(lent)
          crossing = true
          label = "keyed-batch (another's batch and key)"
        } else if (source < 0.45 && lender !== who && lender.keys.size > 0) {
          key = rng.pick([...lender.keys.keys()])
          document = keyedDocument(rng)
          crossing = true
          label = "keyed-batch (another's create key)"
        } else if (source < 0.65 && own.length > 0) {
          ;[key, { document }] = rng.pick(own)
          label = 'keyed-batch (its own again)'
        } else {
          key = `batch-key-${index}`
          document = keyedDocument(rng)
        }
        answer = await send(who, 'POST', '/api/batch', document, { 'idempotency-key': key })
        const earlier = who.batchKeys.get(key)
        const sameDocument = JSON.stringify(earlier?.document) === JSON.stringify(document)
        if (earlier !== undefined && sameDocument) {
          if (answer.status !== 200 || answer.headers['idempotent-replayed'] !== 'true') {
            fail(`its own batch again answered ${answer.status} ${answer.body.slice(0, 200)}`)
          }
          assert.equal(answer.body, earlier.body, `the replay of ${key}`)
        } else if (earlier !== undefined || who.keys.has(key)) {
          if (answer.status !== 422) fail(`a reused key answered ${answer.status}: ${answer.body}`)
        } else {
          if (answer.headers['idempotent-replayed'] !== undefined) {
            fail(
              `${who.name}'s first batch under ${key} was a replay: ${answer.body.slice(0, 300)}`,
            )
          }
          const data = keptBatch(who, answer, document)
          for (const [i, got] of data.entries()) {
            const note = got.body.data as Note
            assert.deepEqual({ ...note, id: 0 }, { ...document.requests[i]?.body, id: 0 })
            who.notes.set(note.id, note)
          }
          who.batchKeys.set(key, { document, body: answer.body })
        }
      } else if (kind === 'list' || kind === 'search') {
        const q = kind === 'search' ? `mark-${rng.pick(callers).name}-` : undefined
        answer = await send(who, 'GET', q === undefined ? '/api/note' : `/api/note?q=${q}`)
        const expected = ownList(who).filter((n) => q === undefined || n.mark.startsWith(q))
        if (answer.status !== 200) fail(`${kind} answered ${answer.status}`)
        assert.deepEqual(parseJson(answer.body), { data: expected }, `${kind} of ${who.name}`)
        if (answer.headers['x-total-count'] !== undefined && q === undefined) {
          assert.equal(answer.headers['x-total-count'], String(expected.length))
        }
      } else if (kind === 'page') {
        const limit = rng.between(1, 5)
        answer = await send(who, 'GET', `/api/note?limit=${limit}`)
        if (answer.status !== 200) fail(`page answered ${answer.status}`)
        assert.deepEqual(parseJson(answer.body), { data: ownList(who).slice(0, limit) })
        assert.equal(answer.headers['x-total-count'], String(who.notes.size))
      } else if (kind === 'foreign-cursor') {
        const from = other(who)
        if (from.cursors.length === 0) continue
        crossing = from !== who
        answer = await send(who, 'GET', rng.pick(from.cursors))
        // Its own notes after that position, or a refusal: never the other's.
        if (answer.status === 200) {
          const own = new Set(who.notes.keys())
          for (const note of (parseJson(answer.body) as { data: Note[] }).data) {
            if (!own.has(note.id)) fail(`a foreign cursor gave ${who.name} note ${note.id}`)
          }
        } else if (answer.status !== 400) {
          fail(`a foreign cursor answered ${answer.status}`)
        }
      } else if (kind === 'foreign-etag') {
        const from = other(who)
        const target = anyId(who)
        if (from.etags.length === 0 || target === undefined) continue
        crossing = true
        const etag = rng.pick(from.etags)
        const mine = who.notes.get(target.id)
        if (rng.chance(0.5)) {
          answer = await send(who, 'GET', `/api/note/${target.id}`, undefined, {
            'if-none-match': etag,
          })
          const expected = mine === undefined ? 404 : 200
          if (answer.status !== expected) fail(`If-None-Match of another's ETag: ${answer.status}`)
        } else {
          answer = await send(
            who,
            'PATCH',
            `/api/note/${target.id}`,
            { n: -1 },
            { 'if-match': etag },
          )
          const expected = mine === undefined ? 404 : 412
          if (answer.status !== expected) fail(`If-Match of another's ETag: ${answer.status}`)
        }
      } else {
        // Another caller's version token as a list's If-None-Match: never a 304.
        const from = other(who)
        if (from.versions.length === 0) continue
        crossing = true
        answer = await send(who, 'GET', '/api/note', undefined, {
          'if-none-match': `"${rng.pick(from.versions)}"`,
        })
        if (answer.status !== 200) fail(`another's version as If-None-Match: ${answer.status}`)
      }
      stats.requests++
      if (crossing) stats.crossings++
      count(label, answer)
      checkAnswer(who, answer, `${kind} by ${who.name}`)
      learn(who, answer)
    }
    // At the end: each list is the model's, and each stream held its own notebook's changes only.
    for (const who of callers) {
      const answer = await send(who, 'GET', '/api/note')
      assert.deepEqual(
        parseJson(answer.body),
        { data: ownList(who) },
        `${who.name}'s list at the end`,
      )
      stats.notesAtEnd += who.notes.size
      const stream = who.stream as SseClient
      const version = answer.headers['notes-version'] as string
      await stream.until((c) => c.messages.some((m) => m.id === version), 30_000)
      nothingOfOthers(who, stream.text, `${who.name}'s change feed`)
    }
    // An event id of another's stream, sent as Last-Event-ID: a reset, nothing of the other.
    for (const who of callers) {
      const from = other(who)
      const id = (from.stream as SseClient).messages.findLast((m) => m.id !== undefined)?.id
      if (id === undefined || from === who) continue
      const resumed = await SseClient.open(rng.pick(ports), '/api/events', {
        authorization: who.authorization,
        'last-event-id': id,
      })
      await resumed.until((c) => c.messages.some((m) => m.event === 'reset'), 10_000)
      resumed.close()
      nothingOfOthers(
        who,
        resumed.text.replaceAll(id, ''),
        `${who.name}'s stream resumed from ${from.name}'s id`,
      )
      stats.crossings++
    }
  } catch (err) {
    if (err instanceof IsolationFailure) throw err
    throw new IsolationFailure(seed, index, err instanceof Error ? err.message : String(err))
  } finally {
    for (const who of callers) who.stream?.close()
    agent.destroy()
  }
  return stats
}

/** A batch of 1 to 3 creates to send under a key; its notes carry no mark, as any caller may send it. */
function keyedDocument(rng: Random): BatchDocument {
  return {
    requests: Array.from({ length: rng.between(1, 3) }, () => ({
      method: 'POST',
      url: '/api/note',
      body: { owner: 'keyed', mark: 'keyed-batch', n: rng.int(1e6) },
    })),
  }
}
