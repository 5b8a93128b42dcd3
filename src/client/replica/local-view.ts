/**
 * The replica's local view: the service's notes (the base, or the echo of an acknowledged write)
 * with the outbox applied on top, entry by entry and as the whole list notes() shows; and the
 * local writes as they enter the outbox (create, update, delete, a queued file's reference).
 */
import type { NoteFields } from '../types.js'
import {
  copyJson,
  isObject,
  type JsonObject,
  mergePatch,
  sameJson,
  shallowPatch,
} from './note-json.js'
import { META_SEQ, type OutboxEntry, outboxKey, type StoredConflict } from './outbox.js'
import { changed, conflictOn, idOf, keyOf, type ReplicaState } from './replica-state.js'
import type { ReplicaEntry } from './replica-types.js'
import type { ReplicaWrite } from './storage.js'

/** The whole view, in list order (service ids ascending, local creates after them). */
export function buildView(state: ReplicaState): ReplicaEntry[] {
  const keys = new Set<string>()
  const arriving = arrivingCreates(state)
  for (const id of state.base.keys()) if (!arriving.has(id)) keys.add(keyOf(state, id))
  for (const id of state.echoes.keys()) keys.add(keyOf(state, id))
  for (const entry of state.outbox) keys.add(entry.entry)
  for (const conflict of state.conflicts.values()) keys.add(conflict.entry)
  // Each entry's queued writes, in order, and its conflict: one pass over each.
  const queued = new Map<string, OutboxEntry[]>()
  for (const entry of state.outbox) {
    const list = queued.get(entry.entry)
    if (list === undefined) queued.set(entry.entry, [entry])
    else list.push(entry)
  }
  const conflicted = new Map<string, StoredConflict>()
  for (const conflict of state.conflicts.values()) conflicted.set(conflict.entry, conflict)
  const order = new Map<string, number>()
  for (const [key, list] of queued) order.set(key, (list[0] as OutboxEntry).seq)
  const view: ReplicaEntry[] = []
  for (const key of keys) {
    const conflict = conflicted.get(key)
    let note = conflict === undefined ? serviceState(state, key) : conflict.mine
    if (conflict === undefined)
      for (const entry of queued.get(key) ?? []) note = applied(note, entry)
    if (note === null) continue
    const pending = queued.has(key) || conflict !== undefined
    view.push({ key, id: idOf(state, key), note, pending })
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

/**
 * Notes the feed brought while a send is on its way that may be that send's own creates, their
 * answers not yet back: linked to no entry, and equal but for the id to a queued create not yet
 * acknowledged. The view leaves them out until the answer links them to their entry (or the send
 * ends), so that a create never shows twice; another client's equal create shows a moment later.
 */
function arrivingCreates(state: ReplicaState): Set<number> {
  const arriving = new Set<number>()
  if (state.flight === undefined || state.flight.length === 0) return arriving
  const creates = state.outbox.filter(
    (entry) => entry.op === 'create' && idOf(state, entry.entry) === undefined,
  )
  if (creates.length === 0) return arriving
  for (const { id, note } of state.flight) {
    if (note === null || state.keyById.has(id)) continue
    const fields = withoutId(note)
    if (creates.some((entry) => sameJson(entry.fields ?? {}, fields))) arriving.add(id)
  }
  return arriving
}

/** One entry of the view, without building the whole view (it was just written). */
export function entryOf(state: ReplicaState, key: string): ReplicaEntry {
  return { key, id: idOf(state, key), note: stateOf(state, key) ?? {}, pending: true }
}

/** An entry's note in the local view (null: none, or deleted). */
export function stateOf(state: ReplicaState, key: string): JsonObject | null {
  const conflict = conflictOn(state, key)
  if (conflict !== undefined) return conflict.mine
  let note = serviceState(state, key)
  for (const entry of state.outbox) if (entry.entry === key) note = applied(note, entry)
  return note
}

/** The entry as the service has it, as far as this replica knows (acknowledged writes too). */
function serviceState(state: ReplicaState, key: string): JsonObject | null {
  const id = idOf(state, key)
  if (id === undefined) return null
  const echo = state.echoes.get(id)
  if (echo !== undefined) return echo.note
  return state.base.get(id)?.note ?? null
}

function serviceEtag(state: ReplicaState, key: string): string | null {
  const id = idOf(state, key)
  if (id === undefined) return null
  const echo = state.echoes.get(id)
  if (echo !== undefined) return echo.etag
  return state.base.get(id)?.etag ?? null
}

/**
 * Whether the service's version, as the feed last told it, is no longer the one the update was
 * made on: sent as it is, it would meet a 412. A merged update is left to its 412 (the feed may
 * still be bringing versions older than the one it was merged with).
 */
export function staleByFeed(state: ReplicaState, entry: OutboxEntry): boolean {
  if (entry.op !== 'update' || entry.basis === null || entry.merged !== undefined) return false
  const seen = serviceState(state, entry.entry)
  return seen !== null && !sameJson(seen, entry.basis.note)
}

/** An entry's note after one queued write (`after` where the note is gone under an update). */
export function applied(note: JsonObject | null, entry: OutboxEntry): JsonObject | null {
  switch (entry.op) {
    case 'create':
      return copyJson(entry.fields ?? {})
    case 'delete':
      return null
    case 'update': {
      // A merged update shows as it was merged (mine at the conflicting paths, if any).
      if (note === null || entry.merged !== undefined) return copyJson(entry.after)
      if (entry.replace === true) return { ...copyJson(entry.fields ?? {}), id: note.id }
      const patch = entry.fields ?? {}
      return entry.mergePatch === true ? mergePatch(note, patch) : shallowPatch(note, patch)
    }
  }
}

/** The fields of a note as the replica writes them: { id: 3, a: 1 } -> { a: 1 }. */
export function withoutId(fields: NoteFields): JsonObject {
  const copy = copyJson(fields)
  if (isObject(copy)) delete copy.id
  return copy
}

/** The outbox entry of an update of `key` (its current local state `current`) by `patch`. */
export function updateOf(
  key: string,
  current: JsonObject,
  patch: NoteFields,
  merge: boolean,
): OutboxEntry {
  const after = merge ? mergePatch(current, patch) : shallowPatch(current, patch)
  return {
    seq: 0,
    entry: key,
    op: 'update',
    fields: copyJson(patch),
    ...(merge ? { mergePatch: true } : {}),
    basis: null,
    after,
  }
}

/**
 * Queues a write (or folds it into its entry's open conflict), with `more` changes, in one
 * storage write. Its basis is the service's version of the note unless a write to it is already
 * queued.
 */
export async function queueWrite(
  state: ReplicaState,
  entry: OutboxEntry,
  more: readonly ReplicaWrite[] = [],
): Promise<void> {
  const conflict = conflictOn(state, entry.entry)
  if (conflict !== undefined) {
    conflict.mine = entry.after
    changed(state, 'change', 'conflict')
    await state.writes.write([{ table: 'conflicts', key: conflict.key, value: conflict }, ...more])
    return
  }
  const queued = state.outbox.some((other) => other.entry === entry.entry)
  if (entry.op !== 'create' && !queued) {
    const note = serviceState(state, entry.entry)
    if (note !== null) entry.basis = { etag: serviceEtag(state, entry.entry), note }
  }
  entry.seq = ++state.seq
  state.outbox.push(entry)
  changed(state, 'change', 'waiting')
  state.wakePush?.()
  await state.writes.write([
    { table: 'outbox', key: outboxKey(entry.seq), value: entry },
    { table: 'meta', key: META_SEQ, value: state.seq },
    ...more,
  ])
}
