import { mergePatchInto } from './merge-patch.js'
import {
  type NoteFields,
  type NoteStore,
  type PatchKind,
  StoreFullError,
  type StoreStats,
} from './types.js'

export interface MemoryStoreOptions {
  /** Most notes held at once. */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON held at once. */
  maxBytes: number
  /** Clock for ids, in ms since the epoch; tests pass a fake one. */
  now?: () => number
}

interface Entry {
  /** The note's `id` field: a number unless a PATCH made it something else. */
  id: unknown
  /** The note serialized, written once per create or update. */
  json: string
  /** UTF-8 length of `json`, counted against maxBytes. */
  bytes: number
  /** Creation order, to keep duplicate ids in list order. */
  readonly seq: number
}

/**
 * Notes in a Set (insertion order, O(1) delete) plus an index from numeric id to entry,
 * so get, update and delete cost O(1) whatever the number of notes.
 */
export class MemoryNoteStore implements NoteStore {
  readonly #maxNotes: number
  readonly #maxBytes: number
  readonly #now: () => number
  readonly #entries = new Set<Entry>()
  /** id -> the entry holding it, or its holders in list order when a PATCH duplicated it. */
  readonly #byId = new Map<number, Entry | Entry[]>()
  #lastId = 0
  /** The highest id ever indexed (by a create or a PATCH): any id above it is free. */
  #highestId = 0
  #seq = 0
  #bytes = 0
  #listJson: string | undefined

  constructor(options: MemoryStoreOptions) {
    this.#maxNotes = options.maxNotes
    this.#maxBytes = options.maxBytes
    this.#now = options.now ?? Date.now
  }

  create(fields: NoteFields): string {
    if (this.#entries.size >= this.#maxNotes) {
      throw new StoreFullError(`The store holds its maximum of ${this.#maxNotes} notes.`)
    }
    const id = this.#nextId()
    const json = serializeWithId(fields, id)
    const bytes = Buffer.byteLength(json)
    this.#reserve(bytes)
    const entry: Entry = { id, json, bytes, seq: this.#seq++ }
    this.#lastId = id
    this.#entries.add(entry)
    this.#index(entry)
    this.#bytes += bytes
    this.#listJson = undefined
    return json
  }

  list(): string {
    if (this.#listJson === undefined) {
      const parts: string[] = new Array(this.#entries.size)
      let i = 0
      for (const entry of this.#entries) parts[i++] = entry.json
      this.#listJson = `[${parts.join(',')}]`
    }
    return this.#listJson
  }

  get(id: number): string | undefined {
    return this.#find(id)?.json
  }

  update(id: number, fields: NoteFields, kind: PatchKind = 'merge'): string | undefined {
    const entry = this.#find(id)
    if (entry === undefined) return undefined
    // A fresh copy of the note: it is changed, measured, and only then stored or dropped.
    const note = JSON.parse(entry.json) as NoteFields
    if (kind === 'merge-patch') mergePatchInto(note, fields)
    else for (const key of Object.keys(fields)) setField(note, key, fields[key])
    const json = JSON.stringify(note)
    const bytes = Buffer.byteLength(json)
    const growth = bytes - entry.bytes
    this.#reserve(growth)
    if (note.id !== entry.id) {
      this.#unindex(entry)
      entry.id = note.id
      this.#index(entry)
    }
    entry.json = json
    entry.bytes = bytes
    this.#bytes += growth
    this.#listJson = undefined
    return json
  }

  delete(id: number): boolean {
    const entry = this.#find(id)
    if (entry === undefined) return false
    this.#entries.delete(entry)
    this.#unindex(entry)
    this.#bytes -= entry.bytes
    this.#listJson = undefined
    return true
  }

  stats(): StoreStats {
    return {
      notes: this.#entries.size,
      bytes: this.#bytes,
      maxNotes: this.#maxNotes,
      maxBytes: this.#maxBytes,
    }
  }

  /** max(now, last id + 1), stepping over ids that PATCHed notes already hold. */
  #nextId(): number {
    let id = Math.max(this.#now(), this.#lastId + 1)
    // Above every id ever indexed, nothing can hold it: no lookup in the (large) index.
    if (id > this.#highestId) return id
    while (this.#byId.has(id)) id++
    return id
  }

  #reserve(bytes: number): void {
    if (this.#bytes + bytes > this.#maxBytes) {
      throw new StoreFullError(`The store holds its maximum of ${this.#maxBytes} bytes of notes.`)
    }
  }

  #find(id: number): Entry | undefined {
    const found = this.#byId.get(id)
    return Array.isArray(found) ? found[0] : found
  }

  #index(entry: Entry): void {
    const { id } = entry
    if (!isIndexable(id)) return
    if (id > this.#highestId) {
      // The usual case for a create: no note holds this id, so one Map write indexes it.
      this.#highestId = id
      this.#byId.set(id, entry)
      return
    }
    const found = this.#byId.get(id)
    if (found === undefined) {
      this.#byId.set(id, entry)
      return
    }
    const holders = Array.isArray(found) ? found : [found]
    let at = holders.length
    while (at > 0 && (holders[at - 1] as Entry).seq > entry.seq) at--
    holders.splice(at, 0, entry)
    if (holders !== found) this.#byId.set(id, holders)
  }

  #unindex(entry: Entry): void {
    const { id } = entry
    if (!isIndexable(id)) return
    const found = this.#byId.get(id)
    if (!Array.isArray(found)) {
      this.#byId.delete(id)
      return
    }
    found.splice(found.indexOf(entry), 1)
    if (found.length === 1) this.#byId.set(id, found[0] as Entry)
  }
}

/**
 * Only finite numbers can equal a path id; Infinity (from `1e400`) is serialized as null.
 */
function isIndexable(id: unknown): id is number {
  return typeof id === 'number' && Number.isFinite(id)
}

/**
 * JSON of `fields` with `id` set, as `{ ...fields, id }` would give, without copying the object:
 * { a: 1 } -> '{"a":1,"id":5}'; {} -> '{"id":5}'; { id: 'x', a: 1 } -> '{"id":5,"a":1}'.
 */
function serializeWithId(fields: NoteFields, id: number): string {
  if (Object.hasOwn(fields, 'id')) {
    const note = { ...fields }
    note.id = id
    return JSON.stringify(note)
  }
  const json = JSON.stringify(fields)
  // join() makes one flat string. A template literal would store a rope of five pieces, holding
  // the whole stringify output behind a slice: ~300 bytes a small note instead of ~160, and more
  // objects for every garbage collection to copy (bench W4, W6).
  return json === '{}' ? `{"id":${id}}` : [json.slice(0, -1), ',"id":', id, '}'].join('')
}

/** `note[key] = value`, except that '__proto__' becomes a plain field instead of a prototype. */
function setField(note: NoteFields, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(note, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    })
  } else {
    note[key] = value
  }
}
