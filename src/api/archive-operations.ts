import { ID_TAKEN, type Revision, type RevisionPage, type TrashPage } from '../store/archive.js'
import type { MaybePromise, NoteFields, NoteRecord, NoteStore } from '../store/types.js'
import { Answer, JSON_CONTENT_TYPE, NOT_FOUND, type RequestHeaders } from './answer.js'
import { noneMatch } from './conditional.js'
import { clip, DEFAULT_LIMIT, readLimit } from './page-query.js'
import { problemAnswer } from './problem.js'
import { updateAnswer, writtenAnswer } from './write-answers.js'

/**
 * What a note's history and the trash answer (docs/api.md): the revisions of a note, one
 * revision, a restore to one, the trash's page, a note put back, purges. The routes
 * (archive-routes.ts) only read the request and write these Answers; `store` is the notebook's
 * (for a write, as its member writes it).
 */

/** A page stops once its notes pass this many bytes (one note always goes), as a list's does not need to. */
const PAGE_BYTES = 8 * 1024 * 1024
/** A version as the store makes them: an epoch, a dot, a sequence in base 36. */
const VERSION = /^[0-9a-z]{1,16}\.[0-9a-z]{1,11}$/

export type Paging<T> = { limit: number; after: T | undefined } | { bad: string }

/** `limit` (1-1000, default 100) and `after` from a query string, `after` read by `readAfter`. */
export function pagingOf<T>(search: string, readAfter: (text: string) => T | undefined): Paging<T> {
  const params = new URLSearchParams(search)
  const limitText = params.get('limit')
  const afterText = params.get('after')
  const limit = limitText === null ? DEFAULT_LIMIT : readLimit(limitText)
  if (typeof limit === 'string') return { bad: limit }
  if (afterText === null) return { limit, after: undefined }
  const after = readAfter(afterText)
  if (after === undefined) {
    return { bad: `after must be the cursor of a page's Link; got "${clip(afterText)}".` }
  }
  return { limit, after }
}

const readVersion = (text: string): string | undefined => (VERSION.test(text) ? text : undefined)
export const readSequence = (text: string): number | undefined =>
  /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : undefined

/** A time as RFC 3339, in UTC with ms: 1700000000000 -> '2023-11-14T22:13:20.000Z'. */
export const rfc3339 = (ms: number): string => new Date(ms).toISOString()

function revisionJson({ version, at, change, json }: Revision): string {
  return `{"version":${JSON.stringify(version)},"at":"${rfc3339(at)}","change":"${change}","note":${json}}`
}

/** The Link to the page after this one: `path` with `limit` and `after`. */
export function nextLink(path: string, limit: number, after: string | number): string[] {
  return ['link', `<${path}?limit=${limit}&after=${encodeURIComponent(String(after))}>; rel="next"`]
}

/**
 * Up to `limit` items as JSON, stopping early once they pass PAGE_BYTES: the array, and the
 * index of the last one sent when the page stopped early (else undefined).
 */
function boundedArray<T>(
  items: readonly T[],
  json: (item: T) => string,
): [string, number | undefined] {
  const parts: string[] = []
  let bytes = 0
  for (const [i, item] of items.entries()) {
    const part = json(item)
    parts.push(part)
    bytes += part.length
    if (bytes > PAGE_BYTES && i < items.length - 1) return [`[${parts.join(',')}]`, i]
  }
  return [`[${parts.join(',')}]`, undefined]
}

/** GET .../note/:id/revisions: the note's revisions, newest first, paged; the empty 404 without the note. */
export function revisionsAnswer(
  store: NoteStore,
  id: number | undefined,
  search: string,
  path: string,
): MaybePromise<Answer> {
  const paging = pagingOf(search, readVersion)
  if ('bad' in paging) return problemAnswer(400, paging.bad)
  if (id === undefined) return NOT_FOUND
  const { limit } = paging
  const answer = (page: RevisionPage | undefined): Answer => {
    if (page === undefined) return NOT_FOUND
    const [json, stoppedAt] = boundedArray(page.revisions, revisionJson)
    const next = stoppedAt === undefined ? page.next : page.revisions[stoppedAt]?.version
    const headers = next === undefined ? [] : nextLink(path, limit, next)
    return new Answer(200, JSON_CONTENT_TYPE, `{"data":${json}}`, headers)
  }
  const page = store.revisions(id, limit, paging.after)
  return page instanceof Promise ? page.then(answer) : answer(page)
}

/** GET .../note/:id/revisions/:version: one revision, with its ETag (the note's in that state). */
export function revisionAnswer(
  store: NoteStore,
  id: number | undefined,
  version: string,
  headers: RequestHeaders,
): MaybePromise<Answer> {
  if (id === undefined || !VERSION.test(version)) return NOT_FOUND
  const answer = (revision: Revision | undefined): Answer => {
    if (revision === undefined) return NOT_FOUND
    const etag = JSON.stringify(revision.version)
    // A revision never changes: its ETag names it for good.
    if (noneMatch(headers['if-none-match'], etag)) {
      return new Answer(304, undefined, undefined, ['etag', etag])
    }
    return new Answer(200, JSON_CONTENT_TYPE, `{"data":${revisionJson(revision)}}`, ['etag', etag])
  }
  const revision = store.revision(id, version)
  return revision instanceof Promise ? revision.then(answer) : answer(revision)
}

/**
 * POST .../note/:id/restore {"version"}: the note made that revision's content again, as a PUT of
 * it (its id the note's, If-Match honoured), answered as a PATCH is.
 */
export function restoreAnswer(
  store: NoteStore,
  id: number | undefined,
  body: NoteFields,
  headers: RequestHeaders,
): MaybePromise<Answer> {
  const { version } = body
  if (typeof version !== 'string') {
    return problemAnswer(
      400,
      'The body must be {"version": "<version>"}, the version of one of the note\'s revisions (GET its /revisions lists them).',
    )
  }
  if (id === undefined) return NOT_FOUND
  const restore = (revision: Revision | undefined): MaybePromise<Answer> => {
    if (revision === undefined) {
      return problemAnswer(
        404,
        `This note has no revision ${JSON.stringify(clip(version))}: it may be older than the history keeps (GET its /revisions lists the ones kept), or the note may not exist.`,
      )
    }
    return updateAnswer(store, id, JSON.parse(revision.json) as NoteFields, 'replace', headers)
  }
  const revision = VERSION.test(version) ? store.revision(id, version) : undefined
  return revision instanceof Promise ? revision.then(restore) : restore(revision)
}

/** GET .../trash: the deleted notes, most recently deleted first, paged, with X-Total-Count. */
export function trashAnswer(store: NoteStore, search: string, path: string): MaybePromise<Answer> {
  const paging = pagingOf(search, readSequence)
  if ('bad' in paging) return problemAnswer(400, paging.bad)
  const { limit } = paging
  const answer = (page: TrashPage): Answer => {
    const [json, stoppedAt] = boundedArray(
      page.notes,
      ({ deleted, json: note }) => `{"deleted_at":"${rfc3339(deleted)}","note":${note}}`,
    )
    const next = stoppedAt === undefined ? page.next : page.notes[stoppedAt]?.sequence
    const headers = ['x-total-count', String(page.total)]
    if (next !== undefined) headers.push(...nextLink(path, limit, next))
    return new Answer(200, JSON_CONTENT_TYPE, `{"data":${json}}`, headers)
  }
  const page = store.trash(limit, paging.after)
  return page instanceof Promise ? page.then(answer) : answer(page)
}

/** POST .../trash/:id/restore: the note back at the end of the list, answered with its ETag. */
export function untrashAnswer(store: NoteStore, id: number | undefined): MaybePromise<Answer> {
  if (id === undefined) return NOT_FOUND
  const answer = (note: NoteRecord | undefined | typeof ID_TAKEN): Answer => {
    if (note === undefined) return NOT_FOUND
    if (note === ID_TAKEN) {
      return problemAnswer(
        409,
        `A note with id ${id} exists again; delete it, or give it another id, to restore this one.`,
      )
    }
    return writtenAnswer(note)
  }
  const note = store.untrash(id)
  return note instanceof Promise ? note.then(answer) : answer(note)
}

const NO_CONTENT = Object.freeze(new Answer(204, undefined, undefined))

/** DELETE .../trash/:id: the deleted note removed for good (204), or the empty 404. */
export function purgeAnswer(store: NoteStore, id: number | undefined): MaybePromise<Answer> {
  if (id === undefined) return NOT_FOUND
  const answer = (found: boolean): Answer => (found ? NO_CONTENT : NOT_FOUND)
  const found = store.purge(id)
  return found instanceof Promise ? found.then(answer) : answer(found)
}

/** DELETE .../trash: every deleted note removed for good, answered with how many went. */
export function emptyTrashAnswer(store: NoteStore): MaybePromise<Answer> {
  const answer = (purged: number): Answer =>
    new Answer(200, JSON_CONTENT_TYPE, `{"data":{"purged":${purged}}}`)
  const purged = store.emptyTrash()
  return purged instanceof Promise ? purged.then(answer) : answer(purged)
}
