import {
  DEFAULT_INVITE_S,
  MAX_INVITE_S,
  MAX_INVITE_USES,
  MAX_NAME,
  MAX_SUB,
} from '../api/notebook-routes.js'
import { envelope, schema } from './parts.js'

/** A member's role, as every schema here names it. */
const ROLE = {
  type: 'string',
  enum: ['owner', 'editor', 'viewer'],
  description:
    '`owner`: everything, members, invitations, rename, delete. `editor`: read and write notes. `viewer`: read, list, search, export, follow.',
}

const ID = { type: 'string', pattern: '^[A-Za-z0-9_-]{22,}$' }

/** The schemas of notebooks, members and invitations. */
export function notebookSchemas(): Record<string, unknown> {
  const object = (properties: Record<string, unknown>, examples: unknown[]) => ({
    type: 'object',
    required: Object.keys(properties),
    properties,
    additionalProperties: false,
    examples,
  })
  const invite = {
    id: ID,
    role: ROLE,
    expires: {
      type: 'string',
      format: 'date-time',
      description: 'When it stops working (RFC 3339).',
    },
    uses: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_INVITE_USES,
      description: 'How many more times it can be redeemed.',
    },
  }
  const inviteExample = {
    id: 'b2VdT1kq9Xx0aZ4mP7rS8w',
    role: 'editor',
    expires: '2027-01-22T08:00:00.000Z',
    uses: 1,
  }
  return {
    Notebook: object(
      {
        id: { ...ID, description: 'Opaque, URL-safe, at least 128 random bits.' },
        name: { type: 'string', minLength: 1, maxLength: MAX_NAME },
        role: { ...ROLE, description: "The caller's role in it." },
        members: { type: 'integer', minimum: 1, description: 'How many members it has.' },
      },
      [{ id: 'n4Qv0b6mJx8y2kTqR1sZ3w', name: 'My notes', role: 'owner', members: 1 }],
    ),
    Member: object(
      {
        user: { type: 'string', minLength: 1, maxLength: MAX_SUB, description: 'Their `sub`.' },
        role: ROLE,
      },
      [{ user: 'bob', role: 'editor' }],
    ),
    Invite: object(invite, [inviteExample]),
    NewInvite: object(
      {
        ...invite,
        token: {
          type: 'string',
          description:
            'Shown in this answer alone (the service keeps only its hash): send it to `POST /api/invites/{token}`.',
        },
      },
      [{ ...inviteExample, token: 'Zx3k9QmT0bLw7yVn2cRf5hJ8sDa4uGe1' }],
    ),
    NotebookEnvelope: envelope(schema('Notebook')),
    NotebookListEnvelope: envelope({ type: 'array', items: schema('Notebook') }),
    MemberEnvelope: envelope(schema('Member')),
    MemberListEnvelope: envelope({ type: 'array', items: schema('Member') }),
    InviteListEnvelope: envelope({ type: 'array', items: schema('Invite') }),
    NewInviteEnvelope: envelope(schema('NewInvite')),
    NotebookName: object(
      {
        name: {
          type: 'string',
          minLength: 1,
          maxLength: MAX_NAME,
          description: 'Not only spaces.',
        },
      },
      [{ name: 'Trip' }],
    ),
    MemberRole: object({ role: ROLE }, [{ role: 'viewer' }]),
    InviteRequest: {
      type: 'object',
      required: ['role'],
      properties: {
        role: ROLE,
        expires_in: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_INVITE_S,
          default: DEFAULT_INVITE_S,
          description: 'Seconds until it stops working: 7 days when left out, at most 30 days.',
        },
        uses: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_INVITE_USES,
          default: 1,
          description: 'How many times it can be redeemed.',
        },
      },
      additionalProperties: false,
      examples: [{ role: 'editor' }, { role: 'viewer', expires_in: 3600, uses: 5 }],
    },
  }
}

/** The headers only these routes answer. */
export function notebookHeaders(): Record<string, unknown> {
  return {
    NoStore: {
      description: '`no-store`: who may see a notebook can change at any time.',
      required: true,
      schema: { type: 'string', const: 'no-store' },
    },
  }
}
