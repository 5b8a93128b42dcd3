/**
 * The straightforward Fastify implementation of the API, as a tutorial would write it: notes in
 * a plain array of objects, find/findIndex by id, `reply.send(object)` (JSON.stringify per
 * response). Fastify's defaults otherwise (no logger). PORT from the environment; 127.0.0.1.
 */
import Fastify from 'fastify'

interface Note {
  id: unknown
  [field: string]: unknown
}

interface IdParams {
  id: string
}

const notes: Note[] = []
let lastId = 0

const app = Fastify()

app.post('/api/note', (request, reply) => {
  const id = Math.max(Date.now(), lastId + 1)
  lastId = id
  const note: Note = { ...(request.body as object), id }
  notes.push(note)
  reply.send({ data: note })
})

app.get('/api/note', (_request, reply) => {
  reply.send({ data: notes })
})

app.get<{ Params: IdParams }>('/api/note/:id', (request, reply) => {
  const id = Number(request.params.id)
  const note = notes.find((n) => n.id === id)
  if (note === undefined) reply.code(404).send()
  else reply.send({ data: note })
})

app.patch<{ Params: IdParams }>('/api/note/:id', (request, reply) => {
  const id = Number(request.params.id)
  const index = notes.findIndex((n) => n.id === id)
  const note = notes[index]
  if (note === undefined) {
    reply.code(404).send()
    return
  }
  const updated: Note = { ...note, ...(request.body as object) }
  notes[index] = updated
  reply.send({ data: updated })
})

app.delete<{ Params: IdParams }>('/api/note/:id', (request, reply) => {
  const id = Number(request.params.id)
  const index = notes.findIndex((n) => n.id === id)
  if (index === -1) {
    reply.code(404).send()
    return
  }
  notes.splice(index, 1)
  reply.send({ data: request.params.id })
})

await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' })
process.once('SIGTERM', () => void app.close())
