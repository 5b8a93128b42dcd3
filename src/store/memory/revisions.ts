import type { Revision, RevisionPage } from '../archive.js'
import type { Entry, PastStates } from './entries.js'

/**
 * A memory store's revisions. A note's current state is its entry; its past states are kept in
 * the entry's `past` (PastStates), oldest first: two slots each in `refs` (the state's ETag and its
 * JSON) and its time in `times`, an array of doubles kept unboxed, so that a revision costs three
 * slots and no object of its own. Which states a create made (the first, and each restore from the
 * trash) is the short list `created`; every other one is an update. The JSON strings are the ones
 * the note held, never copied. An entry put back from the trash takes the PastStates of the entry
 * it was, so that the budget's queue still finds its states.
 */

/**
 * The bytes of past revisions over a whole service, and the order they were kept in, so that
 * past MAX_HISTORY_BYTES the oldest go first wherever they are. The queue holds, per revision,
 * its note's past states and its ETag: a pair whose revision went another way (a count or age
 * bound, a purge) no longer matches the oldest one there and is passed over, and once such pairs
 * outnumber the live ones they are swept out, so that the queue stays within twice the revisions
 * kept.
 */
export class HistoryBudget {
  bytes = 0
  /** Past revisions kept now, over the service. */
  live = 0
  readonly #max: number
  #queue: (PastStates | string)[] = []
  #head = 0

  constructor(maxBytes: number) {
    this.#max = maxBytes
  }

  /** Pairs in the queue, live and passed over (for tests). */
  get queued(): number {
    return (this.#queue.length - this.#head) / 2
  }

  /** A revision of `bytes` kept for `entry`; the oldest ones go while the budget is passed. */
  kept(past: PastStates, etag: string, bytes: number): void {
    this.bytes += bytes
    this.live++
    this.#queue.push(past, etag)
    while (this.bytes > this.#max && this.#head < this.#queue.length) {
      const oldest = this.#queue[this.#head] as PastStates
      const oldestEtag = this.#queue[this.#head + 1] as string
      this.#head += 2
      if (oldest.refs[0] === oldestEtag) dropOldest(oldest, this)
    }
    const pairs = (this.#queue.length - this.#head) / 2
    if (pairs > 2 * this.live + 1024) this.#sweep()
  }

  /**
   * Keeps only the pairs of revisions still kept: for each note's past states, the newest pairs,
   * as many as it holds (its states go oldest first, so the ones kept are the last pushed).
   */
  #sweep(): void {
    const queue = this.#queue
    const seen = new Map<PastStates, number>()
    const kept: (PastStates | string)[] = []
    for (let i = queue.length - 2; i >= this.#head; i -= 2) {
      const past = queue[i] as PastStates
      const count = (seen.get(past) ?? 0) + 1
      seen.set(past, count)
      if (count <= past.times.length) kept.push(queue[i + 1] as string, past)
    }
    kept.reverse()
    this.#queue = kept
    this.#head = 0
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
  const { refs, created } = past
  budget.bytes -= Buffer.byteLength(refs[1] as string)
  budget.live--
  if (created !== undefined && created[0] === refs[0]) {
    created.shift()
    if (created.length === 0) past.created = undefined
  }
  refs.splice(0, 2)
  past.times.shift()
}

/**
 * Keeps the entry's current state as a past one, before a write replaces it, within the rules:
 * the note's count, then its age (`now` - historyMs), then the service's bytes.
 */
export function keepPast(entry: Entry, rules: HistoryRules, now: number): void {
  keepState(entry, entry.etag, entry.modified, entry.change, entry.json, entry.bytes, rules, now)
}

/** keepPast for a state given apart from the entry (a batch's, kept once the batch is). */
export function keepState(
  entry: Entry,
  etag: string,
  at: number,
  change: Revision['change'],
  json: string,
  /** The UTF-8 length of `json`. */
  bytes: number,
  rules: HistoryRules,
  now: number,
): void {
  if (rules.noteHistory <= 1) return
  let past = entry.past
  if (past === undefined) {
    past = { refs: [], times: [], created: undefined }
    entry.past = past
  }
  push(past, etag, at, change, json)
  const { budget } = rules
  budget.kept(past, etag, bytes)
  const { times } = past
  while (times.length > rules.noteHistory - 1) dropOldest(past, budget)
  const oldest = now - rules.historyMs
  while (times.length > 0 && (times[0] as number) < oldest) dropOldest(past, budget)
}

function push(
  past: PastStates,
  etag: string,
  at: number,
  change: Revision['change'],
  json: string,
) {
  past.refs.push(etag, json)
  past.times.push(at)
  if (change === 'created') {
    if (past.created === undefined) past.created = [etag]
    else past.created.push(etag)
  }
}

/** Lets go of every past state of the entry (it left the store for good). */
export function dropPast(entry: Entry, budget: HistoryBudget): void {
  const { past } = entry
  while (past !== undefined && past.times.length > 0) dropOldest(past, budget)
}

/** The past state at index `i` (0 the oldest). */
function pastRevision(past: PastStates, i: number): Revision {
  const etag = past.refs[2 * i] as string
  return {
    version: etag.slice(1, -1),
    at: past.times[i] as number,
    change: past.created?.includes(etag) === true ? 'created' : 'updated',
    json: past.refs[2 * i + 1] as string,
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
  const past = entry.past
  for (let i = (past?.times.length ?? 0) - 1; past !== undefined && i >= 0; i--) {
    if ((past.times[i] as number) < oldest) break
    if (after !== undefined && sequenceOf(past.refs[2 * i] as string) >= after) continue
    if (!take(pastRevision(past, i))) break
  }
  return { revisions, next: more ? revisions[revisions.length - 1]?.version : undefined }
}

/** The entry's revision with this version (unquoted), current or past, or undefined. */
export function findRevision(entry: Entry, version: string, oldest: number): Revision | undefined {
  const etag = JSON.stringify(version)
  if (entry.etag === etag) return currentRevision(entry)
  const past = entry.past
  for (let i = (past?.times.length ?? 0) - 1; past !== undefined && i >= 0; i--) {
    if (past.refs[2 * i] === etag) {
      return (past.times[i] as number) < oldest ? undefined : pastRevision(past, i)
    }
  }
  return undefined
}

/** The past states as an image keeps them (oldest first), and back. */
export function pastOf(entry: Entry): Revision[] | undefined {
  const past = entry.past
  if (past === undefined || past.times.length === 0) return undefined
  const revisions: Revision[] = []
  for (let i = 0; i < past.times.length; i++) revisions.push(pastRevision(past, i))
  return revisions
}

/** Loads an image's past states into an entry, counted in the budget (no bound applied). */
export function loadPast(
  entry: Entry,
  revisions: readonly Revision[],
  budget: HistoryBudget,
): void {
  if (revisions.length === 0) return
  const past: PastStates = { refs: [], times: [], created: undefined }
  entry.past = past
  for (const { version, at, change, json } of revisions) {
    const etag = JSON.stringify(version)
    push(past, etag, at, change, json)
    budget.kept(past, etag, Buffer.byteLength(json))
  }
}
