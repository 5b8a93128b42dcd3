import assert from 'node:assert/strict'
import { Agent, request } from 'node:http'
import { parseJson } from '../../src/client/parse-json.js'
import { signed } from '../support/jwks-server.js'
import { SseClient } from '../support/sse-client.js'
import { FILE_KINDS, fileSteps } from './isolation-files.js'
import {
  accessMatches,
  type ChangeKey,
  changeKey,
  NOTE_EVENTS,
  noteEvents,
} from './isolation-streams.js'
import { createRandom, type Random } from './prng.js'

/** The secret the isolation run's service checks user tokens with. */
export const ISOLATION_SECRET = 'isolation-run-secret-of-32-bytes-or-more'
/** The service key of the run: it acts on the shared notebook. */
export const ISOLATION_SERVICE_KEY = 'isolation-run-service-key'

export interface IsolationOptions {
  host: string
  /** Instances of the service on one store: each request goes to one of them. */
  ports: readonly number[]
  seed: number
  /** Requests to send (the checks of each caller's list and stream at the end not counted). */
  requests: number
  /** Users, each with a token of their own; a service key is a caller too. */
  users: number
}

export interface IsolationStats {
  seed: number
  requests: number
  byStatus: Record<string, number>
  byKind: Record<string, number>
  /**
   * Answers to a request that named another caller's note, cursor, ETag, key or event id, or a
   * notebook the caller is not (or no longer) in.
   */
  crossings: number
  notesAtEnd: number
  /** Notebooks made, and how many were still there at the end. */
  notebooksMade: number
  notebooksAtEnd: number
  /** Members added, by a PUT or an invitation, and removed (by an owner, leaving, or deletion). */
  joins: number
  removals: number
  /** Member streams that were revoked, and the longest a revocation took from its removal, in ms. */
  revoked: number
  slowestRevokeMs: number
  /** Events the member streams and the all-notebooks streams carried, every one checked. */
  streamEvents: number
  /**
   * Changes made while a user was a member that their all-notebooks stream never sent: none is
   * a leak; the count is printed, not refused (a notebook joined an instant before a change may
   * be followed from just after it).
   */
  allStreamMissed: number
}

/** An answer broke the rule; the message says which request, so a seed replays it. */
export class IsolationFailure extends Error {
  constructor(seed: number, index: number, message: string) {
    super(`isolation request #${index} (seed ${seed}): ${message}`)
    this.name = 'IsolationFailure'
  }
}

type Role = 'owner' | 'editor' | 'viewer'
const ROLES: readonly Role[] = ['owner', 'editor', 'viewer']
const RANK: Readonly<Record<Role, number>> = { viewer: 0, editor: 1, owner: 2 }

interface Note {
  id: number
  owner: string
  mark: string
  n: number
}

interface Invite {
  id: string
  token: string
  role: Role
  expires: string
  uses: number
}

/** A notebook as the model says it must be. */
interface Notebook {
  /** What its notes' marks name: its user for a default notebook ('user-2', 'service'), else 'nb-7'. */
  tag: string
  /** Its id; '' for the service key's shared notebook, which no path names by id. */
  id: string
  name: string
  /** The user whose default notebook it is. */
  home: Caller | undefined
  /** Members by sub, in the order they joined; a ghost is a sub that never signs in. */
  members: Map<string, Role>
  notes: Map<number, Note>
  /** The epochs of the version tokens its answers gave: no non-member's answer may hold one. */
  epochs: Set<string>
  /** Invitations that can still be redeemed, in the order they were made. */
  invites: Map<string, Invite>
  gone: boolean
  /** Every change applied to its notes -> the index of the request that was answered for it. */
  changes: Map<ChangeKey, number>
  lastChange: ChangeKey | undefined
}

/** A stream of one notebook's feed, opened by a member once they joined. */
interface MemberStream {
  who: Caller
  notebook: Notebook
  client: SseClient
  /** The index of the request after which it was open. */
  opened: number
  /** The index of the request that removed its caller (or deleted the notebook), and when. */
  removed: number | undefined
  removedAt: number
  closedAt: number | undefined
}

/** One caller: a user with a token, or the service key. */
interface Caller {
  name: string
  authorization: string
  /** False for the service key: notebooks are for users. */
  user: boolean
  home: Notebook
  /** The notebooks it joined, its default apart, in the order it joined them. */
  joined: Notebook[]
  /** [joined, left] request indexes of each time it was a member of a notebook. */
  periods: Map<Notebook, [number, number][]>
  /** What its all-notebooks stream must tell of each notebook, in order: 'joined', 'left'. */
  access: Map<Notebook, string[]>
  etags: string[]
  versions: string[]
  cursors: string[]
  /** Idempotency keys it used on its default notebook, with the note each made. */
  keys: Map<string, Note>
  /** Idempotency keys it used on batches, with the document and the answer's body. */
  batchKeys: Map<string, { document: BatchDocument; body: string }>
  stream: SseClient | undefined
  all: SseClient | undefined
  /** When it tried invitations (ms): fewer than REDEEMS_PER_MINUTE in any minute. */
  redeems: number[]
}

/** A note's mark, which names its notebook: 'mark-user-2-17-4411' -> 'user-2', 'mark-nb-3-9-1' -> 'nb-3'. */
const MARK = /mark-(user-\d+|service|nb-\d+|madeup)-\d+-\d+/g

/** Invitation redemptions the run sends per user in any minute: the service allows 20. */
const REDEEMS_PER_MINUTE = 18
/** Notebooks the run keeps at once (made ones; deletion makes room): sharing stays dense. */
const MAX_LIVE_NOTEBOOKS = 8
/** Invitations a notebook holds at once in the run. */
const MAX_INVITES = 12
/** The longest a removed member's stream may take to end: 1 s, and the run's own event loop. */
const REVOKE_BOUND_MS = 1500

const problem = (status: number, title: string, detail: string): string =>
  JSON.stringify({ type: 'about:blank', title, status, detail })
const NO_NOTEBOOK = problem(
  404,
  'Not Found',
  'No notebook has this id, or you are not one of its members.',
)
const VIEWER = problem(
  403,
  'Forbidden',
  'This needs the editor role in this notebook; you are a viewer.',
)
const OWNER_ONLY = problem(403, 'Forbidden', 'Only an owner of this notebook may do this.')
const LAST_OWNER = problem(
  409,
  'Conflict',
  'A notebook keeps at least one owner: make another member an owner first.',
)
const DEFAULT_NOTEBOOK = problem(
  409,
  'Conflict',
  "A user's default notebook is theirs for good: it cannot be deleted, and they cannot leave it or lose its ownership.",
)
const SERVICE_KEY = problem(
  403,
  'Forbidden',
  'Notebooks belong to users: send a user token. A service key acts on the shared notebook at /api/note.',
)
const NO_INVITE = problem(
  404,
  'Not Found',
  'This invitation is unknown, expired, used up or withdrawn; ask for a new link.',
)

/** A batch document. */
interface BatchDocument {
  requests: { method: string; url: string; body?: Record<string, unknown> }[]
}

/** One answer of a kept batch. */
interface SubAnswer {
  status: number
  body: { data: unknown }
}

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** Where a note request goes: '/api' (the default notebook), '/api/notebooks/me' or by id. */
interface Place {
  /** The notebook the path names; undefined for a made-up id. */
  notebook: Notebook | undefined
  prefix: string
}

/** The headers two answers must share to be told apart by nothing: all but these. */
const PER_ANSWER = new Set(['date', 'x-request-id', 'connection', 'keep-alive'])
const headersOf = (answer: Answer): string =>
  JSON.stringify(
    Object.entries(answer.headers)
      .filter(([name]) => !PER_ANSWER.has(name))
      .sort(([a], [b]) => a.localeCompare(b)),
  )

/** What may be a version token's epoch: '2iukhpi1up.1' -> '2iukhpi1up'. */
const EPOCH = /(?<![0-9A-Za-z_-])([0-9a-z]{4,})\.(?=[0-9a-z])/g
/** What may be a notebook's id (22 characters of base64url), or an invitation's token (32). */
const NOTEBOOK_ID = /(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])/g
const INVITE_TOKEN = /(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32}(?![A-Za-z0-9_-])/g

const ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/**
 * The randomized isolation run: several users and a service key send a mix of creates, reads,
 * updates, deletes, lists, pages, searches and batches against a real service, in their default
 * notebooks and in shared ones (by `/api/notebooks/<id>/note...` and `me`), as owners, editors,
 * viewers and strangers, over everybody's ids, cursors, ETags, version tokens, idempotency keys
 * and event ids; and they make, rename and delete notebooks, add, change and remove members,
 * leave, and make, withdraw and redeem invitations; and upload, read, list and delete files and
 * try each other's resumable uploads (isolation-files.ts). A model of every notebook says each status
 * and body; no answer, header or event that a caller gets may hold anything of a notebook it is
 * not in at that moment (each note carries a mark naming its notebook, and every version an
 * answer gave is known to be its notebook's). A stranger's 404 is byte for byte the 404 of a
 * made-up id. Every member follows each shared notebook it is in (and its own, and all of them
 * on one stream): no event of a change made after a member's removal was answered reaches them,
 * and their stream gets `revoked` and ends.
 */
export async function runIsolation(options: IsolationOptions): Promise<IsolationStats> {
  const { host, ports, seed } = options
  const rng = createRandom(seed)
  const agent = new Agent({ keepAlive: true, maxSockets: 4 })
  const exp = Math.floor(Date.now() / 1000) + 24 * 3600
  const callers: Caller[] = []
  const byName = new Map<string, Caller>()
  const notebooks: Notebook[] = []
  const byTag = new Map<string, Notebook>()
  const memberStreams: MemberStream[] = []
  /** Every note id the service gave: none may be given twice. */
  const given = new Set<number>()
  const givenList: number[] = []
  /** What names a notebook in an answer: its id, its epochs, its invitations' tokens. */
  const byId = new Map<string, Notebook>()
  const byEpoch = new Map<string, Notebook>()
  const byToken = new Map<string, Notebook>()
  /** The one token an answer may hold: the invitation it made. */
  let shownToken: string | undefined
  /** Which notebook holds each note; deleted notes keep theirs. */
  const noteHome = new Map<number, Notebook>()
  /** Tokens of invitations withdrawn, used up or in a deleted notebook. */
  const deadTokens: string[] = []
  const deadInvites: { notebook: Notebook; id: string }[] = []
  let made = 0

  const notebook = (tag: string, id: string, name: string, home?: Caller): Notebook => {
    const made: Notebook = {
      tag,
      id,
      name,
      home,
      members: new Map(),
      notes: new Map(),
      epochs: new Set(),
      invites: new Map(),
      gone: false,
      changes: new Map(),
      lastChange: undefined,
    }
    notebooks.push(made)
    byTag.set(tag, made)
    if (id !== '') byId.set(id, made)
    return made
  }
  const caller = (name: string, authorization: string, user: boolean): Caller => {
    const made: Caller = {
      name,
      authorization,
      user,
      home: undefined as unknown as Notebook,
      joined: [],
      periods: new Map(),
      access: new Map(),
      etags: [],
      versions: [],
      cursors: [],
      keys: new Map(),
      batchKeys: new Map(),
      stream: undefined,
      all: undefined,
      redeems: [],
    }
    callers.push(made)
    byName.set(name, made)
    return made
  }
  for (let u = 0; u < options.users; u++) {
    const name = `user-${u}`
    const token = await signed(Buffer.from(ISOLATION_SECRET), { alg: 'HS256' }, { sub: name, exp })
    caller(name, `Bearer ${token}`, true)
  }
  const service = caller('service', `Bearer ${ISOLATION_SERVICE_KEY}`, false)
  service.home = notebook('service', '', '', service)
  service.home.members.set('service', 'owner')

  const stats: IsolationStats = {
    seed,
    requests: 0,
    byStatus: {},
    byKind: {},
    crossings: 0,
    notesAtEnd: 0,
    notebooksMade: 0,
    notebooksAtEnd: 0,
    joins: 0,
    removals: 0,
    revoked: 0,
    slowestRevokeMs: 0,
    streamEvents: 0,
    allStreamMissed: 0,
  }
  let index = 0
  const fail = (message: string): never => {
    throw new IsolationFailure(seed, index, message)
  }

  const send = (
    who: Caller,
    method: string,
    path: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ): Promise<Answer> => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body))
    const json = payload === undefined ? {} : { 'content-type': 'application/json' }
    return sendRaw(who, method, path, payload, { ...json, ...extra })
  }
  /** `payload` (or nothing) as the body, with these headers. */
  const sendRaw = (
    who: Caller,
    method: string,
    path: string,
    payload: Buffer | undefined,
    extra: Record<string, string>,
  ): Promise<Answer> => {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host,
          port: rng.pick(ports),
          method,
          path,
          agent,
          headers: {
            authorization: who.authorization,
            ...(payload === undefined ? {} : { 'content-length': payload.length }),
            ...extra,
          },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          )
          res.on('error', reject)
        },
      )
      req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${path}`)))
      req.on('error', reject)
      req.end(payload)
    })
  }

  const roleOf = (who: Caller, nb: Notebook | undefined): Role | undefined =>
    nb === undefined || nb.gone ? undefined : nb.members.get(who.name)

  /**
   * Nothing of a notebook the caller is not in, in this answer (body and every header): no note
   * marked with its tag, no version token of it, not its id.
   */
  const nothingOfOthers = (who: Caller, text: string, what: string): void => {
    for (const match of text.matchAll(MARK)) {
      const tag = match[1] as string
      if (roleOf(who, byTag.get(tag)) === undefined)
        fail(`${who.name} got ${match[0]} in ${what}: ${text.slice(0, 300)}`)
    }
    for (const match of text.matchAll(EPOCH)) {
      const nb = byEpoch.get(match[1] as string)
      if (nb !== undefined && roleOf(who, nb) === undefined) {
        fail(`${who.name} got ${nb.tag}'s version ${match[0]}* in ${what}: ${text.slice(0, 300)}`)
      }
    }
    for (const match of text.matchAll(NOTEBOOK_ID)) {
      const nb = byId.get(match[0])
      if (nb !== undefined && roleOf(who, nb) === undefined) {
        fail(`${who.name} got the id of ${nb.tag} in ${what}: ${text.slice(0, 300)}`)
      }
    }
    for (const match of text.matchAll(INVITE_TOKEN)) {
      const nb = byToken.get(match[0])
      if (nb !== undefined && match[0] !== shownToken) {
        fail(`${who.name} got a token of ${nb.tag}'s invitations in ${what}: ${text.slice(0, 300)}`)
      }
    }
  }
  const checkAnswer = (who: Caller, answer: Answer, what: string): void => {
    nothingOfOthers(who, answer.body, `the body of ${what}`)
    nothingOfOthers(who, JSON.stringify(answer.headers), `the headers of ${what}`)
  }
  /** Records what an answer gave its caller, so that another caller's answer may not hold it. */
  const learn = (who: Caller, nb: Notebook | undefined, answer: Answer): void => {
    const etag = answer.headers.etag
    if (typeof etag === 'string') who.etags.push(etag)
    const version = answer.headers['notes-version']
    if (typeof version === 'string' && nb !== undefined) {
      who.versions.push(version)
      const epoch = version.slice(0, version.lastIndexOf('.'))
      if (nb.epochs.size > 0 && !nb.epochs.has(epoch)) {
        fail(`${nb.tag}'s version ${version} is of another epoch than ${[...nb.epochs].join()}`)
      }
      nb.epochs.add(epoch)
      byEpoch.set(epoch, nb)
    }
    // A cursor is a position in the caller's own list (the same in any list): no secret, but
    // another caller's, sent, must still bring its sender's notes alone.
    const next = /<([^>]+)>; rel="next"/.exec(String(answer.headers.link ?? ''))?.[1]
    // A files list's cursor is a file id, in that caller's own list too: the note steps try
    // note cursors only.
    if (next !== undefined && !next.includes('/files')) who.cursors.push(next)
  }
  const sorted = (nb: Notebook): Note[] => [...nb.notes.values()].sort((a, b) => a.id - b.id)
  const other = (who: Caller): Caller => {
    let picked = rng.pick(callers)
    while (picked === who && callers.length > 1) picked = rng.pick(callers)
    return picked
  }
  const count = (kind: string, answer: Answer): void => {
    stats.byKind[kind] = (stats.byKind[kind] ?? 0) + 1
    stats.byStatus[answer.status] = (stats.byStatus[answer.status] ?? 0) + 1
  }
  const madeUpId = (): string =>
    Array.from({ length: 22 }, () => ID_CHARS[rng.int(ID_CHARS.length)]).join('')
  const withIds = (): Notebook[] => notebooks.filter((nb) => nb.id !== '')
  const live = (): Notebook[] => withIds().filter((nb) => !nb.gone)
  /** A change applied by the request at `index`, the `nth` of its batch: at index + nth / 8. */
  const record = (nb: Notebook, key: ChangeKey, nth = 0): void => {
    if (nb.changes.has(key)) fail(`the run made change ${key} twice`)
    nb.changes.set(key, index + nth / 8)
    nb.lastChange = key
  }
  const view = (who: Caller, nb: Notebook) => ({
    id: nb.id,
    name: nb.name,
    role: nb.members.get(who.name) as Role,
    members: nb.members.size,
  })
  /** A member who can read `nb`, and the path of its notes for them. */
  const readerOf = (nb: Notebook): { who: Caller; prefix: string } | undefined => {
    if (nb.gone) return undefined
    if (nb.home !== undefined) return { who: nb.home, prefix: '/api' }
    for (const [sub] of nb.members) {
      const who = byName.get(sub)
      if (who !== undefined) return { who, prefix: `/api/notebooks/${nb.id}` }
    }
    return undefined
  }

  /** Where a note request goes: mostly the caller's default notebook, else any notebook. */
  const placeOf = (who: Caller): Place => {
    const r = rng.next()
    if (r < 0.4) return { notebook: who.home, prefix: '/api' }
    if (r < 0.47) return { notebook: who.home, prefix: '/api/notebooks/me' }
    if (r < 0.52) return { notebook: undefined, prefix: `/api/notebooks/${madeUpId()}` }
    const mine = withIds().filter((nb) => roleOf(who, nb) !== undefined)
    const pool = mine.length > 0 && rng.chance(0.65) ? mine : withIds()
    if (pool.length === 0) return { notebook: who.home, prefix: '/api' }
    const nb = rng.pick(pool)
    return { notebook: nb, prefix: `/api/notebooks/${nb.id}` }
  }
  /** A notebook for a notebook route: its id, `me`, or a made-up one. */
  const pickNotebook = (who: Caller): { nb: Notebook | undefined; path: string } => {
    const r = rng.next()
    if (r < 0.08) return { nb: who.user ? who.home : undefined, path: '/api/notebooks/me' }
    if (r < 0.14) return { nb: undefined, path: `/api/notebooks/${madeUpId()}` }
    const mine = withIds().filter((nb) => roleOf(who, nb) === 'owner' && nb.home !== who)
    const member = withIds().filter((nb) => roleOf(who, nb) !== undefined)
    const pool =
      mine.length > 0 && r < 0.55 ? mine : member.length > 0 && r < 0.8 ? member : withIds()
    if (pool.length === 0) return { nb: undefined, path: `/api/notebooks/${madeUpId()}` }
    const nb = rng.pick(pool)
    return { nb, path: `/api/notebooks/${nb.id}` }
  }
  /** A note id: mostly one of this notebook, else of any notebook (deleted ones too). */
  const anyNote = (nb: Notebook | undefined): { id: number; home: Notebook } | undefined => {
    if (nb !== undefined && nb.notes.size > 0 && rng.chance(0.7)) {
      return { id: rng.pick([...nb.notes.keys()]), home: nb }
    }
    const holding = notebooks.filter((n) => n.notes.size > 0)
    if (holding.length > 0 && rng.chance(0.85)) {
      const from = rng.pick(holding)
      return { id: rng.pick([...from.notes.keys()]), home: from }
    }
    if (givenList.length === 0) return undefined
    const id = rng.pick(givenList)
    return { id, home: noteHome.get(id) as Notebook }
  }

  /**
   * The refusal a note request at `place` must get before any note is looked at: a stranger's
   * 404 (word for word a made-up id's, headers too), or a viewer's 403 on a write.
   */
  const refusalAt = (who: Caller, place: Place, write: boolean): string | undefined => {
    const role = roleOf(who, place.notebook)
    if (role === undefined) return 'stranger'
    return write && role === 'viewer' ? 'viewer' : undefined
  }
  const refused = async (
    who: Caller,
    answer: Answer,
    refusal: string,
    method: string,
    place: Place,
    tail: string,
    body: unknown,
  ): Promise<void> => {
    const expected = refusal === 'viewer' ? VIEWER : NO_NOTEBOOK
    if (answer.status !== (refusal === 'viewer' ? 403 : 404) || answer.body !== expected) {
      fail(
        `${method} ${place.prefix}${tail} by ${who.name} (${refusal}) answered ${answer.status} ${answer.body.slice(0, 300)}`,
      )
    }
    if (answer.headers['content-type'] !== 'application/problem+json') {
      fail(`a ${refusal}'s refusal came as ${answer.headers['content-type']}`)
    }
    if (refusal === 'stranger' && place.notebook !== undefined && rng.chance(0.3)) {
      const none = await send(who, method, `/api/notebooks/${madeUpId()}${tail}`, body)
      if (none.body !== answer.body || headersOf(none) !== headersOf(answer)) {
        fail(
          `a stranger's ${method} ${tail} told a real notebook from a made-up one: ${answer.status} ${headersOf(answer)} ${answer.body} vs ${none.status} ${headersOf(none)} ${none.body}`,
        )
      }
    }
  }

  const fileStep = fileSteps<Caller, Notebook>({
    rng,
    sendRaw,
    placeOf,
    refusalAt,
    refusals: { stranger: NO_NOTEBOOK, viewer: VIEWER },
    homeOf: (who) => who.home,
    madeUpId,
    headersOf,
    tagOf: (nb) => nb.tag,
    goneOf: (nb) => nb.gone,
    fail,
  })

  /** Opens `who`'s stream of `nb` (they just joined it), once it is open. */
  const follow = async (who: Caller, nb: Notebook): Promise<void> => {
    if (nb.home === who) return
    const client = await SseClient.open(rng.pick(ports), `/api/notebooks/${nb.id}/events`, {
      authorization: who.authorization,
    })
    if (client.status !== 200) fail(`${who.name}'s stream of ${nb.tag} answered ${client.status}`)
    const stream: MemberStream = {
      who,
      notebook: nb,
      client,
      opened: index,
      removed: undefined,
      removedAt: 0,
      closedAt: undefined,
    }
    client.response.once('close', () => {
      stream.closedAt = Date.now()
    })
    await client.until((c) => c.messages.length >= 1, 10_000)
    memberStreams.push(stream)
  }
  /** `sub` is a member of `nb` now (the request at `index` was answered so). */
  const joined = async (sub: string, nb: Notebook, role: Role): Promise<void> => {
    nb.members.set(sub, role)
    stats.joins++
    const who = byName.get(sub)
    if (who === undefined) return
    if (nb.home !== who) who.joined.push(nb)
    const periods = who.periods.get(nb) ?? []
    periods.push([index, Number.POSITIVE_INFINITY])
    who.periods.set(nb, periods)
    const access = who.access.get(nb) ?? []
    access.push('joined')
    who.access.set(nb, access)
    await follow(who, nb)
  }
  /** `sub` is no longer a member of `nb`. */
  const left = (sub: string, nb: Notebook): void => {
    nb.members.delete(sub)
    stats.removals++
    const who = byName.get(sub)
    if (who === undefined) return
    who.joined = who.joined.filter((n) => n !== nb)
    const period = who.periods.get(nb)?.at(-1)
    if (period !== undefined) period[1] = index
    who.access.get(nb)?.push('left')
    for (const stream of memberStreams) {
      if (stream.who === who && stream.notebook === nb && stream.removed === undefined) {
        stream.removed = index
        stream.removedAt = Date.now()
      }
    }
  }
  const deleted = (nb: Notebook): void => {
    for (const sub of [...nb.members.keys()]) left(sub, nb)
    nb.gone = true
    nb.notes.clear()
    for (const invite of nb.invites.values()) deadTokens.push(invite.token)
    for (const id of nb.invites.keys()) deadInvites.push({ notebook: nb, id })
    nb.invites.clear()
  }

  /** A refused batch: that status, a problem naming the request, and nothing applied. */
  const refusedBatch = (answer: Answer, status: number, prefix: string): void => {
    if (answer.status !== status)
      fail(`a batch answered ${answer.status}, not ${status}: ${answer.body}`)
    const { detail } = parseJson(answer.body) as { detail: string }
    if (!detail.startsWith(prefix) || !detail.endsWith('Nothing in the batch was applied.')) {
      fail(`the refused batch's detail: ${detail}`)
    }
  }
  /** A kept batch's answers, one 200 per request; each created id is new to the service. */
  const keptBatch = (who: Caller, answer: Answer, document: BatchDocument): SubAnswer[] => {
    if (answer.status !== 200) fail(`${who.name}'s batch answered ${answer.status}: ${answer.body}`)
    const { data } = parseJson(answer.body) as { data: SubAnswer[] }
    assert.equal(data.length, document.requests.length)
    for (const [i, got] of data.entries()) {
      if (got.status !== 200) fail(`requests[${i}] of a kept batch answered ${got.status}`)
      if (document.requests[i]?.method !== 'POST') continue
      const { id } = got.body.data as Note
      if (given.has(id)) fail(`id ${id} was given twice`)
    }
    return data
  }
  /** A note the service made in `nb`. */
  const created = (nb: Notebook, note: Note, nth = 0): void => {
    if (given.has(note.id)) fail(`id ${note.id} was given twice`)
    given.add(note.id)
    givenList.push(note.id)
    noteHome.set(note.id, nb)
    nb.notes.set(note.id, note)
    record(nb, changeKey('created', note), nth)
  }

  try {
    // Each user's default notebook, as it lists it; a made-up id's 404, the one every stranger gets.
    for (const who of callers) {
      if (!who.user) continue
      const answer = await send(who, 'GET', '/api/notebooks/me')
      const { data } = parseJson(answer.body) as { data: { id: string } }
      who.home = notebook(who.name, data.id, 'My notes', who)
      who.home.members.set(who.name, 'owner')
      who.periods.set(who.home, [[-1, Number.POSITIVE_INFINITY]])
      assert.deepEqual(data, view(who, who.home), `${who.name}'s default notebook`)
    }
    const none = await send(rng.pick(callers), 'GET', `/api/notebooks/${madeUpId()}/note`)
    assert.equal(none.body, NO_NOTEBOOK)
    // Every caller follows its own change feed from the start, and every user all its notebooks.
    for (const who of callers) {
      who.stream = await SseClient.open(rng.pick(ports), '/api/events', {
        authorization: who.authorization,
      })
      assert.equal(who.stream.status, 200)
      if (!who.user) continue
      who.all = await SseClient.open(rng.pick(ports), '/api/events?notebooks=all', {
        authorization: who.authorization,
      })
      assert.equal(who.all.status, 200)
      await who.all.until((c) => c.messages.length >= 1, 10_000)
    }
    for (; index < options.requests; index++) {
      const who = rng.pick(callers)
      const kind = rng.weighted<string>([
        [5, 'create'],
        [2, 'idempotent-create'],
        [4, 'get'],
        [3, 'patch'],
        [5, 'delete'],
        [3, 'list'],
        [2, 'page'],
        [1, 'search'],
        [1, 'foreign-cursor'],
        [1, 'foreign-etag'],
        [1, 'foreign-version'],
        [3, 'batch'],
        [2, 'keyed-batch'],
        [0.6, 'notebook-create'],
        [0.5, 'notebook-get'],
        [0.5, 'notebook-list'],
        [0.3, 'notebook-rename'],
        [0.25, 'notebook-delete'],
        [0.5, 'members-get'],
        [1.5, 'member-put'],
        [1, 'member-delete'],
        [0.8, 'invite-create'],
        [0.3, 'invite-list'],
        [0.3, 'invite-withdraw'],
        [1, 'redeem'],
        ...FILE_KINDS,
      ])
      let answer: Answer
      let crossing = false
      /** The kind, told more finely where the run wants to show that each case came up. */
      let label = kind
      /** The notebook whose epochs the answer's version belongs to. */
      let learnt: Notebook | undefined
      if (kind === 'create') {
        const place = placeOf(who)
        const nb = place.notebook
        const mark = `mark-${nb?.tag ?? 'madeup'}-${index}-${rng.int(1e9)}`
        const body = { owner: who.name, mark, n: index * 16 }
        answer = await send(who, 'POST', `${place.prefix}/note`, body)
        const refusal = refusalAt(who, place, true)
        crossing = refusal === 'stranger'
        label = refusal === undefined ? kind : `${kind} (${refusal})`
        if (refusal !== undefined) {
          await refused(who, answer, refusal, 'POST', place, '/note', body)
        } else {
          if (answer.status !== 200) fail(`create answered ${answer.status}: ${answer.body}`)
          const note = (parseJson(answer.body) as { data: Note }).data
          assert.deepEqual({ ...note, id: 0 }, { ...body, id: 0 })
          created(nb as Notebook, note)
        }
      } else if (kind === 'idempotent-create') {
        const nb = who.home
        const mark = `mark-${nb.tag}-${index}-${rng.int(1e9)}`
        const body = { owner: who.name, mark, n: index * 16 }
        // A key some caller used, or a new one: the same key in two notebooks is two keys.
        const used = rng.pick(callers).keys
        const key = used.size > 0 && rng.chance(0.6) ? rng.pick([...used.keys()]) : `key-${index}`
        answer = await send(who, 'POST', '/api/note', body, { 'idempotency-key': key })
        learnt = nb
        if (who.keys.has(key) || who.batchKeys.has(key)) {
          // Its own key again with another body: 422; never another caller's note.
          if (answer.status !== 422) fail(`a reused key answered ${answer.status}: ${answer.body}`)
        } else {
          if (answer.status !== 200) fail(`create answered ${answer.status}: ${answer.body}`)
          const note = (parseJson(answer.body) as { data: Note }).data
          assert.deepEqual({ ...note, id: 0 }, { ...body, id: 0 })
          created(nb, note)
          who.keys.set(key, note)
          crossing = callers.some((c) => c !== who && c.keys.has(key))
        }
      } else if (kind === 'get' || kind === 'patch' || kind === 'delete') {
        const place = placeOf(who)
        const nb = place.notebook
        const target = anyNote(nb)
        if (target === undefined) continue
        const tail = `/note/${target.id}`
        const method = kind === 'get' ? 'GET' : kind === 'patch' ? 'PATCH' : 'DELETE'
        const n = index * 16
        const body = kind === 'patch' ? { n } : undefined
        answer = await send(who, method, `${place.prefix}${tail}`, body)
        const refusal = refusalAt(who, place, kind !== 'get')
        crossing = refusal === 'stranger' || target.home !== nb
        label = refusal === undefined ? kind : `${kind} (${refusal})`
        if (refusal !== undefined) {
          await refused(who, answer, refusal, method, place, tail, body)
        } else {
          const mine = (nb as Notebook).notes.get(target.id)
          if (mine === undefined) {
            if (answer.status !== 404 || answer.body !== '') {
              fail(
                `${kind} of ${target.home.tag}'s ${target.id} by ${who.name} in ${nb?.tag} answered ${answer.status} ${answer.body}`,
              )
            }
          } else {
            if (kind === 'patch') {
              mine.n = n
              record(nb as Notebook, changeKey('updated', mine))
            } else if (kind === 'delete') {
              ;(nb as Notebook).notes.delete(target.id)
              record(nb as Notebook, changeKey('deleted', mine))
            }
            if (answer.status !== 200) {
              fail(
                `${kind} of ${target.id} in ${nb?.tag} answered ${answer.status}: ${answer.body}`,
              )
            }
            assert.deepEqual(
              parseJson(answer.body),
              { data: kind === 'delete' ? String(target.id) : mine },
              `${kind} ${tail}`,
            )
          }
        }
      } else if (kind === 'batch') {
        // Creates, patches and deletes, some of other notebooks' notes: one of those (or a note the
        // batch deleted already) refuses the batch whole with a 404 naming it.
        const place = placeOf(who)
        const nb = place.notebook
        const count = rng.between(1, 6)
        const document: BatchDocument = { requests: [] }
        const targets: ({ id: number; home: Notebook } | undefined)[] = []
        for (let i = 0; i < count; i++) {
          const target = rng.chance(0.4) ? undefined : anyNote(nb)
          targets.push(target)
          if (target === undefined) {
            const mark = `mark-${nb?.tag ?? 'madeup'}-${index}-${rng.int(1e9)}`
            document.requests.push({
              method: 'POST',
              url: '/api/note',
              body: { owner: who.name, mark, n: index * 16 + i },
            })
          } else if (rng.chance(0.5)) {
            document.requests.push({
              method: 'PATCH',
              url: `/api/note/${target.id}`,
              body: { n: index * 16 + i },
            })
          } else {
            document.requests.push({ method: 'DELETE', url: `/api/note/${target.id}` })
          }
        }
        answer = await send(who, 'POST', `${place.prefix}/batch`, document)
        const refusal = refusalAt(who, place, true)
        crossing = refusal === 'stranger' || targets.some((t) => t !== undefined && t.home !== nb)
        if (refusal !== undefined) {
          label = `batch (${refusal})`
          await refused(who, answer, refusal, 'POST', place, '/batch', document)
        } else {
          const book = nb as Notebook
          // The notebook as the batch leaves it, if kept; the first request that fails, if not.
          const after = new Map([...book.notes].map(([id, note]) => [id, { ...note }]))
          let failing = -1
          // What each patch or delete answers: the note as it stands at that point of the batch.
          const expected: unknown[] = []
          const changes: ChangeKey[] = []
          for (let i = 0; i < count && failing === -1; i++) {
            const target = targets[i]
            const request = document.requests[i] as BatchDocument['requests'][number]
            if (target === undefined) continue
            const note = after.get(target.id)
            if (note === undefined) failing = i
            else if (request.method === 'PATCH') {
              note.n = request.body?.n as number
              expected[i] = { data: { ...note } }
            } else {
              after.delete(target.id)
              expected[i] = { data: String(target.id) }
            }
          }
          label = `batch (${failing === -1 ? 'kept' : 'refused'}${crossing ? ', naming foreign notes' : ''})`
          if (failing !== -1) {
            const request = document.requests[failing] as BatchDocument['requests'][number]
            refusedBatch(answer, 404, `requests[${failing}] (${request.method} ${request.url}): `)
          } else {
            const data = keptBatch(who, answer, document)
            const made: Note[] = []
            for (let i = 0; i < count; i++) {
              const target = targets[i]
              const request = document.requests[i] as BatchDocument['requests'][number]
              const got = data[i] as SubAnswer
              if (target === undefined) {
                const note = got.body.data as Note
                assert.deepEqual({ ...note, id: 0 }, { ...request.body, id: 0 })
                after.set(note.id, note)
                made.push(note)
                changes.push(changeKey('created', note))
              } else {
                assert.deepEqual(got.body, expected[i], `requests[${i}]`)
                changes.push(
                  request.method === 'PATCH'
                    ? changeKey('updated', { id: target.id, n: request.body?.n })
                    : changeKey('deleted', { id: target.id }),
                )
              }
            }
            book.notes.clear()
            for (const [id, note] of after) book.notes.set(id, note)
            for (const note of made) {
              given.add(note.id)
              givenList.push(note.id)
              noteHome.set(note.id, book)
            }
            for (const [nth, change] of changes.entries()) record(book, change, nth)
          }
        }
        // Nothing of another notebook changed: each named foreign note is as its notebook has it.
        for (const target of targets) {
          if (target === undefined || target.home === nb) continue
          const reader = readerOf(target.home)
          if (reader === undefined) continue
          const owned = target.home.notes.get(target.id)
          const seen = await send(reader.who, 'GET', `${reader.prefix}/note/${target.id}`)
          if (owned === undefined ? seen.status !== 404 : seen.status !== 200) {
            fail(
              `${target.home.tag}'s ${target.id} answers ${seen.status} after ${who.name}'s batch`,
            )
          }
          if (owned !== undefined) assert.deepEqual(parseJson(seen.body), { data: owned })
        }
      } else if (kind === 'keyed-batch') {
        // A batch under an Idempotency-Key: a new one, its own again (replayed), or one another
        // caller used, on a batch (the very same document) or a create: keys are per notebook.
        let key: string
        let document: BatchDocument
        const source = rng.next()
        const lender = other(who)
        const lent = [...lender.batchKeys.entries()]
        const own = [...who.batchKeys.entries()]
        if (source < 0.3 && lender !== who && lent.length > 0) {
          ;[key, { document }] = rng.pick(lent)
          crossing = true
          label = "keyed-batch (another's batch and key)"
        } else if (source < 0.45 && lender !== who && lender.keys.size > 0) {
          key = rng.pick([...lender.keys.keys()])
          document = keyedDocument(rng, index)
          crossing = true
          label = "keyed-batch (another's create key)"
        } else if (source < 0.65 && own.length > 0) {
          ;[key, { document }] = rng.pick(own)
          label = 'keyed-batch (its own again)'
        } else {
          key = `batch-key-${index}`
          document = keyedDocument(rng, index)
        }
        answer = await send(who, 'POST', '/api/batch', document, { 'idempotency-key': key })
        const earlier = who.batchKeys.get(key)
        const sameDocument = JSON.stringify(earlier?.document) === JSON.stringify(document)
        if (earlier !== undefined && sameDocument) {
          if (answer.status !== 200 || answer.headers['idempotent-replayed'] !== 'true') {
            fail(`its own batch again answered ${answer.status} ${answer.body.slice(0, 200)}`)
          }
          assert.equal(answer.body, earlier.body, `the replay of ${key}`)
        } else if (earlier !== undefined || who.keys.has(key)) {
          if (answer.status !== 422) fail(`a reused key answered ${answer.status}: ${answer.body}`)
        } else {
          if (answer.headers['idempotent-replayed'] !== undefined) {
            fail(
              `${who.name}'s first batch under ${key} was a replay: ${answer.body.slice(0, 300)}`,
            )
          }
          const data = keptBatch(who, answer, document)
          for (const [i, got] of data.entries()) {
            const note = got.body.data as Note
            assert.deepEqual({ ...note, id: 0 }, { ...document.requests[i]?.body, id: 0 })
            created(who.home, note, i)
          }
          who.batchKeys.set(key, { document, body: answer.body })
        }
      } else if (kind === 'list' || kind === 'search' || kind === 'page') {
        const place = placeOf(who)
        const nb = place.notebook
        const q = kind === 'search' ? `mark-${rng.pick(notebooks).tag}-` : undefined
        const limit = kind === 'page' ? rng.between(1, 5) : undefined
        const tail =
          q !== undefined ? `/note?q=${q}` : limit !== undefined ? `/note?limit=${limit}` : '/note'
        answer = await send(who, 'GET', `${place.prefix}${tail}`)
        const refusal = refusalAt(who, place, false)
        crossing = refusal === 'stranger' || (q !== undefined && !q.includes(`-${nb?.tag}-`))
        label = refusal === undefined ? kind : `${kind} (${refusal})`
        if (refusal !== undefined) {
          await refused(who, answer, refusal, 'GET', place, tail, undefined)
        } else {
          const book = nb as Notebook
          learnt = book
          const all = sorted(book).filter((n) => q === undefined || n.mark.startsWith(q))
          const expected = limit === undefined ? all : all.slice(0, limit)
          if (answer.status !== 200) fail(`${kind} answered ${answer.status}`)
          assert.deepEqual(parseJson(answer.body), { data: expected }, `${kind} of ${book.tag}`)
          if (q === undefined) assert.equal(answer.headers['x-total-count'], String(all.length))
        }
      } else if (kind === 'foreign-cursor') {
        const from = other(who)
        if (from.cursors.length === 0) continue
        crossing = from !== who
        answer = await send(who, 'GET', rng.pick(from.cursors))
        // Its own notes after that position, or a refusal: never the other's. (A cursor of a
        // notebook path names that notebook: answered for this caller's role there.)
        if (answer.status === 200) {
          for (const note of (parseJson(answer.body) as { data: Note[] }).data) {
            if (roleOf(who, noteHome.get(note.id)) === undefined) {
              fail(`a foreign cursor gave ${who.name} note ${note.id}`)
            }
          }
        } else if (answer.status !== 400 && answer.body !== NO_NOTEBOOK) {
          fail(`a foreign cursor answered ${answer.status} ${answer.body}`)
        }
      } else if (kind === 'foreign-etag') {
        // Not an ETag of this caller's own notebook: the other may have read it as a member.
        const from = other(who)
        const target = anyNote(who.home)
        const foreign = from.etags.filter((etag) => {
          const token = etag
            .replace(/^W\//, '')
            .replace(/^"|"$/g, '')
            .replace(/-(br|gzip)$/, '')
          return byEpoch.get(token.slice(0, token.lastIndexOf('.'))) !== who.home
        })
        if (foreign.length === 0 || target === undefined) continue
        crossing = true
        const etag = rng.pick(foreign)
        const mine = who.home.notes.get(target.id)
        if (rng.chance(0.5)) {
          answer = await send(who, 'GET', `/api/note/${target.id}`, undefined, {
            'if-none-match': etag,
          })
          const expected = mine === undefined ? 404 : 200
          if (answer.status !== expected) fail(`If-None-Match of another's ETag: ${answer.status}`)
        } else {
          answer = await send(
            who,
            'PATCH',
            `/api/note/${target.id}`,
            { n: -1 },
            { 'if-match': etag },
          )
          const expected = mine === undefined ? 404 : 412
          if (answer.status !== expected) fail(`If-Match of another's ETag: ${answer.status}`)
        }
      } else if (kind === 'foreign-version') {
        // Another caller's version token as a list's If-None-Match: never a 304. Not one of a
        // notebook of this caller's own: the other may have read it as a member.
        const from = other(who)
        const foreign = from.versions.filter(
          (version) => byEpoch.get(version.slice(0, version.lastIndexOf('.'))) !== who.home,
        )
        if (foreign.length === 0) continue
        crossing = true
        answer = await send(who, 'GET', '/api/note', undefined, {
          'if-none-match': `"${rng.pick(foreign)}"`,
        })
        learnt = who.home
        if (answer.status !== 200) fail(`another's version as If-None-Match: ${answer.status}`)
      } else if (kind.startsWith('file-') || kind.startsWith('upload-')) {
        const step = await fileStep(who, kind)
        if (step === undefined) continue
        ;({ answer, label, crossing } = step)
      } else {
        const step = await notebookStep(who, kind)
        if (step === undefined) continue
        ;({ answer, label, crossing } = step)
      }
      stats.requests++
      if (crossing) stats.crossings++
      count(label, answer)
      checkAnswer(who, answer, `${kind} by ${who.name}`)
      shownToken = undefined
      learn(who, learnt, answer)
    }
    await finalChecks()
  } catch (err) {
    if (err instanceof IsolationFailure) throw err
    throw new IsolationFailure(seed, index, err instanceof Error ? err.message : String(err))
  } finally {
    for (const who of callers) {
      who.stream?.close()
      who.all?.close()
    }
    for (const stream of memberStreams) stream.client.close()
    agent.destroy()
  }
  return stats

  /** The notebook, member and invitation steps: what each answers, by the model. */
  async function notebookStep(
    who: Caller,
    kind: string,
  ): Promise<{ answer: Answer; label: string; crossing: boolean } | undefined> {
    const at = pickNotebook(who)
    const nb = at.nb
    const role = roleOf(who, nb)
    let crossing = role === undefined
    let label = kind
    let answer: Answer
    /** The answer a request on a notebook route gets when the caller's role refuses it. */
    const gate = (needs: Role): string | undefined => {
      if (!who.user) return SERVICE_KEY
      if (role === undefined) return NO_NOTEBOOK
      return RANK[role] < RANK[needs] ? OWNER_ONLY : undefined
    }
    const expect = (status: number, body: string): void => {
      if (answer.status !== status || answer.body !== body) {
        fail(
          `${label} ${at.path} by ${who.name} (${role ?? 'none'}) answered ${answer.status} ${answer.body.slice(0, 400)}, not ${status} ${body.slice(0, 400)}`,
        )
      }
    }
    const expectData = (status: number, value: unknown): void =>
      expect(status, JSON.stringify({ data: value }))
    const refusedLabel = (body: string): string =>
      body === SERVICE_KEY
        ? `${kind} (service key)`
        : body === NO_NOTEBOOK
          ? `${kind} (stranger)`
          : `${kind} (${role})`

    /** A member's act refused: the label it is counted by, and its status and detail. */
    const refuseMember = (refusal: string): void => {
      label =
        refusal === LAST_OWNER
          ? `${kind} (the last owner)`
          : refusal === DEFAULT_NOTEBOOK
            ? `${kind} (a default notebook's owner)`
            : refusedLabel(refusal)
      const status =
        refusal === NO_NOTEBOOK
          ? 404
          : refusal === OWNER_ONLY || refusal === SERVICE_KEY
            ? 403
            : 409
      expect(status, refusal)
    }
    if (kind === 'notebook-create') {
      if (live().filter((n) => n.home === undefined).length >= MAX_LIVE_NOTEBOOKS) return undefined
      const name = `Book ${index}`
      answer = await send(who, 'POST', '/api/notebooks', { name })
      crossing = false
      if (!who.user) {
        label = `${kind} (service key)`
        expect(403, SERVICE_KEY)
      } else {
        if (answer.status !== 201)
          fail(`making a notebook answered ${answer.status} ${answer.body}`)
        const { data } = parseJson(answer.body) as { data: { id: string } }
        const book = notebook(`nb-${made++}`, data.id, name)
        stats.notebooksMade++
        if (answer.headers.location !== `/api/notebooks/${data.id}`) {
          fail(`a new notebook's Location: ${answer.headers.location}`)
        }
        await joined(who.name, book, 'owner')
        expectData(201, view(who, book))
      }
    } else if (kind === 'notebook-get') {
      answer = await send(who, 'GET', at.path)
      const refusal = who.user ? (role === undefined ? NO_NOTEBOOK : undefined) : NO_NOTEBOOK
      if (refusal !== undefined) {
        label = refusedLabel(who.user ? refusal : SERVICE_KEY)
        expect(who.user ? 404 : 403, who.user ? refusal : SERVICE_KEY)
      } else expectData(200, view(who, nb as Notebook))
    } else if (kind === 'notebook-list') {
      answer = await send(who, 'GET', '/api/notebooks')
      crossing = false
      if (!who.user) expect(403, SERVICE_KEY)
      else
        expectData(
          200,
          [who.home, ...who.joined].map((n) => view(who, n)),
        )
    } else if (kind === 'notebook-rename') {
      const name = `Renamed ${index}`
      answer = await send(who, 'PATCH', at.path, { name })
      const refusal = gate('owner')
      if (refusal !== undefined) {
        label = refusedLabel(refusal)
        expect(refusal === NO_NOTEBOOK ? 404 : 403, refusal)
      } else {
        const book = nb as Notebook
        book.name = name
        expectData(200, view(who, book))
      }
    } else if (kind === 'notebook-delete') {
      answer = await send(who, 'DELETE', at.path)
      const refusal = gate('owner') ?? (nb?.home !== undefined ? DEFAULT_NOTEBOOK : undefined)
      if (refusal !== undefined) {
        label = refusedLabel(refusal)
        expect(refusal === NO_NOTEBOOK ? 404 : refusal === DEFAULT_NOTEBOOK ? 409 : 403, refusal)
        if (refusal === DEFAULT_NOTEBOOK) label = `${kind} (a default notebook)`
      } else {
        deleted(nb as Notebook)
        expect(204, '')
      }
    } else if (kind === 'members-get') {
      answer = await send(who, 'GET', `${at.path}/members`)
      const refusal = gate('viewer')
      if (refusal !== undefined) {
        label = refusedLabel(refusal)
        expect(refusal === NO_NOTEBOOK ? 404 : 403, refusal)
      } else {
        const members = [...(nb as Notebook).members].map(([user, role]) => ({ user, role }))
        expectData(200, members)
      }
    } else if (kind === 'member-put') {
      const sub = rng.chance(0.85)
        ? rng.pick(callers.filter((c) => c.user)).name
        : `ghost-${rng.int(3)}`
      const given = rng.pick(ROLES)
      answer = await send(who, 'PUT', `${at.path}/members/${sub}`, { role: given })
      let refusal = gate('owner')
      const book = nb as Notebook
      const current = refusal === undefined ? book.members.get(sub) : undefined
      if (refusal === undefined && current === 'owner' && given !== 'owner') {
        if (book.home?.name === sub) refusal = DEFAULT_NOTEBOOK
        else if ([...book.members.values()].filter((r) => r === 'owner').length === 1) {
          refusal = LAST_OWNER
        }
      }
      if (refusal !== undefined) {
        refuseMember(refusal)
      } else {
        label = current === undefined ? `${kind} (adds)` : `${kind} (changes a role)`
        if (current === undefined) await joined(sub, book, given)
        else book.members.set(sub, given)
        expectData(200, { user: sub, role: given })
      }
    } else if (kind === 'member-delete') {
      const members = nb === undefined ? [] : [...nb.members.keys()]
      const sub =
        rng.chance(0.4) || members.length === 0
          ? who.name
          : rng.chance(0.85)
            ? rng.pick(members)
            : `ghost-${rng.int(3)}`
      answer = await send(who, 'DELETE', `${at.path}/members/${sub}`)
      const leaving = sub === who.name
      let refusal = leaving
        ? who.user
          ? role === undefined
            ? NO_NOTEBOOK
            : undefined
          : SERVICE_KEY
        : gate('owner')
      const book = nb as Notebook
      if (refusal === undefined) {
        const current = book.members.get(sub)
        if (current === undefined) refusal = NO_NOTEBOOK
        else if (book.home?.name === sub) refusal = DEFAULT_NOTEBOOK
        else if (
          current === 'owner' &&
          [...book.members.values()].filter((r) => r === 'owner').length === 1
        ) {
          refusal = LAST_OWNER
        }
      }
      if (refusal !== undefined) {
        refuseMember(refusal)
      } else {
        label = leaving ? `${kind} (leaves)` : `${kind} (removes)`
        left(sub, book)
        expect(204, '')
      }
    } else if (kind === 'invite-create') {
      if (nb !== undefined && nb.invites.size >= MAX_INVITES) return undefined
      const body = {
        role: rng.pick(ROLES),
        uses: rng.between(1, 3),
        ...(rng.chance(0.3) ? {} : { expires_in: rng.between(3600, 30 * 86_400) }),
      }
      const sent = Date.now()
      answer = await send(who, 'POST', `${at.path}/invites`, body)
      const refusal = gate('owner')
      if (refusal !== undefined) {
        label = refusedLabel(refusal)
        expect(refusal === NO_NOTEBOOK ? 404 : 403, refusal)
      } else {
        if (answer.status !== 201) fail(`an invitation answered ${answer.status} ${answer.body}`)
        const { data } = parseJson(answer.body) as { data: Invite }
        const seconds = body.expires_in ?? 7 * 86_400
        const expires = Date.parse(data.expires)
        if (Math.abs(expires - (sent + seconds * 1000)) > 10_000) {
          fail(`an invitation for ${seconds} s expires ${data.expires}`)
        }
        if (!/^[A-Za-z0-9_-]{32,}$/.test(data.token)) fail(`an invitation's token: ${data.token}`)
        const invite: Invite = {
          id: data.id,
          role: body.role,
          expires: data.expires,
          uses: body.uses,
          token: data.token,
        }
        ;(nb as Notebook).invites.set(invite.id, invite)
        byToken.set(invite.token, nb as Notebook)
        shownToken = invite.token
        expectData(201, invite)
      }
    } else if (kind === 'invite-list') {
      answer = await send(who, 'GET', `${at.path}/invites`)
      const refusal = gate('owner')
      if (refusal !== undefined) {
        label = refusedLabel(refusal)
        expect(refusal === NO_NOTEBOOK ? 404 : 403, refusal)
      } else {
        const invites = [...(nb as Notebook).invites.values()].map(({ token: _, ...rest }) => rest)
        expectData(200, invites)
      }
    } else if (kind === 'invite-withdraw') {
      const r = rng.next()
      const dead = deadInvites.filter((d) => d.notebook === nb)
      const id =
        nb !== undefined && nb.invites.size > 0 && r < 0.6
          ? rng.pick([...nb.invites.keys()])
          : dead.length > 0 && r < 0.85
            ? rng.pick(dead).id
            : madeUpId()
      answer = await send(who, 'DELETE', `${at.path}/invites/${id}`)
      const refusal = gate('owner') ?? (nb?.invites.has(id) ? undefined : NO_NOTEBOOK)
      if (refusal !== undefined) {
        label =
          role === 'owner' && refusal === NO_NOTEBOOK
            ? `${kind} (spent or unknown)`
            : refusedLabel(refusal)
        expect(refusal === NO_NOTEBOOK ? 404 : 403, refusal)
      } else {
        const book = nb as Notebook
        const invite = book.invites.get(id) as Invite
        book.invites.delete(id)
        deadTokens.push(invite.token)
        deadInvites.push({ notebook: book, id })
        expect(204, '')
      }
    } else {
      // An invitation redeemed: a valid one (of any notebook), a spent or withdrawn one, a made-up one.
      if (who.user) {
        const now = Date.now()
        who.redeems = who.redeems.filter((t) => now - t < 61_000)
        if (who.redeems.length >= REDEEMS_PER_MINUTE) return undefined
        who.redeems.push(now)
      }
      const open = live().flatMap((n) => [...n.invites.values()].map((i) => ({ n, i })))
      const r = rng.next()
      const pick = open.length > 0 && r < 0.6 ? rng.pick(open) : undefined
      const token =
        pick?.i.token ??
        (deadTokens.length > 0 && r < 0.85 ? rng.pick(deadTokens) : madeUpId() + madeUpId())
      answer = await send(who, 'POST', `/api/invites/${token}`)
      crossing = pick === undefined
      if (!who.user) {
        label = `${kind} (service key)`
        expect(403, SERVICE_KEY)
      } else if (pick === undefined) {
        label = `${kind} (spent, withdrawn or made up)`
        expect(404, NO_INVITE)
      } else {
        const { n: book, i: invite } = pick
        const current = book.members.get(who.name)
        invite.uses--
        if (invite.uses === 0) {
          book.invites.delete(invite.id)
          deadTokens.push(invite.token)
          deadInvites.push({ notebook: book, id: invite.id })
        }
        if (current === undefined) {
          label = `${kind} (joins)`
          await joined(who.name, book, invite.role)
        } else {
          label = `${kind} (already a member)`
          if (RANK[invite.role] > RANK[current]) book.members.set(who.name, invite.role)
        }
        expectData(200, view(who, book))
      }
    }
    return { answer, label, crossing }
  }

  /** At the end: every list and stream as the model has it, and nothing of a notebook outside it. */
  async function finalChecks(): Promise<void> {
    for (const who of callers) {
      const answer = await send(who, 'GET', '/api/note')
      assert.deepEqual(parseJson(answer.body), { data: sorted(who.home) }, `${who.name}'s list`)
      const stream = who.stream as SseClient
      const version = answer.headers['notes-version'] as string
      await stream.until((c) => c.messages.some((m) => m.id === version), 30_000)
      nothingOfOthers(who, stream.text, `${who.name}'s change feed`)
      for (const event of noteEvents(stream.messages)) {
        if (!who.home.changes.has(event.key)) fail(`${who.name}'s feed sent ${event.key}`)
      }
      stats.streamEvents += stream.messages.length
      if (!who.user) continue
      const listed = await send(who, 'GET', '/api/notebooks')
      assert.deepEqual(
        parseJson(listed.body),
        { data: [who.home, ...who.joined].map((nb) => view(who, nb)) },
        `${who.name}'s notebooks at the end`,
      )
    }
    for (const nb of live()) {
      stats.notebooksAtEnd += nb.home === undefined ? 1 : 0
      const reader = readerOf(nb)
      if (reader === undefined) continue
      const answer = await send(reader.who, 'GET', `/api/notebooks/${nb.id}/note`)
      assert.deepEqual(parseJson(answer.body), { data: sorted(nb) }, `${nb.tag}'s list at the end`)
    }
    for (const nb of notebooks) stats.notesAtEnd += nb.gone ? 0 : nb.notes.size

    for (const stream of memberStreams) {
      const { who, notebook: nb, client, opened, removed } = stream
      const what = `${who.name}'s stream of ${nb.tag} (open after #${opened}${removed === undefined ? '' : `, removed at #${removed}`})`
      if (removed === undefined) {
        const last = nb.lastChange
        if (last !== undefined && (nb.changes.get(last) as number) > opened) {
          await client.until(
            (c) => c.ended !== false || noteEvents(c.messages).some((e) => e.key === last),
            30_000,
          )
        }
        if (client.ended !== false) fail(`${what} ended: ${client.text.slice(-300)}`)
      } else {
        await client
          .closed(5_000)
          .catch(() => fail(`${what} did not end: ${client.text.slice(-300)}`))
        const end = client.messages.at(-1)
        if (end?.event !== 'revoked' || end.data !== JSON.stringify({ notebook: nb.id })) {
          fail(`${what} did not end with revoked: ${client.text.slice(-300)}`)
        }
        const took = (stream.closedAt ?? Date.now()) - stream.removedAt
        stats.revoked++
        stats.slowestRevokeMs = Math.max(stats.slowestRevokeMs, took)
        if (took > REVOKE_BOUND_MS) fail(`${what} ended ${took} ms after the removal`)
      }
      for (const match of client.text.matchAll(MARK)) {
        if (match[1] !== nb.tag) fail(`${what} sent ${match[0]}`)
      }
      let previous = opened
      const keys: ChangeKey[] = []
      for (const event of noteEvents(client.messages)) {
        const at = nb.changes.get(event.key)
        if (at === undefined) fail(`${what} sent ${event.key}, not a change of it`)
        if ((at as number) <= previous) {
          fail(`${what} sent ${event.key} (made at #${at}) out of order or from before it opened`)
        }
        if (removed !== undefined && (at as number) > removed) {
          fail(`${what} sent ${event.key}, made at #${at}, after the removal was answered`)
        }
        previous = at as number
        keys.push(event.key)
      }
      if (removed === undefined) {
        const expected = [...nb.changes].filter(([, at]) => at > opened).map(([key]) => key)
        assert.deepEqual(keys, expected, `${what}: every change since it opened`)
      }
      stats.streamEvents += client.messages.length
    }

    for (const who of callers) {
      const all = who.all
      if (all === undefined) continue
      const what = `${who.name}'s stream of all notebooks`
      if (all.ended !== false) fail(`${what} ended: ${all.text.slice(-300)}`)
      const last = who.home.lastChange
      if (last !== undefined) {
        await all.until((c) => noteEvents(c.messages).some((e) => e.key === last), 30_000)
      }
      const wanted = [who.home, ...who.joined].flatMap((nb) =>
        nb.lastChange !== undefined &&
        (nb.changes.get(nb.lastChange) as number) > (who.periods.get(nb)?.at(-1)?.[0] ?? 0)
          ? [nb.lastChange]
          : [],
      )
      await all
        .until((c) => {
          const seen = new Set(noteEvents(c.messages).map((e) => e.key))
          return wanted.every((key) => seen.has(key))
        }, 3_000)
        .catch(() => {})
      const seen = new Map<Notebook, number[]>()
      for (const event of noteEvents(all.messages)) {
        const nb = byId.get(event.notebook ?? '')
        if (nb === undefined) fail(`${what} sent ${event.key} of notebook ${event.notebook}`)
        const book = nb as Notebook
        const at = book.changes.get(event.key)
        if (at === undefined) fail(`${what} sent ${event.key} as ${book.tag}'s, not a change of it`)
        const periods = who.periods.get(book) ?? []
        if (!periods.some(([from, to]) => from < (at as number) && (at as number) < to)) {
          fail(
            `${what} sent ${event.key} of ${book.tag}, made at #${at} when ${who.name} was not a member (${JSON.stringify(periods)}); what it sent of ${book.tag} around it: ${JSON.stringify(around(all, book.id, event.key))}`,
          )
        }
        const times = seen.get(book) ?? []
        if (times.length > 0 && (times.at(-1) as number) >= (at as number)) {
          fail(`${what} sent ${book.tag}'s ${event.key} out of order`)
        }
        times.push(at as number)
        seen.set(book, times)
      }
      for (const nb of withIds()) {
        const told = all.messages
          .filter((m) => m.event === 'joined' || m.event === 'left')
          .filter(
            (m) =>
              (JSON.parse(m.data ?? '{}') as { notebook: { id: string } }).notebook.id === nb.id,
          )
          .map((m) => m.event as string)
        const expected = who.access.get(nb) ?? []
        if (!accessMatches(expected, told)) {
          fail(`${what} told ${JSON.stringify(told)} of ${nb.tag}, not ${JSON.stringify(expected)}`)
        }
        const delivered = new Set(seen.get(nb) ?? [])
        for (const [from, to] of who.periods.get(nb) ?? []) {
          for (const at of nb.changes.values()) {
            if (from < at && at < to && !delivered.has(at)) stats.allStreamMissed++
          }
        }
      }
      for (const message of all.messages) {
        if (message.event !== undefined && !NOTE_EVENTS.has(message.event)) {
          if (message.event !== 'joined' && message.event !== 'left') {
            fail(`${what} sent ${message.event}: ${message.data}`)
          }
        }
      }
      stats.streamEvents += all.messages.length
    }

    // An event id of another's stream, sent as Last-Event-ID: a reset, nothing of the other.
    for (const who of callers) {
      const from = other(who)
      const id = (from.stream as SseClient).messages.findLast((m) => m.id !== undefined)?.id
      if (id === undefined || from === who) continue
      const resumed = await SseClient.open(rng.pick(ports), '/api/events', {
        authorization: who.authorization,
        'last-event-id': id,
      })
      await resumed.until((c) => c.messages.some((m) => m.event === 'reset'), 10_000)
      resumed.close()
      nothingOfOthers(
        who,
        resumed.text.replaceAll(id, ''),
        `${who.name}'s stream resumed from ${from.name}'s id`,
      )
      stats.crossings++
    }
  }
}

/** The events of notebook `id` on an all-notebooks stream, from three before `key` to one after. */
function around(all: SseClient, id: string, key: ChangeKey): string[] {
  const of = all.messages
    .filter((m) => m.data?.includes(`"${id}"`))
    .map((m) => {
      const data = JSON.parse(m.data ?? 'null') as { note?: { id: unknown; n?: unknown } }
      return `${m.event} ${data.note === undefined ? '' : changeKey(m.event ?? '', data.note)}`
    })
  const at = of.findIndex((text) => text.endsWith(key))
  return of.slice(Math.max(0, at - 3), at + 2)
}

/** A batch of 1 to 3 creates to send under a key; its notes carry no mark, as any caller may send it. */
function keyedDocument(rng: Random, index: number): BatchDocument {
  return {
    requests: Array.from({ length: rng.between(1, 3) }, (_, i) => ({
      method: 'POST',
      url: '/api/note',
      body: { owner: 'keyed', mark: 'keyed-batch', n: index * 16 + i },
    })),
  }
}
