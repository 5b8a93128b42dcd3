/**
 * The replica's push: sends the outbox in order, alone or as batches, each create with its
 * Idempotency-Key and each update or delete on the version it was made on; takes in the
 * acknowledgements (as echoes the feed will confirm) and hands refusals to conflicts.
 */
import { ConflictError, NoteNotFoundError, NotesProblem } from '../errors.js'
import { newIdempotencyKey } from '../idempotency-key.js'
import { backoffMs, refused, sleep, transient } from '../retry-policy.js'
import type { BatchRequest, BatchResult, NoteResult } from '../types.js'
import { foldIntoConflict, recordConflict } from './conflicts.js'
import { staleByFeed } from './local-view.js'
import { mergeWrite } from './merge-write.js'
import { type JsonObject, sameJson } from './note-json.js'
import { ECHO_PREFIX, type Echo, LINK_PREFIX, type OutboxEntry, outboxKey } from './outbox.js'
import { currentVersion } from './pull.js'
import {
  changed,
  dropLinkIfUnused,
  type FedHooks,
  idOf,
  link,
  loseNotebook,
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
  while (!signal.aborted && !state.lost) {
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
      if (signal.aborted || state.lost) return
      if (notebookRefusal(state, err)) {
        setOnline(state, true)
        await (state.fed as FedHooks).refused(err as NotesProblem).catch(() => {})
      } else if (notebookLost(state, err)) {
        setOnline(state, true)
        loseNotebook(state)
        return
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

/**
 * A write of a replica of one named notebook (`client.notebook(id)`) met the notebook's 404 (a
 * problem; a missing note's 404 has no body): every queued write would meet it, so they stay queued, for unsent().
 */
function notebookLost(state: ReplicaState, err: unknown): boolean {
  return (
    state.fed === undefined &&
    state.client.notebookId !== undefined &&
    err instanceof NotesProblem &&
    !(err instanceof NoteNotFoundError) &&
    err.status === 404
  )
}

/** A refusal of the notebook (either of the two above): thrown to the loop, not a conflict. */
function ofNotebook(state: ReplicaState, err: unknown): boolean {
  return notebookRefusal(state, err) || notebookLost(state, err)
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
    // Versions read (and merges made) first: the head may have changed, so the loop comes again.
    if (await prepareRun(state, signal)) return
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
      if (!refused(err) || ofNotebook(state, err)) throw err
      delete first.batch
      // Nothing was applied. An update that met a newer version is merged with it, and the run
      // goes again; any other refusal: the first write goes alone, and meets its conflict.
      if (err instanceof ConflictError && (await mergeRefused(state, batch, err, signal))) {
        // Unless the merge found it done (then it left the outbox): stored without its batch.
        if (state.outbox.includes(first)) {
          await state.writes.write([{ table: 'outbox', key: outboxKey(first.seq), value: first }])
        }
        return
      }
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
        const method = entry.replace === true ? 'PUT' : 'PATCH'
        request = { method, url: `/api/note/${id}`, headers, body: entry.fields ?? {} }
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
      if (refused(err) && !ofNotebook(state, err)) {
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
  if (entry.op === 'update') return sendUpdate(state, entry, id, signal)
  let etag = basis.etag
  if (etag === null) {
    // The basis came from the feed, which carries no ETag: the service's version is the basis
    // if its content is.
    const current = await state.client.get(id, { signal })
    if (current === undefined) return { id, note: null, etag: null, again: true }
    if (!sameJson(current.note, basis.note)) return { conflict: true, status: 412, current }
    etag = current.etag ?? '*'
  }
  try {
    await state.client.delete(id, { ifMatch: etag, signal })
    return { id, note: null, etag: null, again: false }
  } catch (err) {
    // Deleted there too: what this write wanted.
    if (err instanceof NoteNotFoundError) return { id, note: null, etag: null, again: true }
    if (!(err instanceof ConflictError || refused(err)) || ofNotebook(state, err)) throw err
    const current = await state.client.get(id, { signal })
    const status = err instanceof NotesProblem ? err.status : 412
    return { conflict: true, status, current }
  }
}

/**
 * Sends an update on its basis; when the note changed there (a 412, or the feed shows it), reads
 * the service's version, merges with it (merge-write.ts) and sends the merged note with PUT on
 * that version, again while it keeps changing (bounded by mergeWrite).
 */
async function sendUpdate(
  state: ReplicaState,
  entry: OutboxEntry,
  id: number,
  signal: AbortSignal,
): Promise<Acknowledged | { conflict: true; status: number; current: NoteResult | undefined }> {
  for (;;) {
    const basis = entry.basis as { etag: string | null; note: JsonObject }
    let etag = basis.etag
    if (etag === null || staleByFeed(state, entry)) {
      // No ETag (the basis came from the feed), or the feed shows it would meet a 412.
      const current = await state.client.get(id, { signal })
      if (current === undefined) return { conflict: true, status: 404, current }
      if (!sameJson(current.note, basis.note)) {
        if (await mergeWrite(state, entry, current, signal)) return acknowledged(current, true)
        continue
      }
      etag = current.etag ?? '*'
    }
    try {
      const fields = entry.fields ?? {}
      const result =
        entry.replace === true
          ? await state.client.replace(id, fields, { ifMatch: etag, signal })
          : await state.client.update(id, fields, {
              ifMatch: etag,
              mergePatch: entry.mergePatch === true,
              signal,
            })
      return acknowledged(result, false)
    } catch (err) {
      const kept = err instanceof ConflictError || err instanceof NoteNotFoundError || refused(err)
      if (!kept || ofNotebook(state, err)) throw err
      const current = await state.client.get(id, { signal })
      if (err instanceof ConflictError && current !== undefined) {
        // Changed there (or a resend whose first try was applied, which the merge finds done).
        if (await mergeWrite(state, entry, current, signal)) return acknowledged(current, true)
        continue
      }
      const status = err instanceof NotesProblem ? err.status : 412
      return { conflict: true, status, current }
    }
  }
}

/**
 * Before a batch: reads the versions of the run's updates and deletes that have no ETag (their
 * basis came from the feed) or whose note the feed shows changed since, all at once, and merges
 * the updates that meet a newer version: the run then goes as one batch (with PUTs of the merged
 * notes) rather than write by write, or meeting 412s. Answers whether anything changed.
 */
async function prepareRun(state: ReplicaState, signal: AbortSignal): Promise<boolean> {
  const reads: [OutboxEntry, number][] = []
  const notes = new Set<string>()
  for (const entry of state.outbox) {
    if (notes.size >= state.batchLimit || notes.has(entry.entry)) break
    notes.add(entry.entry)
    if (entry.op === 'create') continue
    const id = idOf(state, entry.entry)
    if (id === undefined || entry.basis === null) break
    if (entry.basis.etag === null || staleByFeed(state, entry)) reads.push([entry, id])
  }
  if (reads.length === 0) return false
  const currents = await Promise.all(reads.map(([, id]) => state.client.get(id, { signal })))
  let done = false
  for (const [i, [entry, id]] of reads.entries()) {
    const current = currents[i]
    const basis = entry.basis as { etag: string | null; note: JsonObject }
    if (current === undefined) {
      // Deleted there: a delete is done; an update goes alone, and meets its conflict.
      if (entry.op === 'delete') {
        await acknowledge(state, entry, { id, note: null, etag: null, again: true })
        done = true
      }
    } else if (sameJson(current.note, basis.note)) {
      basis.etag = current.etag ?? '*'
      await state.writes.write([{ table: 'outbox', key: outboxKey(entry.seq), value: entry }])
      done = true
    } else if (entry.op === 'update') {
      if (await mergeWrite(state, entry, current, signal)) {
        await acknowledge(state, entry, acknowledged(current, true))
      }
      done = true
    }
  }
  return done
}

/**
 * A batch refused with a 412 (nothing applied): the update it names (`requests[3]` in its
 * detail) is merged with the service's version. Answers false when it named no update.
 */
async function mergeRefused(
  state: ReplicaState,
  batch: NonNullable<OutboxEntry['batch']>,
  err: ConflictError,
  signal: AbortSignal,
): Promise<boolean> {
  const index = /^requests\[(\d+)\]/.exec(err.detail)?.[1]
  const seq = index === undefined ? undefined : batch.seqs[Number(index)]
  const entry = state.outbox.find((queued) => queued.seq === seq)
  const id = entry === undefined ? undefined : idOf(state, entry.entry)
  if (entry === undefined || entry.op !== 'update' || entry.basis === null || id === undefined) {
    return false
  }
  const current = await state.client.get(id, { signal })
  if (current === undefined) return false
  if (await mergeWrite(state, entry, current, signal)) {
    await acknowledge(state, entry, acknowledged(current, true))
  }
  return true
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
  const paths = entry.merged?.paths ?? []
  if (paths.length > 0 && note !== null) {
    // The merged note is written; the paths it could not decide go to the application.
    foldIntoConflict(state, entry, { theirs: note, etag, status: 412, paths }, changes)
  }
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
  if (paths.length > 0 && note !== null) changed(state, 'change', 'conflict', 'waiting')
  else changed(state, 'change', 'waiting')
  await state.writes.write(changes)
}

function acknowledged(result: NoteResult, again: boolean): Acknowledged {
  return { id: result.note.id, note: result.note as JsonObject, etag: result.etag ?? null, again }
}
