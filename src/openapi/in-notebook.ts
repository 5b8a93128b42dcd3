import { NO_FILE } from '../api/file-routes.js'
import { NO_NOTEBOOK, needsRoleDetail } from '../api/notebook-access.js'
import { NO_UPLOAD } from '../api/upload-routes.js'
import {
  type Operation,
  PATH_ITEM_METHODS,
  type PathItem,
  type Paths,
  pathParameter,
  problemResponse,
  response,
} from './parts.js'

export interface InNotebookOptions {
  /** Whether user tokens are on: members with roles, so a viewer's write is 403. */
  userTokens: boolean
  /** What each operation adds to its description in a notebook. */
  more?: string | undefined
  /**
   * What an operation's own 404 becomes in a notebook: by default NoteOrNotebookNotFound (a
   * note's empty 404, or the notebook's problem JSON); `FileOrNotebookNotFound` for the files.
   */
  notFound?: 'NoteOrNotebookNotFound' | 'FileOrNotebookNotFound' | 'UploadOrNotebookNotFound'
}

/** Methods that write: a viewer's request with one is 403. */
const WRITES = new Set(['post', 'put', 'patch', 'delete'])

/**
 * The same path items in the notebook the path names, as note-routes.ts and event-routes.ts
 * serve them: '/api/note/{id}' -> '/api/notebooks/{nb}/note/{id}', each operation with the `nb`
 * parameter first, the 404 of a notebook the caller is not in, and, with user tokens (members
 * with roles), the 403 of a viewer's write. What each operation answers is otherwise the same.
 */
export function inNotebook(paths: Paths, options: InNotebookOptions): Paths {
  const inside: Paths = {}
  for (const [path, item] of Object.entries(paths)) {
    const tail = path.replace(/^\/api\//, '')
    const moved: PathItem = {
      description:
        `${item.description ?? ''} In the notebook \`nb\` names: \`/api/${tail}\` is \`/api/notebooks/me/${tail}\`.`.trim(),
    }
    for (const method of PATH_ITEM_METHODS) {
      const operation = item[method]
      if (operation !== undefined) moved[method] = movedOperation(operation, method, options)
    }
    inside[`/api/notebooks/{nb}/${tail}`] = moved
  }
  return inside
}

function movedOperation(
  operation: Operation,
  method: string,
  options: InNotebookOptions,
): Operation {
  const responses: Record<string, unknown> = { ...operation.responses }
  // A missing note keeps its empty 404 (a missing file its problem); a missing notebook is problem JSON.
  responses['404'] =
    responses['404'] === undefined
      ? response('NotebookNotFound')
      : response(options.notFound ?? 'NoteOrNotebookNotFound')
  if (options.userTokens && WRITES.has(method)) responses['403'] = roleForbidden()
  const sorted = Object.fromEntries(
    Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)),
  )
  return {
    ...operation,
    ...(operation.operationId === undefined
      ? {}
      : { operationId: `${operation.operationId}InNotebook` }),
    ...(options.more === undefined
      ? {}
      : { description: `${operation.description ?? ''}\n\n${options.more}`.trim() }),
    parameters: [NOTEBOOK_PARAMETER, ...(operation.parameters ?? [])],
    responses: sorted,
  }
}

function roleForbidden() {
  return problemResponse(
    'The caller is a viewer of this notebook: writing needs the editor or owner role. Nothing was changed.',
    403,
    needsRoleDetail('editor', 'viewer'),
  )
}

/** The answers every path in a notebook shares. */
export function inNotebookResponses(): Record<string, unknown> {
  return {
    NotebookNotFound: problemResponse(
      'No notebook has this id, or the caller is not one of its members: the two answer alike, byte for byte. Without user tokens only `me` names a notebook.',
      404,
      NO_NOTEBOOK,
    ),
    // OpenAPI has no media type for "no body": `x-may-be-empty` says that the body may be absent.
    NoteOrNotebookNotFound: {
      ...problemResponse(
        'No note has this id: the body is empty (Content-Length 0, no Content-Type), as at `/api/note/{id}`. Or no notebook has this id, or the caller is not one of its members: problem JSON, the same for both.',
        404,
        NO_NOTEBOOK,
      ),
      'x-may-be-empty': true,
    },
    FileOrNotebookNotFound: problemResponse(
      "The notebook holds no file with this id (another notebook's file is not found here, whatever its bytes); or no notebook has this id, or the caller is not one of its members, which answer alike.",
      404,
      NO_FILE,
    ),
    UploadOrNotebookNotFound: problemResponse(
      "The notebook has no upload with this id (another notebook's upload is not found here); or no notebook has this id, or the caller is not one of its members, which answer alike.",
      404,
      NO_UPLOAD,
    ),
  }
}

/**
 * The path parameter naming a notebook. Inline, as note-paths.ts's `id`, so that the operations
 * methods.ts adds to the path (OPTIONS, the 405s) take it too.
 */
export const NOTEBOOK_PARAMETER = pathParameter(
  'nb',
  "The notebook: `me` for the caller's default notebook (the shared one for a service key, and for every request without user tokens), or a notebook id as `GET /api/notebooks` lists it. A notebook the caller is not a member of answers exactly as one that does not exist: 404.",
  ['me', 'n4Qv0b6mJx8y2kTqR1sZ3w'],
)
