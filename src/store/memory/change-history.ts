import type { Change } from '../types.js'

/**
 * A memory store's change feed: the last changes, kept for `after` to replay, and
 * the subscribers each change goes to. Changes are numbered by sequence from 1; the history holds
 * changes start+1 ... the last one published, at least the last `limit` of them (none when
 * `limit` is 0).
 */
export class ChangeHistory {
  readonly #limit: number
  /** The last changes, oldest first; at most 1.125 times the limit. */
  #changes: Change[] = []
  #start = 0
  readonly #listeners = new Set<(change: Change) => void>()

  constructor(limit: number) {
    this.#limit = limit
  }

  /** The sequence before the oldest change kept. */
  get start(): number {
    return this.#start
  }

  /** The changes kept, oldest first. */
  get changes(): readonly Change[] {
    return this.#changes
  }

  /** Holds the history of a store's image: `changes`, the first of them after `start`. */
  load(changes: readonly Change[], start: number): void {
    this.#changes = [...changes]
    this.#start = start
  }

  /**
   * Up to `limit` changes after `sequence`, or undefined when the history no longer reaches back
   * to it or it is past `current`, the store's sequence.
   */
  after(sequence: number, current: number, limit: number): readonly Change[] | undefined {
    if (sequence > current) return undefined
    if (sequence < Math.max(this.#start, current - this.#limit)) return undefined
    const from = sequence - this.#start
    return this.#changes.slice(from, from + limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    // A wrapper, so that one function subscribed twice is called twice and removed once.
    const subscription = (change: Change) => listener(change)
    this.#listeners.add(subscription)
    return () => {
      this.#listeners.delete(subscription)
    }
  }

  /** A change into the history and to every subscriber. */
  publish(change: Change): void {
    const { sequence } = change
    if (this.#limit > 0) {
      this.#changes.push(change)
      // Trimmed in steps of an eighth, so the history holds 1 to 1.125 times its limit: a heap
      // that a soak watches stays level once the history is full.
      if (this.#changes.length >= this.#limit + Math.max(64, this.#limit >> 3)) {
        const drop = this.#changes.length - this.#limit
        this.#changes = this.#changes.slice(drop)
        this.#start += drop
      }
    } else {
      this.#start = sequence
    }
    for (const listener of this.#listeners) listener(change)
  }
}
