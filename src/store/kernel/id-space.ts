/** Stale counts are swept once there are this many, then each time their number doubles. */
const SWEEP_FLOOR = 64

/**
 * The ids that creates give: max(now, last id given + 1), stepping over any id that
 * a note holds. A memory store has one of its own; the notebooks of one service share one, so
 * that ids are unique over the whole service whichever notebook creates.
 *
 * It needs no store's index to step over held ids. Created ids increase strictly, so a note that
 * still holds the id its create gave holds one at or below `last`, and a candidate (above `last`)
 * can only be held by a note that a PATCH moved there. Those moves are counted here, in any
 * notebook; the count of one at or below `last` no longer matters and is swept now and then.
 * With one shared space a create thus costs what it costs in a store of its own, however many
 * notebooks there are:
 *   create at now 100 -> 100; a PATCH moves a note (any notebook's) to 102; create at 100 ->
 *   101; create -> 103 (102 is held); the note at 102 is deleted; create at 100 -> 104.
 */
export class IdSpace {
  /**
   * The last id given to a created note. Before the first there is none, so the first create
   * takes the clock's time as it is (a clock at or below 0 is only ever a test's).
   */
  #last = Number.NEGATIVE_INFINITY
  /** The highest id that a note has held: every id above it is free, without a lookup. */
  #highest = Number.NEGATIVE_INFINITY
  /** id -> how many notes a PATCH moved to it, for ids that were above `last` at the move. */
  readonly #moved = new Map<number, number>()
  #sweepAt = SWEEP_FLOOR

  /** The id the last create gave, or -Infinity before the first. */
  get last(): number {
    return this.#last
  }

  /** The id a create at `now` gets; it is not taken until `give` says so. */
  next(now: number): number {
    let id = Math.max(now, this.#last + 1)
    if (id > this.#highest) return id
    while (this.#moved.has(id)) id++
    return id
  }

  /** A create gave `id` (from `next`): no note held it, so a store indexes it without a lookup. */
  give(id: number): void {
    this.#last = id
    if (id > this.#highest) this.#highest = id
  }

  /**
   * Everything this space holds, to be put back with `restore` (an undone batch): the moved ids'
   * counts are copied, and there are few of them (those above `last`, swept as creates pass them).
   */
  mark(): IdMark {
    return {
      last: this.#last,
      highest: this.#highest,
      moved: new Map(this.#moved),
      sweepAt: this.#sweepAt,
    }
  }

  /**
   * Puts the space back as `mark` found it, when every note is back where it was then (a batch
   * undone, with nothing in between: no other create or move can come in a synchronous batch).
   * The next create gets the id it would have had.
   */
  restore(mark: IdMark): void {
    this.#last = mark.last
    this.#highest = mark.highest
    this.#moved.clear()
    for (const [id, count] of mark.moved) this.#moved.set(id, count)
    this.#sweepAt = mark.sweepAt
  }

  /**
   * A PATCH moved a note to `id` (a finite number). True when the id is above every id a note
   * has held, so that the store indexes it without a lookup.
   */
  hold(id: number): boolean {
    if (id > this.#last) this.#count(id, 1)
    if (id <= this.#highest) return false
    this.#highest = id
    return true
  }

  /** A note left `id` (a finite number): it was deleted, or a PATCH moved it. */
  release(id: number): void {
    // A note above `last` is a moved one, counted when it moved (`last` has only grown since).
    if (id > this.#last) this.#count(id, -1)
  }

  #count(id: number, change: 1 | -1): void {
    const held = (this.#moved.get(id) ?? 0) + change
    if (held > 0) this.#moved.set(id, held)
    else this.#moved.delete(id)
    if (this.#moved.size < this.#sweepAt) return
    // Creates have passed these ids: no candidate can meet them again.
    for (const moved of this.#moved.keys()) if (moved <= this.#last) this.#moved.delete(moved)
    this.#sweepAt = Math.max(SWEEP_FLOOR, 2 * this.#moved.size)
  }
}

/** An IdSpace's state at one moment (IdSpace.mark). */
export interface IdMark {
  readonly last: number
  readonly highest: number
  readonly moved: ReadonlyMap<number, number>
  readonly sweepAt: number
}
