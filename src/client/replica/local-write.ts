/**
 * The replica's local writes, as they enter the outbox: an update's entry made from the view,
 * and the one storage write that queues any write (or folds it into its note's open conflict).
 * Replica's create, update and delete use it, and so does a queued file's reference to its note.
 */
import type { NoteFields } from '../types.js'
import { serviceEtag, serviceState } from './local-view.js'
import { copyJson, type JsonObject, mergePatch, shallowPatch } from './note-json.js'
import { META_SEQ, type OutboxEntry, outboxKey } from './outbox.js'
import { changed, conflictOn, type ReplicaState } from './replica-state.js'
import type { ReplicaWrite } from './storage.js'

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
