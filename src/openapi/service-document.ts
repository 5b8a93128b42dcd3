import { needsAccessKey } from '../auth/access-keys.js'
import { RATE_LIMIT_EXEMPT } from '../ops/rate-limits.js'
import { apiDocsPaths } from './api-docs-paths.js'
import { archivePaths } from './archive-paths.js'
import { buildOpenApiDocument, type OpenApiDocument } from './document.js'
import { eventsPaths } from './event-paths.js'
import { filePaths } from './file-paths.js'
import { healthPaths } from './health-paths.js'
import { inNotebook } from './in-notebook.js'
import { metricsPaths } from './metrics-paths.js'
import { notePaths } from './note-paths.js'
import { notebookPaths } from './notebook-paths.js'
import { notesPagePaths } from './notes-page-paths.js'
import { uploadPaths } from './upload-paths.js'

export interface ServiceDescriptionOptions {
  /** The service's version, for `info.version`. */
  version: string
  /** Whether `/metrics` is served. */
  metrics: boolean
  /** Whether `/docs` is served. */
  docs: boolean
  /** Whether the notes page is served at `/`. */
  ui: boolean
  /** Whether access keys are on (API_KEYS, API_READ_KEYS): the security scheme, 401 and 403. */
  accessKeys: boolean
  /** Whether user tokens are on (AUTH_JWT_SECRET, AUTH_JWKS_URL): a notebook per user. */
  userTokens?: boolean
  /** Whether rate limits are on (RATE_LIMIT): 429. */
  rateLimits: boolean
  /** Whether CORS is on (CORS_ORIGIN). */
  cors: boolean
  /** Whether load shedding is on (MAX_EVENT_LOOP_DELAY_MS). */
  loadShedding: boolean
}

const REVOKED =
  'A member who loses read access to the notebook (removed, left, or the notebook deleted) gets `event: revoked` with `data: {"notebook":"<id>"}`, and the stream ends, on every instance. A member who keeps read access (demoted to viewer) keeps their stream.'

/**
 * The OpenAPI document of the service as app.ts puts it together: the paths of each part that is
 * on, as each part describes them, and what access keys and rate limits add to them.
 */
export function describeService(options: ServiceDescriptionOptions): OpenApiDocument {
  const userTokens = options.userTokens === true
  return buildOpenApiDocument({
    version: options.version,
    paths: [
      notePaths(),
      archivePaths(),
      filePaths(),
      uploadPaths(),
      eventsPaths({ allNotebooks: userTokens }),
      userTokens ? notebookPaths() : {},
      // `me` is served without user tokens too: the shared notebook.
      inNotebook(notePaths(), { userTokens }),
      inNotebook(archivePaths(), { userTokens }),
      inNotebook(filePaths(), { userTokens, notFound: 'FileOrNotebookNotFound' }),
      inNotebook(uploadPaths(), { userTokens, notFound: 'UploadOrNotebookNotFound' }),
      inNotebook(eventsPaths(), { userTokens, more: userTokens ? REVOKED : undefined }),
      healthPaths(),
      apiDocsPaths({ ui: options.docs }),
      options.metrics ? metricsPaths() : {},
      options.ui ? notesPagePaths() : {},
    ],
    accessKeys:
      options.accessKeys || options.userTokens === true ? { guards: needsAccessKey } : undefined,
    userTokens,
    serviceKeys: options.accessKeys,
    rateLimits: options.rateLimits ? { exempt: RATE_LIMIT_EXEMPT } : undefined,
    cors: options.cors,
    loadShedding: options.loadShedding,
  })
}
