/**
 * The writes a replica can no longer send, as the application gets them (NotebooksReplica's
 * `unsent`): the notebook was lost (left, removed, deleted), or the role does not allow writing;
 * and the files queued on the device, as files() and unsentFiles() list them.
 */
import type { Notebook } from '../types.js'
import { copyJson } from './note-json.js'
import type { QueuedFile } from './outbox.js'
import { outboxKey } from './outbox.js'
import { changed, idOf, type ReplicaState, sweepLinks } from './replica-state.js'
import type { ReplicaConflict, ReplicaFile, UnsentFile } from './replica-types.js'
import type { ReplicaWrite } from './storage.js'

/** One queued write, in the order it was made. */
export interface UnsentWrite {
  /** The entry key it was made on (`n:<id>`, or `local:<uuid>` for a local create). */
  key: string
  /** The note's id on the service; undefined for a create never acknowledged. */
  id: number | undefined
  op: 'create' | 'update' | 'delete'
  /** A create's note, or an update's patch (undefined for a delete). */
  fields: Record<string, unknown> | undefined
  /** The patch is an RFC 7396 merge patch. */
  mergePatch: boolean
  /** The update replaces the whole note with `fields` (PUT): a merged note or a resolution. */
  replace: boolean
  /** The note as the write left it in the local view (null: deleted). */
  note: Record<string, unknown> | null
}

/** What NotebooksReplica hands to the application, and why. */
export interface UnsentWrites {
  /** The notebook, as last listed. */
  notebook: Notebook
  /**
   * 'left': the user lost the notebook (removed, left, or it was deleted): its copy is removed
   * from the device once this is handled. 'read-only': the service refused a write with 403 (the
   * user is a viewer there): the writes leave the outbox, the copy stays.
   */
  reason: 'left' | 'read-only'
  /** The queued writes, in the order they were made. */
  writes: UnsentWrite[]
  /** Open conflicts, whose `mine` was never written ('left' only; a viewer keeps them). */
  conflicts: ReplicaConflict[]
  /**
   * Files attached on the device, never uploaded, with their bytes read into memory ('left'
   * only: a viewer's refused files stay in the notebook's unsentFiles()).
   */
  files: UnsentFile[]
}

/** The replica's queued writes as UnsentWrites. */
export function unsentWrites(state: ReplicaState): UnsentWrite[] {
  return state.outbox.map((entry) => ({
    key: entry.entry,
    id: idOf(state, entry.entry),
    op: entry.op,
    fields: entry.fields === undefined ? undefined : copyJson(entry.fields),
    mergePatch: entry.mergePatch === true,
    replace: entry.replace === true,
    note: copyJson(entry.after),
  }))
}

/** The replica's open conflicts, as Replica.conflicts gives them. */
export function openConflicts(state: ReplicaState): ReplicaConflict[] {
  return [...state.conflicts.values()].map((conflict) => ({
    key: conflict.key,
    entry: conflict.entry,
    mine: copyJson(conflict.mine),
    theirs: copyJson(conflict.theirs),
    status: conflict.status,
    paths: [...(conflict.paths ?? [''])],
  }))
}

/** Takes the first `count` queued writes out of the outbox (handed over), in one storage write. */
export async function dropQueued(state: ReplicaState, count: number): Promise<void> {
  const gone = state.outbox.slice(0, count)
  state.outbox = state.outbox.slice(count)
  const changes: ReplicaWrite[] = gone.map((entry) => ({
    table: 'outbox',
    key: outboxKey(entry.seq),
    delete: true,
  }))
  sweepLinks(state, changes)
  changed(state, 'change', 'waiting')
  await state.writes.write(changes)
}

/** Files still to send (not refused). */
export function filesWaiting(state: ReplicaState): boolean {
  return state.files.some((file) => file.refused === undefined)
}

/** Every queued file, in the order they are sent. */
export function fileInfos(state: ReplicaState): ReplicaFile[] {
  return state.files.map((file) => fileInfo(state, file))
}

export function fileInfo(state: ReplicaState, file: QueuedFile): ReplicaFile {
  const sending = state.sending.get(file.key)
  return {
    key: file.key,
    entry: file.entry,
    name: file.name,
    type: file.type,
    size: file.size,
    state: file.refused !== undefined ? 'refused' : sending !== undefined ? 'sending' : 'waiting',
    sent: sending?.sent ?? 0,
    status: file.refused?.status,
    detail: file.refused?.detail,
  }
}

/**
 * The files the application gets with their bytes: the refused ones, or `all` (a notebook lost
 * or left). `copy` reads the bytes into memory, for a storage about to be removed.
 */
export async function handedFiles(
  state: ReplicaState,
  all: boolean,
  copy: boolean,
): Promise<UnsentFile[]> {
  const handed: UnsentFile[] = []
  for (const file of state.files) {
    if (!all && file.refused === undefined) continue
    let bytes = await state.storage.getBytes(file.key)
    if (bytes !== undefined && copy) bytes = new Blob([await bytes.arrayBuffer()])
    handed.push({ ...fileInfo(state, file), bytes })
  }
  return handed
}
