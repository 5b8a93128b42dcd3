/**
 * The idiomatic Fastify peer: the service's conditional-request job done the way Fastify's docs
 * suggest, with the official @fastify/etag plugin (its defaults: a strong ETag that is the SHA-1
 * of every string or Buffer answer, made in an onSend hook, and 304 with no body when
 * If-None-Match equals it). A note's GET adds Last-Modified (its last write) and
 * Cache-Control: no-cache, the list's Cache-Control: no-cache, as the service's reads do. Notes
 * are objects in a Map by id (the lookup a tutorial would write for GET /:id), answered with
 * `reply.send(object)`; Fastify's defaults otherwise (no logger). PORT from the environment;
 * listens on 127.0.0.1.
 */
import etag from '@fastify/etag'
import Fastify from 'fastify'

interface Note {
  id: unknown
  [field: string]: unknown
}

interface Stored {
  note: Note
  updatedAt: Date
}

interface IdParams {
  id: string
}

const notes = new Map<number, Stored>()
let lastId = 0

const app = Fastify()
await app.register(etag)

app.post('/api/note', (request, reply) => {
  const id = Math.max(Date.now(), lastId + 1)
  lastId = id
  const note: Note = { ...(request.body as object), id }
  notes.set(id, { note, updatedAt: new Date() })
  reply.send({ data: note })
})

app.get('/api/note', (_request, reply) => {
  reply.header('cache-control', 'no-cache')
  reply.send({ data: Array.from(notes.values(), (stored) => stored.note) })
})

app.get<{ Params: IdParams }>('/api/note/:id', (request, reply) => {
  const stored = notes.get(Number(request.params.id))
  if (stored === undefined) {
    reply.code(404).send()
    return
  }
  reply.header('last-modified', stored.updatedAt.toUTCString())
  reply.header('cache-control', 'no-cache')
  reply.send({ data: stored.note })
})

app.patch<{ Params: IdParams }>('/api/note/:id', (request, reply) => {
  const id = Number(request.params.id)
  const stored = notes.get(id)
  if (stored === undefined) {
    reply.code(404).send()
    return
  }
  const note: Note = { ...stored.note, ...(request.body as object) }
  notes.set(id, { note, updatedAt: new Date() })
  reply.send({ data: note })
})

app.delete<{ Params: IdParams }>('/api/note/:id', (request, reply) => {
  if (!notes.delete(Number(request.params.id))) {
    reply.code(404).send()
    return
  }
  reply.send({ data: request.params.id })
})

await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' })
process.once('SIGTERM', () => void app.close())
