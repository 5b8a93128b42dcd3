/**
 * The replica's state, shared by its parts (the local view, the pull, the push, conflicts): what
 * it holds of the service and of its own writes, loaded from storage; the links between entry
 * keys and service ids; and the events and waits that follow each change.
 */
import type { NotesProblem } from '../errors.js'
import type { NotesClient } from '../notes-client.js'
import type { JsonObject } from './note-json.js'
import {
  type BaseNote,
  ECHO_PREFIX,
  type Echo,
  FILE_PREFIX,
  fileKeyTime,
  LINK_PREFIX,
  META_SEQ,
  META_VERSION,
  type OutboxEntry,
  type QueuedFile,
  type StoredConflict,
} from './outbox.js'
import type { ReplicaEntry, ReplicaEvent, ReplicaOptions } from './replica-types.js'
import type { ReplicaStorage, ReplicaWrite } from './storage.js'
import { WriteQueue } from './write-queue.js'

/** How long bytes named by no queued file are kept at open: another tab may be attaching them. */
const BYTES_GRACE_MS = 10 * 60_000

interface Waiter {
  check: () => boolean
  resolve: () => void
  reject: (reason: unknown) => void
}

/**
 * What a replica fed from outside (by NotebooksReplica, from the one stream of every notebook)
 * is told by, instead of its own feed.
 */
export interface FedHooks {
  /**
   * A send (or the look for the service) met a refusal of the notebook itself: 403 (the role
   * does not allow writing) or a 404 problem (no longer a member, or the notebook is gone).
   * Nothing is sent until it resolves.
   */
  refused(err: NotesProblem): Promise<void>
}

export interface ReplicaState {
  readonly client: NotesClient
  /** Set when the pull is done from outside: start() then only sends. */
  readonly fed: FedHooks | undefined
  readonly storage: ReplicaStorage
  /** Every storage write goes through it: in order, grouped while one is on its way. */
  readonly writes: WriteQueue
  /** A feed change's write that failed, for the pull to throw at its next change. */
  pullError: unknown
  readonly maxDelayMs: number
  readonly batchLimit: number
  readonly base: Map<number, BaseNote>
  readonly echoes: Map<number, Echo>
  outbox: OutboxEntry[]
  readonly conflicts: Map<string, StoredConflict>
  /** Entry key -> service id, for local creates once acknowledged (and entries re-created). */
  readonly links: Map<string, number>
  readonly keyById: Map<number, string>
  version: string | undefined
  seq: number
  view: ReplicaEntry[] | undefined
  online: boolean
  /**
   * The service said the notebook is no longer the user's (its feed was revoked, or a read or a
   * write met the notebook's 404): a replica of one notebook stops syncing.
   */
  lost: boolean
  closed: boolean
  wakePush: (() => void) | undefined
  /** Files attached on the device, in the order they are sent (queued-files.ts). */
  files: QueuedFile[]
  /** The files being uploaded now: how to abort each, and its progress. */
  readonly sending: Map<string, { abort: () => void; sent: number }>
  /** Ends the upload loop's rest (a file queued, the service back). */
  wakeFiles: (() => void) | undefined
  /** The feed's changes seen while a write is on its way (undefined: none on its way). */
  flight: { id: number; note: JsonObject | null }[] | undefined
  /** Versions applied since each sync() began to wait (and '' for a reload). */
  readonly watchers: Set<Set<string>>
  readonly waiters: Set<Waiter>
  readonly listeners: Set<(event: ReplicaEvent) => void>
}

/** A replica's state as its storage holds it. */
export async function loadState(options: ReplicaOptions, fed?: FedHooks): Promise<ReplicaState> {
  const state: ReplicaState = {
    client: options.client,
    fed,
    storage: options.storage,
    writes: new WriteQueue(options.storage),
    pullError: undefined,
    maxDelayMs: options.maxDelayMs ?? 30_000,
    batchLimit: Math.min(Math.max(options.batchLimit ?? 100, 1), 1000),
    base: new Map(),
    echoes: new Map(),
    outbox: [],
    conflicts: new Map(),
    links: new Map(),
    keyById: new Map(),
    version: undefined,
    seq: 0,
    view: undefined,
    online: false,
    lost: false,
    closed: false,
    wakePush: undefined,
    files: [],
    sending: new Map(),
    wakeFiles: undefined,
    flight: undefined,
    watchers: new Set(),
    waiters: new Set(),
    listeners: new Set(),
  }
  const contents = await state.storage.load()
  for (const [key, value] of contents.notes) state.base.set(Number(key), value as BaseNote)
  state.outbox = [...contents.outbox.values()] as OutboxEntry[]
  state.outbox.sort((a, b) => a.seq - b.seq)
  for (const value of contents.conflicts.values()) {
    const conflict = value as StoredConflict
    state.conflicts.set(conflict.key, conflict)
  }
  for (const [key, value] of contents.meta) {
    if (key === META_VERSION) state.version = value as string
    else if (key === META_SEQ) state.seq = value as number
    else if (key.startsWith(LINK_PREFIX))
      link(state, key.slice(LINK_PREFIX.length), value as number)
    else if (key.startsWith(ECHO_PREFIX)) {
      state.echoes.set(Number(key.slice(ECHO_PREFIX.length)), value as Echo)
    } else if (key.startsWith(FILE_PREFIX)) state.files.push(value as QueuedFile)
  }
  state.files.sort((a, b) => a.seq - b.seq)
  // Bytes no queued file refers to: left by a crash before their file was stored, or after it
  // was sent. attachFile stores the bytes before the entry that names them, so bytes another
  // tab is attaching now are named by nothing yet: bytes younger than BYTES_GRACE_MS are left
  // alone (their entry comes a few ms later, or the next open removes them), as no attach takes
  // that long between its two writes. Their key says when they were made (newFileKey).
  const queued = new Set(state.files.map((file) => file.key))
  const now = Date.now()
  for (const key of await state.storage.bytesKeys()) {
    if (!queued.has(key) && now - fileKeyTime(key) > BYTES_GRACE_MS) {
      await state.storage.deleteBytes(key)
    }
  }
  return state
}

export function checkOpen(state: ReplicaState): void {
  if (state.closed) throw new Error('The replica is closed.')
}

// ---- Entry keys and service ids ----

/** 'n:7' -> 7; 'local:…' -> its linked id, or undefined before the service gave one. */
export function idOf(state: ReplicaState, key: string): number | undefined {
  const linked = state.links.get(key)
  if (linked !== undefined) return linked
  return key.startsWith('n:') ? Number(key.slice(2)) : undefined
}

export function keyOf(state: ReplicaState, id: number): string {
  return state.keyById.get(id) ?? `n:${id}`
}

export function link(state: ReplicaState, key: string, id: number): void {
  state.links.set(key, id)
  state.keyById.set(id, key)
}

export function unlink(
  state: ReplicaState,
  key: string,
  id: number,
  changes: ReplicaWrite[],
): void {
  state.links.delete(key)
  state.keyById.delete(id)
  changes.push({ table: 'meta', key: `${LINK_PREFIX}${key}`, delete: true })
}

export function conflictOn(state: ReplicaState, key: string): StoredConflict | undefined {
  for (const conflict of state.conflicts.values()) if (conflict.entry === key) return conflict
  return undefined
}

/** Forgets a local key's id once nothing refers to its note any more. */
export function dropLinkIfUnused(state: ReplicaState, id: number, changes: ReplicaWrite[]): void {
  const key = state.keyById.get(id)
  if (key === undefined || state.base.has(id) || state.echoes.has(id)) return
  if (state.outbox.some((entry) => entry.entry === key)) return
  if (conflictOn(state, key) !== undefined) return
  unlink(state, key, id, changes)
}

/** Forgets every link to a note that nothing refers to any more (after a reload, a resolve). */
export function sweepLinks(state: ReplicaState, changes: ReplicaWrite[]): void {
  for (const id of [...state.keyById.keys()]) dropLinkIfUnused(state, id, changes)
}

// ---- Events and waits ----

export function setOnline(state: ReplicaState, online: boolean): void {
  if (state.online === online) return
  state.online = online
  // The service is back: a file resting after a failed upload goes now.
  if (online) state.wakeFiles?.()
  emit(state, 'online')
}

/** The error sync() rejects with once the notebook is lost. */
export function lostError(): Error {
  return new Error(
    "The notebook is no longer this user's (removed, left or deleted): the replica stopped syncing; its writes are in unsent().",
  )
}

/**
 * The notebook is lost (a replica of one notebook, not fed by NotebooksReplica): syncing stops,
 * the copy and the queued writes stay for the application, `lost` is told, and sync() rejects.
 */
export function loseNotebook(state: ReplicaState): void {
  if (state.lost) return
  state.lost = true
  state.wakePush?.()
  emit(state, 'lost')
  for (const waiter of [...state.waiters]) {
    state.waiters.delete(waiter)
    waiter.reject(lostError())
  }
}

/** After a change: drops the cached view, tells the listeners, settles the waits now met. */
export function changed(state: ReplicaState, ...types: ReplicaEvent['type'][]): void {
  state.view = undefined
  for (const type of types) emit(state, type)
  for (const waiter of [...state.waiters]) {
    if (waiter.check()) {
      state.waiters.delete(waiter)
      waiter.resolve()
    }
  }
}

function emit(state: ReplicaState, type: ReplicaEvent['type']): void {
  for (const listener of [...state.listeners]) {
    try {
      listener({ type })
    } catch {
      // A listener's failure is its own.
    }
  }
}

/** Resolves once `check()` holds after a change; rejects on abort or when the replica closes. */
export function waitFor(
  state: ReplicaState,
  check: () => boolean,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (check()) return Promise.resolve()
  signal?.throwIfAborted()
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      state.waiters.delete(waiter)
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
    state.waiters.add(waiter)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
