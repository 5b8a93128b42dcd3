import type { Access, AccessChange } from '../directory.js'

/** Memberships remembered at most; past it the oldest one filled is forgotten. */
const MAX_MEMBERSHIPS = 10_000

interface Membership {
  readonly access: Access
  /** The head of the log of changes of access in the snapshot the membership was read in. */
  readonly sequence: number
}

/**
 * What one instance remembers of who is a member of which notebook, and never a moment too long.
 * A membership read at log head S (the highest sequence of notes_access_changes in the same
 * snapshot) is used for a request only if a read of the head that BEGAN AFTER the request
 * arrived answers H, and either
 *   - H = S: no change of access at all was committed since it was read, or
 *   - H <= applied: this instance has applied every change up to H (each one forgets the
 *     memberships it touches), and the membership was filled at S >= applied, so every change
 *     after S reached it after it was kept.
 * Otherwise the exact query answers (and fills it again). A change acknowledged before a request
 * arrived is committed, so that request's head read sees it: no request on any instance is
 * answered for a role its member no longer holds.
 *
 * Reads of the head are shared: a request that arrives while one is under way waits for the next
 * one (the one under way may have begun before it arrived), so under load one tiny read serves
 * every request that arrived during the previous one.
 *
 * The changes come from the listener in order, each with its sequence; one that does not follow
 * the last one applied (the listener restarted from the head, or the log was trimmed past it)
 * forgets everything, as does close().
 *
 *   fill('n4Q...', 'bob', { role: 'editor', ... }, 41)   head 41 -> used
 *   a removal elsewhere commits 42; head 42, applied 41   -> the exact query (404)
 *   the listener applies 42 (forgets bob's)              -> the exact query (404)
 */
export class MemberCache {
  readonly #memberships = new Map<string, Membership>()
  readonly #readHead: () => Promise<number>
  /** The last change of access applied here, in order; undefined until one is. */
  #applied: number | undefined
  /** The read of the head under way. */
  #current: Promise<number> | undefined
  /** The read that begins once #current ends, for those who asked while it was under way. */
  #next: Promise<number> | undefined

  constructor(readHead: () => Promise<number>) {
    this.#readHead = readHead
  }

  /**
   * The membership of `user` in notebook `id` if this instance may answer with it now; undefined
   * when it does not know (not kept, or a change may have touched it): ask the database.
   */
  async vouch(id: string, user: string): Promise<Access | undefined> {
    const key = keyOf(id, user)
    if (!this.#memberships.has(key)) return undefined
    let head: number
    try {
      head = await this.#head()
    } catch {
      return undefined
    }
    // Read again: a change applied while the head was read may have forgotten it.
    const membership = this.#memberships.get(key)
    if (membership === undefined) return undefined
    if (head === membership.sequence) return membership.access
    const applied = this.#applied
    return applied !== undefined && head <= applied ? membership.access : undefined
  }

  /** Keeps what the exact query read in the snapshot whose log head was `sequence`. */
  fill(id: string, user: string, access: Access | undefined, sequence: number): void {
    const key = keyOf(id, user)
    // A change after `sequence` may have been applied before this membership was kept: it could
    // not forget it, so it is not kept.
    const applied = this.#applied
    if (access === undefined || (applied !== undefined && sequence < applied)) {
      this.#memberships.delete(key)
      return
    }
    if (this.#memberships.size >= MAX_MEMBERSHIPS && !this.#memberships.has(key)) {
      const oldest = this.#memberships.keys().next()
      if (oldest.done !== true) this.#memberships.delete(oldest.value)
    }
    this.#memberships.set(key, { access, sequence })
  }

  /** A change of access made here, committed: forgotten at once, before it is acknowledged. */
  forget(change: AccessChange): void {
    if (change.type === 'renamed') return
    this.#memberships.delete(keyOf(change.notebook, change.user))
  }

  /** Change `sequence` of the log, as the listener delivers them, in order. */
  apply(change: AccessChange, sequence: number): void {
    if (this.#applied === undefined || sequence !== this.#applied + 1) this.#memberships.clear()
    this.#applied = sequence
    this.forget(change)
  }

  /** Forgets everything: nothing tells this instance of changes any more. */
  clear(): void {
    this.#memberships.clear()
    this.#applied = undefined
  }

  /** The log's head, read by a statement that begins after this call. */
  #head(): Promise<number> {
    if (this.#current === undefined) return this.#begin()
    if (this.#next === undefined) {
      const next = this.#current.then(
        () => this.#begin(),
        () => this.#begin(),
      )
      this.#next = next
    }
    return this.#next
  }

  #begin(): Promise<number> {
    this.#next = undefined
    const read = this.#readHead()
    this.#current = read
    const done = () => {
      if (this.#current === read) this.#current = undefined
    }
    read.then(done, done)
    return read
  }
}

/** 'n4Qv0b6mJx8y2kTqR1sZ3w' and 'bob' -> 'n4Qv0b6mJx8y2kTqR1sZ3w bob' (an id has no space). */
function keyOf(id: string, user: string): string {
  return `${id} ${user}`
}
