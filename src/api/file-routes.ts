import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Directory } from '../store/directory.js'
import {
  type FileRecord,
  type FileSpace,
  FileTooLargeError,
  isFileId,
  type NotebookFiles,
} from '../store/files.js'
import { AccessLostError, StoreFullError, StoreUnavailableError } from '../store/types.js'
import { JSON_CONTENT_TYPE } from './answer.js'
import { nextLink, pagingOf, readSequence } from './archive-operations.js'
import { noneMatch } from './conditional.js'
import {
  FILE_ONLY_HEADERS,
  FILE_SAFETY_HEADERS,
  fileHeaders,
  fileJson,
  rangeOf,
  uploadType,
} from './file-answers.js'
import { isRefused, targetOf } from './notebook-access.js'
import { sendProblem } from './problem.js'
import { queryOf } from './request-target.js'

export interface FileRoutesOptions {
  /** Every notebook's files. */
  readonly space: FileSpace
  /** Who may see which notebook; undefined when there is one notebook for every request. */
  readonly directory?: Directory | undefined
  /** Largest file an upload stores (MAX_FILE_BYTES): a longer Content-Length is refused at once. */
  readonly maxFileBytes: number
}

interface FileParams {
  nb?: string
  id?: string
}

/** The 404 of a file the notebook does not hold: the same whether another notebook holds it or not. */
export const NO_FILE = 'This notebook holds no file with this id.'

/** An error the error handler answers with `statusCode` and the message as its detail. */
export function refusal(statusCode: number, detail: string): Error {
  return Object.assign(new Error(detail), { statusCode })
}

/** Where a files or uploads request acts: a notebook's store, as whom, and its paths' start. */
export interface NotebookScope {
  readonly store: string
  /** The member whose writes are checked as they are kept (Target.guardedFor). */
  readonly guardedFor: string | undefined
  /** '/api' or '/api/notebooks/<nb>'. */
  readonly base: string
}

/**
 * The notebook a request under `/api` or `/api/notebooks/:nb` acts on, once the caller's role
 * allows it (`write`: an editor's); throws the notebook's 404 or the role's 403 otherwise.
 */
export async function scopeOf(
  request: FastifyRequest,
  directory: Directory | undefined,
  write: boolean,
): Promise<NotebookScope> {
  const { nb } = request.params as { nb?: string }
  if (nb === undefined) return { store: request.notebook, guardedFor: undefined, base: '/api' }
  const target = await targetOf(request, nb, directory, write)
  if (isRefused(target)) throw refusal(target.status, target.detail)
  return {
    store: target.store,
    guardedFor: target.guardedFor,
    base: `/api/notebooks/${encodeURIComponent(nb)}`,
  }
}

/** The files of a scope: for a write by a member who can lose access, as that member writes. */
export function filesIn(space: FileSpace, scope: NotebookScope, write: boolean): NotebookFiles {
  return write && scope.guardedFor !== undefined
    ? space.writerFor(scope.store, scope.guardedFor)
    : space.files(scope.store)
}

/** A scope whose requests' bodies are the bytes as they are: no parser reads them, the store does. */
export function takeRawBodies(scope: FastifyInstance): void {
  scope.removeAllContentTypeParsers()
  scope.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))
}

/**
 * Files as Fastify routes, at `/api/files` on the caller's default notebook and under
 * `/api/notebooks/:nb/` on the notebook the path names, by role (a viewer reads, an editor
 * uploads and deletes, a non-member gets the notebook's 404): an upload's body streamed into the
 * store as it arrives (no body parser reads it), a file's bytes streamed out, a Range read
 * exactly. Every refusal is thrown, so the error handler answers it and ends a connection whose
 * body is still arriving.
 */
export function registerFileRoutes(app: FastifyInstance, options: FileRoutesOptions): void {
  const { space, directory, maxFileBytes } = options

  /** The files a request acts on, and the path its Links start with; throws when refused. */
  const filesOf = async (
    request: FastifyRequest,
    write: boolean,
  ): Promise<{ files: NotebookFiles; base: string }> => {
    const scope = await scopeOf(request, directory, write)
    return { files: filesIn(space, scope, write), base: scope.base }
  }

  app.register(async (scope) => {
    // An upload's body is the file's bytes, whatever its type.
    takeRawBodies(scope)
    // The guards on every answer, a refusal's too. A refusal (thrown anywhere, or a read that
    // failed before its first byte) keeps nothing of the file's own headers and is never cached;
    // a 416 is an answer about the file's bytes (no range of them is asked for), and keeps them.
    scope.addHook('onSend', (_request, reply, payload, done) => {
      for (const [name, value] of FILE_SAFETY_HEADERS) reply.header(name, value)
      if (reply.statusCode >= 400 && reply.statusCode !== 416) {
        for (const name of FILE_ONLY_HEADERS) reply.removeHeader(name)
        reply.header('cache-control', 'no-store')
      }
      done(null, payload)
    })
    // A Content-Type that is not a media type is this API's 400, before Fastify's parser would
    // answer it with a 415 about JSON.
    scope.addHook('preParsing', async (request) => {
      if (request.method !== 'POST') return
      const type = uploadType(request.headers['content-type'])
      if ('bad' in type) throw refusal(400, type.bad)
    })

    for (const prefix of ['/api', '/api/notebooks/:nb']) {
      scope.post(`${prefix}/files`, async (request, reply) => {
        const declared = request.headers['content-length']
        if (declared !== undefined && Number(declared) > maxFileBytes) {
          throw new FileTooLargeError(maxFileBytes)
        }
        // A Content-Type that is not a media type was refused before the body (preParsing).
        const { type } = uploadType(request.headers['content-type']) as { type: string }
        const { files, base } = await filesOf(request, true)
        const record = await upload(files, type, request)
        return reply
          .code(201)
          .header('location', `${base}/files/${record.id}`)
          .header('content-type', JSON_CONTENT_TYPE)
          .send(`{"data":${fileJson(record)}}`)
      })

      scope.get(`${prefix}/files`, async (request, reply) => {
        const paging = pagingOf(queryOf(request.url), readSequence)
        if ('bad' in paging) throw refusal(400, paging.bad)
        const { files, base } = await filesOf(request, false)
        const [page, totals] = await Promise.all([
          files.list(paging.limit, paging.after),
          files.totals(),
        ])
        reply.header('content-type', JSON_CONTENT_TYPE).header('x-total-count', totals.files)
        if (page.next !== undefined) {
          const [name, value] = nextLink(`${base}/files`, paging.limit, page.next)
          reply.header(name as string, value)
        }
        return reply.send(`{"data":[${page.files.map(fileJson).join(',')}]}`)
      })

      // HEAD is this route's own (not Fastify's, which would answer Content-Length: 0).
      scope.route({
        method: ['GET', 'HEAD'],
        url: `${prefix}/files/:id`,
        handler: async (request, reply) => {
          const { files } = await filesOf(request, false)
          const id = (request.params as FileParams).id ?? ''
          const record = isFileId(id) ? await files.stat(id) : undefined
          if (record === undefined) return sendProblem(reply, 404, NO_FILE)
          const headers = fileHeaders(record)
          for (let i = 0; i + 1 < headers.length; i += 2) {
            reply.header(headers[i] as string, headers[i + 1])
          }
          const etag = `"${record.id}"`
          if (noneMatch(request.headers['if-none-match'], etag)) return reply.code(304).send()
          const ifRange = request.headers['if-range']
          const asked =
            ifRange === undefined || ifRange === etag
              ? rangeOf(request.headers.range, record.size)
              : 'whole'
          if (asked === 'none') {
            reply.header('content-range', `bytes */${record.size}`)
            return sendProblem(
              reply,
              416,
              `The file holds ${record.size} bytes; the Range asks for none of them.`,
            )
          }
          const { start, end } = asked === 'whole' ? { start: 0, end: record.size } : asked
          if (asked !== 'whole') {
            reply.code(206).header('content-range', `bytes ${start}-${end - 1}/${record.size}`)
          }
          reply.header('content-type', record.type).header('content-length', end - start)
          if (request.method === 'HEAD' || start === end) return reply.send()
          const bytes = await files.read(record.id, start, end)
          // Deleted between the two reads: as if it had been deleted just before.
          if (bytes === undefined) return sendProblem(reply, 404, NO_FILE)
          return reply.send(bytes)
        },
      })

      scope.delete(`${prefix}/files/:id`, async (request, reply) => {
        const { files } = await filesOf(request, true)
        const id = (request.params as FileParams).id ?? ''
        const deleted = isFileId(id) && (await files.delete(id))
        if (!deleted) return sendProblem(reply, 404, NO_FILE)
        return reply.code(204).send()
      })
    }
  })
}

/** What the store refuses on its own account: answered as it is, the upload's end or not. */
const STORE_REFUSALS = [FileTooLargeError, StoreFullError, AccessLostError, StoreUnavailableError]

/**
 * Whether `error` came of a body that ended before its last byte (the client went away, or sent
 * less than its Content-Length), rather than of a refusal: a 400 of the client's, not a failure
 * of ours (nor a line in the error log).
 */
export function bodyEndedEarly(error: unknown, request: FastifyRequest): boolean {
  const refused =
    STORE_REFUSALS.some((kind) => error instanceof kind) ||
    typeof (error as { statusCode?: unknown } | null)?.statusCode === 'number'
  return !refused && !request.raw.complete
}

/**
 * Stores the request's body as a file. A body that ends before its last byte (the client went
 * away, or sent less than its Content-Length) keeps nothing and is a 400, not a failure of ours.
 */
async function upload(
  files: NotebookFiles,
  type: string,
  request: FastifyRequest,
): Promise<FileRecord> {
  try {
    // Not destroyed when the store stops reading early (a 413, a 507): the socket must stay to
    // carry the refusal, and the rest of the body is read and dropped as the connection closes.
    return await files.put(type, request.raw.iterator({ destroyOnReturn: false }))
  } catch (error) {
    if (bodyEndedEarly(error, request)) {
      throw refusal(400, 'The upload ended before its last byte; nothing was kept.')
    }
    throw error
  }
}
