/**
 * The floors of the file benchmark, in a process of their own (`node dist/bench/file-floor-server.js
 * <folder> <plain|static>`, the port on stdout):
 * - plain: node:http alone. POST /upload reads the body, hashes it (SHA-256) and writes it to a
 *   temporary file, with one fsync at the end and a rename, then answers its id; GET /files/:id
 *   streams the file with fs.createReadStream and the headers the service sends for a file.
 * - static: Fastify with @fastify/static serving the same folder at /files/, with the same headers.
 * Neither checks anything the service checks (no caps, no notebooks, no ranges): what Node
 * itself, and the usual Fastify way, can do.
 */
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { open, rename, stat } from 'node:fs/promises'
import { createServer } from 'node:http'
import { join } from 'node:path'
import fastifyStatic from '@fastify/static'
import Fastify from 'fastify'

const [folder = '.', kind = 'plain'] = process.argv.slice(2)

const FILE_HEADERS = {
  'cache-control': 'private, max-age=31536000, immutable',
  'accept-ranges': 'bytes',
  'x-content-type-options': 'nosniff',
  'content-security-policy': "sandbox; default-src 'none'",
  'content-type': 'application/octet-stream',
  'content-disposition': 'attachment',
}

if (kind === 'static') {
  const app = Fastify()
  await app.register(fastifyStatic, {
    root: folder,
    prefix: '/files/',
    setHeaders: (res) => {
      for (const [name, value] of Object.entries(FILE_HEADERS)) res.setHeader(name, value)
    },
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  process.stdout.write(`listening on ${typeof address === 'object' ? address?.port : ''}\n`)
} else {
  const server = createServer(async (request, response) => {
    if (request.method === 'POST' && request.url === '/upload') {
      const hash = createHash('sha256')
      const tmp = join(folder, `${randomBytes(8).toString('hex')}.tmp`)
      const file = await open(tmp, 'w')
      for await (const chunk of request) {
        hash.update(chunk as Buffer)
        await file.write(chunk as Buffer)
      }
      await file.sync()
      await file.close()
      const id = hash.digest('hex')
      await rename(tmp, join(folder, id))
      response.writeHead(201, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ data: { id } }))
      return
    }
    const id = /^\/files\/([0-9a-f]{64})$/.exec(request.url ?? '')?.[1]
    if (request.method === 'GET' && id !== undefined) {
      const path = join(folder, id)
      const { size } = await stat(path)
      response.writeHead(200, { ...FILE_HEADERS, etag: `"${id}"`, 'content-length': size })
      createReadStream(path).pipe(response)
      return
    }
    response.writeHead(404).end()
  })
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    process.stdout.write(`listening on ${typeof address === 'object' ? address?.port : ''}\n`)
  })
}
