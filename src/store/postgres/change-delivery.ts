import pg from 'pg'
import type { Change, ChangeType } from '../types.js'
import { isUnavailable } from './connection.js'
import type { Database } from './database.js'
import { readChangesAfter } from './queries.js'

/** Changes read from the history by one statement at most. */
const CHANGES_PER_READ = 1000

/** A change row (of a query that found one) as subscribers get it. */
export function changeOf(
  db: Database,
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
 * Delivers every change to the store's subscribers, in sequence order, from any instance: a
 * dedicated connection LISTENs, and a notification (or this instance's own write, or the poll)
 * makes the pump read notes_changes after the last sequence delivered. The history, not the
 * notification, is what is delivered, so a listener that reconnects misses nothing and repeats
 * nothing. Nothing runs (no connection, no timer) while no one is subscribed.
 */
export class ChangeDelivery {
  readonly #db: Database
  readonly #url: string
  readonly #pollMs: number
  readonly #listeners = new Set<(change: Change) => void>()
  /** The last sequence delivered; undefined until the store is open. */
  #cursor: number | undefined
  #listener: pg.Client | undefined
  #poll: NodeJS.Timeout | undefined
  #pumping = false
  #pumpAgain = false
  #closed = false

  constructor(db: Database, url: string, pollMs: number) {
    this.#db = db
    this.#url = url
    this.#pollMs = pollMs
  }

  subscribe(listener: (change: Change) => void): () => void {
    // A wrapper, so that one function subscribed twice is called twice and removed once.
    const subscription = (change: Change) => listener(change)
    this.#listeners.add(subscription)
    if (this.#listeners.size === 1) this.#start()
    return () => {
      this.#listeners.delete(subscription)
      if (this.#listeners.size === 0) this.#stop()
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

  close(): void {
    this.#closed = true
    this.#stop()
  }

  #start(): void {
    this.#cursor = undefined
    const db = this.#db
    if (db.epoch === '') {
      // "From now on" is from the version the store opens at: writes wait for the same opening.
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
    this.#poll = setInterval(() => this.pump(), this.#pollMs)
    this.#poll.unref()
    void this.#connectListener()
  }

  async #connectListener(): Promise<void> {
    if (this.#closed || this.#listeners.size === 0 || this.#listener !== undefined) return
    const client = new pg.Client({ connectionString: this.#url })
    this.#listener = client
    const lost = () => {
      if (this.#listener !== client) return
      this.#listener = undefined
      void client.end().catch(() => {})
      setTimeout(() => void this.#connectListener(), 500).unref()
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', () => this.pump())
    try {
      await client.connect()
      await client.query('LISTEN notes_changes')
      this.pump()
    } catch {
      lost()
    }
  }

  #stop(): void {
    if (this.#poll !== undefined) clearInterval(this.#poll)
    this.#poll = undefined
    const client = this.#listener
    this.#listener = undefined
    if (client !== undefined) void client.end().catch(() => {})
  }

  async #drain(): Promise<void> {
    try {
      if (this.#cursor === undefined) {
        if (this.#db.epoch === '') return
        this.#cursor = this.#db.known
      }
      for (;;) {
        const rows = await readChangesAfter(this.#db, this.#cursor, CHANGES_PER_READ)
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
      if (!isUnavailable(err) && !(err instanceof Error && err.name === 'StoreUnavailableError')) {
        throw err
      }
    }
  }
}
