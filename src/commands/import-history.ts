import {
  type ArchiveDropped,
  type ArchiveRules,
  HistoryBytesCut,
  noneDropped,
  slotCount,
} from '../store/kernel/import-archive.js'
import {
  type Block,
  blockOf,
  type Past,
  pastOf,
  type State,
  stateOf,
  trashedOf,
} from './export-history.js'
import type { Line } from './export-lines.js'
import { linesOf } from './export-lines.js'

/*
 * An import's two reads of the history section of an export file (export-history.ts): the check,
 * a line at a time, of every line and of what the store will keep of them (HistoryCheck), before
 * anything changes; then the read again, as the store writes it (HistoryReread), a note at a time,
 * which the notes' read merges with each notebook's notes (export-file.ts).
 */

/** What the history of one notebook holds, as the store keeps it. */
export interface NotebookHistory {
  /** The sequences its notes and trash take. */
  sequence: number
  trash: number
  trashBytes: number
}

/** The block being read, and how far. */
interface OpenBlock extends Block {
  readonly history: NotebookHistory
  notesRead: number
  trashRead: number
}

/** The note whose past states are being read. */
interface Reading {
  owed: number
  /** Past states read so far. */
  read: number
  /** The first of them the note keeps (NOTE_HISTORY keeps the newest). */
  keepFrom: number
  /** Whether the note itself is kept (a deleted note past TRASH_DAYS is not). */
  kept: boolean
}

/**
 * The rules of one past state, the same on both reads: 'count' (past NOTE_HISTORY), 'age' (past
 * HISTORY_DAYS), 'gone' (its deleted note is not kept), or 'kept' so far (MAX_HISTORY_BYTES next).
 */
function pastFate(
  reading: Reading,
  at: number,
  rules: ArchiveRules,
): keyof ArchiveDropped | 'kept' | 'gone' {
  if (!reading.kept) return 'gone'
  if (reading.read < reading.keepFrom) return 'count'
  if (!rules.recent(at)) return 'age'
  return 'kept'
}

function readingOf(past: number, kept: boolean, rules: ArchiveRules): Reading {
  return { owed: past, read: 0, keepFrom: past - rules.pastKept, kept }
}

/**
 * Checks a history section a line at a time, after its {"history":N} line: N blocks, each of a
 * notebook listed before it with that many notes, in the notebooks' order, each line well-formed.
 * Learns on the way what the store will keep of it (`rules`) and what that holds.
 */
export class HistoryCheck {
  /** Per notebook with a block. */
  readonly notebooks = new Map<string, NotebookHistory>()
  readonly dropped: ArchiveDropped = noneDropped()
  readonly cut = new HistoryBytesCut()
  /** The highest safe integer id of the deleted notes kept, or -Infinity. */
  lastId = Number.NEGATIVE_INFINITY
  /** The bytes of the past states kept, once `finish` has found what goes. */
  historyBytes = 0
  /** Bytes [start, end) of the file: the section's lines after its first. */
  readonly start: number
  end: number
  readonly #count: number
  readonly #listed: ReadonlyMap<string, { index: number; notes: number }>
  readonly #rules: ArchiveRules
  readonly #maxDepth: number
  #blocks = 0
  #lastIndex = -1
  #block: OpenBlock | undefined
  #reading: Reading | undefined

  constructor(
    count: number,
    start: number,
    listed: ReadonlyMap<string, { index: number; notes: number }>,
    rules: ArchiveRules,
    maxDepth: number,
  ) {
    this.#count = count
    this.start = start
    this.end = start
    this.#listed = listed
    this.#rules = rules
    this.#maxDepth = maxDepth
  }

  /** Whether every line the section owes has been read. */
  get done(): boolean {
    return this.#blocks === this.#count && this.#block === undefined
  }

  /** The line `text`, the line after it starting at byte `next`: its problem, if any. */
  add(text: string, next: number): string | undefined {
    this.end = next
    const reading = this.#reading
    const block = this.#block
    if (reading !== undefined) {
      const past = pastOf(text, this.#maxDepth)
      if (typeof past === 'string') return past
      const fate = pastFate(reading, past.at, this.#rules)
      if (fate === 'kept') this.cut.add(past.at, Buffer.byteLength(past.json))
      else if (fate !== 'gone') this.dropped[fate]++
      reading.read++
      if (--reading.owed === 0) this.#reading = undefined
    } else if (block === undefined) {
      return this.#startBlock(text)
    } else if (block.notesRead < block.notes) {
      const state = stateOf(text)
      if (typeof state === 'string') return state
      block.notesRead++
      block.history.sequence += slotCount(state.change, state.past, false)
      if (state.past > 0) this.#reading = readingOf(state.past, true, this.#rules)
    } else {
      const trashed = trashedOf(text, this.#maxDepth)
      if (typeof trashed === 'string') return trashed
      block.trashRead++
      block.history.sequence += slotCount(trashed.change, trashed.past, true)
      const kept = this.#rules.inTrash(trashed.deleted)
      if (kept) {
        block.history.trash++
        block.history.trashBytes += Buffer.byteLength(trashed.json)
        const { id } = trashed
        if (Number.isSafeInteger(id) && (id as number) > this.lastId) this.lastId = id as number
      } else {
        this.dropped.trash++
      }
      if (trashed.past > 0) this.#reading = readingOf(trashed.past, kept, this.#rules)
    }
    if (this.#reading === undefined && block !== undefined) this.#endBlockIfDone(block)
    return undefined
  }

  /**
   * Once every line is read: what the section still owes, if anything; else finds what
   * MAX_HISTORY_BYTES lets go and answers undefined.
   */
  finish(): string | undefined {
    const block = this.#block
    if (this.#reading !== undefined) {
      return `the file ends inside the history of notebook ${JSON.stringify(block?.name)}: ${counted(this.#reading.owed, 'past state')} missing.`
    }
    if (block !== undefined) {
      const missing = [
        block.notesRead < block.notes ? counted(block.notes - block.notesRead, 'note') : '',
        counted(block.trash - block.trashRead, 'deleted note'),
      ]
      return `the file ends inside the history of notebook ${JSON.stringify(block.name)}: ${missing.filter((part) => part !== '').join(' and ')} missing.`
    }
    if (this.#blocks < this.#count) {
      return `the file ends ${counted(this.#count - this.#blocks, 'notebook')} short of what its history line says.`
    }
    this.historyBytes = this.cut.finish(this.#rules.limits.maxHistoryBytes)
    this.dropped.bytes = this.cut.dropped
    return undefined
  }

  #startBlock(text: string): string | undefined {
    if (this.#blocks === this.#count) {
      return `the history line says ${this.#count} notebooks, and this line is past the last of them.`
    }
    const block = blockOf(text)
    if (typeof block === 'string') return block
    const listed = this.#listed.get(block.name)
    const name = JSON.stringify(block.name)
    if (listed === undefined)
      return `the history of notebook ${name}, which the file does not list.`
    if (listed.index <= this.#lastIndex) {
      return `the history of notebook ${name} is out of the notebooks' order, or there twice.`
    }
    if (listed.notes !== block.notes) {
      return `the history of notebook ${name} has ${block.notes} notes; its notebook line says ${listed.notes}.`
    }
    this.#lastIndex = listed.index
    this.#blocks++
    const history: NotebookHistory = { sequence: 0, trash: 0, trashBytes: 0 }
    this.notebooks.set(block.name, history)
    this.#block = { ...block, history, notesRead: 0, trashRead: 0 }
    this.#endBlockIfDone(this.#block)
    return undefined
  }

  #endBlockIfDone(block: OpenBlock): void {
    if (block.notesRead === block.notes && block.trashRead === block.trash) this.#block = undefined
  }
}

/** A past state as the second read hands it: undefined when the store does not keep it. */
export type KeptPast = Pick<Past, 'at' | 'change' | 'json'> | undefined

/** A live note's state, read again, with its past states (each kept or not, in file order). */
export interface StateAgain {
  readonly at: number
  readonly change: 'created' | 'updated'
  readonly past: readonly KeptPast[]
}

/** A deleted note, read again: undefined `kept` past TRASH_DAYS. */
export interface TrashedAgain extends StateAgain {
  readonly deleted: number
  readonly json: string
  readonly id: unknown
  readonly kept: boolean
}

/**
 * The history section again, from the file at `path` (the bytes the check read), in order: a
 * notebook's block when its notes come, then its notes' states, then its deleted notes. Each line
 * is checked again, and each past state kept by the same rules and cut as the check found, so
 * what the store writes is what the check counted.
 * @throws Error when a line is not what the check read (the file changed meanwhile)
 */
export class HistoryReread {
  readonly #lines: AsyncIterator<Line>
  readonly #rules: ArchiveRules
  readonly #cut: HistoryBytesCut
  readonly #maxDepth: number
  #blocksLeft: number
  #pending: Block | undefined

  constructor(path: string, check: HistoryCheck, rules: ArchiveRules, maxDepth: number) {
    this.#lines = linesOf(path, { start: check.start, end: check.end })[Symbol.asyncIterator]()
    this.#rules = rules
    this.#cut = check.cut
    this.#maxDepth = maxDepth
    this.#blocksLeft = check.notebooks.size
  }

  /** The block of notebook `name` when it is the next one; undefined when it has none. */
  async block(name: string): Promise<Block | undefined> {
    if (this.#pending === undefined && this.#blocksLeft > 0) {
      this.#blocksLeft--
      this.#pending = this.#checked(blockOf(await this.#line()))
    }
    if (this.#pending?.name !== name) return undefined
    const block = this.#pending
    this.#pending = undefined
    return block
  }

  /** The next live note's state. */
  async state(): Promise<StateAgain> {
    const state: State = this.#checked(stateOf(await this.#line()))
    return { at: state.at, change: state.change, past: await this.#past(state.past, true) }
  }

  /** The next deleted note. */
  async trashed(): Promise<TrashedAgain> {
    const { at, change, deleted, json, id, past } = this.#checked(
      trashedOf(await this.#line(), this.#maxDepth),
    )
    const kept = this.#rules.inTrash(deleted)
    return { at, change, deleted, json, id, kept, past: await this.#past(past, kept) }
  }

  async #past(count: number, kept: boolean): Promise<KeptPast[]> {
    const reading = readingOf(count, kept, this.#rules)
    const past: KeptPast[] = []
    for (let i = 0; i < count; i++) {
      const { at, change, json } = this.#checked(pastOf(await this.#line(), this.#maxDepth))
      const fate = pastFate(reading, at, this.#rules)
      past.push(fate === 'kept' && this.#cut.keeps(at) ? { at, change, json } : undefined)
      reading.read++
    }
    return past
  }

  async #line(): Promise<string> {
    const { done, value } = await this.#lines.next()
    if (done === true) throw changed()
    return value.text
  }

  #checked<T>(value: T | string): T {
    if (typeof value === 'string') throw changed()
    return value
  }
}

/** (1, 'note') -> '1 note'; (2, 'note') -> '2 notes' */
function counted(count: number, what: string): string {
  return `${count} ${what}${count === 1 ? '' : 's'}`
}

function changed(): Error {
  return new Error('the file changed while it was being imported')
}
