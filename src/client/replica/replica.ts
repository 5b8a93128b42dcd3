/**
 * Replica: an offline copy of the notebook, kept current by the change feed, that takes writes
 * at once and sends them later. Its local view is the service's notes (the base, as the feed
 * last told them) with the queued writes (the outbox) applied on top, recomputed whenever either
 * changes: a change of the service under a pending write shows through it, as Replicache rebases
 * pending mutations on each pull. A write is stored (one storage write) before its call resolves,
 * and sent in order with an Idempotency-Key (creates) or the If-Match of the version it was made
 * on (updates and deletes). A refusal (412, or 404 of an update) is a conflict kept with both
 * versions until the application resolves it, as PouchDB keeps both revisions of a conflict.
 */
import { ConflictError, NoteNotFoundError, NotesProblem } from '../errors.js'
import { newIdempotencyKey } from '../idempotency-key.js'
import type { NotesClient } from '../notes-client.js'
import type { BatchRequest, BatchResult, ChangeEvent, NoteFields, NoteResult } from '../types.js'
import {
  copyJson,
  isObject,
  type JsonObject,
  matchesText,
  mergePatch,
  sameJson,
  shallowPatch,
} from './note-json.js'
import {
  type BaseNote,
  conflictKey,
  ECHO_PREFIX,
  type Echo,
  LINK_PREFIX,
  META_SEQ,
  META_VERSION,
  type OutboxEntry,
  outboxKey,
  type StoredConflict,
} from './outbox.js'
import type { ReplicaStorage, ReplicaWrite } from './storage.js'

export interface ReplicaOptions {
  /** The transport: auth, retries, idempotency, feed. */
  client: NotesClient
  storage: ReplicaStorage
  /** The longest wait between attempts while the service cannot be reached (default 30 s). */
  maxDelayMs?: number | undefined
  /**
   * The most queued writes sent as one POST /api/batch (default 100; 1 sends each write alone,
   * for a service without batches).
   */
  batchLimit?: number | undefined
}

export interface ReplicaEntry {
  /**
   * Stable for the entry's life in this replica: `n:<id>` for a note from the service,
   * `local:<uuid>` for a local create (it keeps that key after the service gives it an id).
   */
  key: string
  /** The service's id; undefined while a local create waits to be sent. */
  id: number | undefined
  /** The note as the page shows it (its `id` field too, once known). */
  note: Record<string, unknown>
  /** Has queued writes (or an open conflict). */
  pending: boolean
}

export interface ReplicaConflict {
  /** The conflict's key, for resolve(). */
  key: string
  /** The entry key. */
  entry: string
  /** The local version (null: a local delete). */
  mine: Record<string, unknown> | null
  /** The service's current version (null: deleted there). */
  theirs: Record<string, unknown> | null
  /** What the service answered: 412 (changed there), 404 (deleted there), or another refusal. */
  status: number
}

export type ReplicaEvent = { type: 'change' | 'waiting' | 'conflict' | 'online' | 'reset' }

interface Waiter {
  check: () => boolean
  resolve: () => void
  reject: (reason: unknown) => void
}

/** What a send learnt of the note: the service's version after the write (note null: deleted). */
interface Acknowledged {
  id: number
  note: JsonObject | null
  etag: string | null
  /** Seen again rather than made now (a replayed create, a resend that met its own write). */
  again: boolean
}

export class Replica {
  readonly #client: NotesClient
  readonly #storage: ReplicaStorage
  readonly #maxDelayMs: number
  readonly #batchLimit: number
  readonly #base = new Map<number, BaseNote>()
  readonly #echoes = new Map<number, Echo>()
  #outbox: OutboxEntry[] = []
  readonly #conflicts = new Map<string, StoredConflict>()
  /** Entry key -> service id, for local creates once acknowledged (and entries re-created). */
  readonly #links = new Map<string, number>()
  readonly #keyById = new Map<number, string>()
  #version: string | undefined
  #seq = 0
  #view: ReplicaEntry[] | undefined
  #online = false
  #closed = false
  #running: { stop: AbortController; done: Promise<void> } | undefined
  #wakePush: (() => void) | undefined
  /** The feed's changes seen while a write is on its way (undefined: none on its way). */
  #flight: { id: number; note: JsonObject | null }[] | undefined
  /** Versions applied since each sync() began to wait (and '' for a reload). */
  readonly #watchers = new Set<Set<string>>()
  readonly #waiters = new Set<Waiter>()
  readonly #listeners = new Set<(event: ReplicaEvent) => void>()

  private constructor(options: ReplicaOptions) {
    this.#client = options.client
    this.#storage = options.storage
    this.#maxDelayMs = options.maxDelayMs ?? 30_000
    this.#batchLimit = Math.min(Math.max(options.batchLimit ?? 100, 1), 1000)
  }

  /** Opens a replica over its storage (no network until start() or sync()). */
  static async open(options: ReplicaOptions): Promise<Replica> {
    const replica = new Replica(options)
    await replica.#load()
    return replica
  }

  async #load(): Promise<void> {
    const contents = await this.#storage.load()
    for (const [key, value] of contents.notes) this.#base.set(Number(key), value as BaseNote)
    this.#outbox = [...contents.outbox.values()] as OutboxEntry[]
    this.#outbox.sort((a, b) => a.seq - b.seq)
    for (const value of contents.conflicts.values()) {
      const conflict = value as StoredConflict
      this.#conflicts.set(conflict.key, conflict)
    }
    for (const [key, value] of contents.meta) {
      if (key === META_VERSION) this.#version = value as string
      else if (key === META_SEQ) this.#seq = value as number
      else if (key.startsWith(LINK_PREFIX))
        this.#link(key.slice(LINK_PREFIX.length), value as number)
      else if (key.startsWith(ECHO_PREFIX)) {
        this.#echoes.set(Number(key.slice(ECHO_PREFIX.length)), value as Echo)
      }
    }
  }

  // ---- The local view ----

  /**
   * The local view: the service's notes with the outbox applied, in list order (service ids
   * ascending, local creates after them in creation order).
   */
  notes(): readonly ReplicaEntry[] {
    this.#view ??= this.#buildView()
    return this.#view
  }

  /** The service's q rule (string values at any depth, keys excluded, case-insensitive). */
  search(text: string): readonly ReplicaEntry[] {
    const matches = matchesText(text)
    return this.notes().filter((entry) => matches(entry.note))
  }

  get(key: string): ReplicaEntry | undefined {
    return this.notes().find((entry) => entry.key === key)
  }

  /** Queued writes not yet acknowledged by the service. */
  get waiting(): number {
    return this.#outbox.length
  }

  get conflicts(): readonly ReplicaConflict[] {
    return [...this.#conflicts.values()].map((conflict) => ({
      key: conflict.key,
      entry: conflict.entry,
      mine: copyJson(conflict.mine),
      theirs: copyJson(conflict.theirs),
      status: conflict.status,
    }))
  }

  /** The last contact with the service succeeded. */
  get online(): boolean {
    return this.#online
  }

  /** Listeners get 'change', 'waiting', 'conflict', 'online', 'reset'; answers an unsubscribe. */
  subscribe(listener: (event: ReplicaEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  #buildView(): ReplicaEntry[] {
    const keys = new Set<string>()
    for (const id of this.#base.keys()) keys.add(this.#keyOf(id))
    for (const id of this.#echoes.keys()) keys.add(this.#keyOf(id))
    for (const entry of this.#outbox) keys.add(entry.entry)
    for (const conflict of this.#conflicts.values()) keys.add(conflict.entry)
    // Each entry's queued writes, in order, and its conflict: one pass over each.
    const queued = new Map<string, OutboxEntry[]>()
    for (const entry of this.#outbox) {
      const list = queued.get(entry.entry)
      if (list === undefined) queued.set(entry.entry, [entry])
      else list.push(entry)
    }
    const conflicted = new Map<string, StoredConflict>()
    for (const conflict of this.#conflicts.values()) conflicted.set(conflict.entry, conflict)
    const order = new Map<string, number>()
    for (const [key, list] of queued) order.set(key, (list[0] as OutboxEntry).seq)
    const view: ReplicaEntry[] = []
    for (const key of keys) {
      const conflict = conflicted.get(key)
      let note = conflict === undefined ? this.#serviceState(key) : conflict.mine
      if (conflict === undefined)
        for (const entry of queued.get(key) ?? []) note = applied(note, entry)
      if (note === null) continue
      const pending = queued.has(key) || conflict !== undefined
      view.push({ key, id: this.#idOf(key), note, pending })
    }
    const rank = (entry: ReplicaEntry): number => order.get(entry.key) ?? Number.MAX_SAFE_INTEGER
    view.sort((a, b) => {
      if (a.id !== undefined && b.id !== undefined) return a.id - b.id
      if (a.id !== undefined) return -1
      if (b.id !== undefined) return 1
      return rank(a) - rank(b)
    })
    return view
  }

  /** One entry of the view, without building the whole view (it was just written). */
  #entryOf(key: string): ReplicaEntry {
    return { key, id: this.#idOf(key), note: this.#stateOf(key) ?? {}, pending: true }
  }

  /** An entry's note in the local view (null: none, or deleted). */
  #stateOf(key: string): JsonObject | null {
    const conflict = this.#conflictOn(key)
    if (conflict !== undefined) return conflict.mine
    let state = this.#serviceState(key)
    for (const entry of this.#outbox) if (entry.entry === key) state = applied(state, entry)
    return state
  }

  /** The entry as the service has it, as far as this replica knows (acknowledged writes too). */
  #serviceState(key: string): JsonObject | null {
    const id = this.#idOf(key)
    if (id === undefined) return null
    const echo = this.#echoes.get(id)
    if (echo !== undefined) return echo.note
    return this.#base.get(id)?.note ?? null
  }

  #serviceEtag(key: string): string | null {
    const id = this.#idOf(key)
    if (id === undefined) return null
    const echo = this.#echoes.get(id)
    if (echo !== undefined) return echo.etag
    return this.#base.get(id)?.etag ?? null
  }

  #idOf(key: string): number | undefined {
    const linked = this.#links.get(key)
    if (linked !== undefined) return linked
    return key.startsWith('n:') ? Number(key.slice(2)) : undefined
  }

  #keyOf(id: number): string {
    return this.#keyById.get(id) ?? `n:${id}`
  }

  #link(key: string, id: number): void {
    this.#links.set(key, id)
    this.#keyById.set(id, key)
  }

  #conflictOn(key: string): StoredConflict | undefined {
    for (const conflict of this.#conflicts.values()) if (conflict.entry === key) return conflict
    return undefined
  }

  // ---- Local writes ----

  /** Applies a create to the local view and queues it; resolves once it is stored. */
  async create(fields: NoteFields): Promise<ReplicaEntry> {
    this.#check()
    const note = withoutId(fields)
    const key = `local:${newIdempotencyKey()}`
    const entry: OutboxEntry = {
      seq: 0,
      entry: key,
      op: 'create',
      fields: note,
      idempotencyKey: newIdempotencyKey(),
      basis: null,
      after: note,
    }
    await this.#queue(entry)
    return this.#entryOf(key)
  }

  /**
   * Applies an update to the local view and queues it. `patch` must not hold `id` (the replica
   * does not move notes to another id). Throws when the view has no such entry.
   */
  async update(
    key: string,
    patch: NoteFields,
    options: { mergePatch?: boolean } = {},
  ): Promise<ReplicaEntry> {
    this.#check()
    if (Object.hasOwn(patch, 'id')) {
      throw new TypeError('A replica update cannot change a note id: leave `id` out of the patch.')
    }
    const state = this.#stateOf(key)
    if (state === null) throw new RangeError(`The replica has no note ${key}.`)
    const merge = options.mergePatch === true
    const after = merge ? mergePatch(state, patch) : shallowPatch(state, patch)
    const entry: OutboxEntry = {
      seq: 0,
      entry: key,
      op: 'update',
      fields: copyJson(patch),
      ...(merge ? { mergePatch: true } : {}),
      basis: null,
      after,
    }
    await this.#queue(entry)
    return this.#entryOf(key)
  }

  /** Removes the entry from the local view and queues the delete. */
  async delete(key: string): Promise<void> {
    this.#check()
    if (this.#stateOf(key) === null) throw new RangeError(`The replica has no note ${key}.`)
    await this.#queue({ seq: 0, entry: key, op: 'delete', basis: null, after: null })
  }

  /**
   * Queues a write (or folds it into its entry's open conflict), in one storage write. Its basis
   * is the service's version of the note unless a write to it is already queued.
   */
  async #queue(entry: OutboxEntry): Promise<void> {
    const conflict = this.#conflictOn(entry.entry)
    if (conflict !== undefined) {
      conflict.mine = entry.after
      this.#changed('change', 'conflict')
      await this.#storage.write([{ table: 'conflicts', key: conflict.key, value: conflict }])
      return
    }
    const queued = this.#outbox.some((other) => other.entry === entry.entry)
    if (entry.op !== 'create' && !queued) {
      const note = this.#serviceState(entry.entry)
      if (note !== null) entry.basis = { etag: this.#serviceEtag(entry.entry), note }
    }
    entry.seq = ++this.#seq
    this.#outbox.push(entry)
    this.#changed('change', 'waiting')
    this.#wakePush?.()
    await this.#storage.write([
      { table: 'outbox', key: outboxKey(entry.seq), value: entry },
      { table: 'meta', key: META_SEQ, value: this.#seq },
    ])
  }

  // ---- Conflicts ----

  /**
   * Settles a conflict: 'theirs' drops the local version; 'mine' writes the local version over
   * the service's; `{ note }` writes that note (a merge). The write is queued like any other,
   * conditional on the service's version the conflict showed (so it can conflict again).
   */
  async resolve(
    conflictKey: string,
    choice: 'mine' | 'theirs' | { note: NoteFields },
  ): Promise<void> {
    this.#check()
    const conflict = this.#conflicts.get(conflictKey)
    if (conflict === undefined) throw new RangeError(`No conflict ${conflictKey}.`)
    const target =
      choice === 'theirs' ? undefined : choice === 'mine' ? conflict.mine : withoutId(choice.note)
    this.#conflicts.delete(conflictKey)
    const changes: ReplicaWrite[] = [{ table: 'conflicts', key: conflictKey, delete: true }]
    const writes: OutboxEntry[] = []
    const key = conflict.entry
    if (target !== undefined) {
      const basis = conflict.theirs === null ? null : { etag: conflict.etag, note: conflict.theirs }
      if (conflict.theirs === null && target !== null) {
        // Deleted there: written again as a new note, under the same entry key.
        const note = withoutId(target)
        const id = this.#links.get(key)
        if (id !== undefined) this.#unlink(key, id, changes)
        writes.push({
          seq: 0,
          entry: key,
          op: 'create',
          fields: note,
          idempotencyKey: newIdempotencyKey(),
          basis: null,
          after: note,
        })
      } else if (conflict.theirs !== null && target === null) {
        writes.push({ seq: 0, entry: key, op: 'delete', basis, after: null })
      } else if (conflict.theirs !== null && target !== null) {
        const fields = withoutId(target)
        const after = { ...fields, id: conflict.theirs.id }
        const gone = Object.keys(conflict.theirs).filter(
          (field) => field !== 'id' && !Object.hasOwn(fields, field),
        )
        if (gone.length > 0) {
          // A merge patch removes the fields the target lacks; the plain patch then sets the
          // rest whole (a merge patch could not set a field to null).
          const removal = Object.fromEntries(gone.map((field) => [field, null]))
          writes.push({
            seq: 0,
            entry: key,
            op: 'update',
            fields: removal,
            mergePatch: true,
            basis,
            after: mergePatch(conflict.theirs, removal),
          })
        }
        writes.push({
          seq: 0,
          entry: key,
          op: 'update',
          fields,
          basis: gone.length > 0 ? null : basis,
          after,
        })
      }
    }
    for (const write of writes) {
      write.seq = ++this.#seq
      this.#outbox.push(write)
      changes.push({ table: 'outbox', key: outboxKey(write.seq), value: write })
    }
    changes.push({ table: 'meta', key: META_SEQ, value: this.#seq })
    this.#sweepLinks(changes)
    this.#changed('change', 'conflict', 'waiting')
    this.#wakePush?.()
    await this.#storage.write(changes)
  }

  // ---- Syncing ----

  /**
   * Starts syncing: pull (full load when empty or on reset, then the change feed), push the
   * outbox in order; keeps retrying with backoff while the service is unreachable.
   */
  start(): void {
    this.#check()
    if (this.#running !== undefined) return
    const stop = new AbortController()
    const done = Promise.all([this.#pullLoop(stop.signal), this.#pushLoop(stop.signal)]).then(
      () => undefined,
    )
    this.#running = { stop, done }
  }

  /** Stops syncing: aborts the requests under way; holds no timer or connection afterwards. */
  async stop(): Promise<void> {
    const running = this.#running
    if (running === undefined) return
    this.#running = undefined
    running.stop.abort()
    this.#wakePush?.()
    await running.done
  }

  /**
   * Resolves once the outbox is empty (or only conflicts remain) and the feed has caught up to
   * the service's version at the time of the call; rejects on abort. Starts syncing if needed.
   */
  async sync(options: { signal?: AbortSignal | undefined } = {}): Promise<void> {
    this.#check()
    this.start()
    const signal = options.signal
    for (;;) {
      await this.#waitFor(() => this.#outbox.length === 0, signal)
      const seen = new Set<string>()
      this.#watchers.add(seen)
      try {
        const version = await this.#currentVersion(signal)
        await this.#waitFor(
          () => this.#version === version || seen.has(version) || seen.has(''),
          signal,
        )
      } finally {
        this.#watchers.delete(seen)
      }
      if (this.#outbox.length === 0) return
    }
  }

  /** Stops syncing and closes the storage. */
  async close(): Promise<void> {
    if (this.#closed) return
    await this.stop()
    this.#closed = true
    for (const waiter of this.#waiters) waiter.reject(new Error('The replica was closed.'))
    this.#waiters.clear()
    await this.#storage.close()
  }

  async #currentVersion(signal: AbortSignal | undefined): Promise<string> {
    for (let failures = 0; ; failures++) {
      signal?.throwIfAborted()
      this.#check()
      try {
        const page = await this.#client.pages({ limit: 1, signal }).next()
        const version = page.done === true ? undefined : page.value.version
        if (version === undefined) throw new Error('The list carried no Notes-Version.')
        this.#setOnline(true)
        return version
      } catch (err) {
        if (signal?.aborted === true) throw signal.reason
        if (!transient(err)) throw err
        this.#setOnline(false)
        await sleep(this.#backoff(failures), signal)
      }
    }
  }

  async #pullLoop(signal: AbortSignal): Promise<void> {
    for (let failures = 0; !signal.aborted; failures++) {
      try {
        if (this.#version === undefined) await this.#reload(signal)
        const feed = this.#client.events({ since: this.#version, signal })
        for await (const event of feed) {
          failures = 0
          this.#setOnline(true)
          if (event.type === 'reset') await this.#reload(signal, event.version)
          else await this.#apply(event)
        }
      } catch (err) {
        if (signal.aborted) return
        if (transient(err)) this.#setOnline(false)
      }
      try {
        await sleep(this.#backoff(failures), signal)
      } catch {
        return
      }
    }
  }

  /** Loads the whole list (pages), keeping the outbox and conflicts; `version`: a reset's. */
  async #reload(signal: AbortSignal, version?: string): Promise<void> {
    const notes = new Map<number, JsonObject>()
    let first: string | undefined
    for await (const page of this.#client.pages({ limit: 1000, signal })) {
      first ??= page.version
      for (const note of page.notes) notes.set(note.id, note)
    }
    this.#setOnline(true)
    const changes: ReplicaWrite[] = [{ table: 'notes', clear: true }]
    const old = new Map(this.#base)
    this.#base.clear()
    for (const [id, note] of notes) {
      const before = old.get(id)
      const etag = before !== undefined && sameJson(before.note, note) ? before.etag : null
      this.#base.set(id, { note, etag })
      changes.push({ table: 'notes', key: String(id), value: { note, etag } })
    }
    // The load shows the writes acknowledged before it; one acknowledged while it ran may come
    // before the version the feed goes on from, and would never be echoed: the feed brings the
    // others again.
    for (const id of [...this.#echoes.keys()]) {
      this.#echoes.delete(id)
      changes.push({ table: 'meta', key: `${ECHO_PREFIX}${id}`, delete: true })
    }
    this.#version = version ?? first
    if (this.#version !== undefined) {
      changes.push({ table: 'meta', key: META_VERSION, value: this.#version })
    }
    this.#sweepLinks(changes)
    for (const seen of this.#watchers) seen.add('')
    if (version === undefined) this.#changed('change')
    else this.#changed('change', 'reset')
    await this.#storage.write(changes)
  }

  /** One change of the feed, into the base; the replica's own writes come back as echoes. */
  async #apply(event: Exclude<ChangeEvent, { type: 'reset' }>): Promise<void> {
    const changes: ReplicaWrite[] = []
    const id = event.type === 'deleted' ? event.id : event.note.id
    const note = event.type === 'deleted' ? null : (event.note as JsonObject)
    this.#flight?.push({ id, note })
    const echo = this.#echoes.get(id)
    const echoed = echo !== undefined && sameJson(echo.note, note)
    if (echoed) {
      this.#echoes.delete(id)
      changes.push({ table: 'meta', key: `${ECHO_PREFIX}${id}`, delete: true })
    }
    if (note === null) {
      this.#base.delete(id)
      changes.push({ table: 'notes', key: String(id), delete: true })
      this.#dropLinkIfUnused(id, changes)
    } else {
      const before = this.#base.get(id)
      const etag = echoed
        ? (echo as Echo).etag
        : before !== undefined && sameJson(before.note, note)
          ? before.etag
          : null
      const value: BaseNote = { note, etag }
      this.#base.set(id, value)
      changes.push({ table: 'notes', key: String(id), value })
    }
    this.#version = event.version
    changes.push({ table: 'meta', key: META_VERSION, value: event.version })
    for (const seen of this.#watchers) seen.add(event.version)
    this.#changed('change')
    await this.#storage.write(changes)
  }

  async #pushLoop(signal: AbortSignal): Promise<void> {
    let failures = 0
    while (!signal.aborted) {
      const entry = this.#outbox[0]
      try {
        if (entry === undefined) {
          if (this.#online) await this.#idle(signal)
          else {
            // Offline with nothing to send: look for the service now and then.
            await sleep(this.#backoff(failures), signal)
            await this.#currentVersion(signal)
          }
        } else {
          await this.#sendNext(entry, signal)
          this.#setOnline(true)
        }
        failures = 0
      } catch (err) {
        if (signal.aborted) return
        // A storage failure is tried again too: the write stays queued.
        if (transient(err)) this.#setOnline(false)
        try {
          await sleep(this.#backoff(failures++), signal)
        } catch {
          return
        }
      }
    }
  }

  #idle(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.#wakePush = undefined
        signal.removeEventListener('abort', done)
        resolve()
      }
      this.#wakePush = done
      signal.addEventListener('abort', done, { once: true })
    })
  }

  /**
   * Sends the first queued write alone, or it and the writes after it as one batch when they
   * need nothing the batch itself would answer: creates, and updates and deletes of notes whose
   * id and ETag are known, each note once.
   */
  async #sendNext(first: OutboxEntry, signal: AbortSignal): Promise<void> {
    if (first.batch === undefined && this.#batchLimit > 1 && first.single !== true) {
      const run = this.#run()
      if (run.length > 1) {
        first.batch = {
          idempotencyKey: newIdempotencyKey(),
          seqs: run.map(([entry]) => entry.seq),
          requests: run.map(([, request]) => request),
        }
        await this.#storage.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
      }
    }
    if (first.batch === undefined) {
      if (first.single !== true && this.#batchLimit > 1) {
        first.single = true
        await this.#storage.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
      }
      await this.#send(first, signal)
      return
    }
    const batch = first.batch
    this.#flight = []
    try {
      let result: BatchResult
      try {
        result = await this.#client.batch(batch.requests, {
          idempotencyKey: batch.idempotencyKey,
          ifMatch: false,
          signal,
        })
      } catch (err) {
        if (!refused(err)) throw err
        // Nothing was applied: the first write goes alone, and meets its conflict if it has one.
        delete first.batch
        first.single = true
        await this.#storage.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
        return
      }
      for (const [i, seq] of batch.seqs.entries()) {
        const entry = this.#outbox.find((queued) => queued.seq === seq)
        const answer = result.answers[i]
        if (entry === undefined || answer === undefined) continue
        const request = batch.requests[i] as BatchRequest
        const data = (answer.body as { data?: unknown } | null)?.data
        const acknowledgement: Acknowledged =
          request.method === 'DELETE'
            ? {
                id: Number(request.url.slice('/api/note/'.length)),
                note: null,
                etag: null,
                again: result.replayed,
              }
            : {
                id: (data as JsonObject).id as number,
                note: data as JsonObject,
                etag: answer.headers.etag ?? null,
                again: result.replayed,
              }
        await this.#acknowledge(entry, acknowledgement)
      }
    } finally {
      this.#flight = undefined
    }
  }

  /** The writes at the head of the outbox that can go as one batch, with their requests. */
  #run(): [OutboxEntry, BatchRequest][] {
    const run: [OutboxEntry, BatchRequest][] = []
    const notes = new Set<string>()
    for (const entry of this.#outbox) {
      if (run.length >= this.#batchLimit || notes.has(entry.entry)) break
      let request: BatchRequest
      if (entry.op === 'create') {
        request = { method: 'POST', url: '/api/note', body: entry.fields ?? {} }
      } else {
        const id = this.#idOf(entry.entry)
        const etag = entry.basis?.etag
        if (id === undefined || etag === undefined || etag === null) break
        const headers: Record<string, string> = { 'if-match': etag }
        if (entry.op === 'delete') request = { method: 'DELETE', url: `/api/note/${id}`, headers }
        else {
          headers['content-type'] =
            entry.mergePatch === true ? 'application/merge-patch+json' : 'application/json'
          request = { method: 'PATCH', url: `/api/note/${id}`, headers, body: entry.fields ?? {} }
        }
      }
      notes.add(entry.entry)
      run.push([entry, request])
    }
    return run
  }

  /** Sends the first queued write; acknowledges it, or turns it into a conflict. */
  async #send(entry: OutboxEntry, signal: AbortSignal): Promise<void> {
    this.#flight = []
    try {
      const answer = await this.#attempt(entry, signal)
      if ('conflict' in answer) await this.#conflict(entry, answer.status, answer.current)
      else await this.#acknowledge(entry, answer)
    } finally {
      this.#flight = undefined
    }
  }

  async #attempt(
    entry: OutboxEntry,
    signal: AbortSignal,
  ): Promise<Acknowledged | { conflict: true; status: number; current: NoteResult | undefined }> {
    if (entry.op === 'create') {
      try {
        const result = await this.#client.create(entry.fields ?? {}, {
          idempotencyKey: entry.idempotencyKey,
          signal,
        })
        return acknowledged(result, result.replayed)
      } catch (err) {
        if (refused(err)) return { conflict: true, status: err.status, current: undefined }
        throw err
      }
    }
    const id = this.#idOf(entry.entry)
    if (id === undefined) return { conflict: true, status: 404, current: undefined }
    const basis = entry.basis
    if (basis === null) {
      const current = await this.#client.get(id, { signal })
      return { conflict: true, status: current === undefined ? 404 : 412, current }
    }
    let etag = basis.etag
    if (etag === null) {
      // The basis came from the feed, which carries no ETag: the service's version is the basis
      // if its content is.
      const current = await this.#client.get(id, { signal })
      if (current === undefined) {
        return entry.op === 'delete'
          ? { id, note: null, etag: null, again: true }
          : { conflict: true, status: 404, current }
      }
      if (!sameJson(current.note, basis.note)) {
        const mine = entry.op === 'update' ? applied(basis.note, entry) : null
        if (mine !== null && sameJson(current.note, mine)) return acknowledged(current, true)
        return { conflict: true, status: 412, current }
      }
      etag = current.etag ?? '*'
    }
    try {
      if (entry.op === 'delete') {
        await this.#client.delete(id, { ifMatch: etag, signal })
        return { id, note: null, etag: null, again: false }
      }
      const result = await this.#client.update(id, entry.fields ?? {}, {
        ifMatch: etag,
        mergePatch: entry.mergePatch === true,
        signal,
      })
      return acknowledged(result, false)
    } catch (err) {
      if (entry.op === 'delete' && err instanceof NoteNotFoundError) {
        // Deleted there too: what this write wanted.
        return { id, note: null, etag: null, again: true }
      }
      if (!(err instanceof ConflictError || err instanceof NoteNotFoundError || refused(err))) {
        throw err
      }
      const current = await this.#client.get(id, { signal })
      // A resend whose first try was applied (an answer lost, a crash) meets its own write.
      if (
        entry.op === 'update' &&
        current !== undefined &&
        sameJson(current.note, applied(basis.note, entry))
      ) {
        return acknowledged(current, true)
      }
      const status = err instanceof NotesProblem ? err.status : 412
      return { conflict: true, status, current }
    }
  }

  async #acknowledge(entry: OutboxEntry, answer: Acknowledged): Promise<void> {
    const index = this.#outbox.indexOf(entry)
    if (index === -1) return
    this.#outbox.splice(index, 1)
    const changes: ReplicaWrite[] = [{ table: 'outbox', key: outboxKey(entry.seq), delete: true }]
    const { id, note, etag } = answer
    if (entry.op === 'create') {
      this.#link(entry.entry, id)
      changes.push({ table: 'meta', key: `${LINK_PREFIX}${entry.entry}`, value: id })
    }
    const next = this.#outbox.find((other) => other.entry === entry.entry)
    if (next !== undefined && next.basis === null && note !== null) {
      next.basis = { etag, note }
      changes.push({ table: 'outbox', key: outboxKey(next.seq), value: next })
    }
    const passed = (this.#flight ?? []).some(
      (change) => change.id === id && sameJson(change.note, note),
    )
    const base = this.#base.get(id)
    const sameAsBase =
      note === null ? base === undefined : base !== undefined && sameJson(base.note, note)
    if (sameAsBase) {
      if (base !== undefined && note !== null) {
        base.etag = etag
        changes.push({ table: 'notes', key: String(id), value: base })
      }
    } else if (!passed && !answer.again) {
      const echo: Echo = { note, etag }
      this.#echoes.set(id, echo)
      changes.push({ table: 'meta', key: `${ECHO_PREFIX}${id}`, value: echo })
    }
    // The feed may have brought its note's deletion already.
    this.#dropLinkIfUnused(id, changes)
    this.#changed('change', 'waiting')
    await this.#storage.write(changes)
  }

  /** Stops the write: it and every later write to its note become one conflict. */
  async #conflict(
    entry: OutboxEntry,
    status: number,
    current: NoteResult | undefined,
  ): Promise<void> {
    if (!this.#outbox.includes(entry)) return
    const key = entry.entry
    const mine = this.#stateOf(key)
    const changes: ReplicaWrite[] = []
    for (const other of this.#outbox.filter((queued) => queued.entry === key)) {
      changes.push({ table: 'outbox', key: outboxKey(other.seq), delete: true })
    }
    this.#outbox = this.#outbox.filter((queued) => queued.entry !== key)
    const conflict: StoredConflict = {
      key: conflictKey(entry.seq),
      entry: key,
      mine,
      theirs: current === undefined ? null : (current.note as JsonObject),
      etag: current?.etag ?? null,
      status,
    }
    this.#conflicts.set(conflict.key, conflict)
    changes.push({ table: 'conflicts', key: conflict.key, value: conflict })
    this.#changed('change', 'conflict', 'waiting')
    await this.#storage.write(changes)
  }

  /** Forgets a local key's id once nothing refers to its note any more. */
  #dropLinkIfUnused(id: number, changes: ReplicaWrite[]): void {
    const key = this.#keyById.get(id)
    if (key === undefined || this.#base.has(id) || this.#echoes.has(id)) return
    if (this.#outbox.some((entry) => entry.entry === key)) return
    if (this.#conflictOn(key) !== undefined) return
    this.#unlink(key, id, changes)
  }

  /** Forgets every link to a note that nothing refers to any more (after a reload, a resolve). */
  #sweepLinks(changes: ReplicaWrite[]): void {
    for (const id of [...this.#keyById.keys()]) this.#dropLinkIfUnused(id, changes)
  }

  #unlink(key: string, id: number, changes: ReplicaWrite[]): void {
    this.#links.delete(key)
    this.#keyById.delete(id)
    changes.push({ table: 'meta', key: `${LINK_PREFIX}${key}`, delete: true })
  }

  // ---- Plumbing ----

  #backoff(failures: number): number {
    const ceiling = Math.min(200 * 2 ** Math.min(failures, 20), this.#maxDelayMs)
    return ceiling / 2 + Math.random() * (ceiling / 2)
  }

  #setOnline(online: boolean): void {
    if (this.#online === online) return
    this.#online = online
    this.#emit('online')
  }

  #changed(...types: ReplicaEvent['type'][]): void {
    this.#view = undefined
    for (const type of types) this.#emit(type)
    for (const waiter of [...this.#waiters]) {
      if (waiter.check()) {
        this.#waiters.delete(waiter)
        waiter.resolve()
      }
    }
  }

  #emit(type: ReplicaEvent['type']): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener({ type })
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  #waitFor(check: () => boolean, signal: AbortSignal | undefined): Promise<void> {
    if (check()) return Promise.resolve()
    signal?.throwIfAborted()
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters.delete(waiter)
        reject(signal?.reason)
      }
      const waiter: Waiter = {
        check,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort)
          resolve()
        },
        reject: (reason) => {
          signal?.removeEventListener('abort', onAbort)
          reject(reason)
        },
      }
      this.#waiters.add(waiter)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  #check(): void {
    if (this.#closed) throw new Error('The replica is closed.')
  }
}

/** An entry's note after one queued write (`after` where the note is gone under an update). */
function applied(state: JsonObject | null, entry: OutboxEntry): JsonObject | null {
  switch (entry.op) {
    case 'create':
      return copyJson(entry.fields ?? {})
    case 'delete':
      return null
    case 'update': {
      if (state === null) return entry.after
      const patch = entry.fields ?? {}
      return entry.mergePatch === true ? mergePatch(state, patch) : shallowPatch(state, patch)
    }
  }
}

function acknowledged(result: NoteResult, again: boolean): Acknowledged {
  return { id: result.note.id, note: result.note as JsonObject, etag: result.etag ?? null, again }
}

function withoutId(fields: NoteFields): JsonObject {
  const copy = copyJson(fields)
  if (isObject(copy)) delete copy.id
  return copy
}

/** A refusal no resend changes (a 4xx but auth, timeouts, rate limits and 409): a conflict. */
function refused(err: unknown): err is NotesProblem {
  if (!(err instanceof NotesProblem)) return false
  const status = err.status
  return status >= 400 && status < 500 && ![401, 403, 408, 409, 429].includes(status)
}

/** Worth trying again later: the network, a 5xx, auth, 408, 409, 429. */
function transient(err: unknown): boolean {
  return !(err instanceof NotesProblem) || !refused(err)
}

/** Waits, or rejects when the signal aborts (and then holds no timer). */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason)
      return
    }
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
