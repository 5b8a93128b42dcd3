import type { ServerResponse } from 'node:http'
import {
  type Access,
  type AccessChange,
  type Directory,
  defaultStore,
  type NotebookView,
} from '../store/directory.js'
import type { Change, NoteStore } from '../store/types.js'
import { HEARTBEAT, RETRY_MS } from './event-framing.js'
import type { FeedTuning } from './feed-tuning.js'
import { resumeAt } from './membership-resume.js'

/*
 * GET /api/events?notebooks=all: the changes of every notebook a user can read, over one
 * connection. Each notebook is followed as the single-notebook feed follows its store (register
 * for live changes, read the history after the stream's place, send what was held beyond it), and
 * the stream's place is every notebook's place at once: the event id.
 *
 * A notebook joined while the stream is open is followed from the moment of the join: the
 * directory's `joined` carries the version its notes were at, read in the same step as the join,
 * and the stream sends `joined`, then every change after that version, however late it hears of
 * the join. Nothing from before the join is ever sent. A departure stops its notebook the moment
 * it is heard: nothing more of it is sent, and a join whose notebook's departure is heard before
 * the join is handled sends nothing at all (that membership is over; a later join is followed from
 * its own moment). The history read after a place is sent only once every change of access made
 * before the read has been heard (Directory.caughtUp), so that a departure made before a change in
 * it stops it, as it stops a live change. A notebook listed when the stream opens, and one joined
 * while a resumed client was away, is followed from the opening.
 *
 * A resumed stream goes on from each notebook's token only when the user's membership began at
 * or before it (Access.since): a user who left a notebook and came back while away was not a
 * member for some of the changes after their token. When the membership began after the token,
 * the notebook is told as `joined` (the client could not know it) and followed from where the
 * membership began; when that cannot be told (no start known, another epoch), it is reset
 * (followed from the opening). The user's own default notebook is theirs from its making.
 *
 * An event id lists, for every notebook followed, its id and the version token of its last change
 * sent, joined by '~' (about 35 characters a notebook):
 *   'n4Qv0b6mJx8y2kTqR1sZ3w.k2x9q1.5~Zt3kq0PaW1c9yq2mBv7xLg.9aa0b1.1c'
 */

/** Longest event id read back (Last-Event-ID): Node's header limit is 16 KiB. */
const MAX_POSITION_LENGTH = 16 * 1024
/** Where a resumed stream stands: each notebook's version token, by notebook id. */
export type Position = ReadonlyMap<string, string>

/**
 * 'n4Qv...Z3w.k2x9q1.5~Zt3k...xLg.9aa0b1.1c' -> Map { 'n4Qv...Z3w' => 'k2x9q1.5', ... }; undefined for
 * text that is not an id this stream gave.
 */
export function parsePosition(text: string): Position | undefined {
  if (text.length > MAX_POSITION_LENGTH || !/^[A-Za-z0-9._~-]+$/.test(text)) return undefined
  const position = new Map<string, string>()
  for (const entry of text.split('~')) {
    const dot = entry.indexOf('.')
    if (dot < 1 || dot === entry.length - 1) return undefined
    position.set(entry.slice(0, dot), entry.slice(dot + 1))
  }
  return position
}

/** One notebook followed by a stream, and where the stream stands in its changes. */
interface Followed {
  /** As GET /api/notebooks lists it, kept current by the changes of access heard. */
  view: NotebookView
  /** The user's membership, as it was when it began to be followed. */
  readonly access: Access
  readonly store: NoteStore
  /** The version token of the last change sent (or the one it starts after). */
  token: string
  /** Its sequence; undefined until the first read of the history tells it. */
  last: number | undefined
  /** Live changes that arrived while the history was read: sent after it. */
  held: Change[]
  /** True while the history is read, and until the stream has told of the notebook. */
  reading: boolean
  /** Changes that came while reading: read the history again once done. */
  again: boolean
  unsubscribe: () => void
  /** The user's departures from it heard when it began to be followed: one more ends it. */
  readonly lefts: number
}

/** A join or departure of the user, and their departures from its notebook heard by then. */
interface Heard {
  readonly change: AccessChange
  readonly lefts: number
}

export interface AllNotebooksOptions {
  directory: Directory
  /** The store of a notebook's notes, by store name. */
  storeOf: (store: string) => NoteStore
  tuning: FeedTuning
  onError: (err: unknown) => void
  /** Called once when the stream ends, however it ends. */
  onEnd: () => void
}

/** The sequence of a version token: 'k2x9q1.1c' -> 48. */
function sequenceOf(token: string): number | undefined {
  const digits = token.slice(token.lastIndexOf('.') + 1)
  return /^[0-9a-z]{1,11}$/.test(digits) ? Number.parseInt(digits, 36) : undefined
}

/**
 * One user's stream of every notebook they can read. Changes come as `created`, `updated` and
 * `deleted` with `{"notebook": id, "note": ...}`; `joined` and `left` with `{"notebook": <as
 * listed>}` when the user gains or loses one; `reset` with `{"notebook": id}` when a resumed
 * position is older than that notebook's history (it is followed from now on).
 */
export class AllNotebooksStream {
  readonly #response: ServerResponse
  readonly #user: string
  readonly #options: AllNotebooksOptions
  readonly #followed = new Map<string, Followed>()
  #closed = false
  #heartbeat: NodeJS.Timeout | undefined
  #stopDirectory: (() => void) | undefined
  /** Changes of access heard while the stream was opening: applied once it is open. */
  #early: Heard[] | undefined = []
  /** How many times the user's departure from each notebook has been heard, by notebook id. */
  readonly #lefts = new Map<string, number>()
  /** The joins and departures being handled, in order. */
  #accessQueue: Promise<void> = Promise.resolve()

  constructor(response: ServerResponse, user: string, options: AllNotebooksOptions) {
    this.#response = response
    this.#user = user
    this.#options = options
    response.once('close', () => this.#end())
  }

  /** Starts the stream after `position` (Last-Event-ID), or from now when it is undefined. */
  async open(position: Position | undefined): Promise<void> {
    const { directory } = this.#options
    // Registered before the list is read: a change of access meanwhile is not missed.
    this.#stopDirectory = directory.subscribe((change) => {
      const own = change.type !== 'renamed' && change.user === this.#user
      if (own && (change.type === 'joined' || change.type === 'left')) {
        const id = change.notebook
        // Counted at once: nothing more of the notebook is sent from now (#following).
        if (change.type === 'left') this.#lefts.set(id, this.#leftsOf(id) + 1)
        const heard = { change, lefts: this.#leftsOf(id) }
        if (this.#early !== undefined) this.#early.push(heard)
        else this.#inOrder(heard)
      } else {
        this.#update(change, this.#early === undefined)
      }
    })
    try {
      // Asked for in the same step as the subscription: a departure heard from now on may be of a
      // membership the list holds, so it ends it (and a join heard after it follows it again).
      const views = await directory.list(this.#user)
      if (this.#closed) return
      const joined: string[] = []
      const reset: string[] = []
      for (const view of views) {
        const followed = await this.#follow(view, 0)
        if (followed === undefined) continue
        if (this.#closed) return
        const token = position?.get(view.id)
        const { since, store } = followed.access
        const resume =
          token === undefined || store === defaultStore(this.#user)
            ? 'token'
            : resumeAt(token, since)
        if (token !== undefined && resume === 'token') {
          followed.token = token
          followed.last = undefined
        } else if (resume === 'start') {
          // Left and joined again while the client was away: from where this membership began.
          followed.token = since as string
          followed.last = sequenceOf(followed.token)
          joined.push(view.id)
        } else if (resume === 'reset') {
          // Cannot tell whether it was a member for the changes after its token: from now.
          reset.push(view.id)
        } else if (position !== undefined) {
          // Joined while the client was away: it learns of it, and follows it from now.
          joined.push(view.id)
        }
      }
      this.#response.flushHeaders()
      let opening = `retry: ${RETRY_MS}\nid: ${this.#id()}\ndata: {}\n\n`
      if (position !== undefined) {
        for (const id of position.keys()) {
          // A notebook of the position the user is no longer in: it was left while away.
          if (!this.#followed.has(id)) {
            opening += `event: left\nid: ${this.#id()}\ndata: ${JSON.stringify({ notebook: { id } })}\n\n`
          }
        }
        for (const id of joined) {
          const followed = this.#followed.get(id) as Followed
          opening += `event: joined\nid: ${this.#id()}\ndata: ${JSON.stringify({ notebook: followed.view })}\n\n`
        }
        for (const id of reset) {
          opening += `event: reset\nid: ${this.#id()}\ndata: ${JSON.stringify({ notebook: id })}\n\n`
        }
      }
      this.#write(opening)
      this.#heartbeat = setInterval(
        () => this.#write(HEARTBEAT.raw.toString()),
        this.#options.tuning.heartbeatMs,
      )
      this.#heartbeat.unref()
      for (const followed of this.#followed.values()) {
        followed.reading = false
        void this.#catchUp(followed)
      }
      const early = this.#early ?? []
      this.#early = undefined
      for (const change of early) this.#inOrder(change)
    } catch (err) {
      this.#fail(err)
    }
  }

  /**
   * Starts following a notebook after `since` (the version its join carried), or from its current
   * version; catchUp reads what follows, once the caller has told of it and set `reading` false
   * (live changes are held until then). Undefined when the user is not a member, or a departure
   * from it was heard since `lefts`.
   */
  async #follow(view: NotebookView, lefts: number, since?: string): Promise<Followed | undefined> {
    const access = await this.#options.directory.access(this.#user, view.id)
    if (access === undefined || this.#closed || this.#leftsOf(view.id) !== lefts) return undefined
    const store = this.#options.storeOf(access.store)
    const followed: Followed = {
      view,
      access,
      store,
      token: since ?? '',
      last: since === undefined ? undefined : sequenceOf(since),
      held: [],
      reading: true,
      again: false,
      unsubscribe: () => {},
      lefts,
    }
    followed.unsubscribe = store.subscribe((change) => this.#receive(followed, change))
    if (since === undefined) {
      followed.token = await store.version()
      followed.last = sequenceOf(followed.token)
      if (this.#closed || this.#leftsOf(view.id) !== lefts) {
        followed.unsubscribe()
        return undefined
      }
    }
    this.#followed.set(view.id, followed)
    return followed
  }

  #leftsOf(id: string): number {
    return this.#lefts.get(id) ?? 0
  }

  /** Whether the stream still sends `followed`'s changes: open, followed, no departure heard. */
  #following(followed: Followed): boolean {
    const { id } = followed.view
    return (
      !this.#closed && this.#followed.get(id) === followed && this.#leftsOf(id) === followed.lefts
    )
  }

  /** The stream's place: every notebook's id and last token. */
  #id(): string {
    return [...this.#followed.entries()]
      .map(([id, followed]) => `${id}.${followed.token}`)
      .join('~')
  }

  #receive(followed: Followed, change: Change): void {
    if (!this.#following(followed)) return
    if (followed.reading || this.#early !== undefined) {
      followed.held.push(change)
      followed.again ||= followed.held.length > this.#options.tuning.historyPage
      return
    }
    const last = followed.last
    if (last !== undefined && change.sequence <= last) return
    if (last === undefined || change.sequence !== last + 1) {
      // A gap, or a place not known yet: the history has what lies between.
      followed.held.push(change)
      void this.#catchUp(followed)
      return
    }
    this.#send(followed, change)
  }

  #send(followed: Followed, change: Change): void {
    followed.last = change.sequence
    followed.token = change.version
    const data = `{"notebook":${JSON.stringify(followed.view.id)},"note":${change.data}}`
    this.#write(`event: ${change.type}\nid: ${this.#id()}\ndata: ${data}\n\n`)
  }

  /** Sends a notebook's history after its token, then what it held, then takes it live. */
  async #catchUp(followed: Followed): Promise<void> {
    if (followed.reading) {
      followed.again = true
      return
    }
    followed.reading = true
    try {
      do {
        followed.again = false
        followed.held = []
        for (;;) {
          const page = this.#options.tuning.historyPage
          const changes = await followed.store.changesSince(followed.token, page)
          if (!this.#following(followed)) return
          if (changes === undefined) {
            // Too old for this notebook's history (or another epoch): it is followed from now.
            followed.token = await followed.store.version()
            if (!this.#following(followed)) return
            followed.last = sequenceOf(followed.token)
            followed.held = []
            this.#write(
              `event: reset\nid: ${this.#id()}\ndata: ${JSON.stringify({ notebook: followed.view.id })}\n\n`,
            )
            break
          }
          const { directory } = this.#options
          if (changes.length > 0 && directory.caughtUp !== undefined) {
            // A departure made before one of these changes is heard first, and stops them.
            await directory.caughtUp()
            if (!this.#following(followed)) return
          }
          followed.last ??= sequenceOf(followed.token)
          for (const change of changes) this.#send(followed, change)
          if (changes.length < page) break
        }
        for (const change of followed.held.splice(0)) {
          const last = followed.last
          if (last !== undefined && change.sequence === last + 1) this.#send(followed, change)
          else if (last === undefined || change.sequence > last) followed.again = true
        }
      } while (followed.again && !this.#closed)
    } catch (err) {
      this.#fail(err)
    } finally {
      followed.reading = false
    }
  }

  /**
   * Handles the user's joins and departures one at a time, in the order they were heard: a join
   * still reading the list must not follow a notebook whose departure came meanwhile.
   */
  #inOrder(heard: Heard): void {
    this.#accessQueue = this.#accessQueue
      .then(() => this.#access(heard))
      .catch((err: unknown) => this.#fail(err))
  }

  /**
   * A change that leaves the user's place as it was but changes how a followed notebook is listed:
   * its name, their role, its count of members (counted only once the stream is open: the list
   * it opened with already holds the changes before).
   */
  #update(change: AccessChange, counted: boolean): void {
    const followed = this.#followed.get(change.notebook)
    if (followed === undefined) return
    const { view } = followed
    if (change.type === 'renamed') followed.view = { ...view, name: change.name }
    else if (change.type === 'role' && change.user === this.#user) {
      followed.view = { ...view, role: change.role }
    } else if (counted && change.type === 'joined') {
      followed.view = { ...view, members: view.members + 1 }
    } else if (counted && change.type === 'left') {
      followed.view = { ...view, members: view.members - 1 }
    }
  }

  /** The user joined or left a notebook. */
  async #access({ change, lefts }: Heard): Promise<void> {
    if (this.#closed || change.type === 'renamed' || change.type === 'role') return
    const id = change.notebook
    const current = this.#followed.get(id)
    if (change.type === 'left') {
      if (current === undefined) return
      // Nothing more of it: no change held or arriving later is sent.
      current.unsubscribe()
      this.#followed.delete(id)
      const view = { ...current.view }
      this.#write(`event: left\nid: ${this.#id()}\ndata: ${JSON.stringify({ notebook: view })}\n\n`)
      return
    }
    // Followed already, or a departure from it was heard since: that membership is over.
    if (current !== undefined || this.#leftsOf(id) !== lefts) return
    const view = (await this.#options.directory.list(this.#user)).find(
      (notebook) => notebook.id === id,
    )
    if (view === undefined || this.#closed || this.#followed.has(id)) return
    const followed = await this.#follow(view, lefts, change.version)
    if (followed === undefined) return
    if (!this.#following(followed)) {
      // Its departure came meanwhile: not told of, so its `left` finds nothing to end.
      followed.unsubscribe()
      if (this.#followed.get(id) === followed) this.#followed.delete(id)
      return
    }
    this.#write(`event: joined\nid: ${this.#id()}\ndata: ${JSON.stringify({ notebook: view })}\n\n`)
    followed.reading = false
    void this.#catchUp(followed)
  }

  #write(text: string): void {
    if (this.#closed) return
    const response = this.#response
    response.write(text)
    if (response.writableLength > this.#options.tuning.maxBacklogBytes) {
      // The client does not read: it resumes from its last id.
      response.destroy()
    }
  }

  #fail(err: unknown): void {
    if (this.#closed) return
    this.#options.onError(err)
    this.#response.destroy()
  }

  /** Ends the stream (and, when the client has not, its response). */
  close(): void {
    if (this.#closed) return
    this.#response.end()
    this.#end()
  }

  #end(): void {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#heartbeat)
    this.#stopDirectory?.()
    for (const followed of this.#followed.values()) followed.unsubscribe()
    this.#followed.clear()
    this.#options.onEnd()
  }
}
