import { readdirSync, readFileSync } from 'node:fs'
import { sep } from 'node:path'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type Coding, encodedEtag, parseAcceptEncoding } from '../api/compression.js'
import { noneMatch } from '../api/conditional.js'
import { sendProblem } from '../api/problem.js'
import { compressedPageFile, contentDigest } from './page-compression.js'

/** The Trusted Types policy the page registers its service worker through (src/ui/main.ts). */
const SERVICE_WORKER_POLICY = 'notes-service-worker'

/**
 * The page's policy: everything from this origin only (images also from the page's own blob:
 * URLs), no inline script or style, no plugins, no
 * framing, and Trusted Types required, so that assigning a string to innerHTML (or any other
 * HTML sink) throws: note content can only ever reach the page as text.
 */
export const PAGE_CSP = pageCsp()

/**
 * The page's policy, reaching `signInOrigin` too when the page signs people in there (discovery
 * and the token endpoint: 'https://idp.example'); navigations to its sign-in page are not fetches.
 */
export function pageCsp(signInOrigin?: string): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    // blob: for the attachments, whose bytes the page reads with the tab's key.
    "img-src 'self' blob:",
    signInOrigin === undefined ? "connect-src 'self'" : `connect-src 'self' ${signInOrigin}`,
    "worker-src 'self'",
    "manifest-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
    // One policy, which makes a script URL of the service worker's address and of nothing else.
    `trusted-types ${SERVICE_WORKER_POLICY}`,
  ].join('; ')
}

/**
 * How the page signs people in, when it does (AUTH_PAGE_CLIENT_ID): served at /ui/sign-in.json
 * as {"issuer", "client_id", "scope"}; without it the JSON is {} and the page asks for a token.
 */
export interface PageSignIn {
  issuer: string
  clientId: string
  scope: string
}

/** Where the page learns how to sign people in. */
const SIGN_IN_FILE = 'sign-in.json'

/** The detail of the 404 for a name under /ui/ that is not one of the page's files. */
export const NO_SUCH_PAGE_FILE = 'The notes page has no such file; open / itself.'

/** The page's files that are not compiled: in src/ui/ beside its TypeScript sources. */
const STATIC_FILES = {
  'index.html': 'text/html; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
  'icon.svg': 'image/svg+xml',
  'icon-maskable.svg': 'image/svg+xml',
  'manifest.webmanifest': 'application/manifest+json',
} as const

/**
 * The service worker, served at /ui/sw.js with `Service-Worker-Allowed: /`, so that it may
 * control the whole origin's page (it leaves /api/ alone).
 */
export const SERVICE_WORKER = 'sw.js'

/**
 * The folders under /ui/ that hold files: the page's own, the client library's, and the
 * libraries it uses as they ship (oauth4webapi's ES module, which has no imports of its own).
 */
const PAGE_FOLDERS = ['', 'client/', 'client/replica/', 'vendor/'] as const

/** The libraries served under /ui/vendor/: name there -> module specifier. */
const VENDOR = { 'oauth4webapi.js': 'oauth4webapi' } as const

const JAVASCRIPT = 'text/javascript; charset=utf-8'

/** One file of the page, as sent: identity, brotli and gzip, each with its strong ETag. */
interface PageFile {
  contentType: string
  variants: Record<Encoding, { body: Buffer; etag: string }>
}

type Encoding = 'identity' | Coding

/**
 * The page's files by name: 'index.html' (served at /), 'main.js', 'style.css', the client
 * library's modules as 'client/index.js' ...
 */
export type PageFiles = ReadonlyMap<string, PageFile>

/**
 * Where the page's files are: its compiled modules in dist/src/page/ui/ and the client
 * library's, compiled with them, in dist/src/page/client/ (tsconfig.ui.json); the HTML, CSS,
 * icons and manifest in src/ui/ (package.json's `files` ships both). From dist/src/pages/ here.
 */
const COMPILED = new URL('../page/ui/', import.meta.url)
const CLIENT = new URL('../page/client/', import.meta.url)
const SOURCES = new URL('../../../src/ui/', import.meta.url)

let loaded: PageFiles | undefined

/**
 * Reads the page's files once per process, with the compressed copies that the build wrote
 * (page-compression.ts), so that a request only picks the bytes to send. Synchronously, on
 * purpose: with zlib's and fs's async calls at start-up, the process then spent about 7% more
 * instructions on every W1 request for the rest of its life (callgrind, `npm run
 * bench:instructions`: 74,448 against 69,508 with UI=false; with the sync calls 72,499 against
 * 71,916, within the runs' spread).
 */
export function loadPageFiles(): PageFiles {
  loaded ??= new Map(
    pageSources().map(({ name, contentType, url }) => [
      name,
      pageFile(contentType, readFileSync(url)),
    ]),
  )
  return loaded
}

/** One file of the page: its name under /ui/ ('index.html' is served at /), type and place. */
export interface PageSource {
  name: string
  contentType: string
  url: URL
}

/** Every file of the page, where it is on disk; throws when its scripts are not built. */
export function pageSources(): PageSource[] {
  let modules: string[]
  try {
    modules = readdirSync(COMPILED)
      .filter((name) => name.endsWith('.js'))
      .sort()
  } catch {
    modules = []
  }
  if (!modules.includes('main.js')) {
    throw new Error(
      `The notes page's scripts are not built (no main.js in ${COMPILED.pathname}): run npm run build, or set UI=false.`,
    )
  }
  return [
    ...Object.entries(STATIC_FILES).map(([name, contentType]) => ({
      name,
      contentType,
      url: new URL(name, SOURCES),
    })),
    ...modules.map((name) => ({ name, contentType: JAVASCRIPT, url: new URL(name, COMPILED) })),
    ...modulesUnder(CLIENT).map((name) => ({
      name: `client/${name}`,
      contentType: JAVASCRIPT,
      url: new URL(name, CLIENT),
    })),
    ...Object.entries(VENDOR).map(([name, specifier]) => ({
      name: `vendor/${name}`,
      contentType: JAVASCRIPT,
      url: new URL(import.meta.resolve(specifier)),
    })),
  ]
}

/** The .js files under `folder`, at any depth, by their relative path: 'replica/replica.js'. */
function modulesUnder(folder: URL): string[] {
  let names: string[]
  try {
    names = readdirSync(folder, { recursive: true, encoding: 'utf8' })
  } catch {
    return []
  }
  return names
    .map((name) => name.split(sep).join('/'))
    .filter((name) => name.endsWith('.js'))
    .sort()
}

function pageFile(contentType: string, body: Buffer): PageFile {
  const digest = contentDigest(body)
  const hash = digest.slice(0, 27)
  const br = compressedPageFile(body, digest, 'br')
  const gz = compressedPageFile(body, digest, 'gzip')
  const etag = `"${hash}"`
  return {
    contentType,
    variants: {
      identity: { body, etag },
      br: { body: br, etag: encodedEtag(etag, 'br') },
      gzip: { body: gz, etag: encodedEtag(etag, 'gzip') },
    },
  }
}

/**
 * `GET /` serves the notes page and `GET /ui/{file}` its scripts (the client library's under
 * /ui/client/), style, icons, manifest and service worker, read once at start-up with the
 * compressed copies the build made. Each answer carries a strong ETag (one per encoding) and
 * `Cache-Control: no-cache`: a browser revalidates and gets a 304 instead of the file again.
 * Nothing here touches the note routes or the fast lane, which never sees `/` or `/ui/`; the
 * page holds no notes, so it stays open when access keys are on (it asks for a key when the API
 * answers 401).
 */
export function registerNotesPage(app: FastifyInstance, signIn?: PageSignIn): void {
  const csp = signIn === undefined ? PAGE_CSP : pageCsp(new URL(signIn.issuer).origin)
  const signInJson = JSON.stringify(
    signIn === undefined
      ? {}
      : { issuer: signIn.issuer, client_id: signIn.clientId, scope: signIn.scope },
  )
  app.register(async (page) => {
    const files = loadPageFiles()
    const index = files.get('index.html') as PageFile
    page.get('/', { logLevel: 'warn' }, (request, reply) => {
      reply.header('content-security-policy', csp).header('referrer-policy', 'no-referrer')
      return sendPageFile(request, reply, index)
    })
    page.get(`/ui/${SIGN_IN_FILE}`, { logLevel: 'warn' }, (_request, reply) =>
      reply
        .header('cache-control', 'no-cache')
        .header('x-content-type-options', 'nosniff')
        .header('content-type', 'application/json')
        .send(signInJson),
    )
    // The client library's modules are in client/ and client/replica/ (their own imports).
    for (const folder of PAGE_FOLDERS) {
      page.get<{ Params: { file: string } }>(
        `/ui/${folder}:file`,
        { logLevel: 'warn' },
        (request, reply) => {
          const name = `${folder}${request.params.file}`
          const file = name === 'index.html' ? undefined : files.get(name)
          if (file === undefined) return sendProblem(reply, 404, NO_SUCH_PAGE_FILE)
          if (name === SERVICE_WORKER) reply.header('service-worker-allowed', '/')
          return sendPageFile(request, reply, file)
        },
      )
    }
  })
}

/**
 * 200 with the file in the coding the client asks for, or 304 when it has that one: the API's
 * rules (compression.ts, conditional.ts), so that one header means the same on every path.
 * A coding that would not make the file smaller is skipped, unless the client refused identity
 * ('gzip, identity;q=0'), as the API compresses an answer of any size then.
 */
function sendPageFile(request: FastifyRequest, reply: FastifyReply, file: PageFile): FastifyReply {
  const header = request.headers['accept-encoding']
  const choice = header === undefined ? undefined : parseAcceptEncoding(header)
  const identity = file.variants.identity
  let variant = choice === undefined ? identity : file.variants[choice.coding]
  if (choice?.always === false && variant.body.length >= identity.body.length) variant = identity
  const { body, etag } = variant
  reply
    .header('etag', etag)
    .header('cache-control', 'no-cache')
    .header('vary', 'Accept-Encoding')
    .header('x-content-type-options', 'nosniff')
  const ifNoneMatch = request.headers['if-none-match']
  if (ifNoneMatch !== undefined && noneMatch(ifNoneMatch, etag)) return reply.code(304).send()
  if (variant !== identity && choice !== undefined) reply.header('content-encoding', choice.coding)
  return reply.header('content-type', file.contentType).send(body)
}
