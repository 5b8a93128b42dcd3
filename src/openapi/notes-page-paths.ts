import { NO_SUCH_PAGE_FILE } from '../pages/notes-page.js'
import {
  fixedFileResponse,
  header,
  type Paths,
  pathParameter,
  problemResponse,
  requestIdHeader,
} from './parts.js'

/** What every answer of the page's files carries beside ETag and Cache-Control. */
const FILE_HEADERS = {
  Vary: header('VaryAlways'),
  'Content-Encoding': header('ContentEncoding'),
  'X-Content-Type-Options': {
    description: '`nosniff`: the file is only ever what its Content-Type says.',
    required: true,
    schema: { type: 'string', const: 'nosniff' },
  },
}

/** A 304 of a page file: the client's copy (of this encoding) is current. */
const NOT_MODIFIED = {
  description: 'If-None-Match names the ETag of the encoding asked for. No body.',
  headers: {
    ...requestIdHeader,
    ETag: header('ETag'),
    'Cache-Control': header('CacheControl'),
    ...FILE_HEADERS,
  },
}

/** The OpenAPI paths of the notes page and its files (notes-page.ts). */
export function notesPagePaths(): Paths {
  return {
    '/': {
      get: {
        tags: ['operations'],
        operationId: 'showNotesPage',
        summary: 'The notes page',
        description:
          'A page for people that lists, creates, edits and deletes notes and follows changes live, through this API. Its files are under `/ui/`; it loads nothing from another host. Compressed and revalidated as the API answers are: `Accept-Encoding` and `If-None-Match` follow the same rules.',
        responses: {
          '200': fixedFileResponse(
            'An HTML page.',
            { 'text/html': { schema: { type: 'string' } } },
            {
              ...FILE_HEADERS,
              'Content-Security-Policy': {
                description: 'Same origin only, no inline script or style, Trusted Types.',
                required: true,
                schema: { type: 'string' },
              },
              'Referrer-Policy': {
                description: '`no-referrer`.',
                required: true,
                schema: { type: 'string', const: 'no-referrer' },
              },
            },
          ),
          '304': NOT_MODIFIED,
        },
      },
    },
    '/ui/{file}': pageFileOperation(
      'getNotesPageFile',
      'A file of the notes page',
      'The scripts, style, icons, web app manifest and service worker of the notes page, brotli- or gzip-compressed when the client accepts it. The service worker (`sw.js`) is sent with `Service-Worker-Allowed: /`, so that it may keep the page for offline use; it never answers for the API.',
      ['main.js', 'style.css'],
    ),
    '/ui/client/{file}': pageFileOperation(
      'getNotesPageClientModule',
      'A module of the client library, as the notes page loads it',
      'The modules of `notes-service/client` the page is built on, compiled for browsers.',
      ['index.js', 'notes-client.js'],
    ),
    '/ui/client/replica/{file}': pageFileOperation(
      'getNotesPageReplicaModule',
      "A module of the client library's replica, as the notes page loads it",
      'The replica and its IndexedDB storage, which keep the notes on the device.',
      ['replica.js'],
    ),
    '/ui/vendor/{file}': pageFileOperation(
      'getNotesPageVendorModule',
      'A library the notes page loads as it ships',
      "oauth4webapi's ES module, loaded by the page when it signs someone in with OpenID Connect.",
      ['oauth4webapi.js'],
    ),
    '/ui/sign-in.json': {
      get: {
        tags: ['operations'],
        operationId: 'getNotesPageSignIn',
        summary: 'How the notes page signs people in',
        description:
          'With `AUTH_PAGE_CLIENT_ID` set, the identity provider the page signs people in with (the authorization code flow with PKCE): `{"issuer": AUTH_ISSUER, "client_id": AUTH_PAGE_CLIENT_ID, "scope": AUTH_PAGE_SCOPE}`; otherwise `{}`, and the page asks for a token.',
        responses: {
          '200': {
            description: 'The settings the page signs in with, or `{}`.',
            headers: {
              ...requestIdHeader,
              'Cache-Control': header('CacheControl'),
              'X-Content-Type-Options': FILE_HEADERS['X-Content-Type-Options'],
            },
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    issuer: { type: 'string', format: 'uri' },
                    client_id: { type: 'string' },
                    scope: { type: 'string' },
                  },
                  additionalProperties: false,
                },
                example: {
                  issuer: 'https://id.example',
                  client_id: 'notes-page',
                  scope: 'openid',
                },
              },
            },
          },
        },
      },
    },
  }
}

/** GET of one of the page's files, in a folder of /ui/. */
function pageFileOperation(
  operationId: string,
  summary: string,
  description: string,
  examples: string[],
) {
  return {
    get: {
      tags: ['operations'],
      operationId,
      summary,
      description,
      parameters: [pathParameter('file', 'The name of the file, as the page links it.', examples)],
      responses: {
        '200': fixedFileResponse(
          'The file.',
          {
            'text/css': { schema: { type: 'string' } },
            'text/javascript': { schema: { type: 'string' } },
            'image/svg+xml': { schema: { type: 'string' } },
            'application/manifest+json': { schema: { type: 'object' } },
          },
          {
            ...FILE_HEADERS,
            'Service-Worker-Allowed': {
              description: '`/`, on the service worker (`sw.js`) only.',
              required: false,
              schema: { type: 'string', const: '/' },
            },
          },
        ),
        '304': NOT_MODIFIED,
        '404': problemResponse('The page has no file of this name.', 404, NO_SUCH_PAGE_FILE),
      },
    },
  }
}
