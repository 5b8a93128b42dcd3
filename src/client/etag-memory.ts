/**
 * The ETags the client last saw, per note id, so that writes are conditional by default. Bounded:
 * past `limit` ids the one whose ETag changed (or was first seen) longest ago is forgotten (a Map
 * keeps insertion order, and a note whose ETag changes moves to the end).
 */
export class EtagMemory {
  readonly #limit: number
  readonly #etags = new Map<string, string>()

  constructor(limit: number) {
    this.#limit = limit
  }

  get(id: unknown): string | undefined {
    return this.#etags.get(String(id))
  }

  remember(id: unknown, etag: string | undefined): void {
    if (this.#limit <= 0) return
    const key = String(id)
    if (etag === undefined) {
      this.#etags.delete(key)
      return
    }
    // The same ETag again (a note read over and over) keeps its place: no Map churn per read.
    if (this.#etags.get(key) === etag) return
    this.#etags.delete(key)
    this.#etags.set(key, etag)
    if (this.#etags.size > this.#limit) {
      const oldest = this.#etags.keys().next().value
      if (oldest !== undefined) this.#etags.delete(oldest)
    }
  }

  forget(id: unknown): void {
    this.#etags.delete(String(id))
  }

  get size(): number {
    return this.#etags.size
  }
}
