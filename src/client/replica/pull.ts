/**
 * The replica's pull: the full load (on first sync and on a reset), then the change feed into
 * the base, where the replica's own acknowledged writes come back as echoes; and the look at the
 * service's current version that sync() waits for.
 */

import { NotesProblem } from '../errors.js'
import { backoffMs, sleep, transient } from '../retry-policy.js'
import type { ChangeEvent } from '../types.js'
import { type JsonObject, sameJson } from './note-json.js'
import { type BaseNote, ECHO_PREFIX, type Echo, META_VERSION } from './outbox.js'
import {
  changed,
  checkOpen,
  dropLinkIfUnused,
  loseNotebook,
  lostError,
  type ReplicaState,
  setOnline,
  sweepLinks,
} from './replica-state.js'
import type { ReplicaWrite } from './storage.js'

/** The service's version now (one page of one note), trying again while it cannot be reached. */
export async function currentVersion(
  state: ReplicaState,
  signal: AbortSignal | undefined,
): Promise<string> {
  for (let failures = 0; ; failures++) {
    signal?.throwIfAborted()
    checkOpen(state)
    if (state.lost) throw lostError()
    try {
      const page = await state.client.pages({ limit: 1, signal }).next()
      const version = page.done === true ? undefined : page.value.version
      if (version === undefined) throw new Error('The list carried no Notes-Version.')
      setOnline(state, true)
      return version
    } catch (err) {
      if (signal?.aborted === true) throw signal.reason
      if (!transient(err)) throw err
      setOnline(state, false)
      await sleep(backoffMs(failures, state.maxDelayMs), signal)
    }
  }
}

/**
 * Loads when the replica has no version, then follows the feed; retries until aborted, or until
 * the notebook is lost: its feed revoked, or, for a named notebook (`client.notebook(id)`), its
 * list or feed answered 404 (the notebook is gone, or the user is no longer in it), which no
 * retry changes.
 */
export async function pullLoop(state: ReplicaState, signal: AbortSignal): Promise<void> {
  for (let failures = 0; !signal.aborted && !state.lost; failures++) {
    try {
      if (state.version === undefined) await reload(state, signal)
      const feed = state.client.events({ since: state.version, signal })
      for await (const event of feed) {
        failures = 0
        setOnline(state, true)
        throwPullError(state)
        if (event.type === 'reset') await reload(state, signal, event.version)
        // Only a notebook's feed is revoked, and the feed ends after it.
        else if (event.type === 'revoked') {
          loseNotebook(state)
          return
        } else apply(state, event)
      }
    } catch (err) {
      if (signal.aborted) return
      if (
        err instanceof NotesProblem &&
        err.status === 404 &&
        state.client.notebookId !== undefined
      ) {
        setOnline(state, true)
        loseNotebook(state)
        return
      }
      if (transient(err)) setOnline(state, false)
    }
    try {
      await sleep(backoffMs(failures, state.maxDelayMs), signal)
    } catch {
      return
    }
  }
}

/** Loads the whole list (pages), keeping the outbox and conflicts; `version`: a reset's. */
export async function reload(
  state: ReplicaState,
  signal: AbortSignal,
  version?: string,
): Promise<void> {
  const notes = new Map<number, JsonObject>()
  let first: string | undefined
  for await (const page of state.client.pages({ limit: 1000, signal })) {
    first ??= page.version
    for (const note of page.notes) notes.set(note.id, note)
  }
  setOnline(state, true)
  const changes: ReplicaWrite[] = [{ table: 'notes', clear: true }]
  const old = new Map(state.base)
  state.base.clear()
  for (const [id, note] of notes) {
    const before = old.get(id)
    const etag = before !== undefined && sameJson(before.note, note) ? before.etag : null
    state.base.set(id, { note, etag })
    changes.push({ table: 'notes', key: String(id), value: { note, etag } })
  }
  // The load shows the writes acknowledged before it; one acknowledged while it ran may come
  // before the version the feed goes on from, and would never be echoed: the feed brings the
  // others again.
  for (const id of [...state.echoes.keys()]) {
    state.echoes.delete(id)
    changes.push({ table: 'meta', key: `${ECHO_PREFIX}${id}`, delete: true })
  }
  state.version = version ?? first
  if (state.version !== undefined) {
    changes.push({ table: 'meta', key: META_VERSION, value: state.version })
  }
  sweepLinks(state, changes)
  for (const seen of state.watchers) seen.add('')
  if (version === undefined) changed(state, 'change')
  else changed(state, 'change', 'reset')
  await state.writes.write(changes)
}

/**
 * A feed change whose storage write failed: the pull loads the whole list again (and stores it
 * whole), as after a reset, so that the storage is never left behind the view.
 */
function throwPullError(state: ReplicaState): void {
  const err = state.pullError
  if (err === undefined) return
  state.pullError = undefined
  state.version = undefined
  throw err
}

/**
 * One change of the feed, into the base at once; the replica's own writes come back as echoes.
 * Its storage write is not waited for: the changes of a burst are stored together (WriteQueue),
 * each write holding the feed position of its last change, so a crash between them resumes the
 * feed from what is stored and the changes after it come again.
 */
export function apply(
  state: ReplicaState,
  event: Exclude<ChangeEvent, { type: 'reset' | 'revoked' }>,
): void {
  const changes: ReplicaWrite[] = []
  const id = event.type === 'deleted' ? event.id : event.note.id
  const note = event.type === 'deleted' ? null : (event.note as JsonObject)
  state.flight?.push({ id, note })
  const echo = state.echoes.get(id)
  const echoed = echo !== undefined && sameJson(echo.note, note)
  if (echoed) {
    state.echoes.delete(id)
    changes.push({ table: 'meta', key: `${ECHO_PREFIX}${id}`, delete: true })
  }
  if (note === null) {
    state.base.delete(id)
    changes.push({ table: 'notes', key: String(id), delete: true })
    dropLinkIfUnused(state, id, changes)
  } else {
    const before = state.base.get(id)
    const etag = echoed
      ? (echo as Echo).etag
      : before !== undefined && sameJson(before.note, note)
        ? before.etag
        : null
    const value: BaseNote = { note, etag }
    state.base.set(id, value)
    changes.push({ table: 'notes', key: String(id), value })
  }
  state.version = event.version
  changes.push({ table: 'meta', key: META_VERSION, value: event.version })
  for (const seen of state.watchers) seen.add(event.version)
  changed(state, 'change')
  state.writes.write(changes).catch((err: unknown) => {
    state.pullError ??= err
  })
}
