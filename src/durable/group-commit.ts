/**
 * Group commit, as databases batch their log flushes: items are queued, and every item queued
 * while a batch is committed (written and fsynced) goes into the next batch, so one fsync serves
 * them all. Used by the service's journal and the client's file storage; what a batch's commit
 * writes, and how it settles its items, is theirs. `commit` settles every item of its batch and
 * does not throw.
 */
export class GroupCommit<T> {
  readonly #commit: (batch: T[]) => Promise<void>
  #queue: T[] = []
  #busy = false
  #idle: (() => void)[] = []

  constructor(commit: (batch: T[]) => Promise<void>) {
    this.#commit = commit
  }

  /** Queues an item; the first batch starts a turn later, so the items of this tick join it. */
  push(item: T): void {
    this.#queue.push(item)
    if (!this.#busy) void this.#pump()
  }

  /** Takes every item queued and not yet in a batch (those after a failed batch). */
  takeQueued(): T[] {
    return this.#queue.splice(0)
  }

  /** Whether a batch is being committed (or about to be). */
  get busy(): boolean {
    return this.#busy
  }

  /** Resolves once the queue is empty and no batch runs: at once when none does. */
  idle(): Promise<void> {
    if (!this.#busy) return Promise.resolve()
    return new Promise<void>((resolve) => this.#idle.push(resolve))
  }

  async #pump(): Promise<void> {
    this.#busy = true
    // One turn lets the items of this tick join the first batch.
    await Promise.resolve()
    while (this.#queue.length > 0) {
      const batch = this.#queue
      this.#queue = []
      await this.#commit(batch)
    }
    this.#busy = false
    for (const resolve of this.#idle.splice(0)) resolve()
  }
}
