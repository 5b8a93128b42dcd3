import { NO_UPLOAD } from '../api/upload-routes.js'
import { fileSchema } from './file-paths.js'
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

/*
 * Resumable uploads: tus 1.0 (https://tus.io/protocols/resumable-upload) at /api/uploads, as
 * upload-routes.ts serves it.
 */

const text = (description: string, required = true) => ({
  description,
  required,
  schema: { type: 'string' },
})
const bytes = (description: string, required = true) => ({
  description,
  required,
  schema: { type: 'integer', minimum: 0 },
})
const TUS_RESUMABLE = {
  name: 'Tus-Resumable',
  in: 'header',
  required: true,
  description: 'The protocol version the client speaks: `1.0.0`; another one is a 412.',
  schema: { type: 'string', const: '1.0.0' },
}
const UPLOAD_ID = {
  name: 'id',
  in: 'path',
  required: true,
  description: "The upload's id, the last segment of the Location its creation answered.",
  schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' },
}
const TUS_HEADERS = {
  ...requestIdHeader,
  'Tus-Resumable': text('`1.0.0`.'),
}
const STATE_HEADERS = {
  ...TUS_HEADERS,
  'Upload-Offset': bytes('Bytes the service holds of the upload: where the next part goes.'),
  'Upload-Length': bytes('The length the upload was created with.'),
  'Upload-Expires': text(
    'When the upload goes unless more bytes arrive (24 h after its last byte), as an HTTP date.',
  ),
  'Upload-Metadata': text('The Upload-Metadata it was created with, when it had one.', false),
  'Cache-Control': text('`no-store`: an offset is never kept by a cache.'),
}
const PART = {
  'application/offset+octet-stream': { schema: { type: 'string', format: 'binary' } },
}
const NOT_FOUND = problemResponse(
  'No upload of this notebook has this id: never created here, terminated, or past its 24 h.',
  404,
  NO_UPLOAD,
)
const VERSION = problemResponse(
  'Tus-Resumable is missing or names another version (`Tus-Version` lists the one served).',
  412,
  'Send Tus-Resumable: 1.0.0; it is the version served here.',
  { 'Tus-Version': text('`1.0.0`.') },
)
const FULL = problemResponse(
  "The upload would pass the notebook's MAX_FILES_BYTES_PER_USER or the service's MAX_FILES_BYTES, or, on the memory store, MAX_STORE_BYTES, which its files share with the notes; an upload counts toward them as it grows. The bytes already acknowledged stay.",
  507,
  'This notebook holds its maximum of 1073741824 bytes of files. Delete files to make room.',
)

/** tus 1.0 at /api/uploads (upload-routes.ts). */
export function uploadPaths(): Paths {
  return {
    '/api/uploads': {
      description: 'Uploads that resume: create one, then send its bytes in parts.',
      options: discover(),
      post: create(),
    },
    '/api/uploads/{id}': {
      description: 'One upload: its offset, its next part, its end.',
      head: offset(),
      get: finished(),
      patch: part(),
      delete: terminate(),
    },
  }
}

function discover(): Operation {
  return {
    tags: ['files'],
    operationId: 'uploadOptions',
    summary: 'What the upload endpoint speaks',
    parameters: [parameter('RequestId')],
    description: 'tus discovery: the version, the extensions and the largest upload.',
    responses: {
      '204': {
        description: 'No body.',
        headers: {
          ...TUS_HEADERS,
          Allow: text('`OPTIONS, POST`.'),
          'Tus-Version': text('`1.0.0`.'),
          'Tus-Extension': text('`creation,creation-with-upload,termination,expiration`.'),
          'Tus-Max-Size': bytes('MAX_FILE_BYTES: the longest Upload-Length taken.'),
        },
      },
    },
  }
}

function create(): Operation {
  return {
    tags: ['files'],
    operationId: 'createUpload',
    summary: 'Create an upload',
    parameters: [
      TUS_RESUMABLE,
      {
        name: 'Upload-Length',
        in: 'header',
        required: true,
        description: 'The length of the file, in bytes (at most MAX_FILE_BYTES).',
        schema: { type: 'integer', minimum: 0 },
      },
      {
        name: 'Upload-Metadata',
        in: 'header',
        required: false,
        description:
          'Comma-separated `key base64value` pairs (at most 4096 characters); `filetype` (or `type`, `contentType`) is the media type of the file it becomes.',
        schema: { type: 'string' },
      },
      parameter('RequestId'),
    ],
    description:
      'Creates an upload of the declared length in the notebook, counted toward its caps as it grows. With `Content-Type: application/offset+octet-stream`, the body is its first bytes (creation-with-upload). An upload of length 0 is a file at once.',
    requestBody: { required: false, content: PART },
    responses: {
      '201': {
        description: 'Created: send its bytes to Location.',
        headers: {
          ...STATE_HEADERS,
          Location: text("The upload's URL: `/api/uploads/<id>`."),
        },
      },
      '400': problemResponse(
        'Upload-Length is missing (an upload of unknown length is not taken), or Upload-Metadata is malformed.',
        400,
        'Send Upload-Length: the length of the file, in bytes.',
      ),
      '412': VERSION,
      '413': problemResponse(
        'Upload-Length is past MAX_FILE_BYTES.',
        413,
        'A file may hold at most 104857600 bytes. Send a smaller file.',
      ),
      ...STORE_ERRORS,
      '507': FULL,
    },
  }
}

function offset(): Operation {
  return {
    tags: ['files'],
    operationId: 'uploadOffset',
    summary: "An upload's offset",
    parameters: [UPLOAD_ID, TUS_RESUMABLE, parameter('RequestId')],
    description:
      'How many bytes the service holds: after a lost connection, the client sends the rest from there. A complete upload whose file could not be stored yet is stored now (or the refusal answered).',
    responses: {
      '200': { description: 'No body.', headers: STATE_HEADERS },
      '404': NOT_FOUND,
      '412': VERSION,
      ...STORE_ERRORS,
      '507': FULL,
    },
  }
}

function finished(): Operation {
  return {
    tags: ['files'],
    operationId: 'uploadedFile',
    summary: 'The file an upload became',
    parameters: [UPLOAD_ID, parameter('RequestId')],
    description: 'Once its last byte has arrived, the file it is (as GET /api/files lists it).',
    responses: {
      '200': jsonResponse('The file.', envelope(fileSchema)),
      '404': NOT_FOUND,
      '409': problemResponse(
        'Bytes are still to come.',
        409,
        'The upload holds 1048576 of its 4194304 bytes; send the rest with PATCH.',
      ),
      ...STORE_ERRORS,
    },
  }
}

function part(): Operation {
  return {
    tags: ['files'],
    operationId: 'uploadPart',
    summary: "Send an upload's next part",
    parameters: [
      UPLOAD_ID,
      TUS_RESUMABLE,
      {
        name: 'Upload-Offset',
        in: 'header',
        required: true,
        description: 'Where these bytes go: the offset the service holds.',
        schema: { type: 'integer', minimum: 0 },
      },
      parameter('RequestId'),
    ],
    description:
      'Appends the body at the offset. Every byte acknowledged is kept (on DATA_FILE and PostgreSQL, on disk), a part cut off keeps what arrived, and the last byte makes the upload a file of its notebook.',
    requestBody: { required: true, content: PART },
    responses: {
      '204': { description: 'Kept: Upload-Offset is the new offset.', headers: STATE_HEADERS },
      '400': problemResponse(
        'Upload-Offset is missing, or more bytes were sent than the upload is long.',
        400,
        'Send Upload-Offset: where these bytes go.',
      ),
      '404': NOT_FOUND,
      '409': problemResponse(
        'Upload-Offset is not the offset the service holds, or another request is sending bytes to this upload.',
        409,
        'The upload holds 1048576 bytes; send the bytes from Upload-Offset 1048576.',
      ),
      '412': VERSION,
      '415': problemResponse(
        'The body is not `application/offset+octet-stream`.',
        415,
        'Send the bytes as application/offset+octet-stream.',
      ),
      ...STORE_ERRORS,
      '507': FULL,
    },
  }
}

function terminate(): Operation {
  return {
    tags: ['files'],
    operationId: 'terminateUpload',
    summary: 'End an upload',
    parameters: [UPLOAD_ID, TUS_RESUMABLE, parameter('RequestId')],
    description: 'Removes the upload and its bytes (a file it became stays).',
    responses: {
      '204': { description: 'Removed.', headers: TUS_HEADERS },
      '404': NOT_FOUND,
      '409': problemResponse(
        'A request is sending bytes to this upload now.',
        409,
        'A request is sending bytes to this upload; try again once it ends.',
      ),
      '412': VERSION,
      ...STORE_ERRORS,
    },
  }
}
