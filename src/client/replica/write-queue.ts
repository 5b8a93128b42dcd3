import type { ReplicaStorage, ReplicaWrite } from './storage.js'

/**
 * Every storage write of a replica, in call order, with group commit: the writes called while one
 * is on its way go to the storage together, as one write (all or nothing, as each was), when it
 * has settled. A burst of the feed's changes (a catch-up of 1,000) then costs a few storage
 * transactions instead of one each, and nothing is reordered: a later write never lands before an
 * earlier one. Each caller's promise settles with the write its changes went in.
 */
export class WriteQueue {
  readonly #storage: ReplicaStorage
  #changes: ReplicaWrite[] = []
  #callers: { resolve: () => void; reject: (reason: unknown) => void }[] = []
  #running: Promise<void> | undefined

  constructor(storage: ReplicaStorage) {
    this.#storage = storage
  }

  /** Stores `changes` after every write called before, perhaps together with others. */
  write(changes: readonly ReplicaWrite[]): Promise<void> {
    return new Promise((resolve, reject) => {
      for (const change of changes) this.#changes.push(change)
      this.#callers.push({ resolve, reject })
      this.#running ??= this.#drain()
    })
  }

  /** Settles once every write called so far has (whether it was stored or refused). */
  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running
  }

  async #drain(): Promise<void> {
    while (this.#callers.length > 0) {
      const changes = this.#changes
      const callers = this.#callers
      this.#changes = []
      this.#callers = []
      try {
        await this.#storage.write(changes)
        for (const caller of callers) caller.resolve()
      } catch (err) {
        for (const caller of callers) caller.reject(err)
      }
    }
    this.#running = undefined
  }
}
