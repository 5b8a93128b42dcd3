import { DEFAULT_LIMIT, MAX_LIMIT } from '../api/page-query.js'
import {
  envelope,
  header,
  jsonResponse,
  type Operation,
  type Paths,
  parameter,
  problemResponse,
  requestIdHeader,
  response,
  STORE_ERRORS,
  schema,
} from './parts.js'

const NOTE_ID = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The id of the note, as a decimal integer. Anything else matches no note: 404.',
  schema: { type: 'string' },
  example: '1767225600000',
}

const VERSION = {
  name: 'version',
  in: 'path',
  required: true,
  description: 'The version of the revision: its ETag without the quotes.',
  schema: { type: 'string' },
  example: 'k2x9q1.5',
}

/** `limit` and `after` of a list paged by a cursor; `what` names its items. */
export const pageQuery = (what: string) => [
  {
    name: 'limit',
    in: 'query',
    required: false,
    description: `At most this many ${what} (default ${DEFAULT_LIMIT}), with \`Link: rel="next"\` while more follow.`,
    schema: { type: 'integer', minimum: 1, maximum: MAX_LIMIT },
  },
  {
    name: 'after',
    in: 'query',
    required: false,
    description: 'The cursor from a `Link: rel="next"` URL. One that is not ours is a 400.',
    schema: { type: 'string' },
  },
]

const revisionSchema = {
  type: 'object',
  required: ['version', 'at', 'change', 'note'],
  additionalProperties: false,
  properties: {
    version: {
      type: 'string',
      description: 'The ETag the note had in this state, without its quotes.',
    },
    at: {
      type: 'string',
      format: 'date-time',
      description: 'When the write that made it was made.',
    },
    change: {
      type: 'string',
      enum: ['created', 'updated'],
      description: '`created` for a create or a restore from the trash, else `updated`.',
    },
    note: schema('Note'),
  },
}

const trashedSchema = {
  type: 'object',
  required: ['deleted_at', 'note'],
  additionalProperties: false,
  properties: {
    deleted_at: { type: 'string', format: 'date-time' },
    note: schema('Note'),
  },
}

/** The 400 of a bad `limit` or `after`. */
export const BAD_PAGE = problemResponse(
  '`limit` or `after` is not one this list takes.',
  400,
  'limit must be a whole number from 1 to 1000; got "0".',
)

const written = (description: string) => ({
  ...jsonResponse(description, schema('NoteEnvelope')),
  headers: { ...requestIdHeader, ETag: header('ETag') },
})

/**
 * A note's history (`/api/note/{id}/revisions`, one revision, a restore) and the trash
 * (`/api/trash`), as archive-routes.ts serves them.
 */
export function archivePaths(): Paths {
  return {
    '/api/note/{id}/revisions': {
      description: 'Every state the note has had that the history keeps, newest first.',
      get: listRevisions(),
    },
    '/api/note/{id}/revisions/{version}': {
      description: 'One state the note has had.',
      get: getRevision(),
    },
    '/api/note/{id}/restore': {
      description: "The note made one of its revisions' content again.",
      post: restoreRevision(),
    },
    '/api/trash': {
      description: 'The deleted notes the trash keeps, most recently deleted first.',
      get: listTrash(),
      delete: emptyTrash(),
    },
    '/api/trash/{id}': {
      description: 'A deleted note in the trash.',
      delete: purgeNote(),
    },
    '/api/trash/{id}/restore': {
      description: 'A deleted note put back.',
      post: untrashNote(),
    },
  }
}

function listRevisions(): Operation {
  return {
    tags: ['notes'],
    operationId: 'listRevisions',
    summary: "List a note's revisions",
    parameters: [NOTE_ID, ...pageQuery('revisions'), parameter('RequestId')],
    description:
      'Every state of the note the history keeps, newest first: the current state is the first. A note keeps at most NOTE_HISTORY revisions (default 100, its current state included), for HISTORY_DAYS (default 90), and the oldest go first once the past revisions of the whole service pass MAX_HISTORY_BYTES; the current state always stays. A deleted note answers none until it is restored from the trash.',
    responses: {
      '200': {
        ...jsonResponse(
          'The revisions, or a page of them.',
          envelope({ type: 'array', items: revisionSchema }),
        ),
        headers: { ...requestIdHeader, Link: header('Link') },
      },
      '400': BAD_PAGE,
      '404': response('NoteNotFound'),
      ...STORE_ERRORS,
    },
  }
}

function getRevision(): Operation {
  return {
    tags: ['notes'],
    operationId: 'getRevision',
    summary: 'Read one revision',
    parameters: [NOTE_ID, VERSION, parameter('IfNoneMatch'), parameter('RequestId')],
    description:
      'A revision never changes: its ETag is the version, and If-None-Match with it is a 304.',
    responses: {
      '200': {
        ...jsonResponse('The revision.', envelope(revisionSchema)),
        headers: { ...requestIdHeader, ETag: header('ETag') },
      },
      '304': {
        description: 'If-None-Match names this revision.',
        headers: { ...requestIdHeader, ETag: header('ETag') },
      },
      '404': response('NoteNotFound'),
      ...STORE_ERRORS,
    },
  }
}

function restoreRevision(): Operation {
  return {
    tags: ['notes'],
    operationId: 'restoreRevision',
    summary: 'Restore a revision',
    parameters: [NOTE_ID, ...['RequestId', 'IfMatch', 'IfUnmodifiedSince'].map(parameter)],
    description:
      "Makes the note exactly that revision's content again, as a PUT of it: fields added since are gone, the id stays the note's. A new write: it honours If-Match, is one `updated` change in the feed and a new revision, and answers as PATCH does.",
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['version'],
            properties: { version: { type: 'string', description: 'The revision to restore.' } },
          },
          example: { version: 'k2x9q1.5' },
        },
      },
    },
    responses: {
      '200': written('The note as stored now.'),
      '400': problemResponse(
        'The body has no `version`, or is not valid JSON.',
        400,
        'The body must be {"version": "<version>"}, the version of one of the note\'s revisions (GET its /revisions lists them).',
      ),
      '404': {
        description:
          'No note has this id (the empty 404), or it has no revision of this version (problem JSON).',
        headers: requestIdHeader,
        content: { 'application/problem+json': { schema: schema('Problem') } },
      },
      '412': response('PreconditionFailed'),
      '413': response('PayloadTooLarge'),
      '415': response('UnsupportedMediaType'),
      ...STORE_ERRORS,
      '507': response('InsufficientStorage'),
    },
  }
}

function listTrash(): Operation {
  return {
    tags: ['notes'],
    operationId: 'listTrash',
    summary: 'List the trash',
    parameters: [...pageQuery('deleted notes'), parameter('RequestId')],
    description:
      'The deleted notes kept for TRASH_DAYS (default 30; 0 turns the trash off), most recently deleted first. They count toward the caps as notes do until they leave the trash.',
    responses: {
      '200': {
        ...jsonResponse(
          'The deleted notes, or a page of them.',
          envelope({ type: 'array', items: trashedSchema }),
        ),
        headers: {
          ...requestIdHeader,
          'X-Total-Count': header('TotalCount'),
          Link: header('Link'),
        },
      },
      '400': BAD_PAGE,
      ...STORE_ERRORS,
    },
  }
}

function emptyTrash(): Operation {
  return {
    tags: ['notes'],
    operationId: 'emptyTrash',
    summary: 'Empty the trash',
    parameters: [parameter('RequestId')],
    description: 'Removes every deleted note for good, with its revisions.',
    responses: {
      '200': jsonResponse(
        'How many notes were removed.',
        envelope({
          type: 'object',
          required: ['purged'],
          additionalProperties: false,
          properties: { purged: { type: 'integer', minimum: 0 } },
        }),
      ),
      ...STORE_ERRORS,
    },
  }
}

function purgeNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'purgeNote',
    summary: 'Remove a deleted note for good',
    parameters: [NOTE_ID, parameter('RequestId')],
    description:
      'The most recently deleted note with this id leaves the trash, with its revisions.',
    responses: {
      '204': { description: 'Removed.', headers: requestIdHeader },
      '404': response('NoteNotFound'),
      ...STORE_ERRORS,
    },
  }
}

function untrashNote(): Operation {
  return {
    tags: ['notes'],
    operationId: 'restoreFromTrash',
    summary: 'Restore a deleted note',
    parameters: [NOTE_ID, parameter('RequestId')],
    description:
      'Puts the most recently deleted note with this id back, with its id, content and revisions, at the end of the list: a new write (a new ETag, a `created` change in the feed, a new revision).',
    responses: {
      '200': written('The note as it is back.'),
      '404': response('NoteNotFound'),
      '409': problemResponse(
        'A live note holds this id again.',
        409,
        'A note with id 1767225600000 exists again; delete it, or give it another id, to restore this one.',
      ),
      ...STORE_ERRORS,
    },
  }
}
