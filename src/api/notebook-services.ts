import type { Socket } from 'node:net'
import type { NoteStore } from '../store/types.js'
import { ChangeFeed, StreamCount } from './change-feed.js'
import type { FeedTuning } from './feed-tuning.js'
import { OpenExports } from './note-export.js'
import { NoteOperations } from './note-operations.js'

export interface NotebookServicesOptions {
  /** The store of the notebook with this name: the same one every time it is asked for. */
  storeOf: (notebook: string) => NoteStore
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
  readonly #feeds = new Map<string, ChangeFeed>()
  readonly #streams = new StreamCount()
  /** The exports being sent, of every notebook: a shutdown ends them with the event streams. */
  readonly exports = new OpenExports()
  #closing = false

  constructor(options: NotebookServicesOptions) {
    this.#options = options
  }

  operations(notebook: string): NoteOperations {
    let operations = this.#operations.get(notebook)
    if (operations === undefined) {
      const store = this.#options.storeOf(notebook)
      operations = this.#options.operations?.(store, notebook) ?? new NoteOperations(store)
      this.#operations.set(notebook, operations)
    }
    return operations
  }

  /** The store of the notebook (an export reads it directly). */
  store(notebook: string): NoteStore {
    return this.#options.storeOf(notebook)
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
  }
}
