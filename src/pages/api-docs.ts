import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { JSON_CONTENT_TYPE } from '../api/answer.js'
import {
  type Coding,
  Compression,
  encodedEtag,
  isLarge,
  parseAcceptEncoding,
} from '../api/compression.js'
import { noneMatch } from '../api/conditional.js'
import { sendProblem } from '../api/problem.js'

export interface ApiDocsOptions {
  /** The OpenAPI document served at /api/openapi.json, as src/openapi/ builds it. */
  document: object
  /** Also serve the Swagger UI page at /docs, with its assets from the npm package. */
  ui: boolean
}

/** The files of swagger-ui-dist that the page loads from /docs/static/, by their media types. */
const DOCS_PAGE_FILES = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'index.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
} as const

/** The detail of the 404 for a name under /docs/static/ that is not one of the page's files. */
export const NO_SUCH_FILE = 'The /docs page has no such file; open /docs itself.'

/** Every file under /docs/static/: swagger-ui-dist's and the initializer. */
export const DOCS_PAGE_FILE_NAMES = [...Object.keys(DOCS_PAGE_FILES), 'swagger-initializer.js']

/** Starts Swagger UI on the canonical document; it is what the top bar shows, too. */
const INITIALIZER = `window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: '/api/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    defaultModelsExpandDepth: 1,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'StandaloneLayout',
    validatorUrl: null,
  })
}
`

/** Absolute paths, so that /docs and /docs/ (the same resource) load the same files. */
const PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>notes-service API</title>
<link rel="stylesheet" href="/docs/static/swagger-ui.css">
<link rel="stylesheet" href="/docs/static/index.css">
<link rel="icon" type="image/png" href="/docs/static/favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="/docs/static/favicon-16x16.png" sizes="16x16">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script src="/docs/static/swagger-ui-standalone-preset.js"></script>
<script src="/docs/static/swagger-initializer.js"></script>
</body>
</html>
`

/** A response that never changes while the process runs, with its strong ETag. */
interface FixedFile {
  contentType: string
  body: Buffer
  etag: string
  /** Its compressed copies, made at the first request that asks for each. */
  encoded: Partial<Record<Coding, Promise<Buffer>>>
}

/**
 * `GET /api/openapi.json` serves the document as built once. With `ui`, `GET /docs` serves a
 * Swagger UI page that reads that same document (there is no second copy of it), and
 * `GET /docs/static/{file}` the page's scripts, styles and icons from `swagger-ui-dist` in
 * node_modules (no CDN), each with an ETag and `Cache-Control: no-cache`, so a browser
 * revalidates and gets a 304 instead of the 1.5 MB bundle again. Accept-Encoding and
 * If-None-Match mean what they mean for the API's answers (compression.ts, conditional.ts): a
 * text file is sent brotli- or gzip-compressed, compressed once per process and coding, with the
 * ETag of that copy. None of these requests is logged below warn.
 *
 * The page's files are read only when the page is on, which saves their memory and start-up time.
 */
export function registerApiDocs(app: FastifyInstance, { document, ui }: ApiDocsOptions): void {
  const body = Buffer.from(JSON.stringify(document))
  app.get('/api/openapi.json', { logLevel: 'warn' }, (_request, reply) => {
    reply.header('content-type', JSON_CONTENT_TYPE).send(body)
  })
  if (!ui) return
  app.register(async (docs) => {
    const page = fixedFile('text/html; charset=utf-8', Buffer.from(PAGE))
    const files = await readDocsPageFiles()
    const compression = new Compression()
    const send = (request: FastifyRequest, reply: FastifyReply, file: FixedFile) =>
      sendFixed(request, reply, file, compression)
    docs.get('/docs', { logLevel: 'warn' }, (request, reply) => send(request, reply, page))
    docs.get<{ Params: { file: string } }>(
      '/docs/static/:file',
      { logLevel: 'warn' },
      (request, reply) => {
        const file = files.get(request.params.file)
        if (file === undefined) {
          return sendProblem(reply, 404, NO_SUCH_FILE)
        }
        return send(request, reply, file)
      },
    )
  })
}

/** The page's files under their names in /docs/static/, read from swagger-ui-dist. */
async function readDocsPageFiles(): Promise<Map<string, FixedFile>> {
  const folder = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
  const files = new Map<string, FixedFile>()
  for (const [name, contentType] of Object.entries(DOCS_PAGE_FILES)) {
    files.set(name, fixedFile(contentType, await readFile(join(folder, name))))
  }
  files.set(
    'swagger-initializer.js',
    fixedFile('text/javascript; charset=utf-8', Buffer.from(INITIALIZER)),
  )
  return files
}

function fixedFile(contentType: string, body: Buffer): FixedFile {
  const hash = createHash('sha256').update(body).digest('base64url').slice(0, 27)
  return { contentType, body, etag: `"${hash}"`, encoded: {} }
}

/**
 * 200 with the file in the coding the client asks for, or 304 when it has that copy. As for the
 * API's answers, a file of 1 KiB or less is sent as it is unless identity is refused, and a file
 * whose compression is not ready while the thread pool is busy goes uncompressed. Images are
 * compressed already.
 */
async function sendFixed(
  request: FastifyRequest,
  reply: FastifyReply,
  file: FixedFile,
  compression: Compression,
): Promise<FastifyReply> {
  const header = request.headers['accept-encoding']
  const choice = header === undefined ? undefined : parseAcceptEncoding(header)
  let body = file.body
  let etag = file.etag
  let coding: Coding | undefined
  if (
    choice !== undefined &&
    !file.contentType.startsWith('image/') &&
    (choice.always || isLarge(file.body))
  ) {
    const compressed = await compressedOnce(file, choice.coding, compression)
    if (compressed !== undefined) {
      body = compressed
      etag = encodedEtag(file.etag, choice.coding)
      coding = choice.coding
    }
  }
  reply.header('etag', etag).header('cache-control', 'no-cache').header('vary', 'Accept-Encoding')
  const ifNoneMatch = request.headers['if-none-match']
  if (ifNoneMatch !== undefined && noneMatch(ifNoneMatch, etag)) return reply.code(304).send()
  if (coding !== undefined) reply.header('content-encoding', coding)
  return reply.header('content-type', file.contentType).send(body)
}

/** `file` compressed with `coding`, once; undefined while the thread pool is busy. */
function compressedOnce(
  file: FixedFile,
  coding: Coding,
  compression: Compression,
): Promise<Buffer> | undefined {
  const made = file.encoded[coding]
  if (made !== undefined) return made
  const compressed = compression.compress(file.body, coding, 'cached')
  if (compressed === undefined) return undefined
  const once = Promise.resolve(compressed)
  file.encoded[coding] = once
  return once
}
