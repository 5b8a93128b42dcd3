import type { TrashedNote, TrashPage } from '../archive.js'
import type { Entry } from './entries.js'

/** A deleted note in a memory store's trash: its entry as it was, when and by which change. */
export interface TrashedEntry {
  readonly entry: Entry
  readonly deleted: number
  /** The sequence of its delete. */
  readonly sequence: number
}

/**
 * A memory store's trash: deleted entries in the order of their deletes (so by time, and by
 * sequence), the oldest first, which is also the order they expire in.
 */
export class MemoryTrash {
  #items: TrashedEntry[] = []

  get size(): number {
    return this.#items.length
  }

  get items(): readonly TrashedEntry[] {
    return this.#items
  }

  add(item: TrashedEntry): void {
    this.#items.push(item)
  }

  /** Takes the last one added back out (a batch undone). */
  undoAdd(): void {
    this.#items.pop()
  }

  /** Takes out and answers the items deleted at or before `until` (ms). */
  expire(until: number): TrashedEntry[] {
    let count = 0
    while (count < this.#items.length && (this.#items[count] as TrashedEntry).deleted <= until) {
      count++
    }
    return count === 0 ? [] : this.#items.splice(0, count)
  }

  /** The index of the most recently deleted item whose note has this id, or -1. */
  findId(id: unknown): number {
    for (let i = this.#items.length - 1; i >= 0; i--) {
      if ((this.#items[i] as TrashedEntry).entry.id === id) return i
    }
    return -1
  }

  /** The index of the item deleted by change `sequence`, or -1. */
  findSequence(sequence: number): number {
    const at = this.#below(sequence) + 1
    return this.#items[at]?.sequence === sequence ? at : -1
  }

  take(index: number): TrashedEntry {
    return this.#items.splice(index, 1)[0] as TrashedEntry
  }

  takeAll(): TrashedEntry[] {
    const items = this.#items
    this.#items = []
    return items
  }

  /** Most recently deleted first, `limit` at most, deleted before the change `after`. */
  page(limit: number, after: number | undefined): TrashPage {
    const notes: TrashedNote[] = []
    let i = after === undefined ? this.#items.length - 1 : this.#below(after)
    for (; i >= 0 && notes.length < limit; i--) {
      const { entry, deleted, sequence } = this.#items[i] as TrashedEntry
      notes.push({ deleted, sequence, json: entry.json })
    }
    const next = i >= 0 && notes.length > 0 ? notes[notes.length - 1]?.sequence : undefined
    return { notes, total: this.#items.length, next }
  }

  /** The index of the last item whose sequence is below `sequence`, or -1 (binary search). */
  #below(sequence: number): number {
    let low = 0
    let high = this.#items.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if ((this.#items[middle] as TrashedEntry).sequence < sequence) low = middle + 1
      else high = middle
    }
    return low - 1
  }
}
