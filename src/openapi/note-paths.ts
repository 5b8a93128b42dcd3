import { NOTES_PATH } from '../api/answer.js'
import { MAX_BATCH_REQUESTS } from '../api/batch.js'
import {
  header,
  jsonResponse,
  type Operation,
  type Paths,
  parameter,
  problemResponse,
  ref,
  requestIdHeader,
  response,
  STORE_ERRORS,
  schema,
} from './parts.js'

/** What a JSON body can be refused for (DELETE parses one too, when it is sent). */
const BODY_ERRORS = {
  '400': response('BadRequest'),
  '413': response('PayloadTooLarge'),
  '415': response('UnsupportedMediaType'),
}

/** On every note operation: the PostgreSQL store's answer while its database is away. */

const READ_HEADERS = {
  ...requestIdHeader,
  ETag: header('ETag'),
  'Cache-Control': header('CacheControl'),
  Vary: header('Vary'),
  'Content-Encoding': header('ContentEncoding'),
}

/**
 * `/api/note` and `/api/note/{id}`: the five operations of the contract and PUT (note-routes.ts).
 * The parameters sit on each operation, not on the path item: Swagger UI 5 shows path-level
 * parameters of an OpenAPI 3.1 document as nameless inputs and sends '/api/note/{id}' literally.
 */
export function notePaths(): Paths {
  return {
    [NOTES_PATH]: {
      description: 'The notes, in the order they were created.',
      get: listNotes(),
      post: createNote(),
    },
    [`${NOTES_PATH}/{id}`]: {
      description: 'One note, found by the `id` in the path read as a decimal integer.',
      get: getNote(),
      put: replaceNote(),
      patch: updateNote(),
      delete: deleteNote(),
    },
    '/api/batch': {
      description: 'Several writes of notes at once, all or nothing.',
      post: applyBatch(),
    },
  }
}

/** A failed request of a batch, as the batch answers it: a problem that names the request. */
function batchFailure(status: number, what: string, detail: string) {
  return problemResponse(
    `${what} Nothing in the batch was applied; \`detail\` names the request by its index.`,
    status,
    `requests[3] (PATCH /api/note/1767225600000): ${detail} Nothing in the batch was applied.`,
  )
}

function applyBatch(): Operation {
  return {
    tags: ['notes'],
    operationId: 'applyBatch',
    summary: 'Apply several writes at once',
    parameters: [parameter('RequestId'), parameter('IdempotencyKey')],
    description: `Applies 1 to ${MAX_BATCH_REQUESTS} creates, updates and deletes in order, as one step: all of them, or, when one fails, none. Each request means exactly what it means alone (its conditions, a merge patch by its \`content-type\` header, the ids it gets, the caps) and sees the ones before it; readers and change-feed streams see all of a batch or none of it, and each request is one change of the feed. The answer holds one answer per request, as each would have been answered alone. With \`Idempotency-Key\` the batch is applied at most once, as a create is; a request inside a batch cannot carry its own key.`,
    requestBody: {
      required: true,
      content: { 'application/json': { schema: schema('Batch') } },
    },
    responses: {
      '200': {
        ...jsonResponse(
          'Every request was applied: one answer per request, in order.',
          schema('BatchAnswers'),
        ),
        headers: {
          ...requestIdHeader,
          'Idempotent-Replayed': header('IdempotentReplayed'),
          Vary: header('Vary'),
          'Content-Encoding': header('ContentEncoding'),
        },
      },
      '400': problemResponse(
        'The batch document is not one (the detail names what is wrong), or its body is not valid JSON or nests too deep.',
        400,
        'requests[2].url must be "/api/note/{id}" for a PATCH.',
      ),
      '404': batchFailure(
        404,
        'A PUT, PATCH or DELETE names a note that does not exist.',
        'No note has this id.',
      ),
      '412': batchFailure(
        412,
        "A request's If-Match or If-Unmodified-Since does not hold.",
        'The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now "k2x9q1.7". GET it, and send that ETag in If-Match to write over it.',
      ),
      '413': response('PayloadTooLarge'),
      '415': response('UnsupportedMediaType'),
      '422': response('IdempotencyKeyReused'),
      ...STORE_ERRORS,
      '507': batchFailure(
        507,
        'The batch would pass a cap.',
        'The store holds its maximum of 1000000 notes. Delete notes to make room.',
      ),
    },
  }
}

function listNotes(): Operation {
  return {
    tags: ['notes'],
    operationId: 'listNotes',
    summary: 'List notes',
    parameters: ['Limit', 'After', 'Order', 'Sort', 'Q', 'IfNoneMatch', 'Accept', 'RequestId'].map(
      parameter,
    ),
    description:
      'Every stored note, oldest first; `data` is `[]` when there are none. With `Accept: application/x-ndjson`, the export of the whole notebook, one note a line, as one consistent snapshot. With `limit` (or `after`), one page: keyset paging on list position, so a walk that follows `Link: rel="next"` visits every note that exists throughout it exactly once, whatever is written meanwhile. `order=desc` walks from the newest; `sort=updated` orders by last change instead (keyset on the time of the last write, then id); `q` keeps the notes with a string value (at any depth, keys excluded) containing the text, case-insensitively. Other query parameters are ignored.',
    responses: {
      '200': {
        description:
          'The notes, or one page of them; or, for Accept: application/x-ndjson, the export.',
        content: {
          'application/json': { schema: schema('NoteListEnvelope') },
          'application/x-ndjson': {
            schema: {
              type: 'string',
              description:
                'The export: each note exactly as the list holds it, in list order, each followed by a newline; `Notes-Version` is the version of the snapshot. Streamed with backpressure; cut short (a shutdown), it ends without the end of its chunked encoding, so a client sees an error rather than a short export.',
            },
            example:
              '{"title":"first","id":1700000000000}\n{"title":"second","id":1700000000001}\n',
          },
        },
        headers: {
          ...READ_HEADERS,
          Vary: header('VaryAlways'),
          'Notes-Version': header('NotesVersion'),
          'X-Total-Count': header('TotalCount'),
          Link: header('Link'),
        },
      },
      '304': response('ListNotModified'),
      '400': response('BadPageQuery'),
      ...STORE_ERRORS,
    },
  }
}

function createNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'createNote',
    summary: 'Create a note',
    parameters: [parameter('RequestId'), parameter('IdempotencyKey')],
    description:
      'Stores the body fields plus a new `id`: the time in ms since the Unix epoch, raised when needed so that no two notes share one. An `id` in the body is replaced.',
    requestBody: ref('requestBodies', 'NoteFields'),
    responses: {
      '200': {
        ...jsonResponse('The note as stored.', schema('NoteEnvelope')),
        headers: {
          ...requestIdHeader,
          ETag: header('ETag'),
          'Idempotent-Replayed': header('IdempotentReplayed'),
          Vary: header('Vary'),
          'Content-Encoding': header('ContentEncoding'),
        },
      },
      ...BODY_ERRORS,
      '422': response('IdempotencyKeyReused'),
      ...STORE_ERRORS,
      '507': response('InsufficientStorage'),
    },
  }
}

/** Inline rather than a component, so that every operation on the path can repeat it. */
const NOTE_ID = {
  name: 'id',
  in: 'path',
  required: true,
  description:
    'The id of the note, as a decimal integer (`^-?[0-9]+$`; leading zeros allowed). Anything else matches no note: 404.',
  schema: { type: 'string' },
  example: '1767225600000',
}

function getNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'getNote',
    summary: 'Get a note',
    parameters: [NOTE_ID, ...['RequestId', 'IfNoneMatch', 'IfModifiedSince'].map(parameter)],
    responses: {
      '200': {
        ...jsonResponse('The note.', schema('NoteEnvelope')),
        headers: { ...READ_HEADERS, 'Last-Modified': header('LastModified') },
      },
      '304': response('NoteNotModified'),
      '400': response('BadUrl'),
      '404': response('NoteNotFound'),
      ...STORE_ERRORS,
    },
  }
}

function updateNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'updateNote',
    summary: 'Update a note',
    parameters: [NOTE_ID, ...['RequestId', 'IfMatch', 'IfUnmodifiedSince'].map(parameter)],
    description:
      'Merges the body fields over the note: each replaces the stored field of the same name, the others stay. An `id` in the body is merged too, and the note is then found at its new id. With `Content-Type: application/merge-patch+json` the body is an RFC 7396 merge patch instead: `null` removes a field, objects merge recursively, arrays replace.',
    requestBody: ref('requestBodies', 'NotePatch'),
    responses: {
      '200': {
        ...jsonResponse('The note after the merge.', schema('NoteEnvelope')),
        headers: {
          ...requestIdHeader,
          ETag: header('ETag'),
          Vary: header('Vary'),
          'Content-Encoding': header('ContentEncoding'),
        },
      },
      '404': response('NoteNotFound'),
      '412': response('PreconditionFailed'),
      ...BODY_ERRORS,
      ...STORE_ERRORS,
      '507': response('InsufficientStorage'),
    },
  }
}

function replaceNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'replaceNote',
    summary: 'Replace a note',
    parameters: [NOTE_ID, ...['RequestId', 'IfMatch', 'IfUnmodifiedSince'].map(parameter)],
    description:
      "Makes the body fields the whole note: stored fields the body does not name are gone. The `id` stays the note's: an `id` in the body is replaced by it, in its place, as on create. One `updated` change in the feed. This is how a note merged on a client (`mergeNotes`) is sent whole, with the `If-Match` of the version it was merged against.",
    requestBody: ref('requestBodies', 'NoteFields'),
    responses: {
      '200': {
        ...jsonResponse('The note as stored now.', schema('NoteEnvelope')),
        headers: {
          ...requestIdHeader,
          ETag: header('ETag'),
          Vary: header('Vary'),
          'Content-Encoding': header('ContentEncoding'),
        },
      },
      '404': response('NoteNotFound'),
      '412': response('PreconditionFailed'),
      ...BODY_ERRORS,
      ...STORE_ERRORS,
      '507': response('InsufficientStorage'),
    },
  }
}

function deleteNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'deleteNote',
    summary: 'Delete a note',
    parameters: [NOTE_ID, ...['RequestId', 'IfMatch', 'IfUnmodifiedSince'].map(parameter)],
    description:
      'The note leaves the list, and goes to the trash (`/api/trash`) for TRASH_DAYS with its revisions, counted toward the caps until it leaves it; with TRASH_DAYS=0 it is gone at once. A body is not needed; one that is sent is parsed as for PATCH, and refused (400, 413, 415) as for PATCH.',
    responses: {
      '200': jsonResponse(
        'The note was deleted; `data` is the `id` path segment as sent, a string.',
        schema('DeletedEnvelope'),
      ),
      '404': response('NoteNotFound'),
      '412': response('PreconditionFailed'),
      ...BODY_ERRORS,
      ...STORE_ERRORS,
    },
  }
}
