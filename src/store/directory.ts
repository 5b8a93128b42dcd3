/** As types.ts's: a directory of a networked backend answers with promises. */
type MaybePromise<T> = T | Promise<T>

/*
 * Who may see which notebook: the directory of notebooks, their members and their invitations.
 * The notes of a notebook live in the Notebooks of the same backend under the notebook's `store`
 * name; the directory says who reaches them and how. Every act takes the acting user and checks
 * the rules (notebook-rules.ts) in the same atomic step as its change, so that no act is applied
 * under a role its actor no longer holds.
 */

/** What a member may do: `viewer` reads, `editor` also writes notes, `owner` also manages. */
export type Role = 'owner' | 'editor' | 'viewer'

export const ROLES: readonly Role[] = ['owner', 'editor', 'viewer']

/** 'viewer' < 'editor' < 'owner' */
export function roleRank(role: Role): number {
  return role === 'owner' ? 2 : role === 'editor' ? 1 : 0
}

/** A notebook as its member lists it: `GET /api/notebooks` answers these. */
export interface NotebookView {
  /** Opaque, URL-safe, 128 random bits: 'n4Qv0b6mJx8y2kTqR1sZ3w'. */
  readonly id: string
  readonly name: string
  /** The caller's role in it. */
  readonly role: Role
  /** How many members it has, the caller included. */
  readonly members: number
}

/** Where a member's requests on a notebook go, and what they may do there. */
export interface Access {
  readonly id: string
  /** The name of its notes in Notebooks: 'user:alice' for alice's default, 'nb:<id>' otherwise. */
  readonly store: string
  readonly role: Role
  /**
   * Where this membership began: the version token of the notebook's notes when the user became a
   * member, read in the same step as the join (the `version` of its `joined`), kept while their
   * role changes. The changes after it are the ones made while they are a member; one before it
   * may be from a time they were not. Absent when not known (a membership an older release
   * recorded, or brought by an import), and for the user's own default notebook, theirs from its
   * making.
   */
  readonly since?: string
}

export interface Member {
  /** The member's `sub`. */
  readonly user: string
  readonly role: Role
}

/** An invitation as its notebook's owners list it: never its token. */
export interface Invite {
  readonly id: string
  readonly role: Role
  /** When it stops working, ms since 1970. */
  readonly expires: number
  /** How many more times it can be redeemed. */
  readonly uses: number
}

/** An invitation just made: its token, shown this once (the directory keeps only its hash). */
export interface NewInvite extends Invite {
  readonly token: string
}

/**
 * Why an act was refused; nothing changed.
 * - 'not-found': no such notebook, member or invitation, or the actor is not a member (the two
 *   are never told apart);
 * - 'forbidden': the actor's role is not enough (`needs` says which it needs);
 * - 'last-owner': the act would leave the notebook without an owner;
 * - 'default-notebook': a user's default notebook cannot be removed, nor left by that user;
 * - 'full': a cap (notebooks a user owns, members of a notebook); `detail` says which.
 */
export type Refusal =
  | { readonly refused: 'not-found' }
  | { readonly refused: 'forbidden'; readonly needs: Role }
  | { readonly refused: 'last-owner' }
  | { readonly refused: 'default-notebook' }
  | { readonly refused: 'full'; readonly detail: string }

export function isRefusal(value: unknown): value is Refusal {
  return typeof value === 'object' && value !== null && 'refused' in value
}

/**
 * A change of who may see a notebook, as every instance hears of it (subscribe):
 * - 'joined': `user` became a member (added, or by an invitation); `version` is the version token
 *   of the notebook's notes at that moment, read in the same step as the join: the changes after
 *   it are the ones made while they are a member (absent only from a change an older release
 *   recorded);
 * - 'role': `user`'s role changed to `role`;
 * - 'left': `user` is no longer a member (removed, left, or the notebook was deleted);
 * - 'renamed': the notebook is now called `name`.
 */
export type AccessChange =
  | {
      readonly type: 'joined'
      readonly notebook: string
      readonly user: string
      readonly version?: string | undefined
    }
  | { readonly type: 'role'; readonly notebook: string; readonly user: string; readonly role: Role }
  | { readonly type: 'left'; readonly notebook: string; readonly user: string }
  | { readonly type: 'renamed'; readonly notebook: string; readonly name: string }

/** The caps of a directory: MAX_NOTEBOOKS_PER_USER and MAX_MEMBERS. */
export interface DirectoryLimits {
  /** Notebooks one user owns at most, their default one included. */
  readonly maxNotebooksPerUser: number
  /** Members one notebook has at most, its owners included. */
  readonly maxMembers: number
}

/**
 * The notebooks, members and invitations of one service, shared by every instance of its backend.
 * A user's default notebook exists from their first act (any method that takes a user makes it):
 * its store is 'user:' + sub, the notebook their `/api/note` means, and they own it for good.
 *
 * Every method that takes an `actor` acts as that user: a notebook the actor is not a member of is
 * 'not-found', exactly as one that does not exist. Ids are compared exactly; an id that is not one
 * of ours is 'not-found' (never an error).
 */
export interface Directory {
  /** The user's notebooks: their default first, then the others in the order they joined them. */
  list(user: string): MaybePromise<readonly NotebookView[]>
  /** The id of the user's default notebook. */
  defaultOf(user: string): MaybePromise<string>
  /** Where the user's requests on notebook `id` go, or undefined when they are not a member. */
  access(user: string, id: string): MaybePromise<Access | undefined>
  /** A new notebook owned by the actor alone ('full' past maxNotebooksPerUser). */
  create(actor: string, name: string): MaybePromise<NotebookView | Refusal>
  /** Renames it (owner). */
  rename(actor: string, id: string, name: string): MaybePromise<NotebookView | Refusal>
  /**
   * Removes it with every note and invitation in it (owner; not a default notebook): every member
   * hears 'left'. Answers the store name its notes were kept under.
   */
  remove(actor: string, id: string): MaybePromise<{ readonly store: string } | Refusal>
  /** Its members, in the order they joined (any member). */
  members(actor: string, id: string): MaybePromise<readonly Member[] | Refusal>
  /**
   * Adds `user` with `role` or changes their role (owner). Demoting the last owner is
   * 'last-owner'; the default notebook's own user stays its owner ('default-notebook').
   */
  setRole(actor: string, id: string, user: string, role: Role): MaybePromise<Member | Refusal>
  /**
   * Removes `user` (owner, or the actor themself: leaving). The last owner cannot go
   * ('last-owner'), nor a default notebook's own user ('default-notebook').
   */
  removeMember(actor: string, id: string, user: string): MaybePromise<true | Refusal>
  /** A new invitation (owner): `expires` in ms since 1970, `uses` at least 1. */
  invite(
    actor: string,
    id: string,
    invite: { role: Role; expires: number; uses: number },
  ): MaybePromise<NewInvite | Refusal>
  /** Its invitations still usable at `now`, oldest first, without tokens (owner). */
  invites(actor: string, id: string, now: number): MaybePromise<readonly Invite[] | Refusal>
  /** Withdraws one (owner): it can no longer be redeemed. */
  withdraw(actor: string, id: string, inviteId: string): MaybePromise<true | Refusal>
  /**
   * Joins the actor to the invitation's notebook with its role (a member keeps the higher of the
   * two) and spends one use. An unknown, expired, used-up or withdrawn token is 'not-found'.
   */
  redeem(actor: string, token: string, now: number): MaybePromise<NotebookView | Refusal>
  /**
   * Calls `listener` with every change of access from now on, in the order they were made,
   * including those made by other instances of a shared backend; answers the function that stops.
   */
  subscribe(listener: (change: AccessChange) => void): () => void
  /**
   * Resolves once every change of access made before the call, on any instance, has been heard by
   * this directory's subscribers. A directory whose subscribers hear each change before its act
   * answers (memory, a journal) leaves it out.
   */
  caughtUp?(): Promise<void>
}

/**
 * One change of the directory as it was made, enough to make it again (replay): a journal writes
 * these down, and a compaction writes the records that rebuild the whole directory (records()).
 *   { t: 'notebook', id: 'n4Q...', name: 'Trip', store: 'nb:n4Q...', default: undefined }
 */
export type DirectoryRecord =
  | {
      readonly t: 'notebook'
      readonly id: string
      readonly name: string
      readonly store: string
      /** The user whose default notebook it is. */
      readonly default?: string | undefined
    }
  | { readonly t: 'name'; readonly id: string; readonly name: string }
  | { readonly t: 'remove'; readonly id: string }
  | {
      readonly t: 'role'
      readonly id: string
      readonly user: string
      readonly role: Role
      /** A join's: where the membership began (Access.since); absent in older records. */
      readonly since?: string | undefined
    }
  | { readonly t: 'leave'; readonly id: string; readonly user: string }
  | {
      readonly t: 'invite'
      readonly id: string
      readonly invite: string
      readonly hash: string
      readonly role: Role
      readonly expires: number
      readonly uses: number
    }
  | { readonly t: 'spend'; readonly id: string; readonly invite: string }
  | { readonly t: 'withdraw'; readonly id: string; readonly invite: string }

/** 'user:alice': the store of alice's default notebook, the one her `/api/note` means. */
export function defaultStore(user: string): string {
  return `user:${user}`
}

/** The store of a notebook that is no one's default: 'nb:' and its id. */
export function notebookStore(id: string): string {
  return `nb:${id}`
}
