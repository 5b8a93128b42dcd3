/**
 * The replica's conflicts: a refused write (and every later write to its note) kept as one
 * conflict with both versions, and its resolution into new queued writes.
 */
import type { NoteFields, NoteResult } from '../types.js'
import { applied, stateOf, withoutId } from './local-view.js'
import { copyJson, type JsonObject } from './note-json.js'
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

/**
 * Stops the write: it and every later write to its note become one conflict, on the whole note
 * (a delete against an edit, an edit of a note deleted there, a refusal).
 */
export async function recordConflict(
  state: ReplicaState,
  entry: OutboxEntry,
  status: number,
  current: NoteResult | undefined,
): Promise<void> {
  if (!state.outbox.includes(entry)) return
  const changes: ReplicaWrite[] = []
  const found = {
    theirs: current === undefined ? null : (current.note as JsonObject),
    etag: current?.etag ?? null,
    status,
    paths: [''],
  }
  foldIntoConflict(state, entry, found, changes)
  changed(state, 'change', 'conflict', 'waiting')
  await state.writes.write(changes)
}

/**
 * Makes `entry` (in the outbox or just acknowledged) a conflict with `found`, folding the later
 * queued writes to its note into its `mine`; the storage's changes go to `changes`.
 */
export function foldIntoConflict(
  state: ReplicaState,
  entry: OutboxEntry,
  found: Pick<StoredConflict, 'theirs' | 'etag' | 'status' | 'paths'>,
  changes: ReplicaWrite[],
): void {
  const key = entry.entry
  // A merged write's own version (mine at the disputed paths), then the writes after it.
  const queued = state.outbox.includes(entry)
  let mine = queued ? stateOf(state, key) : copyJson(entry.after)
  for (const other of state.outbox.filter((write) => write.entry === key)) {
    if (!queued) mine = applied(mine, other)
    changes.push({ table: 'outbox', key: outboxKey(other.seq), delete: true })
  }
  state.outbox = state.outbox.filter((queued) => queued.entry !== key)
  const conflict: StoredConflict = { key: conflictKey(entry.seq), entry: key, mine, ...found }
  state.conflicts.set(conflict.key, conflict)
  changes.push({ table: 'conflicts', key: conflict.key, value: conflict })
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
  const key = conflict.entry
  if (conflict.theirs === null) {
    if (target === null) return []
    // Deleted there: written again as a new note, under the same entry key.
    const id = state.links.get(key)
    if (id !== undefined) unlink(state, key, id, changes)
    return [queuedCreate(key, withoutId(target))]
  }
  const basis = { etag: conflict.etag, note: conflict.theirs }
  if (target === null) return [{ seq: 0, entry: key, op: 'delete', basis, after: null }]
  // The whole note, with PUT; its id where the target has it (a PUT keeps the body's order).
  const fields = { ...copyJson(target), id: conflict.theirs.id }
  return [{ seq: 0, entry: key, op: 'update', fields, replace: true, basis, after: fields }]
}
