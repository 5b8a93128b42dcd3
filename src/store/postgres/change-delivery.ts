import pg from 'pg'
import type { Change, ChangeType } from '../types.js'
import { isUnavailable } from './connection.js'
import type { Database } from './database.js'
import type { NotebookDb } from './notebook-db.js'
import { readChangesAfter, readSequences } from './queries.js'

/** Changes read from the history by one statement at most. */
const CHANGES_PER_READ = 1000

/** A change row (of a query that found one) as subscribers get it. */
export function changeOf(
  db: NotebookDb,
  row: { sequence: string | null; type: ChangeType | null; data: string | null },
): Change {
  const sequence = Number(row.sequence)
  return {
    type: row.type as ChangeType,
    version: db.token(sequence),
    sequence,
    data: row.data as string,
  }
}

/**
 * Delivers every change of one notebook to its subscribers on this instance, in sequence order,
 * whichever instance wrote it: a notification (ChangeListener), this instance's own write or the
 * poll makes the pump read notes_changes after the last sequence delivered. The history, not the
 * notification, is what is delivered, so a listener that reconnects misses nothing and repeats
 * nothing. Nothing runs while no one is subscribed.
 */
export class ChangeDelivery {
  readonly #db: NotebookDb
  readonly #listener: ChangeListener
  readonly #listeners = new Set<(change: Change) => void>()
  /** The last sequence delivered; undefined until the notebook is open. */
  #cursor: number | undefined
  #pumping = false
  #pumpAgain = false
  #closed = false

  constructor(db: NotebookDb, listener: ChangeListener) {
    this.#db = db
    this.#listener = listener
  }

  get notebook(): string {
    return this.#db.name
  }

  subscribe(listener: (change: Change) => void): () => void {
    // A wrapper, so that one function subscribed twice is called twice and removed once.
    const subscription = (change: Change) => listener(change)
    this.#listeners.add(subscription)
    if (this.#listeners.size === 1) this.#start()
    return () => {
      this.#listeners.delete(subscription)
      if (this.#listeners.size === 0) this.#listener.remove(this)
    }
  }

  /** Delivers what has changed since the last delivery (a write of this instance calls it). */
  pump(): void {
    if (this.#listeners.size === 0 || this.#closed) return
    if (this.#pumping) {
      this.#pumpAgain = true
      return
    }
    this.#pumping = true
    void this.#drain().finally(() => {
      this.#pumping = false
      if (this.#pumpAgain) {
        this.#pumpAgain = false
        this.pump()
      }
    })
  }

  /** Whether the notebook at `sequence` has changes not yet delivered here (the poll asks). */
  behind(sequence: number): boolean {
    return this.#cursor === undefined || sequence > this.#cursor
  }

  close(): void {
    this.#closed = true
    this.#listener.remove(this)
  }

  #start(): void {
    this.#cursor = undefined
    const db = this.#db
    if (db.epoch === '') {
      // "From now on" is from the version the notebook opens at: writes wait for the same opening.
      void db.open().then(
        () => {
          this.#cursor ??= db.known
          this.pump()
        },
        () => {},
      )
    } else {
      this.#cursor = db.known
    }
    this.#listener.add(this)
  }

  async #drain(): Promise<void> {
    try {
      if (this.#cursor === undefined) {
        if (this.#db.epoch === '') return
        this.#cursor = this.#db.known
      }
      for (;;) {
        const rows = await readChangesAfter(this.#db, this.#cursor, CHANGES_PER_READ)
        // A change of access committed before these writes is heard first (a removed member's
        // streams end before a later write could reach them).
        if (rows.length > 0) await this.#listener.caughtUp()
        for (const row of rows) {
          if (this.#listeners.size === 0) return
          const change = changeOf(this.#db, row)
          this.#cursor = change.sequence
          for (const listener of this.#listeners) listener(change)
        }
        if (rows.length < CHANGES_PER_READ) return
      }
    } catch (err) {
      // The database is away: the next notification or poll tries again from the same cursor.
      if (!isGone(err)) throw err
    }
  }
}

/** A database that cannot be reached now, as a pg error or as the store's 503. */
function isGone(err: unknown): boolean {
  return isUnavailable(err) || (err instanceof Error && err.name === 'StoreUnavailableError')
}

/**
 * Woken by the listener besides the notebooks' deliveries (the directory's changes of access):
 * on every notification on `channel`, once LISTEN is in place, and on every poll.
 */
export interface Follower {
  /** A channel of ours, a plain identifier: 'notes_access'. */
  readonly channel: string
  pump(): void
  /** Resolves once everything it follows that was committed before the call is delivered. */
  caughtUp?(): Promise<void>
}

/**
 * The one connection of an instance that LISTENs for the changes of every notebook, and the
 * deliveries it wakes: a notification names the notebook that changed. A poll every `pollMs`
 * reads the sequences of the notebooks followed here (one statement for all of them) and pumps
 * those that are behind, in case a notification was lost with a connection; followers are
 * pumped on every poll. The connection and the timer exist only while some notebook has
 * subscribers, or some follower follows.
 */
export class ChangeListener {
  readonly #db: Database
  readonly #pollMs: number
  /** The deliveries with subscribers, by notebook. */
  readonly #deliveries = new Map<string, Set<ChangeDelivery>>()
  readonly #followers = new Set<Follower>()
  #client: pg.Client | undefined
  /** Whether #client LISTENs on #channels (every one is LISTENed when it connects). */
  #listening = false
  readonly #channels = new Set<string>()
  #poll: NodeJS.Timeout | undefined
  #polling = false
  #closed = false

  constructor(db: Database, pollMs: number) {
    this.#db = db
    this.#pollMs = pollMs
  }

  add(delivery: ChangeDelivery): void {
    if (this.#closed) return
    const { notebook } = delivery
    let set = this.#deliveries.get(notebook)
    if (set === undefined) {
      set = new Set()
      this.#deliveries.set(notebook, set)
    }
    set.add(delivery)
    this.#start()
  }

  remove(delivery: ChangeDelivery): void {
    const set = this.#deliveries.get(delivery.notebook)
    if (set === undefined || !set.delete(delivery)) return
    if (set.size === 0) this.#deliveries.delete(delivery.notebook)
    if (this.#idle()) this.#stop()
  }

  follow(follower: Follower): void {
    if (this.#closed || this.#followers.has(follower)) return
    this.#followers.add(follower)
    const client = this.#client
    if (this.#listening && client !== undefined) {
      void this.#listen(client).then(
        () => follower.pump(),
        () => {},
      )
    }
    this.#start()
  }

  /** Resolves once every follower has delivered what was committed before the call. */
  async caughtUp(): Promise<void> {
    if (this.#followers.size === 0) return
    await Promise.all([...this.#followers].map((follower) => follower.caughtUp?.()))
  }

  unfollow(follower: Follower): void {
    if (this.#followers.delete(follower) && this.#idle()) this.#stop()
  }

  close(): void {
    this.#closed = true
    for (const set of this.#deliveries.values()) for (const delivery of set) delivery.close()
    this.#deliveries.clear()
    this.#followers.clear()
    this.#stop()
  }

  #idle(): boolean {
    return this.#deliveries.size === 0 && this.#followers.size === 0
  }

  #start(): void {
    if (this.#poll !== undefined) return
    this.#poll = setInterval(() => void this.#pollAll(), this.#pollMs)
    this.#poll.unref()
    void this.#connect()
  }

  #pumpAll(): void {
    for (const set of this.#deliveries.values()) for (const delivery of set) delivery.pump()
    for (const follower of this.#followers) follower.pump()
  }

  async #pollAll(): Promise<void> {
    if (this.#polling || this.#idle()) return
    this.#polling = true
    for (const follower of this.#followers) follower.pump()
    try {
      const rows = await readSequences(this.#db, [...this.#deliveries.keys()])
      for (const row of rows) {
        for (const delivery of this.#deliveries.get(row.notebook) ?? []) {
          if (delivery.behind(Number(row.sequence))) delivery.pump()
        }
      }
    } catch (err) {
      if (!isGone(err)) throw err
    } finally {
      this.#polling = false
    }
  }

  async #connect(): Promise<void> {
    if (this.#closed || this.#idle() || this.#client !== undefined) return
    const client = new pg.Client({ connectionString: this.#db.url })
    this.#client = client
    const lost = () => {
      if (this.#client !== client) return
      this.#client = undefined
      this.#listening = false
      void client.end().catch(() => {})
      setTimeout(() => void this.#connect(), 500).unref()
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', ({ channel, payload }) => {
      if (channel === 'notes_changes') {
        for (const delivery of this.#deliveries.get(payload ?? '') ?? []) delivery.pump()
      }
      for (const follower of this.#followers) if (follower.channel === channel) follower.pump()
    })
    try {
      await client.connect()
      this.#channels.clear()
      await this.#listen(client)
      this.#listening = true
      this.#pumpAll()
    } catch {
      lost()
    }
  }

  /** LISTENs on every channel not yet listened to: the notebooks' and each follower's. */
  async #listen(client: pg.Client): Promise<void> {
    const unheard = () =>
      ['notes_changes', ...[...this.#followers].map((follower) => follower.channel)].find(
        (channel) => !this.#channels.has(channel),
      )
    for (let channel = unheard(); channel !== undefined; channel = unheard()) {
      this.#channels.add(channel)
      await client.query(`LISTEN ${channel}`)
    }
  }

  #stop(): void {
    if (this.#poll !== undefined) clearInterval(this.#poll)
    this.#poll = undefined
    const client = this.#client
    this.#client = undefined
    this.#listening = false
    if (client !== undefined) void client.end().catch(() => {})
  }
}
