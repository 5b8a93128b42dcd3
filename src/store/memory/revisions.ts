import type { Revision, RevisionPage } from '../archive.js'
import type { Entry, PastStates } from './entries.js'

/**
 * A memory store's revisions. A note's current state is its entry; its past states are kept in
 * the entry's `past` (PastStates), oldest first: its JSON in `json` (the string the note held,
 * never copied), and its time and its ETag's change sequence as two doubles in `marks`, an array
 * kept unboxed, so that a revision costs one slot and two doubles and no object or string of its
 * own: its ETag is written again from the sequence when asked for ('"k2x9q1.1c"' is epoch
 * 'k2x9q1', sequence 48). An ETag of another epoch than the first state's (a history imported
 * from another store) is kept as it is, in `odd`. Which states a create made (the first, and each
 * restore from the trash) is the short list `created`; every other one is an update. An entry put
 * back from the trash takes the PastStates of the entry it was, so that the budget's queue still
 * finds its states.
 */

/**
 * The bytes of past revisions over a whole service, and the order they were kept in, so that
 * past MAX_HISTORY_BYTES the oldest go first wherever they are. The queue holds, per revision,
 * its note's past states and the revision's number among them (PastStates.pushed when kept): a
 * pair whose revision went another way (a count or age bound, a purge) is no longer its note's
 * oldest (PastStates.dropped) and is passed over, and once such pairs outnumber the live ones
 * they are swept out, so that the queue stays within twice the revisions kept.
 */
export class HistoryBudget {
  bytes = 0
  /** Past revisions kept now, over the service. */
  live = 0
  readonly #max: number
  #queue: (PastStates | number)[] = []
  #head = 0

  constructor(maxBytes: number) {
    this.#max = maxBytes
  }

  /** Pairs in the queue, live and passed over (for tests). */
  get queued(): number {
    return (this.#queue.length - this.#head) / 2
  }

  /** The newest state of `past`, of `bytes`, kept; the oldest ones go while the budget is passed. */
  kept(past: PastStates, bytes: number): void {
    this.bytes += bytes
    this.live++
    this.#queue.push(past, past.pushed - 1)
    while (this.bytes > this.#max && this.#head < this.#queue.length) {
      const oldest = this.#queue[this.#head] as PastStates
      const number = this.#queue[this.#head + 1] as number
      this.#head += 2
      if (oldest.dropped === number) dropOldest(oldest, this)
    }
    const pairs = (this.#queue.length - this.#head) / 2
    if (pairs > 2 * this.live + 1024) this.#sweep()
  }

  /** Keeps only the pairs of revisions still kept: those not yet let go of their note's states. */
  #sweep(): void {
    const queue = this.#queue
    const kept: (PastStates | number)[] = []
    for (let i = this.#head; i < queue.length; i += 2) {
      const past = queue[i] as PastStates
      if ((queue[i + 1] as number) >= past.dropped) kept.push(past, queue[i + 1] as number)
    }
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

/**
 * Slots of states let go that a note's arrays may hold before they are cleared: a shift of
 * every array on each state let go cost about 0.8 us a PATCH once a note's history was full (its
 * 99 past states moved each time); cleared 16 at a time, a note's arrays hold at most 16 slots
 * more than its states (never more than twice as many).
 */
const SLACK = 16

/** The number of states kept. */
function keptCount(past: PastStates): number {
  return past.json.length - past.head
}

function dropOldest(past: PastStates, budget: HistoryBudget): void {
  const { json, created, head } = past
  budget.bytes -= Buffer.byteLength(json[head] as string)
  budget.live--
  if (created !== undefined && created[0] === etagAt(past, head)) {
    created.shift()
    if (created.length === 0) past.created = undefined
  }
  json[head] = ''
  if (past.odd !== undefined) past.odd[head] = ''
  past.head = head + 1
  past.dropped++
  if (past.head >= Math.min(SLACK, keptCount(past))) {
    json.splice(0, past.head)
    past.marks.splice(0, 2 * past.head)
    past.odd?.splice(0, past.head)
    past.head = 0
  }
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
    past = emptyPast()
    entry.past = past
  }
  push(past, etag, at, change, json)
  const { budget } = rules
  budget.kept(past, bytes)
  while (keptCount(past) > rules.noteHistory - 1) dropOldest(past, budget)
  const oldest = now - rules.historyMs
  while (keptCount(past) > 0 && (past.marks[2 * past.head] as number) < oldest) {
    dropOldest(past, budget)
  }
}

function emptyPast(): PastStates {
  return {
    json: [],
    marks: [],
    head: 0,
    epoch: undefined,
    odd: undefined,
    created: undefined,
    pushed: 0,
    dropped: 0,
  }
}

/**
 * The sequence an ETag's digits write, if a sequence writes them again ('"k2x9q1.1c"' -> 48: its
 * epoch is the text before the last dot); -1 when not. Read a character at a time: no string is
 * made (a regular expression and three slices were 5% of a memory store's PATCH).
 */
function etagSequence(etag: string): number {
  const dot = etag.lastIndexOf('.')
  const end = etag.length - 1
  const count = end - dot - 1
  if (dot < 2 || count < 1 || count > 11) return -1
  // Up to 10 base-36 digits stay below 2^53, so they are exact and come back the same, but for
  // a leading 0; 11 of them may not, and are read as they always were.
  if (count === 11) {
    const digits = etag.slice(dot + 1, end)
    if (!/^[0-9a-z]{11}$/.test(digits)) return -1
    const sequence = Number.parseInt(digits, 36)
    return sequence.toString(36) === digits ? sequence : -1
  }
  if (count > 1 && etag.charCodeAt(dot + 1) === 48) return -1
  let sequence = 0
  for (let i = dot + 1; i < end; i++) {
    const code = etag.charCodeAt(i)
    let digit: number
    if (code >= 48 && code <= 57) digit = code - 48
    else if (code >= 97 && code <= 122) digit = code - 87
    else return -1
    sequence = sequence * 36 + digit
  }
  return sequence
}

/** Whether the ETag, one a sequence writes, is of this epoch: '"k2x9q1.1c"' is 'k2x9q1''s. */
function ofEpoch(etag: string, epoch: string | undefined): boolean {
  return (
    epoch !== undefined && etag.lastIndexOf('.') === epoch.length + 1 && etag.startsWith(epoch, 1)
  )
}

/** The ETag of the past state in slot `i` (past.head the oldest). */
function etagAt(past: PastStates, i: number): string {
  const sequence = past.marks[2 * i + 1] as number
  if (sequence === -1) return (past.odd as string[])[i] as string
  return `"${past.epoch}.${sequence.toString(36)}"`
}

function push(
  past: PastStates,
  etag: string,
  at: number,
  change: Revision['change'],
  json: string,
) {
  const sequence = etagSequence(etag)
  if (sequence !== -1 && past.epoch === undefined) past.epoch = etag.slice(1, etag.lastIndexOf('.'))
  const own = sequence !== -1 && ofEpoch(etag, past.epoch)
  if (!own && past.odd === undefined) past.odd = past.json.map(() => '')
  past.json.push(json)
  past.marks.push(at, own ? sequence : -1)
  past.odd?.push(own ? '' : etag)
  past.pushed++
  if (change === 'created') {
    if (past.created === undefined) past.created = [etag]
    else past.created.push(etag)
  }
}

/** Lets go of every past state of the entry (it left the store for good). */
export function dropPast(entry: Entry, budget: HistoryBudget): void {
  const { past } = entry
  while (past !== undefined && keptCount(past) > 0) dropOldest(past, budget)
}

/** The past state in slot `i` (past.head the oldest). */
function pastRevision(past: PastStates, i: number): Revision {
  const etag = etagAt(past, i)
  return {
    version: etag.slice(1, -1),
    at: past.marks[2 * i] as number,
    change: past.created?.includes(etag) === true ? 'created' : 'updated',
    json: past.json[i] as string,
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
  for (let i = (past?.json.length ?? 0) - 1; past !== undefined && i >= past.head; i--) {
    if ((past.marks[2 * i] as number) < oldest) break
    if (after !== undefined && sequenceOf(etagAt(past, i)) >= after) continue
    if (!take(pastRevision(past, i))) break
  }
  return { revisions, next: more ? revisions[revisions.length - 1]?.version : undefined }
}

/** The entry's revision with this version (unquoted), current or past, or undefined. */
export function findRevision(entry: Entry, version: string, oldest: number): Revision | undefined {
  const etag = JSON.stringify(version)
  if (entry.etag === etag) return currentRevision(entry)
  const past = entry.past
  if (past === undefined) return undefined
  const i = indexOfEtag(past, etag)
  if (i === -1 || (past.marks[2 * i] as number) < oldest) return undefined
  return pastRevision(past, i)
}

/** The slot of the newest past state with this ETag, or -1: its sequence sought, not its text. */
function indexOfEtag(past: PastStates, etag: string): number {
  const found = etagSequence(etag)
  const sequence = found !== -1 && ofEpoch(etag, past.epoch) ? found : -1
  for (let i = past.json.length - 1; i >= past.head; i--) {
    const at = past.marks[2 * i + 1] as number
    if (at === -1 ? past.odd?.[i] === etag : at === sequence) return i
  }
  return -1
}

/** The past states as an image keeps them (oldest first), and back. */
export function pastOf(entry: Entry): Revision[] | undefined {
  const past = entry.past
  if (past === undefined || keptCount(past) === 0) return undefined
  const revisions: Revision[] = []
  for (let i = past.head; i < past.json.length; i++) revisions.push(pastRevision(past, i))
  return revisions
}

/** Loads an image's past states into an entry, counted in the budget (no bound applied). */
export function loadPast(
  entry: Entry,
  revisions: readonly Revision[],
  budget: HistoryBudget,
): void {
  if (revisions.length === 0) return
  const past = emptyPast()
  entry.past = past
  for (const { version, at, change, json } of revisions) {
    push(past, JSON.stringify(version), at, change, json)
    budget.kept(past, Buffer.byteLength(json))
  }
}
