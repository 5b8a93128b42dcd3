import type { RememberedKey } from './records.js'

/**
 * The idempotency keys a memory store remembers, oldest first: each until it
 * expires, and at most `max` of them, the oldest dropped first.
 */
export class RememberedKeys {
  readonly #max: number
  readonly #keys = new Map<string, RememberedKey>()

  constructor(max: number) {
    this.#max = max
  }

  /** The key as remembered, if it is and has not expired (the clock is read only then). */
  live(key: string, now: () => number): RememberedKey | undefined {
    const known = this.#keys.get(key)
    return known !== undefined && known.expires > now() ? known : undefined
  }

  /** The key as remembered, expired or not. */
  get(key: string): RememberedKey | undefined {
    return this.#keys.get(key)
  }

  /** Remembers a key as the newest, then drops the expired ones and those beyond the bound. */
  remember(key: string, remembered: RememberedKey, now: number): void {
    this.#keys.delete(key)
    this.#keys.set(key, remembered)
    // Oldest first: drop the expired ones and those beyond the bound.
    for (const [oldKey, kept] of this.#keys) {
      if (this.#keys.size <= this.#max && kept.expires > now) break
      this.#keys.delete(oldKey)
    }
  }

  /** Every key remembered, oldest first (a store's image). */
  entries(): (readonly [string, RememberedKey])[] {
    return [...this.#keys]
  }

  /** Holds the keys of a store's image, oldest first, as they were. */
  load(keys: readonly (readonly [string, RememberedKey])[]): void {
    for (const [key, remembered] of keys) this.#keys.set(key, remembered)
  }
}
