/**
 * The replica's push: sends the outbox in order, alone or as batches, each create with its
 * Idempotency-Key and each update or delete on the version it was made on; takes in the
 * acknowledgements (as echoes the feed will confirm) and hands refusals to conflicts.
 */
import { ConflictError, NoteNotFoundError, NotesProblem } from '../errors.js'
import { newIdempotencyKey } from '../idempotency-key.js'
import { backoffMs, refused, sleep, transient } from '../retry-policy.js'
import type { BatchRequest, BatchResult, NoteResult } from '../types.js'
import { recordConflict } from './conflicts.js'
import { applied } from './local-view.js'
import { type JsonObject, sameJson } from './note-json.js'
import { ECHO_PREFIX, type Echo, LINK_PREFIX, type OutboxEntry, outboxKey } from './outbox.js'
import { currentVersion } from './pull.js'
import {
  changed,
  dropLinkIfUnused,
  type FedHooks,
  idOf,
  link,
  type ReplicaState,
  setOnline,
} from './replica-state.js'
import type { ReplicaWrite } from './storage.js'

/** What a send learnt of the note: the service's version after the write (note null: deleted). */
interface Acknowledged {
  id: number
  note: JsonObject | null
  etag: string | null
  /** Seen again rather than made now (a replayed create, a resend that met its own write). */
  again: boolean
}

/** Sends the outbox's head while there is one; idles (or looks for the service) until aborted. */
export async function pushLoop(state: ReplicaState, signal: AbortSignal): Promise<void> {
  let failures = 0
  while (!signal.aborted) {
    const entry = state.outbox[0]
    try {
      if (entry === undefined) {
        if (state.online) await idle(state, signal)
        else {
          // Offline with nothing to send: look for the service now and then.
          await sleep(backoffMs(failures, state.maxDelayMs), signal)
          await currentVersion(state, signal)
        }
      } else {
        await sendNext(state, entry, signal)
        setOnline(state, true)
      }
      failures = 0
    } catch (err) {
      if (signal.aborted) return
      if (notebookRefusal(state, err)) {
        setOnline(state, true)
        await (state.fed as FedHooks).refused(err as NotesProblem).catch(() => {})
      } else if (transient(err)) {
        // A storage failure is tried again too: the write stays queued.
        setOnline(state, false)
      }
      try {
        await sleep(backoffMs(failures++, state.maxDelayMs), signal)
      } catch {
        return
      }
    }
  }
}

/**
 * A refusal of the notebook rather than of the write, in a replica fed by NotebooksReplica: a 403
 * (a viewer's write) or a 404 problem (no longer a member; a missing note's 404 has no body).
 * Every queued write would meet it: the replica's hooks hand them over instead of sending them.
 */
function notebookRefusal(state: ReplicaState, err: unknown): boolean {
  return (
    state.fed !== undefined &&
    err instanceof NotesProblem &&
    !(err instanceof NoteNotFoundError) &&
    (err.status === 403 || err.status === 404)
  )
}

/** Resolves at the next queued write (state.wakePush) or on abort. */
function idle(state: ReplicaState, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      state.wakePush = undefined
      signal.removeEventListener('abort', done)
      resolve()
    }
    state.wakePush = done
    signal.addEventListener('abort', done, { once: true })
  })
}

/**
 * Sends the first queued write alone, or it and the writes after it as one batch when they
 * need nothing the batch itself would answer: creates, and updates and deletes of notes whose
 * id and ETag are known, each note once.
 */
async function sendNext(
  state: ReplicaState,
  first: OutboxEntry,
  signal: AbortSignal,
): Promise<void> {
  if (first.batch === undefined && state.batchLimit > 1 && first.single !== true) {
    const run = batchRun(state)
    if (run.length > 1) {
      first.batch = {
        idempotencyKey: newIdempotencyKey(),
        seqs: run.map(([entry]) => entry.seq),
        requests: run.map(([, request]) => request),
      }
      await state.writes.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
    }
  }
  if (first.batch === undefined) {
    if (first.single !== true && state.batchLimit > 1) {
      first.single = true
      await state.writes.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
    }
    await send(state, first, signal)
    return
  }
  const batch = first.batch
  state.flight = []
  try {
    let result: BatchResult
    try {
      result = await state.client.batch(batch.requests, {
        idempotencyKey: batch.idempotencyKey,
        ifMatch: false,
        signal,
      })
    } catch (err) {
      if (!refused(err) || notebookRefusal(state, err)) throw err
      // Nothing was applied: the first write goes alone, and meets its conflict if it has one.
      delete first.batch
      first.single = true
      await state.writes.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
      return
    }
    for (const [i, seq] of batch.seqs.entries()) {
      const entry = state.outbox.find((queued) => queued.seq === seq)
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
      await acknowledge(state, entry, acknowledgement)
    }
  } finally {
    state.flight = undefined
    // The view may have left out a note of the feed as this send's own create (local-view.ts).
    state.view = undefined
  }
}

/** The writes at the head of the outbox that can go as one batch, with their requests. */
function batchRun(state: ReplicaState): [OutboxEntry, BatchRequest][] {
  const run: [OutboxEntry, BatchRequest][] = []
  const notes = new Set<string>()
  for (const entry of state.outbox) {
    if (run.length >= state.batchLimit || notes.has(entry.entry)) break
    let request: BatchRequest
    if (entry.op === 'create') {
      request = { method: 'POST', url: '/api/note', body: entry.fields ?? {} }
    } else {
      const id = idOf(state, entry.entry)
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
async function send(state: ReplicaState, entry: OutboxEntry, signal: AbortSignal): Promise<void> {
  state.flight = []
  try {
    const answer = await attempt(state, entry, signal)
    if ('conflict' in answer) await recordConflict(state, entry, answer.status, answer.current)
    else await acknowledge(state, entry, answer)
  } finally {
    state.flight = undefined
    // The view may have left out a note of the feed as this send's own create (local-view.ts).
    state.view = undefined
  }
}

async function attempt(
  state: ReplicaState,
  entry: OutboxEntry,
  signal: AbortSignal,
): Promise<Acknowledged | { conflict: true; status: number; current: NoteResult | undefined }> {
  if (entry.op === 'create') {
    try {
      const result = await state.client.create(entry.fields ?? {}, {
        idempotencyKey: entry.idempotencyKey,
        signal,
      })
      return acknowledged(result, result.replayed)
    } catch (err) {
      if (refused(err) && !notebookRefusal(state, err)) {
        return { conflict: true, status: err.status, current: undefined }
      }
      throw err
    }
  }
  const id = idOf(state, entry.entry)
  if (id === undefined) return { conflict: true, status: 404, current: undefined }
  const basis = entry.basis
  if (basis === null) {
    const current = await state.client.get(id, { signal })
    return { conflict: true, status: current === undefined ? 404 : 412, current }
  }
  let etag = basis.etag
  if (etag === null) {
    // The basis came from the feed, which carries no ETag: the service's version is the basis
    // if its content is.
    const current = await state.client.get(id, { signal })
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
      await state.client.delete(id, { ifMatch: etag, signal })
      return { id, note: null, etag: null, again: false }
    }
    const result = await state.client.update(id, entry.fields ?? {}, {
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
    const kept = err instanceof ConflictError || err instanceof NoteNotFoundError || refused(err)
    if (!kept || notebookRefusal(state, err)) throw err
    const current = await state.client.get(id, { signal })
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

async function acknowledge(
  state: ReplicaState,
  entry: OutboxEntry,
  answer: Acknowledged,
): Promise<void> {
  const index = state.outbox.indexOf(entry)
  if (index === -1) return
  state.outbox.splice(index, 1)
  const changes: ReplicaWrite[] = [{ table: 'outbox', key: outboxKey(entry.seq), delete: true }]
  const { id, note, etag } = answer
  if (entry.op === 'create') {
    link(state, entry.entry, id)
    changes.push({ table: 'meta', key: `${LINK_PREFIX}${entry.entry}`, value: id })
  }
  const next = state.outbox.find((other) => other.entry === entry.entry)
  if (next !== undefined && next.basis === null && note !== null) {
    next.basis = { etag, note }
    changes.push({ table: 'outbox', key: outboxKey(next.seq), value: next })
  }
  const passed = (state.flight ?? []).some(
    (change) => change.id === id && sameJson(change.note, note),
  )
  const base = state.base.get(id)
  const sameAsBase =
    note === null ? base === undefined : base !== undefined && sameJson(base.note, note)
  if (sameAsBase) {
    if (base !== undefined && note !== null) {
      base.etag = etag
      changes.push({ table: 'notes', key: String(id), value: base })
    }
  } else if (!passed && !answer.again) {
    const echo: Echo = { note, etag }
    state.echoes.set(id, echo)
    changes.push({ table: 'meta', key: `${ECHO_PREFIX}${id}`, value: echo })
  }
  // The feed may have brought its note's deletion already.
  dropLinkIfUnused(state, id, changes)
  changed(state, 'change', 'waiting')
  await state.writes.write(changes)
}

function acknowledged(result: NoteResult, again: boolean): Acknowledged {
  return { id: result.note.id, note: result.note as JsonObject, etag: result.etag ?? null, again }
}
