import { MAX_BATCH_REQUESTS } from '../api/batch.js'
import { DEFAULT_LIMIT, MAX_LIMIT, MAX_Q_LENGTH } from '../api/page-query.js'
import { envelope, schema } from './parts.js'

/** The document's components.schemas: notes, their envelopes, problems. */
export function schemas(): Record<string, unknown> {
  return {
    Note: {
      type: 'object',
      description:
        'A note: the fields it was created with, as sent, plus `id`. Only a PATCH that sends an `id` can make `id` something other than an integer.',
      required: ['id'],
      properties: {
        id: {
          type: 'integer',
          description: 'Set at creation: the time in ms since the Unix epoch, unique.',
          examples: [1_767_225_600_000],
        },
      },
      additionalProperties: true,
      examples: [{ title: 'Buy milk', done: false, id: 1_767_225_600_000 }],
    },
    NoteFields: {
      type: 'object',
      description: 'Any JSON object; its fields are stored as sent.',
      additionalProperties: true,
      examples: [{ title: 'Buy milk', done: false }],
    },
    NoteEnvelope: envelope(schema('Note')),
    NoteListEnvelope: envelope({ type: 'array', items: schema('Note') }),
    DeletedEnvelope: envelope({
      type: 'string',
      pattern: '^-?[0-9]+$',
      description: 'The `id` path segment as received, after percent-decoding.',
      examples: ['1767225600000'],
    }),
    Batch: {
      type: 'object',
      description: 'The requests of a batch, applied in order.',
      required: ['requests'],
      additionalProperties: false,
      properties: {
        requests: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_BATCH_REQUESTS,
          items: schema('BatchRequest'),
        },
      },
      examples: [
        {
          requests: [
            { method: 'POST', url: '/api/note', body: { title: 'Buy milk' } },
            {
              method: 'PATCH',
              url: '/api/note/1767225600000',
              headers: { 'If-Match': '"k2x9q1.7"' },
              body: { done: true },
            },
            { method: 'DELETE', url: '/api/note/1767225600001' },
          ],
        },
      ],
    },
    BatchRequest: {
      type: 'object',
      description:
        'One write, as it would be sent alone. Of its headers, `Content-Type` (`application/merge-patch+json` makes a PATCH a merge patch), `If-Match` and `If-Unmodified-Since` mean what they mean alone, others are ignored, and `Idempotency-Key` is refused (send it on the batch).',
      required: ['method', 'url'],
      additionalProperties: false,
      properties: {
        method: { type: 'string', enum: ['POST', 'PUT', 'PATCH', 'DELETE'] },
        url: {
          type: 'string',
          description: '`/api/note` for a POST, `/api/note/{id}` for a PUT, PATCH or DELETE.',
          examples: ['/api/note', '/api/note/1767225600000'],
        },
        headers: { type: 'object', additionalProperties: { type: 'string' } },
        body: { ...schema('NoteFields'), description: 'The fields; none at all counts as `{}`.' },
      },
    },
    BatchAnswers: envelope({
      type: 'array',
      items: {
        type: 'object',
        required: ['status', 'headers', 'body'],
        additionalProperties: false,
        properties: {
          status: { type: 'integer', const: 200 },
          headers: {
            type: 'object',
            description: 'The ETag of a created or updated note.',
            additionalProperties: { type: 'string' },
          },
          body: {
            description:
              'The answer the request would have had alone: `{"data": note}`, or `{"data": "<id>"}` for a DELETE.',
            type: 'object',
          },
        },
      },
    }),
    Problem: {
      type: 'object',
      description: 'RFC 9457 problem details.',
      required: ['type', 'title', 'status', 'detail'],
      properties: {
        type: { type: 'string', const: 'about:blank' },
        title: { type: 'string', description: 'The reason phrase of the status code.' },
        status: { type: 'integer', description: 'The HTTP status code.' },
        detail: { type: 'string', description: 'What went wrong and what to change.' },
      },
      additionalProperties: false,
    },
  }
}

/** The note and list operations' parameters. */
export function parameters(): Record<string, unknown> {
  return {
    ...pageParameters(),
    ...conditionParameters(),
    IdempotencyKey: {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Apply this create at most once: a repeat with the same key and body within 24 hours answers the first answer again (with `Idempotent-Replayed: true`) and creates nothing; the same key with another body is a 422. 1 to 255 visible ASCII characters.',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    },
    RequestId: {
      name: 'X-Request-Id',
      in: 'header',
      required: false,
      description:
        'Your id for this request, echoed back and logged; replaced by a generated one unless it is 1 to 128 characters of `A-Z a-z 0-9 _ . : @ / + = ~ -`.',
      schema: { type: 'string' },
    },
  }
}

function pageParameters(): Record<string, unknown> {
  const query = (name: string, description: string, schema: object) => ({
    name,
    in: 'query',
    required: false,
    description,
    schema,
  })
  return {
    Limit: query(
      'limit',
      'Answer one page of at most this many notes, with `Link: rel="next"` while more follow.',
      { type: 'integer', minimum: 1, maximum: MAX_LIMIT },
    ),
    After: query(
      'after',
      `The opaque cursor from a \`Link: rel="next"\` URL: the page starts after the last note of the one before. Alone, pages by ${DEFAULT_LIMIT}. A cursor that is not one of ours is a 400.`,
      { type: 'string' },
    ),
    Order: query('order', '`desc` walks from the newest note; alone, it reverses the whole list.', {
      type: 'string',
      enum: ['asc', 'desc'],
    }),
    Sort: query(
      'sort',
      "`updated` orders by the time of each note's last write (notes written in the same ms by id, a note whose id is not a number after the others), `order=desc` the most recently changed first; `created`, the default, is list order. A walk in this order visits every note not written during it exactly once; ascending, a note written during it comes again, with its last content. A cursor of one sort is a 400 with the other.",
      { type: 'string', enum: ['created', 'updated'], default: 'created' },
    ),
    Q: query(
      'q',
      'Keep only the notes with a string value, at any depth (keys excluded), that contains this text, compared case-insensitively. X-Total-Count then counts the matches.',
      { type: 'string', minLength: 1, maxLength: MAX_Q_LENGTH },
    ),
  }
}

function conditionParameters(): Record<string, unknown> {
  const condition = (name: string, description: string) => ({
    name,
    in: 'header',
    required: false,
    description,
    schema: { type: 'string' },
  })
  return {
    Accept: {
      ...condition(
        'Accept',
        '`application/x-ndjson` asks for the export: every note of the notebook, one JSON object a line, in list order, as one snapshot (no page or search parameters).',
      ),
      example: 'application/x-ndjson',
    },
    IfNoneMatch: condition(
      'If-None-Match',
      'ETags the client holds (or `*`), compared weakly (`W/"x"` matches `"x"`): 304 with no body while one is current.',
    ),
    IfModifiedSince: condition(
      'If-Modified-Since',
      'An HTTP date: 304 when the note was not written after it (ignored with If-None-Match).',
    ),
    IfMatch: condition(
      'If-Match',
      'Write only if the note still has one of these ETags (or any, with `*`); else 412 and nothing changes. Of two writes with the same If-Match, exactly one succeeds.',
    ),
    IfUnmodifiedSince: condition(
      'If-Unmodified-Since',
      'An HTTP date: write only if the note was not written after it; else 412 (ignored with If-Match).',
    ),
  }
}

/** The bodies of a create and of an update. */
export function requestBodies(): Record<string, unknown> {
  return {
    NoteFields: {
      description:
        'A JSON object in UTF-8, as `application/json` or any `application/*+json`. No body at all counts as `{}`.',
      required: false,
      content: { 'application/json': { schema: schema('NoteFields') } },
    },
    NotePatch: {
      description:
        'A JSON object in UTF-8. No body at all counts as `{}`. As `application/json` or any other `application/*+json`: a shallow merge, each field replacing the stored one (a `null` is stored as `null`).',
      required: false,
      content: {
        'application/json': { schema: schema('NoteFields') },
        'application/merge-patch+json': {
          schema: {
            ...schema('NoteFields'),
            description:
              'An RFC 7396 JSON Merge Patch: a `null` removes the field, an object merges recursively into the stored field (into `{}` when that is absent or not an object), any other value (an array too) replaces it. Removing `id` leaves a note that no id finds but the list still holds; `__proto__` is a plain field at any depth.',
          },
        },
      },
    },
  }
}
