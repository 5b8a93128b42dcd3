/**
 * The replica's conflicts: a refused write (and every later write to its note) kept as one
 * conflict with both versions, and its resolution into new queued writes.
 */
import type { NoteFields, NoteResult } from '../types.js'
import { stateOf, withoutId } from './local-view.js'
import { type JsonObject, mergePatch } from './note-json.js'
import {
  conflictKey,
  META_SEQ,
  type OutboxEntry,
  outboxKey,
  queuedCreate,
  type StoredConflict,
} from './outbox.js'
import { changed, type ReplicaState, sweepLinks, unlink } from './replica-state.js'
import type { ReplicaWrite } from './storage.js'

/** Stops the write: it and every later write to its note become one conflict. */
export async function recordConflict(
  state: ReplicaState,
  entry: OutboxEntry,
  status: number,
  current: NoteResult | undefined,
): Promise<void> {
  if (!state.outbox.includes(entry)) return
  const key = entry.entry
  const mine = stateOf(state, key)
  const changes: ReplicaWrite[] = []
  for (const other of state.outbox.filter((queued) => queued.entry === key)) {
    changes.push({ table: 'outbox', key: outboxKey(other.seq), delete: true })
  }
  state.outbox = state.outbox.filter((queued) => queued.entry !== key)
  const conflict: StoredConflict = {
    key: conflictKey(entry.seq),
    entry: key,
    mine,
    theirs: current === undefined ? null : (current.note as JsonObject),
    etag: current?.etag ?? null,
    status,
  }
  state.conflicts.set(conflict.key, conflict)
  changes.push({ table: 'conflicts', key: conflict.key, value: conflict })
  changed(state, 'change', 'conflict', 'waiting')
  await state.writes.write(changes)
}

/**
 * Settles a conflict (see Replica.resolve): drops it and queues the writes the choice needs,
 * conditional on the service's version the conflict showed.
 */
export async function resolveConflict(
  state: ReplicaState,
  key: string,
  choice: 'mine' | 'theirs' | { note: NoteFields },
): Promise<void> {
  const conflict = state.conflicts.get(key)
  if (conflict === undefined) throw new RangeError(`No conflict ${key}.`)
  const target =
    choice === 'theirs' ? undefined : choice === 'mine' ? conflict.mine : withoutId(choice.note)
  state.conflicts.delete(key)
  const changes: ReplicaWrite[] = [{ table: 'conflicts', key, delete: true }]
  const writes = target === undefined ? [] : writesFor(state, conflict, target, changes)
  for (const write of writes) {
    write.seq = ++state.seq
    state.outbox.push(write)
    changes.push({ table: 'outbox', key: outboxKey(write.seq), value: write })
  }
  changes.push({ table: 'meta', key: META_SEQ, value: state.seq })
  sweepLinks(state, changes)
  changed(state, 'change', 'conflict', 'waiting')
  state.wakePush?.()
  await state.writes.write(changes)
}

/** The writes that turn the service's version of a conflict into `target` (null: deleted). */
function writesFor(
  state: ReplicaState,
  conflict: StoredConflict,
  target: JsonObject | null,
  changes: ReplicaWrite[],
): OutboxEntry[] {
  const writes: OutboxEntry[] = []
  const key = conflict.entry
  const basis = conflict.theirs === null ? null : { etag: conflict.etag, note: conflict.theirs }
  if (conflict.theirs === null && target !== null) {
    // Deleted there: written again as a new note, under the same entry key.
    const note = withoutId(target)
    const id = state.links.get(key)
    if (id !== undefined) unlink(state, key, id, changes)
    writes.push(queuedCreate(key, note))
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
  return writes
}
