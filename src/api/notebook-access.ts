import type { Directory, Role } from '../store/directory.js'
import type { MaybePromise } from '../store/types.js'

/** In a path, the caller's own default notebook: `/api/notebooks/me/note` is `/api/note`. */
export const MY_NOTEBOOK = 'me'

/**
 * The 404 of a notebook the caller is not a member of, word for word the 404 of one that does not
 * exist: nothing tells the two apart.
 */
export const NO_NOTEBOOK = 'No notebook has this id, or you are not one of its members.'

/** 'editor' -> 'Writing here needs the editor role in this notebook; you are a viewer.' */
export function needsRoleDetail(needs: Role, role: Role): string {
  return `This needs the ${needs} role in this notebook; you are ${role === 'editor' ? 'an' : 'a'} ${role}.`
}

/** Where a request on `/api/notebooks/:nb/...` goes: the notebook's notes, and as whom. */
export interface Target {
  /** The notebook's id as the path spelled it (`me` included). */
  readonly id: string
  /** Its store name in Notebooks. */
  readonly store: string
  readonly role: Role
  /**
   * The member whose writes must be checked again as they are applied, or undefined when they
   * cannot lose access (the caller's own default notebook, a service key's shared one).
   */
  readonly guardedFor: string | undefined
  /** Where the caller's membership began (Access.since), when it is known. */
  readonly since?: string | undefined
}

export interface Refused {
  readonly status: 403 | 404
  readonly detail: string
}

/**
 * The target of a request on notebook `nb`: `me` is the caller's default notebook (the shared one
 * for a service key); any other id needs a user token whose user is a member (else 404, as for a
 * notebook that does not exist), and a write needs an editor or owner (else 403).
 */
export function targetOf(
  request: { readonly notebook: string; readonly user?: string | undefined },
  nb: string,
  directory: Directory | undefined,
  write: boolean,
): MaybePromise<Target | Refused> {
  if (nb === MY_NOTEBOOK) {
    return { id: nb, store: request.notebook, role: 'owner', guardedFor: undefined }
  }
  const { user } = request
  if (user === undefined || directory === undefined) return { status: 404, detail: NO_NOTEBOOK }
  const decide = (access: Awaited<ReturnType<Directory['access']>>): Target | Refused => {
    if (access === undefined) return { status: 404, detail: NO_NOTEBOOK }
    if (write && access.role === 'viewer') {
      return { status: 403, detail: needsRoleDetail('editor', access.role) }
    }
    const own = access.store === request.notebook
    const { store, role, since } = access
    return { id: nb, store, role, guardedFor: own ? undefined : user, since }
  }
  const access = directory.access(user, nb)
  return access instanceof Promise ? access.then(decide) : decide(access)
}

export function isRefused(value: Target | Refused): value is Refused {
  return 'status' in value
}
