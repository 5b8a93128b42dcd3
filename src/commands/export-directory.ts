import type { DirectoryRecord } from '../store/directory.js'
import { defaultStore, notebookStore, ROLES, type Role } from '../store/directory.js'
import { isNotebookName } from '../store/types.js'

/*
 * The directory in an export file: after the first line, a line {"directory":<count>} and that
 * many records, each a notebook, a member or an invitation (tokens only as their SHA-256), in the
 * order that rebuilds it (a notebook before its members and invitations):
 *   {"directory":3}
 *   {"t":"notebook","id":"n4Qv0b6mJx8y2kTqR1sZ3w","name":"Trip","store":"nb:n4Qv0b6mJx8y2kTqR1sZ3w"}
 *   {"t":"role","id":"n4Qv0b6mJx8y2kTqR1sZ3w","user":"ann","role":"owner"}
 *   {"t":"invite","id":"n4Q...","invite":"Zt3...","hash":"<64 hex>","role":"viewer","expires":1800000000000,"uses":1}
 * A default notebook's record names its user ("default":"ann") and its store is "user:ann".
 */

/** (3) -> '{"directory":3}' */
export function directoryLine(records: number): string {
  return JSON.stringify({ directory: records })
}

/** The count of a `{"directory":N}` line, or undefined for any other line. */
export function directoryCount(value: unknown): number | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const keys = Object.keys(value)
  if (keys.length !== 1 || keys[0] !== 'directory') return undefined
  const count = (value as { directory: unknown }).directory
  return Number.isSafeInteger(count) && (count as number) >= 0 ? (count as number) : undefined
}

const ID = /^[A-Za-z0-9_-]{1,64}$/
const HASH = /^[0-9a-f]{64}$/

const isText = (value: unknown, max: number): value is string =>
  typeof value === 'string' && value !== '' && [...value].length <= max && isNotebookName(value)

const isRole = (value: unknown): value is Role =>
  typeof value === 'string' && (ROLES as readonly string[]).includes(value)

/**
 * Checks the directory records of one file as they are read, each against the ones before it, and
 * at the end that every notebook keeps an owner (a default notebook, its own user).
 */
export class DirectoryCheck {
  readonly records: DirectoryRecord[] = []
  readonly #notebooks = new Map<string, { owners: number; default: string | undefined }>()
  readonly #stores = new Set<string>()
  readonly #members = new Map<string, Role>()
  readonly #hashes = new Set<string>()
  readonly #invites = new Set<string>()

  /** The record, or the problem with it ('an invitation of a notebook not listed before it'). */
  add(value: unknown): string | undefined {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return 'a directory record must be a JSON object.'
    }
    const record = value as Record<string, unknown>
    const { t, id } = record
    if (typeof id !== 'string' || !ID.test(id)) return 'a directory record needs a notebook id.'
    const fields = Object.keys(record).sort().join(',')
    if (t === 'notebook') {
      const { name, store } = record
      const owner = record.default
      if (fields !== (owner === undefined ? 'id,name,store,t' : 'default,id,name,store,t')) {
        return 'a notebook record has the fields t, id, name, store and, for a default one, default.'
      }
      if (this.#notebooks.has(id)) return `notebook ${id} appears a second time.`
      if (!isText(name, 200)) return 'a notebook name is 1 to 200 characters of well-formed text.'
      if (owner !== undefined && !isText(owner, 255)) return 'a default notebook names its user.'
      const expected = owner === undefined ? notebookStore(id) : defaultStore(owner as string)
      if (store !== expected || this.#stores.has(expected)) {
        return `notebook ${id} must keep its notes as ${JSON.stringify(expected)}, once.`
      }
      this.#stores.add(expected)
      this.#notebooks.set(id, { owners: 0, default: owner as string | undefined })
      this.records.push({
        t,
        id,
        name,
        store: expected,
        ...(owner === undefined ? {} : { default: owner as string }),
      })
      return undefined
    }
    const notebook = this.#notebooks.get(id)
    if (notebook === undefined)
      return `a record of notebook ${id}, which no record before it makes.`
    if (t === 'role') {
      const { user, role } = record
      if (fields !== 'id,role,t,user') return 'a member record has the fields t, id, user and role.'
      if (!isText(user, 255) || !isRole(role)) return 'a member record names a user and a role.'
      const key = `${id}\n${user}`
      if (this.#members.has(key))
        return `user ${JSON.stringify(user)} is listed twice in notebook ${id}.`
      if (notebook.default === user && role !== 'owner') {
        return `the user of default notebook ${id} must be its owner.`
      }
      this.#members.set(key, role)
      if (role === 'owner') notebook.owners++
      this.records.push({ t, id, user, role })
      return undefined
    }
    if (t === 'invite') {
      const { invite, hash, role, expires, uses } = record
      if (fields !== 'expires,hash,id,invite,role,t,uses') {
        return 'an invitation record has the fields t, id, invite, hash, role, expires and uses.'
      }
      if (typeof invite !== 'string' || !ID.test(invite) || this.#invites.has(`${id}\n${invite}`)) {
        return 'an invitation record needs an id of its own.'
      }
      if (typeof hash !== 'string' || !HASH.test(hash) || this.#hashes.has(hash)) {
        return 'an invitation keeps its token as a SHA-256 in lowercase hex, one per invitation.'
      }
      if (
        !isRole(role) ||
        !Number.isSafeInteger(expires) ||
        !Number.isSafeInteger(uses) ||
        (uses as number) < 1
      ) {
        return 'an invitation record has a role, an expiry in ms and 1 or more uses.'
      }
      this.#invites.add(`${id}\n${invite}`)
      this.#hashes.add(hash)
      this.records.push({
        t,
        id,
        invite,
        hash,
        role,
        expires: expires as number,
        uses: uses as number,
      })
      return undefined
    }
    return `a directory record of type ${JSON.stringify(t)}; an export holds notebook, role and invite records.`
  }

  /** Once every record is read: the notebook left without an owner, if one is. */
  finish(): string | undefined {
    for (const [id, notebook] of this.#notebooks) {
      if (notebook.owners === 0) return `notebook ${id} has no owner.`
      if (
        notebook.default !== undefined &&
        this.#members.get(`${id}\n${notebook.default}`) !== 'owner'
      ) {
        return `the user of default notebook ${id} must be its owner.`
      }
    }
    return undefined
  }
}
