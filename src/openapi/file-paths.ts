import { NO_FILE } from '../api/file-routes.js'
import { BAD_PAGE, pageQuery } from './archive-paths.js'
import {
  envelope,
  jsonResponse,
  type Operation,
  type Paths,
  parameter,
  problemResponse,
  requestIdHeader,
  STORE_ERRORS,
} from './parts.js'

/** A file as the API shows it. */
export const fileSchema = {
  type: 'object',
  required: ['id', 'size', 'type', 'created'],
  additionalProperties: false,
  properties: {
    id: {
      type: 'string',
      pattern: '^[0-9a-f]{64}$',
      description: 'The lowercase hex SHA-256 of its bytes.',
    },
    size: { type: 'integer', minimum: 0, description: 'Its length in bytes.' },
    type: {
      type: 'string',
      description:
        'The media type it was uploaded with (type and subtype in lowercase, parameters as sent); `application/octet-stream` when it came without one.',
    },
    created: {
      type: 'string',
      format: 'date-time',
      description: 'When it was first stored in this notebook.',
    },
  },
  examples: [
    {
      id: '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824',
      size: 5,
      type: 'text/plain',
      created: '2026-11-24T18:40:06.000Z',
    },
  ],
}

const FILE_ID = {
  name: 'id',
  in: 'path',
  required: true,
  description:
    "The file's id: the lowercase hex SHA-256 of its bytes, as its upload answered it. Anything else, and the id of a file another notebook holds (whatever its bytes), is a 404.",
  schema: { type: 'string' },
  example: '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824',
}

const fixed = (description: string, value: string, required = true) => ({
  description,
  required,
  schema: { type: 'string', const: value },
})

/** What every answer about a file's bytes carries (200, 206, 304, 416). */
const FILE_HEADERS = {
  ...requestIdHeader,
  ETag: {
    description: 'The file\'s id in quotes, `"<id>"`: its bytes never change.',
    required: true,
    schema: { type: 'string', pattern: '^"[0-9a-f]{64}"$' },
  },
  'Cache-Control': fixed(
    'The bytes of an id never change: a browser keeps them a year without asking again.',
    'private, max-age=31536000, immutable',
  ),
  'Accept-Ranges': fixed('A `Range` of bytes is answered with those bytes alone.', 'bytes'),
  'X-Content-Type-Options': fixed(
    'The file is only ever what its Content-Type says: never sniffed.',
    'nosniff',
  ),
  'Content-Security-Policy': fixed(
    'A file opened in a browser runs in a sandbox where no script runs and nothing is loaded.',
    "sandbox; default-src 'none'",
  ),
  'Cross-Origin-Resource-Policy': fixed(
    'Only pages of this origin may embed the file.',
    'same-origin',
  ),
  'Content-Disposition': fixed(
    'On a file whose type a browser could run or that it does not know (HTML, SVG, XML, JavaScript, PDF, `application/octet-stream`, anything but the pictures, sound, video and plain text below): a download, never a page of this origin.',
    'attachment',
    false,
  ),
}

const BYTES = { '*/*': { schema: { type: 'string', format: 'binary' } } }

/** Files: upload, list, read whole or a range, delete (file-routes.ts). */
export function filePaths(): Paths {
  return {
    '/api/files': {
      description: "The notebook's files, oldest first.",
      get: listFiles(),
      post: uploadFile(),
    },
    '/api/files/{id}': {
      description: "One file's bytes.",
      get: getFile(),
      delete: deleteFile(),
    },
  }
}

function uploadFile(): Operation {
  return {
    tags: ['files'],
    operationId: 'uploadFile',
    summary: 'Upload a file',
    parameters: [parameter('RequestId')],
    description:
      'The body is the file: its bytes as they are, of any media type, with a `Content-Length` or chunked, streamed into the store as it arrives (no parser reads it; `BODY_LIMIT` does not apply, `MAX_FILE_BYTES` does). Its id is the lowercase hex SHA-256 of its bytes: the same bytes uploaded again to the same notebook answer the file stored first, with its first type and time, and take no more room. A note refers to the file by holding its id in any string (`"/api/files/<id>"`); a file that no note of its notebook refers to, the trash included, is removed `FILE_GRACE_HOURS` (default 24) after its upload or after its last reference went.',
    requestBody: {
      description:
        'The bytes of the file. `Content-Type` is kept as its type (none: `application/octet-stream`). No body at all is an empty file.',
      required: false,
      content: BYTES,
    },
    responses: {
      '201': {
        ...jsonResponse('The file as stored.', envelope(fileSchema)),
        headers: {
          ...requestIdHeader,
          Location: {
            description: "The file's URL.",
            required: true,
            schema: { type: 'string', pattern: '^/api/(notebooks/[^/]+/)?files/[0-9a-f]{64}$' },
          },
        },
      },
      '400': problemResponse(
        'The `Content-Type` is not a media type (`type/subtype`, parameters allowed, at most 200 characters), or the body ended before its `Content-Length` did. Nothing was kept.',
        400,
        'Content-Type must be a media type such as image/png (at most 200 characters).',
      ),
      '413': problemResponse(
        'The file is larger than `MAX_FILE_BYTES` (100 MiB by default): refused at once for a `Content-Length` above it, else as soon as the bytes pass it. Nothing was kept.',
        413,
        'A file may hold at most 104857600 bytes. Send a smaller file.',
      ),
      ...STORE_ERRORS,
      '507': problemResponse(
        "The notebook's files would pass `MAX_FILES_BYTES_PER_USER` (1 GiB by default), or the service's `MAX_FILES_BYTES` (16 GiB by default); on the memory store, where files count toward `MAX_STORE_BYTES` with the notes, that cap too (`The store holds its maximum of 268435456 bytes of notes and files. Delete notes or files to make room.`). Nothing was kept.",
        507,
        'This notebook holds its maximum of 1073741824 bytes of files. Delete files to make room.',
      ),
    },
  }
}

function listFiles(): Operation {
  return {
    tags: ['files'],
    operationId: 'listFiles',
    summary: 'List files',
    parameters: [...pageQuery('files'), parameter('RequestId')],
    description: "The notebook's files, oldest first, in pages as the trash is.",
    responses: {
      '200': {
        ...jsonResponse(
          'The files, or a page of them.',
          envelope({ type: 'array', items: fileSchema }),
        ),
        headers: {
          ...requestIdHeader,
          'X-Total-Count': {
            description: 'Files the notebook holds.',
            required: true,
            schema: { type: 'integer', minimum: 0 },
          },
          Link: {
            description: 'While more follow: `</api/files?limit=...&after=...>; rel="next"`.',
            required: false,
            schema: { type: 'string', pattern: '^<[^>]+>; rel="next"$' },
          },
        },
      },
      '400': BAD_PAGE,
      ...STORE_ERRORS,
    },
  }
}

const RANGE = {
  name: 'Range',
  in: 'header',
  required: false,
  description:
    "One range of bytes (`bytes=0-1023`, `bytes=1024-`, `bytes=-500`): answered 206 with exactly those bytes (an end past the file is the file's end), or 416 when it starts past the end (`bytes=-0` too, and any range of an empty file). Several ranges, another unit, a malformed header or an end before the start: the whole file, 200.",
  schema: { type: 'string' },
  example: 'bytes=0-1023',
}

const IF_RANGE = {
  name: 'If-Range',
  in: 'header',
  required: false,
  description:
    "With `Range`: the range only if this is the file's ETag; anything else (another ETag, a date) answers the whole file.",
  schema: { type: 'string' },
}

const NOT_FOUND = problemResponse(
  'This notebook holds no file with this id: never uploaded here, deleted, removed as no note referred to it, or held by another notebook alone.',
  404,
  NO_FILE,
)

function getFile(): Operation {
  return {
    tags: ['files'],
    operationId: 'getFile',
    summary: 'Download a file',
    parameters: [FILE_ID, RANGE, IF_RANGE, parameter('IfNoneMatch'), parameter('RequestId')],
    description:
      'The bytes as uploaded, with the type they were uploaded with; never compressed. Pictures (PNG, JPEG, GIF, WebP, AVIF, BMP), sound (MPEG, Ogg, WAV, WebM, AAC, FLAC), video (MP4, WebM, Ogg) and `text/plain` and `text/csv` are shown inline; anything else is sent with `Content-Disposition: attachment`, since a browser could run it as a page of this origin. Every answer carries `X-Content-Type-Options: nosniff` and a sandboxing `Content-Security-Policy`.',
    responses: {
      '200': { description: 'The whole file.', headers: FILE_HEADERS, content: BYTES },
      '206': {
        description: 'The bytes the Range asked for.',
        headers: {
          ...FILE_HEADERS,
          'Content-Range': {
            description: '`bytes <first>-<last>/<size>`.',
            required: true,
            schema: { type: 'string', pattern: '^bytes [0-9]+-[0-9]+/[0-9]+$' },
          },
        },
        content: BYTES,
      },
      '304': {
        description: 'If-None-Match names the file: the copy the client holds is current. No body.',
        headers: FILE_HEADERS,
      },
      '404': NOT_FOUND,
      '416': problemResponse(
        'The Range starts past the end of the file.',
        416,
        'The file holds 2097152 bytes; the Range asks for none of them.',
        {
          ...FILE_HEADERS,
          'Content-Range': {
            description: '`bytes */<size>`: the size of the file.',
            required: true,
            schema: { type: 'string', pattern: '^bytes \\*/[0-9]+$' },
          },
        },
      ),
      ...STORE_ERRORS,
    },
  }
}

function deleteFile(): Operation {
  return {
    tags: ['files'],
    operationId: 'deleteFile',
    summary: 'Delete a file',
    parameters: [FILE_ID, parameter('RequestId')],
    description:
      'Removes the file from this notebook at once, whether notes refer to it or not. The same bytes held by another notebook stay there.',
    responses: {
      '204': { description: 'Deleted.', headers: requestIdHeader },
      '404': NOT_FOUND,
      ...STORE_ERRORS,
    },
  }
}
