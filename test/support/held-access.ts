import type { AccessChange } from '../../src/store/directory.js'
import type { Notebooks } from '../../src/store/types.js'

/**
 * Holds back what the subscribers of a directory hear, while every act still takes effect at once:
 * what a stream on another instance, or one whose listener falls behind, sees of the changes of
 * access. `wrap` gives the notebooks whose directory delivers this way; `hold` starts holding,
 * `release` lets the held changes through, in order. Its caughtUp (as PostgreSQL's directory has)
 * resolves once nothing is held.
 */
export class HeldAccess {
  readonly #held: AccessChange[] = []
  readonly #listeners = new Set<(change: AccessChange) => void>()
  #holding = false
  /** Who waits for nothing to be held (caughtUp). */
  readonly #waiting: (() => void)[] = []
  /** Who waits for a subscriber to ask caughtUp while changes are held. */
  readonly #askers: (() => void)[] = []

  hold(): void {
    this.#holding = true
  }

  /** Delivers the first `count` changes held (all by default); releasing all stops holding. */
  release(count = Number.POSITIVE_INFINITY): void {
    const all = count >= this.#held.length
    if (all) this.#holding = false
    for (const change of this.#held.splice(0, count)) this.#deliver(change)
    if (this.#held.length === 0) for (const resolve of this.#waiting.splice(0)) resolve()
  }

  /** Resolves once a subscriber has asked to be caught up while some change was held. */
  asked(): Promise<void> {
    return new Promise((resolve) => this.#askers.push(resolve))
  }

  /** `notebooks`, with a directory whose subscribers hear changes as this lets them. */
  wrap(notebooks: Notebooks): Notebooks {
    const inner = notebooks.directory
    let stop: (() => void) | undefined
    const subscribe = (listener: (change: AccessChange) => void): (() => void) => {
      const subscription = (change: AccessChange) => listener(change)
      this.#listeners.add(subscription)
      stop ??= inner.subscribe((change) => {
        if (this.#holding) this.#held.push(change)
        else this.#deliver(change)
      })
      return () => {
        this.#listeners.delete(subscription)
        if (this.#listeners.size > 0) return
        stop?.()
        stop = undefined
      }
    }
    const caughtUp = async (): Promise<void> => {
      await (inner as { caughtUp?: () => Promise<void> }).caughtUp?.()
      if (this.#held.length === 0) return
      for (const resolve of this.#askers.splice(0)) resolve()
      await new Promise<void>((resolve) => this.#waiting.push(resolve))
    }
    const directory = forwarding(inner, { subscribe, caughtUp })
    return forwarding(notebooks, { directory })
  }

  #deliver(change: AccessChange): void {
    for (const listener of [...this.#listeners]) listener(change)
  }
}

/** `target` with `own` in place of some of its members; its methods are called on `target`. */
function forwarding<T extends object>(target: T, own: Record<string, unknown>): T {
  return new Proxy(target, {
    get(object, key) {
      if (typeof key === 'string' && Object.hasOwn(own, key)) return own[key]
      const value: unknown = Reflect.get(object, key, object)
      return typeof value === 'function' ? value.bind(object) : value
    },
  })
}
