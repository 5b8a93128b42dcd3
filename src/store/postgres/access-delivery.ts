import type { AccessChange } from '../directory.js'
import type { ChangeListener, Follower } from './change-delivery.js'
import { isUnavailable } from './connection.js'
import type { Database } from './database.js'

/** Changes of access read by one statement at most. */
const CHANGES_PER_READ = 1000

/** The channel the directory's acts notify at commit (notes_record_access). */
const ACCESS_CHANNEL = 'notes_access'

/**
 * Delivers every change of access (notes_access_changes, numbered in commit order) to the
 * directory's subscribers on this instance, in order, whichever instance made it: a notification
 * on notes_access, this instance's own act, or the listener's poll makes it read the changes after
 * the last one delivered. The table, not the notification, is what is delivered, so a listener
 * that reconnects misses nothing and repeats nothing. Nothing runs while no one is subscribed.
 */
export class AccessDelivery implements Follower {
  readonly channel = ACCESS_CHANNEL
  readonly #db: Database
  readonly #listener: ChangeListener
  readonly #listeners = new Set<(change: AccessChange, sequence: number) => void>()
  /** The last sequence delivered; undefined while no one is subscribed, or until it is read. */
  #cursor: number | undefined
  /** The read of the sequence subscribers start after, while it is under way. */
  #starting: Promise<void> | undefined
  /** Counts subscriptions started and stopped: a read of an earlier one delivers nothing. */
  #generation = 0
  #pumping = false
  #pumpAgain = false
  /** Who waits for a read that starts after they asked (caughtUp). */
  readonly #waiting: (() => void)[] = []
  #closed = false

  constructor(db: Database, listener: ChangeListener) {
    this.#db = db
    this.#listener = listener
  }

  /**
   * `listener` gets each change with its sequence: one that does not follow the last one means
   * changes between were never delivered here (the log was trimmed past them, or delivery began
   * again from the head after the database was away).
   */
  subscribe(listener: (change: AccessChange, sequence: number) => void): () => void {
    // A wrapper, so that one function subscribed twice is called twice and removed once.
    const subscription = (change: AccessChange, sequence: number) => listener(change, sequence)
    this.#listeners.add(subscription)
    if (this.#listeners.size === 1) this.#start()
    return () => {
      this.#listeners.delete(subscription)
      if (this.#listeners.size === 0) this.#stop()
    }
  }

  /**
   * Resolves once the subscribers' "from now on" is fixed: every act of this instance waits for
   * it, so an act made after subscribe() is heard even when its commit beats that first read.
   */
  ready(): Promise<void> {
    return this.#starting ?? Promise.resolve()
  }

  pump(): void {
    if (this.#listeners.size === 0 || this.#closed) return
    if (this.#pumping) {
      this.#pumpAgain = true
      return
    }
    this.#pumping = true
    // Those who asked before this read began: it reads every change committed before they asked.
    const waiting = this.#waiting.splice(0)
    void this.#drain().finally(() => {
      this.#pumping = false
      for (const resolve of waiting) resolve()
      if (this.#pumpAgain || this.#waiting.length > 0) {
        this.#pumpAgain = false
        this.pump()
      }
    })
  }

  /**
   * Resolves once every change of access committed before this call has been delivered (a read
   * that starts after it has ended). A notebook's changes wait for it before they are delivered,
   * so that a member removed before a write never hears of that write: the removal's `left`
   * comes first, on every instance. Called just after a first subscribe(), it resolves once
   * that subscriber hears every change committed after the call.
   */
  async caughtUp(): Promise<void> {
    // The subscribers' start comes first: a read made before it knows where to begin delivers
    // nothing, and one made after it must still come.
    await this.#starting
    if (this.#listeners.size === 0 || this.#closed) return
    await new Promise<void>((resolve) => {
      this.#waiting.push(resolve)
      this.pump()
    })
  }

  close(): void {
    this.#closed = true
    this.#stop()
    for (const resolve of this.#waiting.splice(0)) resolve()
  }

  #start(): void {
    if (this.#closed) return
    this.#generation++
    const starting: Promise<void> = this.#lastSequence().then(
      (sequence) => {
        if (this.#starting !== starting) return
        this.#starting = undefined
        this.#cursor = sequence
        this.pump()
      },
      () => {
        // The database is away: the first pump that reaches it starts from where it is then.
        if (this.#starting === starting) this.#starting = undefined
      },
    )
    this.#starting = starting
    this.#listener.follow(this)
  }

  #stop(): void {
    this.#generation++
    this.#cursor = undefined
    this.#starting = undefined
    this.#listener.unfollow(this)
  }

  async #lastSequence(): Promise<number> {
    const { rows } = await this.#db.query<{ sequence: string }>(
      'SELECT sequence FROM notes_access_clock',
    )
    return Number((rows[0] as { sequence: string }).sequence)
  }

  async #drain(): Promise<void> {
    const generation = this.#generation
    try {
      if (this.#starting !== undefined) return
      if (this.#cursor === undefined) {
        const sequence = await this.#lastSequence()
        if (generation !== this.#generation) return
        this.#cursor ??= sequence
      }
      for (;;) {
        const { rows }: { rows: { sequence: string; change: string }[] } = await this.#db.query(
          'SELECT sequence, change FROM notes_access_changes WHERE sequence > $1 ORDER BY sequence LIMIT $2',
          [this.#cursor, CHANGES_PER_READ],
        )
        for (const row of rows) {
          if (generation !== this.#generation) return
          const sequence: number = Number(row.sequence)
          this.#cursor = sequence
          const change = JSON.parse(row.change) as AccessChange
          for (const listener of this.#listeners) listener(change, sequence)
        }
        if (rows.length < CHANGES_PER_READ) return
      }
    } catch (err) {
      // The database is away: the next notification or poll tries again from the same cursor.
      if (!isUnavailable(err) && !(err instanceof Error && err.name === 'StoreUnavailableError')) {
        throw err
      }
    }
  }
}
