import {
  type MaybePromise,
  type NoteFields,
  type NoteRecord,
  type NoteWriter,
  type PatchKind,
  PreconditionFailed,
  type Preconditions,
} from '../store/types.js'
import { Answer, JSON_CONTENT_TYPE, NOT_FOUND, type RequestHeaders } from './answer.js'
import { httpDate, writeConditions } from './conditional.js'
import { problemAnswer } from './problem.js'

/**
 * What the writes mean (the spec's POST, PATCH and DELETE, with their conditions and the merge
 * patch, and PUT, an update that replaces): the store call each makes and the answer it gets, uncompressed.
 * A request alone (NoteOperations, which compresses the answer) and a request inside a batch
 * (batch.ts, on the batch's writer) both come here, so that they mean the same.
 * A synchronous writer gets a synchronous answer.
 */

/** POST /api/note: the fields stored under a new id, answered with the note and its ETag. */
export function createAnswer(writer: NoteWriter, fields: NoteFields): MaybePromise<Answer> {
  const note = writer.create(fields)
  return note instanceof Promise ? note.then(writtenAnswer) : writtenAnswer(note)
}

/**
 * PATCH (and PUT, kind 'replace') /api/note/:id: the note changed, a 412 when its conditions fail,
 * or the empty 404.
 */
export function updateAnswer(
  writer: NoteWriter,
  id: number | undefined,
  fields: NoteFields,
  kind: PatchKind,
  headers: RequestHeaders,
): MaybePromise<Answer> {
  if (id === undefined) return NOT_FOUND
  const note = writer.update(id, fields, kind, conditionsOf(headers))
  return note instanceof Promise ? note.then(updatedAnswer) : updatedAnswer(note)
}

/**
 * DELETE /api/note/:id: the note removed, answered with the segment exactly as received (after
 * percent-decoding), as a string: '007' -> {"data":"007"}. Conditions as for update.
 */
export function deleteAnswer(
  writer: NoteWriter,
  id: number | undefined,
  segment: string,
  headers: RequestHeaders,
): MaybePromise<Answer> {
  if (id === undefined) return NOT_FOUND
  const found = writer.delete(id, conditionsOf(headers))
  if (found instanceof Promise) return found.then((value) => deletedAnswer(value, segment))
  return deletedAnswer(found, segment)
}

/** A note just written: 200 {"data":note} with its new ETag. */
export function writtenAnswer(note: NoteRecord): Answer {
  return new Answer(200, JSON_CONTENT_TYPE, `{"data":${note.json}}`, ['etag', note.etag])
}

/** The If-Match or If-Unmodified-Since of a write, if any. */
function conditionsOf(headers: RequestHeaders): Preconditions | undefined {
  const ifMatch = headers['if-match']
  const ifUnmodifiedSince = headers['if-unmodified-since']
  if (ifMatch === undefined && ifUnmodifiedSince === undefined) return undefined
  return writeConditions(ifMatch, ifUnmodifiedSince)
}

function updatedAnswer(note: NoteRecord | undefined | PreconditionFailed): Answer {
  if (note === undefined) return NOT_FOUND
  if (note instanceof PreconditionFailed) return preconditionFailed(note)
  return writtenAnswer(note)
}

function deletedAnswer(found: boolean | PreconditionFailed, segment: string): Answer {
  if (found instanceof PreconditionFailed) return preconditionFailed(found)
  // parseNoteId let through only digits and an optional '-', which need no JSON escaping.
  return found ? new Answer(200, JSON_CONTENT_TYPE, `{"data":"${segment}"}`) : NOT_FOUND
}

/** 412, carrying the note's current ETag so that the client can fetch the newer version. */
function preconditionFailed({ current }: PreconditionFailed): Answer {
  const { status, contentType, body } = problemAnswer(
    412,
    `The note has changed since the version your If-Match or If-Unmodified-Since names; its ETag is now ${current.etag}. GET it, and send that ETag in If-Match to write over it.`,
  )
  return new Answer(status, contentType, body, [
    'etag',
    current.etag,
    'last-modified',
    httpDate(current.modified),
  ])
}
