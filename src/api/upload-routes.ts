import { randomBytes } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Directory } from '../store/directory.js'
import { type FileLimits, type FileSpace, FileTooLargeError, UNKNOWN_TYPE } from '../store/files.js'
import { checkFileRoom } from '../store/kernel/file-intake.js'
import {
  expired,
  UPLOAD_LIFETIME_MS,
  UploadBusyError,
  type UploadStaging,
  type UploadState,
} from '../store/uploads.js'
import { JSON_CONTENT_TYPE } from './answer.js'
import { fileJson, uploadType } from './file-answers.js'
import {
  bodyEndedEarly,
  filesIn,
  type NotebookScope,
  refusal,
  scopeOf,
  takeRawBodies,
} from './file-routes.js'
import { sendProblem } from './problem.js'

/*
 * Uploads that resume: tus 1.0 at /api/uploads (core, creation, creation-with-upload, termination,
 * expiration; https://tus.io/protocols/resumable-upload). A client creates an upload with its
 * length (POST, perhaps with its first bytes), sends parts with PATCH at the offset the service
 * holds, asks for that offset with HEAD after a lost connection, and may end it with DELETE. The
 * last byte makes the upload a file of its notebook, as POST /api/files would, and GET of the
 * upload's URL then answers that file. An upload counts toward the notebook's caps as it grows,
 * and goes 24 h after its last byte.
 */

const TUS_VERSION = '1.0.0'
const TUS_EXTENSIONS = 'creation,creation-with-upload,termination,expiration'
const PART_TYPE = 'application/offset+octet-stream'
/** Longest Upload-Metadata header taken. */
const MAX_METADATA = 4096
export const NO_UPLOAD = 'This notebook has no upload with this id (or it expired).'
const BUSY = 'Another request is sending bytes to this upload; ask its offset with HEAD.'

export interface UploadRoutesOptions {
  readonly space: FileSpace
  readonly staging: UploadStaging
  readonly directory?: Directory | undefined
  readonly limits: FileLimits
  readonly now?: () => number
}

interface UploadParams {
  nb?: string
  id?: string
}

/** A header's one value as a whole number of bytes, or undefined. */
function bytesHeader(value: string | string[] | undefined): number | undefined {
  return typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : undefined
}

/**
 * The media type Upload-Metadata gives the file (`filetype`, as tus-js-client sends it, or
 * `type`/`contentType`), or a refusal of a header that is not tus's `key base64,key base64`.
 */
function metadataType(header: string | undefined): { type: string } | { bad: string } {
  if (header === undefined || header === '') return { type: UNKNOWN_TYPE }
  const bad = {
    bad: `Upload-Metadata must be comma-separated "key base64value" pairs, at most ${MAX_METADATA} characters.`,
  }
  if (header.length > MAX_METADATA) return bad
  let type: string | undefined
  for (const pair of header.split(',')) {
    const match = /^\s*([^\s,]+)(?: ([A-Za-z0-9+/]*={0,2}))?\s*$/.exec(pair)
    if (match === null) return bad
    const [, key, value = ''] = match
    if (key === 'filetype' || key === 'type' || key === 'contentType') {
      type = Buffer.from(value, 'base64').toString('utf8')
    }
  }
  const checked = uploadType(type)
  return 'bad' in checked ? { type: UNKNOWN_TYPE } : checked
}

export function registerUploadRoutes(app: FastifyInstance, options: UploadRoutesOptions): void {
  const { space, staging, directory, limits } = options
  const now = options.now ?? Date.now
  /** Uploads being appended to by a request of this instance now. */
  const busy = new Set<string>()

  /** The upload of the path, if it is the notebook's and has not expired; else the 404. */
  const uploadOf = async (request: FastifyRequest, store: string): Promise<UploadState> => {
    const id = (request.params as UploadParams).id ?? ''
    const state = /^[A-Za-z0-9_-]{22}$/.test(id) ? await staging.state(id) : undefined
    if (state === undefined || state.notebook !== store || expired(state, now())) {
      throw refusal(404, NO_UPLOAD)
    }
    return state
  }
  /**
   * Bytes the notebook's files and its other uploads hold, and the service's: a first look, for
   * a creation's length (the staging counts each part's bytes against the caps as they arrive).
   */
  const heldBy = async (store: string, except: string | undefined) => {
    const [notebookFiles, serviceFiles, uploads] = await Promise.all([
      space.files(store).totals(),
      space.totals(),
      staging.held(store, except),
    ])
    return {
      notebook: notebookFiles.bytes + uploads.notebook,
      service: serviceFiles.bytes + uploads.service,
    }
  }
  /** Appends the request's body to the upload; finishes it at its last byte. */
  const receive = async (
    request: FastifyRequest,
    state: UploadState,
    scope: NotebookScope,
  ): Promise<number> => {
    if (busy.has(state.id)) throw refusal(409, BUSY)
    busy.add(state.id)
    try {
      // From the offset the request was checked against: a request on another instance that
      // moved it since is the staging's to see (UploadBusyError), and this one's bytes go nowhere.
      const offset = await staging
        .append(
          state.id,
          state.offset,
          request.raw.iterator({ destroyOnReturn: false }),
          (bytes) => {
            if (bytes > state.length) {
              throw refusal(400, `The upload is ${state.length} bytes long; more were sent.`)
            }
          },
          now(),
        )
        .catch((err: unknown) => {
          if (err instanceof UploadBusyError) throw refusal(409, BUSY)
          // The connection cut mid-part (tus's everyday case): the bytes that came are kept.
          if (bodyEndedEarly(err, request)) {
            throw refusal(
              400,
              'The part ended before its last byte (the connection was cut); the bytes received are kept: HEAD gives the offset to send from.',
            )
          }
          throw err
        })
      if (offset === state.length) await finish({ ...state, offset }, scope)
      return offset
    } finally {
      busy.delete(state.id)
    }
  }
  /** Stores a complete upload as a file of its notebook (again, if an earlier try failed). */
  const finish = async (state: UploadState, scope: NotebookScope): Promise<void> => {
    if (state.file !== undefined || state.offset !== state.length) return
    try {
      const file = await filesIn(space, scope, true).put(state.type, staging.read(state.id), {
        upload: state.id,
      })
      await staging.finish(state.id, file.id)
    } catch (err) {
      // Another request (a HEAD, or a PATCH's last byte, on any instance) finished it meanwhile
      // and its bytes went while this one read them: the file is there.
      if ((await staging.state(state.id))?.file !== undefined) return
      throw err
    }
  }
  const tusHeaders = (reply: FastifyReply, state?: UploadState) => {
    reply.header('tus-resumable', TUS_VERSION).header('cache-control', 'no-store')
    if (state === undefined) return reply
    reply
      .header('upload-offset', state.offset)
      .header('upload-length', state.length)
      .header('upload-expires', new Date(state.touched + UPLOAD_LIFETIME_MS).toUTCString())
    if (state.metadata !== '') reply.header('upload-metadata', state.metadata)
    return reply
  }

  app.register(async (scope) => {
    takeRawBodies(scope)
    // Every request but OPTIONS names the protocol's version; another version is a 412.
    scope.addHook('onRequest', async (request, reply) => {
      reply.header('tus-resumable', TUS_VERSION)
      if (request.method === 'OPTIONS' || request.method === 'GET') return
      if (request.headers['tus-resumable'] !== TUS_VERSION) {
        reply.header('tus-version', TUS_VERSION)
        throw refusal(412, `Send Tus-Resumable: ${TUS_VERSION}; it is the version served here.`)
      }
    })

    for (const prefix of ['/api', '/api/notebooks/:nb']) {
      scope.options(`${prefix}/uploads`, async (_request, reply) =>
        reply
          .code(204)
          .header('allow', 'OPTIONS, POST')
          .header('tus-version', TUS_VERSION)
          .header('tus-extension', TUS_EXTENSIONS)
          .header('tus-max-size', limits.maxFileBytes)
          .send(),
      )

      scope.post(`${prefix}/uploads`, async (request, reply) => {
        if (request.headers['upload-defer-length'] !== undefined) {
          throw refusal(400, 'Send Upload-Length: an upload of unknown length is not taken.')
        }
        const length = bytesHeader(request.headers['upload-length'])
        if (length === undefined) {
          throw refusal(400, 'Send Upload-Length: the length of the file, in bytes.')
        }
        if (length > limits.maxFileBytes) throw new FileTooLargeError(limits.maxFileBytes)
        const type = metadataType(request.headers['upload-metadata'] as string | undefined)
        if ('bad' in type) throw refusal(400, type.bad)
        const withBytes = request.headers['content-type'] === PART_TYPE
        const scope = await scopeOf(request, directory, true)
        const held = await heldBy(scope.store, undefined)
        checkFileRoom(held.notebook, held.service, length, limits)
        const id = randomBytes(16).toString('base64url')
        const created = now()
        await staging.create({
          id,
          notebook: scope.store,
          length,
          type: type.type,
          metadata: (request.headers['upload-metadata'] as string | undefined) ?? '',
          created,
        })
        let state = (await staging.state(id)) as UploadState
        if (withBytes || length === 0) {
          try {
            await receive(request, state, scope)
          } catch (err) {
            // The client never learns where the upload is: nothing of it may stay counted.
            await staging.remove(id).catch(() => {})
            throw err
          }
          state = (await staging.state(id)) as UploadState
        }
        return tusHeaders(reply.code(201), state)
          .header('location', `${scope.base}/uploads/${id}`)
          .send()
      })

      scope.route({
        method: ['HEAD', 'GET'],
        url: `${prefix}/uploads/:id`,
        handler: async (request, reply) => {
          const scope = await scopeOf(request, directory, false)
          let state = await uploadOf(request, scope.store)
          if (request.method === 'HEAD') {
            // Complete, but not yet a file (its store refused it before): a client that reads the
            // offset takes it as done, so it is stored now, or the refusal answered.
            // A viewer's HEAD answers the offset; the next writer's request stores it.
            if (state.file === undefined && state.offset === state.length) {
              const writer = await scopeOf(request, directory, true).catch((err: unknown) => {
                if ((err as { statusCode?: unknown }).statusCode === 403) return undefined
                throw err
              })
              if (writer !== undefined) {
                await finish(state, writer)
                state = (await staging.state(state.id)) as UploadState
              }
            }
            return tusHeaders(reply.code(200), state).header('content-length', 0).send()
          }
          if (state.file === undefined) {
            throw refusal(
              409,
              `The upload holds ${state.offset} of its ${state.length} bytes; send the rest with PATCH.`,
            )
          }
          const file = await space.files(scope.store).stat(state.file)
          if (file === undefined) return sendProblem(reply, 404, NO_UPLOAD)
          return reply.header('content-type', JSON_CONTENT_TYPE).send(`{"data":${fileJson(file)}}`)
        },
      })

      scope.patch(`${prefix}/uploads/:id`, async (request, reply) => {
        if (request.headers['content-type'] !== PART_TYPE) {
          throw refusal(415, `Send the bytes as ${PART_TYPE}.`)
        }
        const offset = bytesHeader(request.headers['upload-offset'])
        if (offset === undefined) throw refusal(400, 'Send Upload-Offset: where these bytes go.')
        const scope = await scopeOf(request, directory, true)
        const state = await uploadOf(request, scope.store)
        if (offset !== state.offset) {
          throw refusal(
            409,
            `The upload holds ${state.offset} bytes; send the bytes from Upload-Offset ${state.offset}.`,
          )
        }
        await receive(request, state, scope)
        return tusHeaders(reply.code(204), (await staging.state(state.id)) as UploadState).send()
      })

      scope.delete(`${prefix}/uploads/:id`, async (request, reply) => {
        const scope = await scopeOf(request, directory, true)
        const state = await uploadOf(request, scope.store)
        if (busy.has(state.id)) {
          throw refusal(409, 'A request is sending bytes to this upload; try again once it ends.')
        }
        await staging.remove(state.id)
        return tusHeaders(reply.code(204)).send()
      })
    }
  })
}
