/**
 * Files attached to notes on the device: their bytes kept in the replica's storage (beside its
 * tables) until the replica syncs and the service can be reached; then each is uploaded with
 * `files.upload` (resumable, its progress in `files()`), its reference written into its note
 * through the outbox as any update, and its bytes removed. A file the service refuses for good
 * stays on the device, for the application (`unsentFiles()`: handover.ts). Replica loads this
 * module on first use (a file attached, or one queued at open), so a page that attaches none
 * never loads it.
 */
import { NoteNotFoundError, NotesProblem } from '../errors.js'
import type { StoredFile } from '../files-client.js'
import { backoffMs, refused, transient } from '../retry-policy.js'
import { fileInfo } from './handover.js'
import { queueWrite, stateOf, updateOf } from './local-view.js'
import { isObject } from './note-json.js'
import { FILE_PREFIX, META_SEQ, newFileKey, type QueuedFile } from './outbox.js'
import {
  changed,
  checkOpen,
  type FedHooks,
  loseNotebook,
  type ReplicaState,
  setOnline,
} from './replica-state.js'
import type { ReplicaFile } from './replica-types.js'

/** The note's field that refers to its files: [{ id, name, size, type }], as the page keeps it. */
export const FILES_FIELD = 'files'
const NOTE_GONE = 'Its note was deleted.'
/** Statuses that refuse an upload for good besides refused()'s: a viewer, no room left. */
const REFUSING = new Set([403, 507])

export interface AttachOptions {
  /** The file's name in the note's reference; a File's own name by default. */
  name?: string | undefined
  /** Its media type; a Blob's own `type` by default, else application/octet-stream. */
  type?: string | undefined
}

/** Keeps the bytes on the device and queues them for the note `entry`; resolves once stored. */
export async function attachFile(
  state: ReplicaState,
  entry: string,
  bytes: Blob | Uint8Array<ArrayBuffer>,
  options: AttachOptions,
): Promise<ReplicaFile> {
  checkOpen(state)
  if (stateOf(state, entry) === null) throw new RangeError(`The replica has no note ${entry}.`)
  const blob = bytes instanceof Blob ? bytes : new Blob([bytes])
  const name = options.name ?? (blob as Blob & { name?: unknown }).name
  if (typeof name !== 'string' || name === '') {
    throw new TypeError('An attached file needs a name: pass options.name (or a File).')
  }
  const type = options.type ?? (blob.type === '' ? 'application/octet-stream' : blob.type)
  const key = newFileKey()
  await state.storage.putBytes(key, blob)
  const file: QueuedFile = { key, entry, name, type, size: blob.size, seq: ++state.seq }
  state.files.push(file)
  changed(state, 'files')
  state.wakeFiles?.()
  await state.writes.write([
    { table: 'meta', key: `${FILE_PREFIX}${key}`, value: file },
    { table: 'meta', key: META_SEQ, value: state.seq },
  ])
  return fileInfo(state, file)
}

/** Takes a queued file off the device (its upload aborted if under way); false if none. */
export async function removeFile(state: ReplicaState, key: string): Promise<boolean> {
  const at = state.files.findIndex((file) => file.key === key)
  if (at === -1) return false
  state.sending.get(key)?.abort()
  state.files.splice(at, 1)
  changed(state, 'files')
  await state.writes.write([{ table: 'meta', key: `${FILE_PREFIX}${key}`, delete: true }])
  await state.storage.deleteBytes(key)
  return true
}

/** The part of the Web Locks API (navigator.locks) the upload loop uses. */
interface LockManagerLike {
  request<T>(name: string, options: { signal: AbortSignal }, held: () => Promise<T>): Promise<T>
}

/**
 * Sends the queued files in order while the replica runs; rests until one is queued. On a
 * storage other tabs share (IndexedDB), each file goes under a Web Lock named after it, where
 * the browser has them (secure origins, localhost included), so that one tab sends at a time,
 * and the queue is read again from the storage first: a file another tab sent (its entry gone
 * with its reference written) or removed is not sent again, nor referred to twice.
 */
export async function uploadLoop(state: ReplicaState, signal: AbortSignal): Promise<void> {
  let failures = 0
  const shared = state.storage.sharedName
  const locks = (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks
  while (!signal.aborted && !state.lost) {
    const file = state.files.find((queued) => queued.refused === undefined)
    try {
      if (file === undefined) await rest(state, undefined, signal)
      else {
        if (shared === undefined) await sendFile(state, file, signal)
        else if (locks === undefined) await sendShared(state, file, signal)
        else {
          const name = `notes-service-client files ${shared}`
          await locks.request(name, { signal }, () => sendShared(state, file, signal))
        }
        failures = 0
      }
    } catch (err) {
      if (signal.aborted || state.lost) return
      if (notebookGone(state, err)) {
        setOnline(state, true)
        if (state.fed === undefined) {
          loseNotebook(state)
          return
        }
        await (state.fed as FedHooks).refused(err as NotesProblem).catch(() => {})
      } else if (transient(err)) {
        // The network, a 5xx, a storage failure: the file stays queued, tried again.
        setOnline(state, false)
      }
      try {
        await rest(state, backoffMs(failures++, state.maxDelayMs), signal)
      } catch {
        return
      }
    }
  }
}

/**
 * The notebook's 404 (a problem; not a note's empty 404) in a replica of a named notebook: the
 * notebook is lost, for this file and every other.
 */
function notebookGone(state: ReplicaState, err: unknown): boolean {
  return (
    (state.fed !== undefined || state.client.notebookId !== undefined) &&
    err instanceof NotesProblem &&
    !(err instanceof NoteNotFoundError) &&
    err.status === 404
  )
}

/** Waits for a file to be queued, the service to be back (wakeFiles), or `ms`; rejects on abort. */
function rest(state: ReplicaState, ms: number | undefined, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason)
      return
    }
    const end = (): void => {
      clearTimeout(timer)
      state.wakeFiles = undefined
      signal.removeEventListener('abort', aborted)
    }
    const done = (): void => {
      end()
      resolve()
    }
    const aborted = (): void => {
      end()
      reject(signal.reason)
    }
    const timer = ms === undefined ? undefined : setTimeout(done, ms)
    state.wakeFiles = done
    signal.addEventListener('abort', aborted, { once: true })
  })
}

/** sendFile, once the queue is read again: unless another tab sent, refused or removed it. */
async function sendShared(state: ReplicaState, file: QueuedFile, signal: AbortSignal) {
  await rereadQueue(state)
  if (state.files.includes(file) && file.refused === undefined) await sendFile(state, file, signal)
}

/**
 * The queue as the storage holds it now, other tabs' doings included: a file whose entry is
 * gone (sent or removed there) leaves this replica's queue, one refused there is refused here,
 * and one queued there joins at the end (if this copy holds its note). A file this replica
 * queued after the read began stays.
 */
async function rereadQueue(state: ReplicaState): Promise<void> {
  const known = new Set(state.files)
  await state.writes.settled()
  const stored = new Map<string, QueuedFile>()
  // The meta table alone: the queue's entries, not every note again.
  for (const [key, value] of (await state.storage.load(['meta'])).meta) {
    if (key.startsWith(FILE_PREFIX)) stored.set(key.slice(FILE_PREFIX.length), value as QueuedFile)
  }
  let differs = false
  state.files = state.files.filter((file) => {
    const now = stored.get(file.key)
    stored.delete(file.key)
    if (now === undefined) {
      differs ||= known.has(file)
      return !known.has(file)
    }
    if (now.refused !== undefined && file.refused === undefined) {
      file.refused = now.refused
      differs = true
    }
    return true
  })
  for (const other of stored.values()) {
    // Of a note this copy does not hold yet (made in that tab, not sent): left to that tab.
    if (stateOf(state, other.entry) === null) continue
    state.files.push(other)
    differs = true
  }
  if (differs) changed(state, 'files')
}

/** Uploads one file, then refers to it from its note; a refusal for good is kept as such. */
async function sendFile(state: ReplicaState, file: QueuedFile, signal: AbortSignal) {
  if (stateOf(state, file.entry) === null) {
    await refuse(state, file, 404, NOTE_GONE)
    return
  }
  const bytes = await state.storage.getBytes(file.key)
  if (bytes === undefined) {
    await refuse(state, file, 0, 'Its bytes are gone from this device.')
    return
  }
  const abort = new AbortController()
  const sending = { abort: () => abort.abort(), sent: 0 }
  state.sending.set(file.key, sending)
  changed(state, 'files')
  let stored: StoredFile | undefined
  try {
    stored = await state.client.files.upload(bytes, {
      type: file.type,
      signal: AbortSignal.any([signal, abort.signal]),
      onProgress(sent) {
        sending.sent = sent
        changed(state, 'files')
      },
    })
  } catch (err) {
    // Removed meanwhile: nothing more to do.
    if (abort.signal.aborted && !signal.aborted) return
    if (
      err instanceof NotesProblem &&
      !notebookGone(state, err) &&
      (REFUSING.has(err.status) || refused(err))
    ) {
      await refuse(state, file, err.status, err.detail)
      return
    }
    throw err
  } finally {
    state.sending.delete(file.key)
    // Not sent: its state goes back to 'waiting' (or to 'refused', told by refuse()).
    if (stored === undefined) changed(state, 'files')
  }
  setOnline(state, true)
  if (state.files.includes(file)) await refer(state, file, stored)
}

/** Writes the file's reference into its note (once: the same bytes are the same file). */
async function refer(state: ReplicaState, file: QueuedFile, stored: StoredFile): Promise<void> {
  const current = stateOf(state, file.entry)
  if (current === null) {
    await refuse(state, file, 404, NOTE_GONE)
    return
  }
  const files = current[FILES_FIELD] ?? []
  if (!Array.isArray(files)) {
    await refuse(state, file, 400, `Its note’s “${FILES_FIELD}” field is not a list.`)
    return
  }
  const done = [{ table: 'meta' as const, key: `${FILE_PREFIX}${file.key}`, delete: true as const }]
  if (files.some((other) => isObject(other) && other.id === stored.id)) {
    await state.writes.write(done)
  } else {
    const reference = { id: stored.id, name: file.name, size: stored.size, type: stored.type }
    const patch = { [FILES_FIELD]: [...files, reference] }
    await queueWrite(state, updateOf(file.entry, current, patch, false), done)
  }
  // Left behind by a failure here, the bytes are removed at the next open (loadState).
  await state.storage.deleteBytes(file.key).catch(() => {})
  // Queued until its bytes are gone, so that sync() resolves with the device clear of them.
  const at = state.files.indexOf(file)
  if (at >= 0) state.files.splice(at, 1)
  changed(state, 'files')
}

async function refuse(state: ReplicaState, file: QueuedFile, status: number, detail: string) {
  file.refused = { status, detail }
  changed(state, 'files')
  await state.writes.write([{ table: 'meta', key: `${FILE_PREFIX}${file.key}`, value: file }])
}
