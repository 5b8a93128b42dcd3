import { DOCS_PAGE_FILE_NAMES, NO_SUCH_FILE } from '../pages/api-docs.js'
import {
  fixedFileResponse,
  header,
  jsonResponse,
  type Paths,
  pathParameter,
  problemResponse,
  requestIdHeader,
} from './parts.js'

/** Every answer of the page's files varies by Accept-Encoding (a text file may be compressed). */
const ENCODING_HEADERS = {
  Vary: header('VaryAlways'),
  'Content-Encoding': header('ContentEncoding'),
}

/** A 304 of a page file: the client's copy (of this encoding) is current. */
const NOT_MODIFIED = {
  description: 'If-None-Match names the ETag of the encoding asked for. No body.',
  headers: {
    ...requestIdHeader,
    ETag: header('ETag'),
    'Cache-Control': header('CacheControl'),
    Vary: header('VaryAlways'),
  },
}

/** The OpenAPI paths of the document itself and, with `ui`, of the /docs page (api-docs.ts). */
export function apiDocsPaths({ ui }: { ui: boolean }): Paths {
  const paths: Paths = {
    '/api/openapi.json': {
      get: {
        tags: ['operations'],
        operationId: 'getOpenApiDocument',
        summary: 'This document',
        responses: {
          '200': jsonResponse('The OpenAPI 3.1 document.', { type: 'object' }),
        },
      },
    },
  }
  if (!ui) return paths
  paths['/docs'] = {
    get: {
      tags: ['operations'],
      operationId: 'showApiReference',
      summary: 'API reference page',
      description:
        'Swagger UI rendering this document, which it reads from `/api/openapi.json`. Its files are under `/docs/static/`.',
      responses: {
        '200': fixedFileResponse(
          'An HTML page.',
          { 'text/html': { schema: { type: 'string' } } },
          ENCODING_HEADERS,
        ),
        '304': NOT_MODIFIED,
      },
    },
  }
  paths['/docs/static/{file}'] = {
    get: {
      tags: ['operations'],
      operationId: 'getApiReferenceFile',
      summary: 'A file of the API reference page',
      description: `The scripts, styles and icons of Swagger UI, served from this service: ${DOCS_PAGE_FILE_NAMES.map((name) => `\`${name}\``).join(', ')}.`,
      parameters: [
        pathParameter('file', 'The name of the file; any other name is a 404.', [
          'swagger-ui-bundle.js',
        ]),
      ],
      responses: {
        '200': fixedFileResponse(
          'The file; a script or style brotli- or gzip-compressed when the client accepts it.',
          {
            'text/css': { schema: { type: 'string' } },
            'text/javascript': { schema: { type: 'string' } },
            'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } },
          },
          ENCODING_HEADERS,
        ),
        '304': NOT_MODIFIED,
        '404': problemResponse('The page has no file of this name.', 404, NO_SUCH_FILE),
      },
    },
  }
  return paths
}
