/**
 * The list's order by last change, newest first. The replica keeps notes in list order (by
 * creation) and no time of change, so the order is the service's (GET .../note?sort=updated
 * &order=desc, read when the notebook is loaded) with every change this page sees since put on
 * top: a note edited here or elsewhere (the feed) moves to the top, as a new one does.
 */
import { dataOf, type Note, send } from './api.js'
import type { ReplicaEntry } from './client-parts.js'
import { sameJson } from './note-patch.js'

/** The note without its `id` field, which a local create gains when the service takes it. */
function withoutId(note: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(note, 'id')) return note
  const { id: _id, ...rest } = note
  return rest
}

/** Ranks from changes seen live start above any rank from the service's order. */
const LIVE = 2 ** 40

export class ListOrder {
  /** Entry key -> rank, the highest first. */
  #rank = new Map<string, number>()
  /** Entry key -> the note as last ranked. */
  #seen = new Map<string, Record<string, unknown>>()
  /** Note id -> rank, from the service's order, once read. */
  #service: Map<number, number> | undefined
  #tick = LIVE
  #run = 0

  /** Another notebook: nothing of this one's order is kept. */
  reset(): void {
    this.#run++
    this.#rank.clear()
    this.#seen.clear()
    this.#service = undefined
  }

  /**
   * Reads the service's order of last change, every page; `done` is called once it is known.
   * A failure keeps the order as it is (by creation, and the changes seen since).
   */
  async read(base: string, done: () => void): Promise<void> {
    const run = ++this.#run
    const ids: unknown[] = []
    let url: string | undefined = `${base}/note?sort=updated&order=desc&limit=1000`
    try {
      while (url !== undefined) {
        const response = await send(url)
        for (const note of (await dataOf(response)) as Note[]) ids.push(note.id)
        url = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1]
      }
    } catch {
      return
    }
    if (run !== this.#run) return
    const service = new Map<number, number>()
    for (const [index, id] of ids.entries()) {
      if (typeof id === 'number') service.set(id, ids.length - index)
    }
    this.#service = service
    // What the service says replaces what was guessed (creation order), not what was seen.
    for (const [key, rank] of this.#rank) {
      const id = /^n:(-?\d+)$/.exec(key)?.[1]
      const known = id === undefined ? undefined : service.get(Number(id))
      if (rank < LIVE && known !== undefined) this.#rank.set(key, known)
    }
    done()
  }

  /** The entries (in replica order, oldest created first) by last change, newest first. */
  sort(entries: readonly ReplicaEntry[]): ReplicaEntry[] {
    for (const [index, entry] of entries.entries()) {
      const seen = this.#seen.get(entry.key)
      if (seen === undefined) {
        const known = entry.id === undefined ? undefined : this.#service?.get(entry.id)
        // Before the service's order is read, creation order stands in for it.
        const guess = this.#service === undefined && entry.id !== undefined ? index : undefined
        this.#rank.set(entry.key, known ?? guess ?? ++this.#tick)
      } else if (seen !== entry.note && !sameJson(withoutId(seen), withoutId(entry.note))) {
        // (A local create that the service has just taken gains its id: that alone is no change.)
        this.#rank.set(entry.key, ++this.#tick)
      }
      this.#seen.set(entry.key, entry.note)
    }
    const rank = (entry: ReplicaEntry): number => this.#rank.get(entry.key) ?? 0
    return [...entries].sort((a, b) => rank(b) - rank(a))
  }
}
