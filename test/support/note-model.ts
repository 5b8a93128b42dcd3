import { isUtf8 } from 'node:buffer'
import { parseJson } from '../../src/client/parse-json.js'

/** The caps the model applies. */
export interface ModelLimits {
  bodyLimit: number
  /** MAX_DEPTH: levels a field may nest, the body object not counted. */
  maxDepth: number
  maxNotes: number
  maxStoreBytes: number
}

type Fields = Record<string, unknown>

/**
 * How much deeper a note's fields sit in a batch document than in a request of their own
 * ({"requests":[{"body":{...}}]} puts the body object three levels down).
 */
export const BATCH_DEPTH = 3

/** No cap that a property test would reach. */
const UNBOUNDED: ModelLimits = {
  bodyLimit: Number.POSITIVE_INFINITY,
  maxDepth: Number.POSITIVE_INFINITY,
  maxNotes: Number.POSITIVE_INFINITY,
  maxStoreBytes: Number.POSITIVE_INFINITY,
}

interface ModelNote {
  value: Fields
  json: string
  /** The store's change sequence at the note's last write: its ETag's number. */
  version: number
  /** What made this state: a create (or a restore from the trash), or an update. */
  change: 'created' | 'updated'
  /** Its earlier states, oldest first, as the history keeps them (never changed in place). */
  past: readonly ModelRevision[]
}

/** A state a note has had: its version, JSON and change. */
export interface ModelRevision {
  readonly version: number
  readonly json: string
  readonly change: 'created' | 'updated'
}

/** Revisions a note keeps, its current state included: the service's NOTE_HISTORY default. */
const MODEL_NOTE_HISTORY = 100

/**
 * What GET /api/note?<query> should answer: the page's JSON and total, or a 400. For sort=updated
 * the model knows which notes, not their order (it does not see the ms of each write): `count`
 * of `notes` in some order.
 */
export type PageOutcome =
  | { ok: true; json: string; total: number }
  | { ok: 'any-order'; notes: string[]; count: number; total: number }
  | { ok: false; status: 400 }

/** What a request body should come to: its fields, or the error status it earns. */
export type BodyOutcome = { ok: true; fields: Fields } | { ok: false; status: 400 | 413 | 415 }

/**
 * How a Content-Type header value should be treated: 'merge-patch'
 * is application/merge-patch+json, parsed as JSON like the rest, applied by RFC 7396 on PATCH.
 */
export type MediaClass = 'json' | 'merge-patch' | 'unsupported-media' | 'unsupported-charset'

/** How an update applies its fields: the spec's shallow merge, RFC 7396, or a PUT's replacement. */
export type ModelPatchKind = 'merge' | 'merge-patch' | 'replace'

/**
 * The notes store as the contract and docs/api.md describe it, written the plainest way: an array
 * of notes in list order, each kept as parsed JSON and as its text, scanned linearly. The one
 * model every test compares the service with: the store's and the API's property tests through
 * its store-shaped methods (create, list, get, update, delete), the fuzzer through its finer
 * steps (find, createRefusal, merged, replace, remove, bodyOutcome), since it learns each id
 * from the service's answer.
 */
export class NoteModel {
  readonly limits: ModelLimits
  readonly notes: ModelNote[] = []
  /** The last id the service gave a created note. */
  lastId = 0
  /** Writes so far: the store's version number. */
  version = 0
  /** The first part of the service's version tokens, once an answer has shown it. */
  epoch: string | undefined
  /**
   * Idempotency keys: the fields' JSON and the first answer's note and version; for
   * a batch, 'batch <the document's JSON>' and the first answer's data array.
   */
  readonly keys = new Map<string, { fields: string; json: string; version: number }>()
  readonly #now: () => number
  #listBody: Buffer | undefined

  constructor(limits: ModelLimits = UNBOUNDED, now: () => number = Date.now) {
    this.limits = limits
    this.#now = now
  }

  /** The ids of the stored notes that are numbers, in list order. */
  ids(): number[] {
    return this.notes.map((n) => n.value.id).filter((id): id is number => typeof id === 'number')
  }

  /** The next id: max(now, last id + 1), stepping over any id a stored note holds. */
  nextId(): number {
    let id = Math.max(this.#now(), this.lastId + 1)
    while (this.holds(id)) id++
    return id
  }

  list(): string {
    return this.listJson()
  }

  get(id: number): string | undefined {
    return this.notes.find((n) => n.value.id === id)?.json
  }

  /** The merged note's JSON, stored, or undefined when no note has the id (caps not applied). */
  update(id: number, fields: Fields, kind: ModelPatchKind = 'merge'): string | undefined {
    const at = this.notes.findIndex((n) => n.value.id === id)
    if (at === -1) return undefined
    const { json } = this.merged(at, fields, kind)
    this.replace(at, json)
    return json
  }

  /**
   * Whether a deleted note goes to the trash, where it counts toward the caps (the service's
   * default) until it is purged; off, a delete frees its room at once.
   */
  keepsTrash = false
  /** The deleted notes, oldest delete first. */
  trash: ModelNote[] = []

  get trashNotes(): number {
    return this.trash.length
  }

  get trashBytes(): number {
    let total = 0
    for (const note of this.trash) total += Buffer.byteLength(note.json)
    return total
  }

  /** DELETE /api/trash: every deleted note gone for good; answers how many. */
  emptyTrash(): number {
    const count = this.trash.length
    this.trash = []
    return count
  }

  /**
   * POST /api/trash/:id/restore: the most recently deleted note with this id back at the end of
   * the list, as a new write; 'none' without one, 'taken' when a live note holds the id.
   */
  untrash(id: number): string | 'none' | 'taken' {
    let at = -1
    for (let i = this.trash.length - 1; i >= 0 && at === -1; i--) {
      if (this.trash[i]?.value.id === id) at = i
    }
    if (at === -1) return 'none'
    if (this.holds(id)) return 'taken'
    const [old] = this.trash.splice(at, 1) as [ModelNote]
    this.version++
    this.notes.push({
      value: old.value,
      json: old.json,
      version: this.version,
      change: 'created',
      past: kept([...old.past, stateOf(old)]),
    })
    this.#listBody = undefined
    return old.json
  }

  /** The revisions of the note at `index`, newest first: its state now, then its past ones. */
  revisions(index: number): ModelRevision[] {
    const note = this.notes[index] as ModelNote
    return [stateOf(note), ...[...note.past].reverse()]
  }

  /**
   * The bytes of files counted toward the byte cap beside the notes: the memory store's files
   * (none on the other stores, where files have caps of their own alone).
   */
  fileBytes: () => number = () => 0

  /** Notes and bytes counted toward the caps: the live ones and the trash (and files, as above). */
  get heldNotes(): number {
    return this.notes.length + this.trashNotes
  }

  get heldBytes(): number {
    return this.bytes + this.trashBytes + this.fileBytes()
  }

  delete(id: number): boolean {
    const at = this.notes.findIndex((n) => n.value.id === id)
    if (at === -1) return false
    this.remove(at)
    return true
  }

  get bytes(): number {
    let total = 0
    for (const note of this.notes) total += Buffer.byteLength(note.json)
    return total
  }

  listJson(): string {
    return `[${this.notes.map((n) => n.json).join(',')}]`
  }

  /** The whole body GET /api/note should answer, as bytes; cached until the next change. */
  listBody(): Buffer {
    if (this.#listBody === undefined) this.#listBody = Buffer.from(`{"data":${this.listJson()}}`)
    return this.#listBody
  }

  /** The decoded segment names an id only when it is a decimal integer. */
  static parseId(segment: string): number | undefined {
    return /^-?[0-9]+$/.test(segment) ? Number(segment) : undefined
  }

  /** The first note, in list order, whose id is strictly equal to the number. */
  find(segment: string): number {
    const id = NoteModel.parseId(segment)
    if (id === undefined) return -1
    return this.notes.findIndex((n) => n.value.id === id)
  }

  /** Whether some stored note holds this number as its id. */
  holds(id: number): boolean {
    return this.notes.some((n) => n.value.id === id)
  }

  /** 507 or undefined: what a create of these fields meets, given the caps. */
  createRefusal(fields: Fields): 507 | undefined {
    if (this.heldNotes >= this.limits.maxNotes) return 507
    // Ids are 13 digits until the year 2286, so any 13-digit id gives the right length.
    const probable = Math.max(Date.now(), this.lastId + 1)
    const bytes = Buffer.byteLength(JSON.stringify(withId(fields, probable)))
    return this.heldBytes + bytes > this.limits.maxStoreBytes ? 507 : undefined
  }

  /** Stores a note with `id` (the next one unless given) and returns its JSON. */
  create(fields: Fields, id: number = this.nextId()): string {
    const note = withId(fields, id)
    const json = JSON.stringify(note)
    // The note is what the store serves back: 1e400 became Infinity and is stored as null.
    this.version++
    this.notes.push({
      value: parseJson(json) as Fields,
      json,
      version: this.version,
      change: 'created',
      past: [],
    })
    this.#listBody = undefined
    this.lastId = id
    return json
  }

  /** The ETag of the note at `index` ('"<epoch>.<version base 36>"'), once the epoch is known. */
  etagOf(index: number): string | undefined {
    const note = this.notes[index]
    return note === undefined || this.epoch === undefined
      ? undefined
      : `"${this.epoch}.${note.version.toString(36)}"`
  }

  /** The version token now, once the epoch is known. */
  token(): string | undefined {
    return this.epoch === undefined ? undefined : `${this.epoch}.${this.version.toString(36)}`
  }

  /**
   * A page for a query without `after`, written plainly: filter by q (a string value at any
   * depth containing it, Unicode case folding), reverse for order=desc, then the first `limit`.
   */
  page(search: string): PageOutcome {
    const params = new URLSearchParams(search)
    const limit = params.get('limit')
    const order = params.get('order')
    const q = params.get('q')
    const sort = params.get('sort')
    if (params.get('after') !== null) return { ok: false, status: 400 }
    if (sort !== null && sort !== 'created' && sort !== 'updated') return { ok: false, status: 400 }
    if (limit !== null && !(/^[0-9]{1,4}$/.test(limit) && +limit >= 1 && +limit <= 1000)) {
      return { ok: false, status: 400 }
    }
    if (order !== null && order !== 'asc' && order !== 'desc') return { ok: false, status: 400 }
    if (q !== null && ([...q].length === 0 || [...q].length > 256)) {
      return { ok: false, status: 400 }
    }
    let notes = this.notes
    if (q !== null) {
      const folded = new RegExp(q.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'), 'iu')
      const hasText = (value: unknown): boolean =>
        typeof value === 'string'
          ? folded.test(value)
          : typeof value === 'object' && value !== null && Object.values(value).some(hasText)
      notes = notes.filter((note) => hasText(note.value))
    }
    if (sort === 'updated') {
      const count = limit === null ? notes.length : Math.min(notes.length, Number(limit))
      return { ok: 'any-order', notes: notes.map((n) => n.json), count, total: notes.length }
    }
    const ordered = order === 'desc' ? [...notes].reverse() : notes
    const page = limit === null ? ordered : ordered.slice(0, Number(limit))
    return { ok: true, json: `[${page.map((n) => n.json).join(',')}]`, total: notes.length }
  }

  /** The merged note (shallow, or by RFC 7396), and whether storing it passes the byte cap. */
  merged(
    index: number,
    fields: Fields,
    kind: ModelPatchKind = 'merge',
  ): { json: string; refused: boolean } {
    const current = this.notes[index] as ModelNote
    const parsed = parseJson(current.json) as Fields
    const note =
      kind === 'merge-patch'
        ? (mergePatch(parsed, fields) as Fields)
        : kind === 'replace'
          ? ({ ...fields, id: parsed.id } as Fields)
          : parsed
    if (kind === 'merge') {
      for (const key of Object.keys(fields)) {
        // defineProperty, not assignment: a '__proto__' field is data, and an existing key keeps its place.
        Object.defineProperty(note, key, {
          value: fields[key],
          writable: true,
          enumerable: true,
          configurable: true,
        })
      }
    }
    const json = JSON.stringify(note)
    const growth = Buffer.byteLength(json) - Buffer.byteLength(current.json)
    return { json, refused: this.heldBytes + growth > this.limits.maxStoreBytes }
  }

  replace(index: number, json: string): void {
    this.version++
    const old = this.notes[index] as ModelNote
    this.notes[index] = {
      value: parseJson(json) as Fields,
      json,
      version: this.version,
      change: 'updated',
      past: kept([...old.past, stateOf(old)]),
    }
    this.#listBody = undefined
  }

  remove(index: number): void {
    this.version++
    const [gone] = this.notes.splice(index, 1)
    if (this.keepsTrash && gone !== undefined) this.trash.push(gone)
    this.#listBody = undefined
  }

  /**
   * A copy to try a batch on: its notes, ids and version, and the same epoch;
   * `adopt` takes the copy's state back when the whole batch was kept.
   */
  copy(): NoteModel {
    const copy = new NoteModel(this.limits, this.#now)
    copy.notes.push(...this.notes)
    copy.lastId = this.lastId
    copy.version = this.version
    copy.epoch = this.epoch
    copy.keepsTrash = this.keepsTrash
    copy.trash = [...this.trash]
    copy.fileBytes = this.fileBytes
    return copy
  }

  /** Takes the notes, ids and version of `copy` (made by copy()) as this model's own. */
  adopt(copy: NoteModel): void {
    this.notes.splice(0, this.notes.length, ...copy.notes)
    this.lastId = copy.lastId
    this.version = copy.version
    this.trash = copy.trash
    this.epoch ??= copy.epoch
    this.#listBody = undefined
  }

  /**
   * The body's checks, in the order they apply. `extraDepth`: levels the fields sit below
   * the body object (a batch document's note bodies sit BATCH_DEPTH levels down).
   */
  bodyOutcome(media: MediaClass | 'absent', body: Buffer, extraDepth = 0): BodyOutcome {
    if (media === 'absent') {
      return body.length === 0 ? { ok: true, fields: {} } : { ok: false, status: 415 }
    }
    // 'json' and 'merge-patch' parse alike (the same limits and checks).
    if (media === 'unsupported-media') return { ok: false, status: 415 }
    if (body.length > this.limits.bodyLimit) return { ok: false, status: 413 }
    if (media === 'unsupported-charset') return { ok: false, status: 415 }
    if (body.length === 0) return { ok: true, fields: {} }
    if (!isUtf8(body)) return { ok: false, status: 400 }
    let value: unknown
    try {
      value = parseJson(body.toString('utf8'))
    } catch {
      return { ok: false, status: 400 }
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      return { ok: false, status: 400 }
    }
    // depthOf counts the body object too: {"a":[[1]]} -> 3, a field nesting 2.
    if (depthOf(value) - 1 > this.limits.maxDepth + extraDepth) return { ok: false, status: 400 }
    return { ok: true, fields: value as Fields }
  }
}

/**
 * RFC 7396 section 2's MergePatch(Target, Patch), as the RFC writes it, on fresh copies:
 * the result shares nothing with `patch`. A non-object patch replaces the target; an object
 * patch starts from the target if it is an object, else {}; null values remove, others recurse.
 * Own keys only, set by defineProperty: a '__proto__' key is data like any other.
 */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return parseJson(JSON.stringify(patch) ?? 'null')
  const result: Fields = isObject(target) ? target : {}
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) {
      if (Object.hasOwn(result, name)) delete result[name]
    } else {
      const merged = mergePatch(Object.hasOwn(result, name) ? result[name] : undefined, value)
      Object.defineProperty(result, name, {
        value: merged,
        writable: true,
        enumerable: true,
        configurable: true,
      })
    }
  }
  return result
}

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** { a: [1] } -> 2, {} -> 1, 3 -> 0 */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0
  let deepest = 0
  for (const child of Object.values(value)) deepest = Math.max(deepest, depthOf(child))
  return 1 + deepest
}

/** The note a create makes: the body's fields with the service's id, in the body's `id` place if it has one. */
function withId(fields: Fields, id: number): Fields {
  const note = parseJson(JSON.stringify(fields)) as Fields
  note.id = id
  return note
}

function stateOf({ version, json, change }: ModelNote): ModelRevision {
  return { version, json, change }
}

/** The past states a note keeps: MODEL_NOTE_HISTORY - 1 of them, the newest. */
function kept(past: ModelRevision[]): ModelRevision[] {
  return past.length > MODEL_NOTE_HISTORY - 1 ? past.slice(-(MODEL_NOTE_HISTORY - 1)) : past
}
