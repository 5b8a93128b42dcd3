/**
 * The floor: what Node itself can do for this API. Plain node:http, notes kept as
 * pre-serialized JSON strings in a Map (insertion order is list order), the list joined
 * per request. Same status and header semantics as the service on the benchmark's paths:
 * 200 with JSON, 404 with no body. No limits or validation beyond what keeps it correct.
 * A note's GET does the service's conditional-request job with the least work node:http allows:
 * its ETag and Last-Modified are made when the note is written, sent with Cache-Control:
 * no-cache, and an If-None-Match equal to the stored ETag answers 304 with those three headers.
 * PORT (and KEEP_ALIVE_TIMEOUT_MS, HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS, named as the service
 * names them) from the environment; listens on 127.0.0.1.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'

const JSON_TYPE = 'application/json; charset=utf-8'
const ID = /^-?[0-9]+$/
const PREFIX = '/api/note'
const BODY_LIMIT = 1024 * 1024

/** A note as written: its JSON and its validators, made once per write rather than per GET. */
interface StoredNote {
  json: string
  /** '"mifx2k3a.7"': this process's start and a counter of writes, as unique as the service's. */
  etag: string
  /** 'Thu, 26 Nov 2026 10:50:08 GMT', the second of the last write. */
  lastModified: string
}

const notes = new Map<number, StoredNote>()
let lastId = 0
const ETAG_PREFIX = `"${Date.now().toString(36)}.`
let writes = 0
let dateSecond = -1
let dateText = ''

/** The note's record after a write: a new ETag, and the HTTP date of this second (cached per second). */
function stored(json: string): StoredNote {
  const now = Date.now()
  const second = Math.floor(now / 1000)
  if (second !== dateSecond) {
    dateSecond = second
    dateText = new Date(now).toUTCString()
  }
  writes++
  return { json, etag: `${ETAG_PREFIX}${writes}"`, lastModified: dateText }
}

const jsonOf = (note: StoredNote): string => note.json

/** 200 with the note and its validators, or 304 with the validators when If-None-Match names them. */
function sendNote(req: IncomingMessage, res: ServerResponse, note: StoredNote): void {
  if (req.headers['if-none-match'] === note.etag) {
    res.writeHead(304, [
      'etag',
      note.etag,
      'last-modified',
      note.lastModified,
      'cache-control',
      'no-cache',
    ])
    res.end()
    return
  }
  const body = `{"data":${note.json}}`
  res.writeHead(200, [
    'content-type',
    JSON_TYPE,
    'content-length',
    Buffer.byteLength(body),
    'etag',
    note.etag,
    'last-modified',
    note.lastModified,
    'cache-control',
    'no-cache',
  ])
  res.end(body)
}

/** 200 with a JSON body and its Content-Length, as Fastify sends it. */
function sendJson(res: ServerResponse, body: string): void {
  res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

function send(res: ServerResponse, json: string): void {
  sendJson(res, `{"data":${json}}`)
}

/** A status with no body at all (Content-Length: 0). */
function empty(res: ServerResponse, status: number): void {
  res.statusCode = status
  res.end()
}

function notFound(res: ServerResponse): void {
  empty(res, 404)
}

function readBody(req: IncomingMessage, res: ServerResponse, then: (fields: object) => void): void {
  const chunks: Buffer[] = []
  let size = 0
  req.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size <= BODY_LIMIT) chunks.push(chunk)
  })
  req.on('end', () => {
    let value: unknown
    try {
      value = size === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      value = undefined
    }
    if (size > BODY_LIMIT || typeof value !== 'object' || value === null || Array.isArray(value)) {
      empty(res, 400)
      return
    }
    then(value)
  })
}

const server = createServer((req, res) => {
  const url = req.url ?? ''
  if (url === PREFIX || url === `${PREFIX}/`) {
    if (req.method === 'GET') {
      sendJson(res, `{"data":[${Array.from(notes.values(), jsonOf).join(',')}]}`)
    } else if (req.method === 'POST') {
      readBody(req, res, (fields) => {
        const id = Math.max(Date.now(), lastId + 1)
        lastId = id
        const json = JSON.stringify({ ...fields, id })
        notes.set(id, stored(json))
        send(res, json)
      })
    } else {
      empty(res, 405)
    }
    return
  }
  const segment = url.startsWith(`${PREFIX}/`) ? url.slice(PREFIX.length + 1) : undefined
  if (segment === undefined) return notFound(res)
  const id = ID.test(segment) ? Number(segment) : Number.NaN
  if (req.method === 'GET') {
    const note = notes.get(id)
    if (note === undefined) notFound(res)
    else sendNote(req, res, note)
  } else if (req.method === 'PATCH') {
    readBody(req, res, (fields) => {
      const note = notes.get(id)
      if (note === undefined) return notFound(res)
      const json = JSON.stringify({ ...JSON.parse(note.json), ...fields })
      notes.set(id, stored(json))
      send(res, json)
    })
  } else if (req.method === 'DELETE') {
    if (notes.delete(id)) send(res, JSON.stringify(segment))
    else notFound(res)
  } else {
    empty(res, 405)
  }
})

// Node's defaults (5 s, 60 s, 300 s) unless the bench asks for longer (bench:instructions, where
// a server under valgrind on a busy machine can take longer than that between two reads).
const { KEEP_ALIVE_TIMEOUT_MS, HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS } = process.env
if (KEEP_ALIVE_TIMEOUT_MS !== undefined) server.keepAliveTimeout = Number(KEEP_ALIVE_TIMEOUT_MS)
if (HEADERS_TIMEOUT_MS !== undefined) server.headersTimeout = Number(HEADERS_TIMEOUT_MS)
if (REQUEST_TIMEOUT_MS !== undefined) server.requestTimeout = Number(REQUEST_TIMEOUT_MS)
server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1')
process.once('SIGTERM', () => server.close())
