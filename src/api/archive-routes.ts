import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Directory } from '../store/directory.js'
import type { MaybePromise, NoteStore } from '../store/types.js'
import type { Answer } from './answer.js'
import {
  emptyTrashAnswer,
  purgeAnswer,
  restoreAnswer,
  revisionAnswer,
  revisionsAnswer,
  trashAnswer,
  untrashAnswer,
} from './archive-operations.js'
import { parseNoteId } from './note-id.js'
import { bodyFields, send } from './note-routes.js'
import { isRefused, targetOf } from './notebook-access.js'
import type { NotebookServices } from './notebook-services.js'
import { sendProblem } from './problem.js'
import { queryOf } from './request-target.js'

interface ArchiveParams {
  nb?: string
  id?: string
  version?: string
}

/** What an archive route acts on: the notebook's store (as its member writes it, for a write) and its paths. */
interface Scope {
  readonly store: NoteStore
  /** '/api' or '/api/notebooks/<nb>': where the note and trash paths of the answer's Links start. */
  readonly base: string
}

type Services = Pick<NotebookServices, 'store' | 'writerStore'>

/**
 * A note's history and the trash as Fastify routes, at `/api/note/:id/revisions` and `/api/trash`
 * on the caller's default notebook, and under `/api/notebooks/:nb/` on the notebook the path
 * names, once the caller's role allows the request (a viewer reads, an editor restores and
 * purges). Each reads the request and writes the Answer of archive-operations.ts.
 */
export function registerArchiveRoutes(
  app: FastifyInstance,
  services: Services,
  directory?: Directory,
): void {
  for (const prefix of ['/api', '/api/notebooks/:nb']) {
    const scoped = (
      write: boolean,
      operation: (scope: Scope, request: FastifyRequest) => MaybePromise<Answer>,
    ) => {
      return (request: FastifyRequest, reply: FastifyReply): undefined | Promise<unknown> => {
        const { nb } = request.params as ArchiveParams
        if (nb === undefined) {
          const store = services.store(request.notebook)
          return send(reply, operation({ store, base: '/api' }, request))
        }
        const target = targetOf(request, nb, directory, write)
        const run = (settled: Awaited<typeof target>): MaybePromise<Answer> | undefined => {
          if (isRefused(settled)) {
            sendProblem(reply, settled.status, settled.detail)
            return undefined
          }
          const store = write
            ? services.writerStore(settled.store, settled.guardedFor)
            : services.store(settled.store)
          return operation({ store, base: `/api/notebooks/${encodeURIComponent(nb)}` }, request)
        }
        if (target instanceof Promise) {
          return target.then((settled) => {
            const answer = run(settled)
            return answer === undefined ? reply : send(reply, answer)
          })
        }
        const answer = run(target)
        return answer === undefined ? undefined : send(reply, answer)
      }
    }
    const idOf = (request: FastifyRequest) =>
      parseNoteId((request.params as ArchiveParams).id ?? '')

    app.get(
      `${prefix}/note/:id/revisions`,
      scoped(false, ({ store, base }, request) => {
        const segment = (request.params as ArchiveParams).id ?? ''
        const path = `${base}/note/${encodeURIComponent(segment)}/revisions`
        return revisionsAnswer(store, idOf(request), queryOf(request.url), path)
      }),
    )
    app.get(
      `${prefix}/note/:id/revisions/:version`,
      scoped(false, ({ store }, request) =>
        revisionAnswer(
          store,
          idOf(request),
          (request.params as ArchiveParams).version ?? '',
          request.headers,
        ),
      ),
    )
    app.post(
      `${prefix}/note/:id/restore`,
      scoped(true, ({ store }, request) =>
        restoreAnswer(store, idOf(request), bodyFields(request), request.headers),
      ),
    )
    app.get(
      `${prefix}/trash`,
      scoped(false, ({ store, base }, request) =>
        trashAnswer(store, queryOf(request.url), `${base}/trash`),
      ),
    )
    app.delete(
      `${prefix}/trash`,
      scoped(true, ({ store }) => emptyTrashAnswer(store)),
    )
    app.post(
      `${prefix}/trash/:id/restore`,
      scoped(true, ({ store }, request) => untrashAnswer(store, idOf(request))),
    )
    app.delete(
      `${prefix}/trash/:id`,
      scoped(true, ({ store }, request) => purgeAnswer(store, idOf(request))),
    )
  }
}
