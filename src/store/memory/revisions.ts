import type { Revision, RevisionPage } from '../archive.js'
import type { Entry, PastStates } from './entries.js'

/**
 * A memory store's revisions. A note's current state is its entry; its past states are kept in
 * the entry's `past`, oldest first, four slots each (the state's ETag, its time, its change and
 * its JSON), a flat array so that a revision costs its slots and not an object of its own. The
 * JSON strings are the ones the note held, never copied. An entry put back from the trash takes
 * the array of the entry it was, so that the budget's queue still finds its states.
 */
const STRIDE = 4

/**
 * The bytes of past revisions over a whole service, and the order they were kept in, so that
 * past MAX_HISTORY_BYTES the oldest go first wherever they are. The queue holds, per revision,
 * its note's past states and its ETag: a pair whose revision went another way (a count or age
 * bound, a purge) no longer matches the oldest one there and is passed over.
 */
export class HistoryBudget {
  bytes = 0
  readonly #max: number
  #queue: (PastStates | string)[] = []
  #head = 0

  constructor(maxBytes: number) {
    this.#max = maxBytes
  }

  /** A revision of `bytes` kept for `entry`; the oldest ones go while the budget is passed. */
  kept(past: PastStates, etag: string, bytes: number): void {
    this.bytes += bytes
    this.#queue.push(past, etag)
    while (this.bytes > this.#max && this.#head < this.#queue.length) {
      const oldest = this.#queue[this.#head] as PastStates
      const oldestEtag = this.#queue[this.#head + 1] as string
      this.#head += 2
      if (oldest[0] === oldestEtag) dropOldest(oldest, this)
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head)
      this.#head = 0
    }
  }
}

/** How a store keeps revisions: its bounds and the service's budget. */
export interface HistoryRules {
  /** Revisions a note keeps, its current state included; 0 or 1 keeps no past state. */
  readonly noteHistory: number
  readonly historyMs: number
  readonly budget: HistoryBudget
}

function dropOldest(past: PastStates, budget: HistoryBudget): void {
  budget.bytes -= Buffer.byteLength(past[3] as string)
  past.splice(0, STRIDE)
}

/**
 * Keeps the entry's current state as a past one, before a write replaces it, within the rules:
 * the note's count, then its age (`now` - historyMs), then the service's bytes.
 */
export function keepPast(entry: Entry, rules: HistoryRules, now: number): void {
  keepState(entry, entry.etag, entry.modified, entry.change, entry.json, rules, now)
}

/** keepPast for a state given apart from the entry (a batch's, kept once the batch is). */
export function keepState(
  entry: Entry,
  etag: string,
  at: number,
  change: Revision['change'],
  json: string,
  rules: HistoryRules,
  now: number,
): void {
  if (rules.noteHistory <= 1) return
  let past = entry.past
  if (past === undefined) {
    past = []
    entry.past = past
  }
  past.push(etag, at, change, json)
  const { budget } = rules
  budget.kept(past, etag, Buffer.byteLength(json))
  while (past.length > (rules.noteHistory - 1) * STRIDE) dropOldest(past, budget)
  const oldest = now - rules.historyMs
  while (past.length > 0 && (past[1] as number) < oldest) dropOldest(past, budget)
}

/** Lets go of every past state of the entry (it left the store for good). */
export function dropPast(entry: Entry, budget: HistoryBudget): void {
  const { past } = entry
  while (past !== undefined && past.length > 0) dropOldest(past, budget)
}

/** The revision at slot `at` of past states. */
function pastRevision(past: PastStates, at: number): Revision {
  return {
    version: (past[at] as string).slice(1, -1),
    at: past[at + 1] as number,
    change: past[at + 2] as Revision['change'],
    json: past[at + 3] as string,
  }
}

function currentRevision(entry: Entry): Revision {
  return {
    version: entry.etag.slice(1, -1),
    at: entry.modified,
    change: entry.change,
    json: entry.json,
  }
}

/**
 * The entry's revisions newest first, at most `limit`, those older than the version of sequence
 * `after` when given (`sequenceOf` reads an ETag's sequence), past states older than `oldest` (ms)
 * left out.
 */
export function revisionPage(
  entry: Entry,
  limit: number,
  after: number | undefined,
  sequenceOf: (etag: string) => number,
  oldest: number,
): RevisionPage {
  const revisions: Revision[] = []
  let more = false
  const take = (revision: Revision): boolean => {
    if (revisions.length === limit) {
      more = true
      return false
    }
    revisions.push(revision)
    return true
  }
  if (after === undefined || sequenceOf(entry.etag) < after) {
    if (!take(currentRevision(entry))) return { revisions, next: undefined }
  }
  const past = entry.past ?? []
  for (let at = past.length - STRIDE; at >= 0; at -= STRIDE) {
    if ((past[at + 1] as number) < oldest) break
    if (after !== undefined && sequenceOf(past[at] as string) >= after) continue
    if (!take(pastRevision(past, at))) break
  }
  return { revisions, next: more ? revisions[revisions.length - 1]?.version : undefined }
}

/** The entry's revision with this version (unquoted), current or past, or undefined. */
export function findRevision(entry: Entry, version: string, oldest: number): Revision | undefined {
  const etag = JSON.stringify(version)
  if (entry.etag === etag) return currentRevision(entry)
  const past = entry.past ?? []
  for (let at = past.length - STRIDE; at >= 0; at -= STRIDE) {
    if (past[at] === etag)
      return (past[at + 1] as number) < oldest ? undefined : pastRevision(past, at)
  }
  return undefined
}

/** The past states as an image keeps them (oldest first), and back. */
export function pastOf(entry: Entry): Revision[] | undefined {
  const past = entry.past
  if (past === undefined || past.length === 0) return undefined
  const revisions: Revision[] = []
  for (let at = 0; at < past.length; at += STRIDE) revisions.push(pastRevision(past, at))
  return revisions
}

/** Loads an image's past states into an entry, counted in the budget (no bound applied). */
export function loadPast(
  entry: Entry,
  revisions: readonly Revision[],
  budget: HistoryBudget,
): void {
  if (revisions.length === 0) return
  const past: PastStates = []
  entry.past = past
  for (const { version, at, change, json } of revisions) {
    const etag = JSON.stringify(version)
    past.push(etag, at, change, json)
    budget.kept(past, etag, Buffer.byteLength(json))
  }
}
