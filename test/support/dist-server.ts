import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, extname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'

/** dist/, where the compiled modules are. */
export const DIST = join(dirname(fileURLToPath(import.meta.url)), '../..')

/**
 * A static server over dist/ on 127.0.0.1, so that a page in Chromium can import the compiled
 * client modules ('/src/client/replica/indexeddb-storage.js'); '/' is an empty page.
 */
export async function serveDist(): Promise<{ server: Server; origin: string }> {
  const server = createServer((request, response) => {
    const path = normalize(new URL(request.url ?? '/', 'http://x').pathname)
    if (path === '/') {
      response
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<!doctype html><title>t</title>')
      return
    }
    const file = join(DIST, path)
    if (!file.startsWith(DIST) || extname(file) !== '.js' || !existsSync(file)) {
      response.writeHead(404).end()
      return
    }
    response.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(file))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}
