import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Directory } from '../store/directory.js'
import type { NoteStore } from '../store/types.js'
import { AllNotebooksStream, type Position } from './all-notebooks-stream.js'
import { NOTES_PATH } from './answer.js'
import { ChangeFeed } from './change-feed.js'
import { revokedText } from './event-framing.js'
import { type FeedTuning, StreamCount } from './feed-tuning.js'
import { OpenExports } from './note-export.js'
import { NoteOperations } from './note-operations.js'

export interface NotebookServicesOptions {
  /** The store of the notebook with this name: the same one every time it is asked for. */
  storeOf: (notebook: string) => NoteStore
  /**
   * The notebook as one member writes it (Notebooks.writerFor), for a notebook whose members can
   * lose access; undefined when there are no such notebooks (user tokens off).
   */
  writerFor?: ((notebook: string, user: string) => NoteStore) | undefined
  /** The change feeds' pacing and cap (the cap counts the streams of every notebook). */
  tuning: FeedTuning
  /** Hears of a store that failed a stream's read. */
  onError: (err: unknown) => void
  /** Closes an ended stream's connection (the server's lingering close). */
  closeConnection: (socket: Socket) => void
  /**
   * Streams one notebook's feed may hold at most (a user's share of the cap), so that one user
   * cannot take them all; undefined leaves every notebook the whole cap.
   */
  streamsPerNotebook?: number | undefined
  /** The operations of one notebook, when a test changes what they answer; NoteOperations otherwise. */
  operations?: (store: NoteStore, notebook: string) => NoteOperations
}

/**
 * What serves each notebook: its NoteOperations (with their list caches) and its
 * change feed, made on first use and kept. Every lane asks here with the notebook the request's
 * caller acts on, so that nothing one notebook's requests build (a cached list, an ETag, a
 * stream) is ever served to another's. The feeds share one cap on open streams.
 */
export class NotebookServices {
  readonly #options: NotebookServicesOptions
  readonly #operations = new Map<string, NoteOperations>()
  /** Per notebook, its writing members' operations (over writerFor), by user. */
  readonly #writers = new Map<string, Map<string, NoteOperations>>()
  readonly #feeds = new Map<string, ChangeFeed>()
  /** The streams of every notebook, and how many each user has open. */
  readonly #all = new Set<AllNotebooksStream>()
  readonly #allOf = new Map<string, number>()
  /** The store of each notebook id a member's stream was opened on. */
  readonly #storeOf = new Map<string, string>()
  readonly #streams = new StreamCount()
  /** The exports being sent, of every notebook: a shutdown ends them with the event streams. */
  readonly exports = new OpenExports()
  #closing = false

  constructor(options: NotebookServicesOptions) {
    this.#options = options
  }

  /**
   * The operations of `notebook`, served at `notesPath` (what a page's Link names): '/api/note' by
   * default, '/api/notebooks/<nb>/note' at a notebook's own path. Each path has its own cached
   * answers, so a Link never names another path.
   */
  operations(notebook: string, notesPath = NOTES_PATH): NoteOperations {
    const key = notesPath === NOTES_PATH ? notebook : `${notebook}\n${notesPath}`
    let operations = this.#operations.get(key)
    if (operations === undefined) {
      const store = this.#options.storeOf(notebook)
      operations =
        this.#options.operations?.(store, notebook) ?? new NoteOperations(store, notesPath)
      this.#operations.set(key, operations)
    }
    return operations
  }

  /**
   * The operations of `notebook` whose writes are applied only while `user` may still write there:
   * reads as operations(notebook)'s, each write checked again as it is applied.
   */
  operationsAs(notebook: string, user: string): NoteOperations {
    const { writerFor } = this.#options
    if (writerFor === undefined) return this.operations(notebook)
    let writers = this.#writers.get(notebook)
    if (writers === undefined) {
      writers = new Map()
      this.#writers.set(notebook, writers)
    }
    let operations = writers.get(user)
    if (operations === undefined) {
      const store = writerFor(notebook, user)
      operations = this.#options.operations?.(store, notebook) ?? new NoteOperations(store)
      writers.set(user, operations)
    }
    return operations
  }

  /** Forgets what was made for `user` in `notebook` (they left it), or for every user (it went). */
  forget(notebook: string, user?: string): void {
    if (user === undefined) {
      this.#writers.delete(notebook)
      for (const key of this.#operations.keys()) {
        if (key === notebook || key.startsWith(`${notebook}\n`)) this.#operations.delete(key)
      }
    } else {
      this.#writers.get(notebook)?.delete(user)
    }
  }

  /** The store of the notebook (an export reads it directly). */
  store(notebook: string): NoteStore {
    return this.#options.storeOf(notebook)
  }

  /**
   * The store of `notebook` as `user` writes it, each write applied only while they may still
   * write there (Notebooks.writerFor); the store as it is without a `user` who can lose access.
   */
  writerStore(notebook: string, user: string | undefined): NoteStore {
    const { writerFor, storeOf } = this.#options
    return user === undefined || writerFor === undefined
      ? storeOf(notebook)
      : writerFor(notebook, user)
  }

  feed(notebook: string): ChangeFeed {
    let feed = this.#feeds.get(notebook)
    if (feed === undefined) {
      const { storeOf, tuning, onError, closeConnection, streamsPerNotebook } = this.#options
      feed = new ChangeFeed(
        storeOf(notebook),
        tuning,
        onError,
        closeConnection,
        this.#streams,
        streamsPerNotebook,
      )
      if (this.#closing) feed.close()
      this.#feeds.set(notebook, feed)
    }
    return feed
  }

  /**
   * Opens a stream of `store`'s feed for `member` of notebook `id`: when they leave it (or it is
   * removed), the stream gets `revoked` and ends (watch). undefined `member`: they cannot leave.
   * `reset`: `since` is not read from, the stream starts with a reset (as for a token too old).
   */
  openStream(
    store: string,
    response: ServerResponse,
    since: string | undefined,
    member?: { id: string; user: string },
    reset = false,
  ): void {
    if (member !== undefined) this.#storeOf.set(member.id, store)
    this.feed(store).open(response, since, member?.user, reset)
  }

  /**
   * Follows the directory's changes of access: a member who left a notebook (removed, left, or it
   * was removed) has their streams of it revoked at once, and what was made for them forgotten.
   * Answers the function that stops.
   */
  watch(directory: Directory): () => void {
    return directory.subscribe((change) => {
      if (change.type !== 'left') return
      const store = this.#storeOf.get(change.notebook)
      if (store === undefined) return
      this.#feeds.get(store)?.revoke(change.user, revokedText(change.notebook))
      this.forget(store, change.user)
    })
  }

  /**
   * Whether `user` may open one more stream of every notebook: within the service's cap, and within
   * a notebook's share of it for that user's streams of every notebook.
   */
  admitsAll(user: string): boolean {
    const { tuning, streamsPerNotebook } = this.#options
    if (this.#closing || this.#streams.open >= tuning.maxStreams) return false
    return streamsPerNotebook === undefined || (this.#allOf.get(user) ?? 0) < streamsPerNotebook
  }

  /**
   * Takes over a response whose head is set but not sent, and streams every notebook `user` can
   * read to it, after `position` (undefined: from now). It counts as one stream toward the cap.
   */
  openAll(
    response: ServerResponse,
    user: string,
    position: Position | undefined,
    directory: Directory,
  ): void {
    const { storeOf, tuning, onError } = this.#options
    this.#streams.open++
    this.#allOf.set(user, (this.#allOf.get(user) ?? 0) + 1)
    const stream = new AllNotebooksStream(response, user, {
      directory,
      storeOf,
      tuning,
      onError,
      onEnd: () => {
        this.#streams.open--
        const open = (this.#allOf.get(user) ?? 1) - 1
        if (open === 0) this.#allOf.delete(user)
        else this.#allOf.set(user, open)
        this.#all.delete(stream)
      },
    })
    this.#all.add(stream)
    void stream.open(position)
  }

  /** True once close() has been called: no stream may open. */
  get closing(): boolean {
    return this.#closing
  }

  /**
   * Ends every stream and export of every notebook at once; a shutdown is not held up by open
   * streams or slow export readers.
   */
  close(): void {
    this.#closing = true
    this.exports.close()
    for (const feed of this.#feeds.values()) feed.close()
    for (const stream of [...this.#all]) stream.close()
  }
}
