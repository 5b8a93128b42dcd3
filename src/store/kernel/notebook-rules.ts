import { createHash, randomBytes } from 'node:crypto'
import { type Refusal, type Role, roleRank } from '../directory.js'

/*
 * The rules of members and roles, decided on a snapshot of one notebook's members, so that
 * every directory (memory, the journal's, PostgreSQL's inside its transaction) decides alike.
 * Each answers the refusal, or undefined when the act may go ahead.
 */

/** One notebook's members as a rule reads them. */
export interface MembersSnapshot {
  /** Each member's role. */
  readonly roles: ReadonlyMap<string, Role>
  /** The user whose default notebook this is; undefined for any other notebook. */
  readonly defaultUser: string | undefined
}

const NOT_FOUND: Refusal = Object.freeze({ refused: 'not-found' })
const LAST_OWNER: Refusal = Object.freeze({ refused: 'last-owner' })
const DEFAULT_NOTEBOOK: Refusal = Object.freeze({ refused: 'default-notebook' })

export const NOT_FOUND_REFUSAL = NOT_FOUND

/** The actor needs at least `needs`: 'not-found' when not a member at all. */
export function needsRole(
  notebook: MembersSnapshot,
  actor: string,
  needs: Role,
): Refusal | undefined {
  const role = notebook.roles.get(actor)
  if (role === undefined) return NOT_FOUND
  return roleRank(role) >= roleRank(needs) ? undefined : { refused: 'forbidden', needs }
}

function owners(notebook: MembersSnapshot): number {
  let count = 0
  for (const role of notebook.roles.values()) if (role === 'owner') count++
  return count
}

/** PUT member: the actor (an owner) gives `user` the role `role`. */
export function canSetRole(
  notebook: MembersSnapshot,
  actor: string,
  user: string,
  role: Role,
  maxMembers: number,
): Refusal | undefined {
  const refusal = needsRole(notebook, actor, 'owner')
  if (refusal !== undefined) return refusal
  const current = notebook.roles.get(user)
  if (current === undefined) {
    return notebook.roles.size >= maxMembers ? membersFull(maxMembers) : undefined
  }
  if (current === 'owner' && role !== 'owner') {
    if (user === notebook.defaultUser) return DEFAULT_NOTEBOOK
    if (owners(notebook) === 1) return LAST_OWNER
  }
  return undefined
}

/** DELETE member: an owner removes `user`, or `user` leaves. */
export function canRemoveMember(
  notebook: MembersSnapshot,
  actor: string,
  user: string,
): Refusal | undefined {
  if (actor !== user) {
    const refusal = needsRole(notebook, actor, 'owner')
    if (refusal !== undefined) return refusal
  }
  const current = notebook.roles.get(user)
  if (current === undefined) return NOT_FOUND
  if (user === notebook.defaultUser) return DEFAULT_NOTEBOOK
  if (current === 'owner' && owners(notebook) === 1) return LAST_OWNER
  return undefined
}

/**
 * The role a redeemed invitation leaves its redeemer with: the higher of the one they hold and
 * the invitation's; undefined when they keep what they have (nothing to write).
 */
export function redeemedRole(current: Role | undefined, offered: Role): Role | undefined {
  if (current === undefined) return offered
  return roleRank(offered) > roleRank(current) ? offered : undefined
}

export function membersFull(maxMembers: number): Refusal {
  return {
    refused: 'full',
    detail: `This notebook has its maximum of ${maxMembers} members (MAX_MEMBERS). Remove a member to make room.`,
  }
}

/** Invitations one notebook keeps at most (spent, withdrawn and removed ones are not kept). */
export const MAX_INVITES = 1000

export function invitesFull(): Refusal {
  return {
    refused: 'full',
    detail: `This notebook has its maximum of ${MAX_INVITES} open invitations. Withdraw some to make room.`,
  }
}

export function notebooksFull(maxNotebooks: number): Refusal {
  return {
    refused: 'full',
    detail: `You own the maximum of ${maxNotebooks} notebooks (MAX_NOTEBOOKS_PER_USER), your default one included. Delete one to make room.`,
  }
}

/** A new notebook or invitation id: 128 random bits, base64url, 22 characters. */
export function randomId(): string {
  return randomBytes(16).toString('base64url')
}

/** A new invitation token: 192 random bits, base64url, 32 characters, shown once. */
export function randomToken(): string {
  return randomBytes(24).toString('base64url')
}

/** What the directory keeps of a token: its SHA-256, hex. A 192-bit secret needs no slow hash. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}
