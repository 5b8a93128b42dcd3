import { NO_NOTEBOOK } from '../api/notebook-access.js'
import {
  MAX_INVITE_S,
  MAX_INVITE_USES,
  MAX_NAME,
  MAX_SUB,
  NOTEBOOKS_PATH,
  REDEEMS_PER_MINUTE,
  ROLE_DETAIL,
  SERVICE_KEY_DETAIL,
} from '../api/notebook-routes.js'
import { MAX_INVITES } from '../store/kernel/notebook-rules.js'
import { NOTEBOOK_PARAMETER } from './in-notebook.js'
import {
  header,
  jsonResponse,
  type Operation,
  type Paths,
  parameter,
  pathParameter,
  problemResponse,
  requestIdHeader,
  response,
  schema,
} from './parts.js'

const NOTEBOOK = `${NOTEBOOKS_PATH}/{nb}`

/**
 * The notebooks, their members and their invitations (notebook-routes.ts): served only with user
 * tokens on. The notes of a notebook are in-notebook.ts's; the schemas notebook-schemas.ts's.
 */
export function notebookPaths(): Paths {
  return {
    [NOTEBOOKS_PATH]: {
      description: "The caller's notebooks: every one they are a member of.",
      get: listNotebooks(),
      post: createNotebook(),
    },
    [NOTEBOOK]: {
      description: 'One notebook the caller is a member of; `me` is their default one.',
      get: getNotebook(),
      patch: renameNotebook(),
      delete: deleteNotebook(),
    },
    [`${NOTEBOOK}/members`]: {
      description: "The notebook's members and their roles.",
      get: listMembers(),
    },
    [`${NOTEBOOK}/members/{user}`]: {
      description: 'One member, named by their `sub`.',
      put: setMember(),
      delete: removeMember(),
    },
    [`${NOTEBOOK}/invites`]: {
      description: "The notebook's open invitations.",
      get: listInvites(),
      post: createInvite(),
    },
    [`${NOTEBOOK}/invites/{id}`]: {
      description: 'One invitation, named by its `id`.',
      delete: withdrawInvite(),
    },
    '/api/invites/{token}': {
      description: 'An invitation, named by its token.',
      post: redeemInvite(),
    },
  }
}

const NB = NOTEBOOK_PARAMETER
const REQUEST_ID = parameter('RequestId')
const USER = pathParameter(
  'user',
  `The member's \`sub\` (1 to ${MAX_SUB} characters), whether or not they ever signed in.`,
  ['auth0|5f7c8ec7c33c6c004bbafe82'],
)
const INVITE_ID = pathParameter('id', "The invitation's `id`, as its list gives it.", [
  'b2VdT1kq9Xx0aZ4mP7rS8w',
])

/** What every one of these routes can answer besides its own. */
const COMMON = {
  '503': problemResponse(
    "The PostgreSQL store cannot reach its database, or the identity provider's keys cannot be fetched now (AUTH_JWKS_URL); nothing was changed. Retry after Retry-After.",
    503,
    'The database cannot be reached right now. Retry in 1 s.',
    { 'Retry-After': header('RetryAfter') },
  ),
}

const serviceKey = (also = '') =>
  problemResponse(
    `A service key, not a user token: notebooks belong to users.${also}`,
    403,
    SERVICE_KEY_DETAIL,
  )

const ownerOnly = () =>
  problemResponse(
    'The caller is a member but not an owner of the notebook, or calls with a service key (notebooks belong to users); nothing was changed.',
    403,
    'Only an owner of this notebook may do this.',
  )

const notFound = () => response('NotebookNotFound')

const badBody = (what: string, detail: string) => ({
  '400': problemResponse(
    `${what} The body is not valid JSON or not an object, or holds a field not listed.`,
    400,
    detail,
  ),
  '413': response('PayloadTooLarge'),
  '415': response('UnsupportedMediaType'),
})

const NAME_DETAIL = `name must be a string of 1 to ${MAX_NAME} characters, not only spaces.`

const noContent = (description: string) => ({ description, headers: requestIdHeader })

const dataResponse = (description: string, data: string) => ({
  ...jsonResponse(description, schema(data)),
  headers: { ...requestIdHeader, 'Cache-Control': header('NoStore') },
})

const body = (name: string, description: string) => ({
  required: true,
  description,
  content: { 'application/json': { schema: schema(name) } },
})

function operation(
  operationId: string,
  summary: string,
  description: string,
  parameters: unknown[],
  responses: Record<string, unknown>,
  requestBody?: unknown,
): Operation {
  return {
    tags: ['notebooks'],
    operationId,
    summary,
    description,
    parameters: [...parameters, REQUEST_ID],
    ...(requestBody === undefined ? {} : { requestBody }),
    responses: { ...responses, ...COMMON },
  }
}

function listNotebooks(): Operation {
  return operation(
    'listNotebooks',
    'List my notebooks',
    'Every notebook the caller is a member of: their default notebook first (made at their first request), then the others in the order they joined them.',
    [],
    {
      '200': dataResponse('The notebooks.', 'NotebookListEnvelope'),
      '403': serviceKey(),
    },
  )
}

function createNotebook(): Operation {
  return operation(
    'createNotebook',
    'Make a notebook',
    'A new notebook with the caller as its only member and owner. `MAX_NOTEBOOKS_PER_USER` caps the notebooks one user owns, their default one included.',
    [],
    {
      '201': {
        ...dataResponse('The notebook made; `Location` is its path.', 'NotebookEnvelope'),
        headers: {
          ...requestIdHeader,
          'Cache-Control': header('NoStore'),
          Location: {
            description: 'The path of the new notebook: `/api/notebooks/<id>`.',
            required: true,
            schema: { type: 'string', pattern: '^/api/notebooks/[A-Za-z0-9_-]+$' },
          },
        },
      },
      ...badBody(`\`name\` is not 1 to ${MAX_NAME} characters of well-formed text.`, NAME_DETAIL),
      '403': serviceKey(),
      '507': problemResponse(
        'The caller owns `MAX_NOTEBOOKS_PER_USER` notebooks already; nothing was made.',
        507,
        'You own the maximum of 100 notebooks (MAX_NOTEBOOKS_PER_USER), your default one included. Delete one to make room.',
      ),
    },
    body('NotebookName', 'The name of the notebook.'),
  )
}

function getNotebook(): Operation {
  return operation(
    'getNotebook',
    'Get a notebook',
    'The notebook as `GET /api/notebooks` lists it; any member may read it.',
    [NB],
    {
      '200': dataResponse('The notebook.', 'NotebookEnvelope'),
      '403': serviceKey(),
      '404': notFound(),
    },
  )
}

function renameNotebook(): Operation {
  return operation(
    'renameNotebook',
    'Rename a notebook',
    'Gives the notebook a new name (owner).',
    [NB],
    {
      '200': dataResponse('The notebook with its new name.', 'NotebookEnvelope'),
      ...badBody(`\`name\` is not 1 to ${MAX_NAME} characters of well-formed text.`, NAME_DETAIL),
      '403': ownerOnly(),
      '404': notFound(),
    },
    body('NotebookName', 'The new name.'),
  )
}

function deleteNotebook(): Operation {
  return operation(
    'deleteNotebook',
    'Delete a notebook',
    "Removes the notebook with every note and invitation in it (owner). Every member's open streams of it get `event: revoked` and end; from this answer on, it is a 404 for everyone. A user's default notebook cannot be deleted.",
    [NB],
    {
      '204': noContent('The notebook is gone. No body.'),
      '403': ownerOnly(),
      '404': notFound(),
      '409': problemResponse(
        "The notebook is the caller's default one: it cannot be deleted.",
        409,
        "A user's default notebook is theirs for good: it cannot be deleted, and they cannot leave it or lose its ownership.",
      ),
    },
  )
}

function listMembers(): Operation {
  return operation(
    'listMembers',
    'List members',
    'Every member with their role, in the order they joined; any member may list them.',
    [NB],
    {
      '200': dataResponse('The members.', 'MemberListEnvelope'),
      '403': serviceKey(),
      '404': notFound(),
    },
  )
}

const LAST_OWNER = problemResponse(
  'The change would leave the notebook without an owner, or take a default notebook from its owner; nothing was changed.',
  409,
  'A notebook keeps at least one owner: make another member an owner first.',
)

function setMember(): Operation {
  return operation(
    'setMember',
    'Add a member, or change their role',
    "Adds the user to the notebook with this role, or gives a member this role (owner). A demoted member's next request answers for the new role (a viewer's write is 403); a stream they have open stays, as a viewer may follow. `MAX_MEMBERS` caps the members of a notebook, its owners included.",
    [NB, USER],
    {
      '200': dataResponse('The member with their role.', 'MemberEnvelope'),
      ...badBody(
        '`role` is not `owner`, `editor` or `viewer`, or `user` is not a sub.',
        ROLE_DETAIL,
      ),
      '403': ownerOnly(),
      '404': notFound(),
      '409': LAST_OWNER,
      '507': problemResponse(
        'The notebook has `MAX_MEMBERS` members already; nobody was added.',
        507,
        'This notebook has its maximum of 100 members (MAX_MEMBERS). Remove a member to make room.',
      ),
    },
    body('MemberRole', 'The role to give.'),
  )
}

function removeMember(): Operation {
  return operation(
    'removeMember',
    'Remove a member, or leave',
    'Removes a member (owner), or the caller themself (any member: leaving). From this answer on the notebook is a 404 for them, and their open streams of it get `event: revoked` and end.',
    [NB, USER],
    {
      '204': noContent('They are no longer a member. No body.'),
      '403': ownerOnly(),
      '404': notFound(),
      '409': LAST_OWNER,
    },
  )
}

function listInvites(): Operation {
  return operation(
    'listInvites',
    'List invitations',
    'The invitations that can still be redeemed, oldest first, without their tokens (owner).',
    [NB],
    {
      '200': dataResponse('The invitations.', 'InviteListEnvelope'),
      '403': ownerOnly(),
      '404': notFound(),
    },
  )
}

function createInvite(): Operation {
  return operation(
    'createInvite',
    'Make an invitation',
    `A link to join the notebook with a role (owner). Its \`token\` is in this answer alone: the service keeps only its hash. It can be redeemed \`uses\` times until \`expires\`, by any signed-in user (\`POST /api/invites/{token}\`). A notebook holds at most ${MAX_INVITES} open invitations.`,
    [NB],
    {
      '201': dataResponse('The invitation, with its token.', 'NewInviteEnvelope'),
      ...badBody(
        `\`role\` is not a role, \`expires_in\` not a whole number from 1 to ${MAX_INVITE_S}, or \`uses\` not one from 1 to ${MAX_INVITE_USES}.`,
        `expires_in must be a whole number of seconds from 1 to ${MAX_INVITE_S} (30 days); it is 7 days when left out.`,
      ),
      '403': ownerOnly(),
      '404': notFound(),
      '507': problemResponse(
        `The notebook has ${MAX_INVITES} open invitations already; nothing was made.`,
        507,
        `This notebook has its maximum of ${MAX_INVITES} open invitations. Withdraw some to make room.`,
      ),
    },
    body('InviteRequest', 'The role it gives, and how long and how often it works.'),
  )
}

function withdrawInvite(): Operation {
  return operation(
    'withdrawInvite',
    'Withdraw an invitation',
    'The invitation stops working at once (owner); redeeming its token is then a 404.',
    [NB, INVITE_ID],
    {
      '204': noContent('The invitation is withdrawn. No body.'),
      '403': ownerOnly(),
      '404': problemResponse(
        'No notebook has this id, or the caller is not a member; or it has no invitation with this id.',
        404,
        NO_NOTEBOOK,
      ),
    },
  )
}

function redeemInvite(): Operation {
  return operation(
    'redeemInvite',
    'Join with an invitation',
    `The caller joins the notebook with the invitation's role (a member already there keeps the higher of the two), and the invitation has one use fewer. At most ${REDEEMS_PER_MINUTE} tries a minute per user.`,
    [
      pathParameter('token', 'The token the invitation was made with.', [
        'Zx3k9QmT0bLw7yVn2cRf5hJ8sDa4uGe1',
      ]),
    ],
    {
      '200': dataResponse(
        'The notebook joined, as `GET /api/notebooks` lists it.',
        'NotebookEnvelope',
      ),
      '403': serviceKey(' A service key cannot join a notebook.'),
      '404': problemResponse(
        'The token is unknown, expired, used up or withdrawn.',
        404,
        'This invitation is unknown, expired, used up or withdrawn; ask for a new link.',
      ),
      '429': problemResponse(
        `The caller tried ${REDEEMS_PER_MINUTE} invitations this minute already; nothing was tried.`,
        429,
        `At most ${REDEEMS_PER_MINUTE} invitations may be tried per minute; retry in 42 s.`,
        { 'Retry-After': header('RetryAfter') },
      ),
      '507': problemResponse(
        'The notebook has its maximum of members (MAX_MEMBERS); the caller did not join.',
        507,
        'This notebook has its maximum of 100 members (MAX_MEMBERS). Remove a member to make room.',
      ),
    },
  )
}
