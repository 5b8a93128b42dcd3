import { STATUS_CODES } from 'node:http'
import { parseJson } from '../../src/client/parse-json.js'
import { BATCH_DEPTH, type ModelLimits, NoteModel } from '../support/note-model.js'
import { type BatchItem, type Expectation, type FuzzCase, nextCase } from './fuzz-cases.js'
import { checkFile, type FileExpectation, FileModel } from './fuzz-files.js'
import { createRandom, stepRandom } from './prng.js'
import { CLOSED, header, WireConnection, type WireResponse } from './wire.js'

export interface FuzzOptions {
  host: string
  port: number
  /**
   * Ports of further instances of the service on `host` that share its store (PostgreSQL): each
   * batch of requests goes to one instance, and the list check after it to another, so every
   * answer also checks that a write acknowledged by one instance is what the others serve
   * (one service). Chosen by their own generator: the seed makes the same requests either way.
   */
  otherPorts?: readonly number[]
  seed: number
  /** Fuzz requests to send (the list check after each one is not counted). */
  requests: number
  /** The limits the server runs with; the model needs them to know what to expect. */
  limits: ModelLimits
  /**
   * Whether files count toward MAX_STORE_BYTES beside the notes: on the memory store they do
   * (they are in its memory); on a journal or PostgreSQL they have caps of their own alone.
   */
  filesShareStoreBytes: boolean
  /** Longest wait for one response before the server counts as hung, in ms. */
  timeoutMs?: number
  onProgress?: (stats: FuzzStats) => void
}

export interface FuzzStats {
  seed: number
  requests: number
  /** Responses by status; 'closed' counts connections closed without a response. */
  byStatus: Record<string, number>
  byKind: Record<string, number>
  listChecks: number
  pipelined: number
  notesCreated: number
  notesAtEnd: number
  /** Batches applied (answered 200, not replayed), and the writes in them. */
  batchesKept: number
  batchedWrites: number
}

/** A fuzz request got an answer the model does not allow; the message says how to replay it. */
export class FuzzFailure extends Error {
  constructor(
    readonly seed: number,
    readonly index: number,
    message: string,
  ) {
    super(`fuzz request #${index} (seed ${seed}): ${message}`)
    this.name = 'FuzzFailure'
  }
}

const JSON_TYPE = 'application/json; charset=utf-8'
const PIPELINABLE = new Set([
  'create',
  'list',
  'head-list',
  'get',
  'head-note',
  'patch',
  'delete',
  'options',
  'batch',
  'batch-idempotent',
  'batch-bad-document',
])
const LIST_REQUEST = Buffer.from('GET /api/note HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')

/**
 * Sends `requests` generated requests over raw sockets, one at a time (sometimes a few pipelined),
 * and checks every answer against the model, then checks that the list still serves and equals
 * the model's. Stops at the first wrong answer with a FuzzFailure that names the seed.
 */
export async function runFuzz(options: FuzzOptions): Promise<FuzzStats> {
  const { host, port, seed, limits } = options
  const timeoutMs = options.timeoutMs ?? 10_000
  const model = new NoteModel(limits)
  // The service keeps deleted notes in its trash (TRASH_DAYS), counted toward the caps.
  model.keepsTrash = true
  const files = new FileModel(
    options.filesShareStoreBytes
      ? {
          maxBytes: limits.maxStoreBytes,
          notesBytes: () => model.bytes + model.trashBytes,
          trashHolds: () => model.trashNotes > 0,
        }
      : undefined,
  )
  if (options.filesShareStoreBytes) model.fileBytes = () => files.bytes
  const stats: FuzzStats = {
    seed,
    requests: 0,
    byStatus: {},
    byKind: {},
    listChecks: 0,
    pipelined: 0,
    notesCreated: 0,
    notesAtEnd: 0,
    batchesKept: 0,
    batchedWrites: 0,
  }
  const ports = [port, ...(options.otherPorts ?? [])]
  const pickInstance = createRandom(seed ^ 0x5bd1e995)
  const connections = new Map<number, WireConnection>()
  const open = async (to: number): Promise<WireConnection> => {
    let connection = connections.get(to)
    if (connection === undefined || connection.closed) {
      connection?.destroy()
      connection = await WireConnection.open(host, to)
      connections.set(to, connection)
    }
    return connection
  }
  /** '' with one instance, else ' (instance on port 4242)'. */
  const where = (at: number): string => (ports.length > 1 ? ` (instance on port ${at})` : '')
  /** One instance's port; with several, a different one from `not`. */
  const another = (not?: number): number => {
    const choices = ports.length > 1 ? ports.filter((p) => p !== not) : ports
    return pickInstance.pick(choices)
  }

  try {
    for (let step = 0; stats.requests < options.requests; step++) {
      const rng = stepRandom(seed, step)
      const batch: FuzzCase[] = [nextCase(rng, model, limits, files)]
      const first = batch[0] as FuzzCase
      if (PIPELINABLE.has(first.kind) && first.pipelinable && rng.chance(0.05)) {
        for (let n = rng.between(1, 3); n > 0; n--) {
          const next = nextCase(rng, model, limits, files)
          if (!PIPELINABLE.has(next.kind) || !next.pipelinable) break
          batch.push(next)
        }
      }
      const to = another()
      const conn = await open(to)
      const before = Date.now()
      conn.write(Buffer.concat(batch.map((c) => c.bytes)))
      if (batch.some((c) => c.endAfter)) conn.end()
      if (batch.length > 1) stats.pipelined += batch.length
      let mustReconnect = false
      for (const fuzzCase of batch) {
        const index = ++stats.requests
        stats.byKind[fuzzCase.kind] = (stats.byKind[fuzzCase.kind] ?? 0) + 1
        const fail = (message: string, response?: WireResponse | typeof CLOSED): never => {
          throw new FuzzFailure(
            seed,
            index,
            `${fuzzCase.kind}${where(to)}: ${message}\n${describe(fuzzCase, response)}`,
          )
        }
        let response: WireResponse | typeof CLOSED
        try {
          response = await conn.readResponse(fuzzCase.method, timeoutMs)
        } catch (err) {
          return fail(`no answer: ${(err as Error).message}`)
        }
        if (process.env.FUZZ_TRACE) {
          console.log(
            index,
            fuzzCase.kind,
            batch.length,
            response === CLOSED ? 'closed' : response.status,
            JSON.stringify(fuzzCase.bytes.toString('latin1').slice(0, 200)),
          )
        }
        const status = response === CLOSED ? 'closed' : String(response.status)
        stats.byStatus[status] = (stats.byStatus[status] ?? 0) + 1
        // 507 is the documented answer at capacity; check() decides whether it was due.
        if (response !== CLOSED && response.status >= 500 && response.status !== 507) {
          fail(`a ${response.status}`, response)
        }
        const problem = fuzzCase.expect.type.startsWith('file-')
          ? response === CLOSED
            ? 'the connection closed without an answer'
            : checkFile(fuzzCase.expect as FileExpectation, response, files)
          : check(fuzzCase.expect, fuzzCase.method, response, model, before, stats)
        if (problem !== undefined) fail(problem, response)
        if (fuzzCase.expect.type === 'reject' || fuzzCase.expect.type === 'truncated') {
          try {
            await conn.waitForClose(timeoutMs)
          } catch {
            fail('the server kept the connection open after refusing the request', response)
          }
        }
        if (response === CLOSED || /close/i.test(header(response, 'connection') ?? '')) {
          mustReconnect = true
          break
        }
      }
      if (mustReconnect) {
        conn.destroy()
        connections.delete(to)
      }
      const listAt = another(to)
      await checkList(await open(listAt), model, timeoutMs, seed, stats, where(listAt))
      options.onProgress?.(stats)
    }
  } finally {
    for (const connection of connections.values()) connection.destroy()
  }
  stats.notesAtEnd = model.notes.length
  return stats
}

async function checkList(
  conn: WireConnection,
  model: NoteModel,
  timeoutMs: number,
  seed: number,
  stats: FuzzStats,
  where: string,
): Promise<void> {
  stats.listChecks++
  conn.write(LIST_REQUEST)
  let response: WireResponse | typeof CLOSED
  try {
    response = await conn.readResponse('GET', timeoutMs)
  } catch (err) {
    throw new FuzzFailure(
      seed,
      stats.requests,
      `the list check after it${where} got no answer: ${(err as Error).message}`,
    )
  }
  const expected = model.listBody()
  if (response === CLOSED || response.status !== 200 || !response.body.equals(expected)) {
    throw new FuzzFailure(
      seed,
      stats.requests,
      `after it the list${where} differs from the model:\n  expected ${excerpt(expected.toString('utf8'))}\n  got ${response === CLOSED ? 'a closed connection' : `${response.status} ${excerpt(response.body.toString('utf8'))}`}`,
    )
  }
}

/** Undefined when the response is what the model expects (and the model is updated), else why not. */
function check(
  expect: Expectation,
  method: string,
  response: WireResponse | typeof CLOSED,
  model: NoteModel,
  sentAt: number,
  stats: FuzzStats,
): string | undefined {
  if (expect.type === 'truncated') {
    return response === CLOSED ? undefined : problemMismatch(response, 400, method)
  }
  if (response === CLOSED) return 'the connection closed without an answer'
  switch (expect.type) {
    case 'reject':
      if (!expect.problemBody)
        return response.status === expect.status
          ? undefined
          : `expected ${expect.status}, got ${response.status}`
      return problemMismatch(response, expect.status, method)
    case 'problem':
      return problemMismatch(response, expect.status, method, expect.allow)
    case 'options':
      if (response.status !== 204) return `expected 204, got ${response.status}`
      return header(response, 'allow') === expect.allow
        ? undefined
        : `Allow should be "${expect.allow}"`
    case 'list': {
      const page = model.page(expect.query)
      if (page.ok === false) return problemMismatch(response, 400, method)
      const mismatch =
        page.ok === 'any-order'
          ? someOfMismatch(response, method, page.notes, page.count)
          : dataMismatch(response, method, page.json)
      if (mismatch !== undefined) return mismatch
      if (header(response, 'x-total-count') !== String(page.total))
        return `X-Total-Count ${header(response, 'x-total-count')}, the model counts ${page.total}`
      return versionMismatch(response, model, 'notes-version')
    }
    case 'get': {
      const at = model.find(expect.segment)
      if (at === -1) return emptyNotFoundMismatch(response)
      if (expect.condition !== undefined && expect.condition.etag === model.etagOf(at)) {
        if (response.status !== 304)
          return `expected 304 for the current ETag, got ${response.status}`
        return response.body.length === 0 ? undefined : 'a 304 with a body'
      }
      return (
        dataMismatch(response, method, model.notes[at]?.json ?? '') ??
        etagMismatch(response, model.etagOf(at))
      )
    }
    case 'delete': {
      const at = model.find(expect.segment)
      if (at === -1) return emptyNotFoundMismatch(response)
      if (expect.condition !== undefined && expect.condition.etag !== model.etagOf(at)) {
        return preconditionMismatch(response, method, model, at)
      }
      const mismatch = dataMismatch(response, method, JSON.stringify(expect.segment))
      if (mismatch === undefined) model.remove(at)
      return mismatch
    }
    case 'revisions': {
      const at = model.find(expect.segment)
      if (at === -1) return emptyNotFoundMismatch(response)
      return revisionsMismatch(response, model, at)
    }
    case 'untrash': {
      const outcome = model.untrash(expect.id)
      if (outcome === 'none') return emptyNotFoundMismatch(response)
      if (outcome === 'taken') return problemMismatch(response, 409, method)
      return (
        dataMismatch(response, method, outcome) ??
        etagMismatch(response, model.etagOf(model.notes.length - 1))
      )
    }
    case 'trash': {
      if (response.status !== 200) return `expected 200, got ${response.status}`
      if (expect.empty) {
        const mismatch = dataMismatch(response, method, `{"purged":${model.trashNotes}}`)
        if (mismatch === undefined) model.emptyTrash()
        return mismatch
      }
      const total = header(response, 'x-total-count')
      return total === String(model.trashNotes)
        ? undefined
        : `X-Total-Count ${total}, the model has ${model.trashNotes} notes in the trash`
    }
    case 'create': {
      const outcome = model.bodyOutcome(expect.media, expect.body)
      if (!outcome.ok) return problemMismatch(response, outcome.status, method)
      const { key } = expect
      if (key !== undefined) {
        if (!/^[\x21-\x7e]{1,255}$/.test(key)) return problemMismatch(response, 400, method)
        const known = model.keys.get(key)
        if (known !== undefined) {
          if (known.fields !== JSON.stringify(outcome.fields)) {
            return problemMismatch(response, 422, method)
          }
          if (header(response, 'idempotent-replayed') !== 'true')
            return 'a repeated Idempotency-Key without Idempotent-Replayed: true'
          return (
            dataMismatch(response, method, known.json) ??
            etagMismatch(response, `"${model.epoch}.${known.version.toString(36)}"`)
          )
        }
      }
      if (model.createRefusal(outcome.fields) === 507) return problemMismatch(response, 507, method)
      if (response.status !== 200) return `expected 200, got ${response.status}`
      const id = createdId(response)
      if (typeof id !== 'number' || !Number.isSafeInteger(id))
        return 'the created note has no integer id'
      const earliest = Math.max(sentAt, model.lastId + 1)
      const latest = Math.max(Date.now(), model.lastId + 1) + model.notes.length
      if (id < earliest || id > latest) return `id ${id} is outside [${earliest}, ${latest}]`
      if (model.holds(id)) return `id ${id} is already held by a stored note`
      const json = model.create(outcome.fields, id)
      stats.notesCreated++
      if (key !== undefined) {
        model.keys.set(key, {
          fields: JSON.stringify(outcome.fields),
          json,
          version: model.version,
        })
      }
      return dataMismatch(response, method, json) ?? versionMismatch(response, model, 'etag')
    }
    case 'batch':
      return checkBatch(expect, response, model, sentAt, stats)
    case 'patch': {
      const outcome = model.bodyOutcome(expect.media, expect.body)
      if (!outcome.ok) return problemMismatch(response, outcome.status, method)
      const at = model.find(expect.segment)
      if (at === -1) return emptyNotFoundMismatch(response)
      if (expect.condition !== undefined && expect.condition.etag !== model.etagOf(at)) {
        return preconditionMismatch(response, method, model, at)
      }
      // Only a PATCH as application/merge-patch+json is an RFC 7396 merge patch.
      const kind = expect.media === 'merge-patch' ? 'merge-patch' : 'merge'
      const merged = model.merged(at, outcome.fields, kind)
      if (merged.refused) return problemMismatch(response, 507, method)
      const mismatch = dataMismatch(response, method, merged.json)
      if (mismatch !== undefined) return mismatch
      model.replace(at, merged.json)
      return versionMismatch(response, model, 'etag')
    }
    default:
      return `no check for a ${expect.type} here`
  }
}

/**
 * A batch answered as the model says, all or nothing. In the service's order: the
 * document's size and depth, each request as a request (the first refused one is named), the
 * Idempotency-Key, then the writes in order on a copy of the model, which is kept only when every
 * one succeeds: 200 with each answer as it would have been alone, or the first failure's status,
 * as a problem naming it, and the model unchanged.
 */
function checkBatch(
  expect: Extract<Expectation, { type: 'batch' }>,
  response: WireResponse,
  model: NoteModel,
  sentAt: number,
  stats: FuzzStats,
): string | undefined {
  const outcome = model.bodyOutcome('json', expect.body, BATCH_DEPTH)
  if (!outcome.ok) return problemMismatch(response, outcome.status, 'POST')
  const refused = expect.items.findIndex((item) => item.refusal !== undefined)
  if (refused !== -1) {
    const status = expect.items[refused]?.refusal as 400 | 415
    return (
      problemMismatch(response, status, 'POST') ??
      detailMismatch(response, new RegExp(`^requests\\[${refused}\\][ .:]`))
    )
  }
  const { key } = expect
  const fingerprint = `batch ${JSON.stringify(outcome.fields)}`
  if (key !== undefined) {
    if (!/^[\x21-\x7e]{1,255}$/.test(key)) return problemMismatch(response, 400, 'POST')
    const known = model.keys.get(key)
    if (known !== undefined) {
      // A create's key, or another batch's: one key stands for one request.
      if (known.fields !== fingerprint) return problemMismatch(response, 422, 'POST')
      if (header(response, 'idempotent-replayed') !== 'true')
        return 'a repeated Idempotency-Key without Idempotent-Replayed: true'
      return dataMismatch(response, 'POST', known.json)
    }
  }
  const text = response.body.toString('utf8')
  // A batch can be the first write the run sees: its first ETag teaches the model the epoch.
  if (model.epoch === undefined && response.status === 200) {
    model.epoch = /"etag":"\\"([0-9a-z]+)\./.exec(text)?.[1]
  }
  let answered: unknown[] = []
  if (response.status === 200) {
    try {
      answered = (parseJson(text) as { data: unknown[] }).data
    } catch {
      return 'the batch answer is not JSON'
    }
  }
  const copy = model.copy()
  const parts: string[] = []
  let created = 0
  /**
   * A refused batch's answer shows no created id, and the service made each one at a moment the
   * model does not know, between `sentAt` and now (max(now, last + 1), stepping over
   * held ids). So the copy gives each such create the latest id it can have had (the one at now),
   * and keeps here the earliest one too: the note's id is in between, unknown.
   */
  const unsure = new Map<(typeof copy.notes)[number], { earliest: number; latest: number }>()
  let lowest = copy.lastId
  for (let i = 0; i < expect.items.length; i++) {
    const item = expect.items[i] as BatchItem
    const { write } = item
    const failed = (status: number): string | undefined =>
      problemMismatch(response, status, 'POST') ??
      detailMismatch(
        response,
        new RegExp(
          `^${escapeRegExp(`requests[${i}] (${item.method} ${item.url}): `)}.*Nothing in the batch was applied\\.$`,
          's',
        ),
      )
    if (write.type === 'create') {
      if (copy.createRefusal(write.fields) === 507) return failed(507)
      let id: number
      if (response.status === 200) {
        const given = (answered[i] as { body?: { data?: { id?: unknown } } } | undefined)?.body
          ?.data?.id
        if (typeof given !== 'number' || !Number.isSafeInteger(given))
          return `requests[${i}]: the created note has no integer id`
        const earliest = Math.max(sentAt, copy.lastId + 1)
        const latest = Math.max(Date.now(), copy.lastId + 1) + copy.notes.length
        if (given < earliest || given > latest)
          return `requests[${i}]: id ${given} is outside [${earliest}, ${latest}]`
        if (copy.holds(given)) return `requests[${i}]: id ${given} is already held by a stored note`
        id = given
      } else {
        // Refused whole: the answer shows no id (see `unsure`).
        id = copy.nextId()
        lowest = Math.max(sentAt, lowest + 1)
      }
      const json = copy.create(write.fields, id)
      if (response.status !== 200) {
        unsure.set(copy.notes[copy.notes.length - 1] as (typeof copy.notes)[number], {
          earliest: lowest,
          latest: id,
        })
      }
      created++
      parts.push(writtenJson(copy, copy.notes.length - 1, json))
      continue
    }
    let at = copy.find(write.segment)
    const named = NoteModel.parseId(write.segment)
    if (unsure.size > 0 && named !== undefined && Number.isSafeInteger(named)) {
      // A note that surely holds the id comes first in the list (creates append), whatever the
      // creates of the batch took; with none, the id may be one of theirs, or no note's.
      at = copy.notes.findIndex((note) => note.value.id === named && !unsure.has(note))
      const maybe = [...unsure].find(([, ids]) => ids.earliest <= named && named <= ids.latest)
      if (at === -1 && maybe !== undefined) {
        // Only the service's answer tells which (issue 25): it failed here, with a 404 (no note
        // has the id), or a 412 when the request has a condition (the created note's ETag is
        // one the batch made, never the one named); or it went on, having met that create's note.
        if (failedIndex(response) === i) {
          return failed(write.condition !== undefined && response.status === 412 ? 412 : 404)
        }
        const [note] = maybe
        at = copy.notes.indexOf(note)
        settleId(copy, at, named)
        // Ids of one batch's creates increase: the ones before took less, the ones after more.
        unsure.delete(note)
        for (const [other, ids] of unsure) {
          if (copy.notes.indexOf(other) < at) ids.latest = Math.min(ids.latest, named - 1)
          else ids.earliest = Math.max(ids.earliest, named + 1)
        }
      }
    }
    if (at === -1) return failed(404)
    if (write.condition !== undefined && write.condition.etag !== copy.etagOf(at))
      return failed(412)
    if (write.type === 'delete') {
      copy.remove(at)
      parts.push(`{"status":200,"headers":{},"body":{"data":${JSON.stringify(write.segment)}}}`)
    } else {
      const merged = copy.merged(at, write.fields, write.kind)
      if (merged.refused) return failed(507)
      copy.replace(at, merged.json)
      parts.push(writtenJson(copy, at, merged.json))
    }
  }
  const data = `[${parts.join(',')}]`
  if (header(response, 'idempotent-replayed') !== undefined)
    return 'a batch applied for the first time says Idempotent-Replayed'
  const mismatch = dataMismatch(response, 'POST', data)
  if (mismatch !== undefined) return mismatch
  model.adopt(copy)
  stats.notesCreated += created
  stats.batchesKept++
  stats.batchedWrites += expect.items.length
  if (key !== undefined)
    model.keys.set(key, { fields: fingerprint, json: data, version: model.version })
  return undefined
}

/** The index of the request a refused batch names in its problem ('requests[3] (...)'), if any. */
function failedIndex(response: WireResponse): number | undefined {
  try {
    const { detail } = parseJson(response.body.toString('utf8')) as { detail?: unknown }
    const index = typeof detail === 'string' ? /^requests\[(\d+)\]/.exec(detail)?.[1] : undefined
    return index === undefined ? undefined : Number(index)
  } catch {
    return undefined
  }
}

/** The created note at `at` took `id` after all (a refused batch's create): the same note there. */
function settleId(model: NoteModel, at: number, id: number): void {
  const note = model.notes[at] as (typeof model.notes)[number]
  // The spread keeps the keys' order: `id` stays where the create put it.
  const value = { ...note.value, id }
  model.notes[at] = { ...note, value, json: JSON.stringify(value) }
}

/** A note's revisions as the model has them: versions, changes and notes, newest first. */
function revisionsMismatch(
  response: WireResponse,
  model: NoteModel,
  at: number,
): string | undefined {
  if (response.status !== 200) return `expected 200, got ${response.status}`
  const { data } = parseJson(response.body.toString('utf8')) as {
    data: { version: string; at: string; change: string; note: unknown }[]
  }
  const expected = model.revisions(at)
  const seen = data.map(({ version, change, note }) => [version, change, JSON.stringify(note)])
  const wanted = expected.map(({ version, change, json }) => [
    model.epoch === undefined ? (seen[0]?.[0] ?? '') : `${model.epoch}.${version.toString(36)}`,
    change,
    JSON.stringify(parseJson(json)),
  ])
  if (model.epoch === undefined) {
    // Before the epoch is known the versions cannot be checked, only the states.
    for (const row of seen) row[0] = ''
    for (const row of wanted) row[0] = ''
  }
  if (JSON.stringify(seen) !== JSON.stringify(wanted)) {
    return `revisions ${excerpt(JSON.stringify(seen))}, the model has ${excerpt(JSON.stringify(wanted))}`
  }
  const badTime = data.find(
    (revision) => !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(revision.at),
  )
  return badTime === undefined ? undefined : `a revision's time ${badTime.at} is not RFC 3339`
}

/** One written note's answer inside a batch: {"status":200,"headers":{"etag":...},"body":...}. */
function writtenJson(model: NoteModel, at: number, json: string): string {
  return `{"status":200,"headers":{"etag":${JSON.stringify(model.etagOf(at))}},"body":{"data":${json}}}`
}

/** The problem's detail matches `pattern` (run after problemMismatch found the problem sound). */
function detailMismatch(response: WireResponse, pattern: RegExp): string | undefined {
  const { detail } = parseJson(response.body.toString('utf8')) as { detail: string }
  return pattern.test(detail)
    ? undefined
    : `the detail ${JSON.stringify(detail)} should match ${pattern}`
}

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&')
}

/**
 * The answer's version (`Notes-Version`, or a written note's ETag) is the model's:
 * every write advanced it by exactly one. The first answer teaches the model the epoch.
 */
function versionMismatch(
  response: WireResponse,
  model: NoteModel,
  name: 'notes-version' | 'etag',
): string | undefined {
  const value = header(response, name)
  const token = name === 'etag' ? /^"(.*)"$/.exec(value ?? '')?.[1] : value
  const match = /^([0-9a-z]+)\.([0-9a-z]+)$/.exec(token ?? '')
  if (match === null) return `${name} ${value} is not a version token`
  model.epoch ??= match[1]
  return token === model.token() ? undefined : `${name} ${value}, the model is at ${model.token()}`
}

function etagMismatch(response: WireResponse, etag: string | undefined): string | undefined {
  if (etag === undefined) return undefined
  return header(response, 'etag') === etag
    ? undefined
    : `ETag ${header(response, 'etag')}, not ${etag}`
}

/** A stale If-Match gets 412 with the note's current ETag, and changes nothing. */
function preconditionMismatch(
  response: WireResponse,
  method: string,
  model: NoteModel,
  at: number,
): string | undefined {
  return problemMismatch(response, 412, method) ?? etagMismatch(response, model.etagOf(at))
}

function createdId(response: WireResponse): unknown {
  try {
    const parsed = parseJson(response.body.toString('utf8')) as { data?: { id?: unknown } }
    return parsed.data?.id
  } catch {
    return undefined
  }
}

/** Success: 200, JSON media type, body exactly {"data":...} (none for HEAD). */
/**
 * A page of `count` distinct notes among `notes` (JSON texts), in any order: sort=updated, whose
 * order the model does not know. Notes are compared as JSON.parse then JSON.stringify make them.
 */
function someOfMismatch(
  response: WireResponse,
  method: string,
  notes: readonly string[],
  count: number,
): string | undefined {
  if (response.status !== 200) return `expected 200, got ${response.status}`
  if (method === 'HEAD')
    return response.body.length === 0 ? undefined : 'a HEAD response with a body'
  const canonical = (json: string) => JSON.stringify(JSON.parse(json))
  const left = notes.map(canonical)
  const { data } = JSON.parse(response.body.toString()) as { data: unknown[] }
  if (data.length !== count) return `a page of ${data.length} notes, the model expects ${count}`
  for (const note of data) {
    const at = left.indexOf(JSON.stringify(note))
    if (at === -1) return `a note the model does not hold: ${JSON.stringify(note).slice(0, 200)}`
    left.splice(at, 1)
  }
  return undefined
}

function dataMismatch(
  response: WireResponse,
  method: string,
  dataJson: string,
): string | undefined {
  const expected = `{"data":${dataJson}}`
  if (response.status !== 200) return `expected 200, got ${response.status}`
  if (header(response, 'content-type') !== JSON_TYPE)
    return `content-type ${header(response, 'content-type')}`
  if (method === 'HEAD') {
    if (response.body.length !== 0) return 'a HEAD response with a body'
    const length = header(response, 'content-length')
    return length === String(Buffer.byteLength(expected))
      ? undefined
      : `HEAD content-length ${length}`
  }
  const body = response.body.toString('utf8')
  return body === expected
    ? undefined
    : `body differs from the model:\n  expected ${excerpt(expected)}\n  got      ${excerpt(body)}`
}

/** The contract's 404 has no body and no Content-Type. */
function emptyNotFoundMismatch(response: WireResponse): string | undefined {
  if (response.status !== 404) return `expected the empty 404, got ${response.status}`
  if (response.body.length !== 0 || header(response, 'content-length') !== '0')
    return 'the 404 has a body'
  return header(response, 'content-type') === undefined
    ? undefined
    : 'the empty 404 has a content-type'
}

/** Other errors: RFC 9457 problem JSON with a detail. */
function problemMismatch(
  response: WireResponse,
  status: number,
  method: string,
  allow?: string,
): string | undefined {
  if (response.status !== status) return `expected ${status}, got ${response.status}`
  if (allow !== undefined && header(response, 'allow') !== allow)
    return `Allow should be "${allow}"`
  if (!/^application\/problem\+json$/i.test(header(response, 'content-type') ?? '')) {
    return `a ${status} without problem JSON`
  }
  if (method === 'HEAD')
    return response.body.length === 0 ? undefined : 'a HEAD response with a body'
  let body: unknown
  try {
    body = parseJson(response.body.toString('utf8'))
  } catch {
    return 'the problem body is not JSON'
  }
  const p = body as Record<string, unknown>
  const keys = Object.keys(p).sort().join(',')
  if (keys !== 'detail,status,title,type') return `problem keys ${keys}`
  if (p.type !== 'about:blank' || p.status !== status || p.title !== STATUS_CODES[status])
    return 'problem fields wrong'
  return typeof p.detail === 'string' && p.detail.length > 0
    ? undefined
    : 'problem without a detail'
}

function describe(fuzzCase: FuzzCase, response?: WireResponse | typeof CLOSED): string {
  const request = `  request: ${excerpt(fuzzCase.bytes.toString('latin1'))}`
  if (response === undefined) return request
  if (response === CLOSED) return `${request}\n  response: connection closed`
  const headers = [...response.headers].map(([k, v]) => `${k}: ${v.join(', ')}`).join('; ')
  return `${request}\n  response: ${response.status} ${headers}\n  body: ${excerpt(response.body.toString('utf8'))}`
}

function excerpt(text: string, max = 600): string {
  const shown = text.length > max ? `${text.slice(0, max)}... (${text.length} chars)` : text
  return JSON.stringify(shown)
}
