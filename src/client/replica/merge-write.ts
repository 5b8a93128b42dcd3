/**
 * Merging instead of asking: a queued update that meets a newer version of its note (a 412, or
 * the feed showing the note changed since the edit was made) is merged with it, three ways, by
 * mergeNotes (base: the version the edit was made on; mine: the note the edit made of it; theirs:
 * the service's version now), and becomes a PUT of the merged note on that version. Only the
 * paths the merge could not decide reach the application, as a conflict, once the merged note is
 * written (every other change is in it).
 */
import { mergeNotes } from '../merge-notes.js'
import { backoffMs, sleep } from '../retry-policy.js'
import type { NoteResult } from '../types.js'
import { applied } from './local-view.js'
import { copyJson, isObject, type JsonObject, sameJson } from './note-json.js'
import { type OutboxEntry, outboxKey } from './outbox.js'
import { changed, type ReplicaState } from './replica-state.js'

/**
 * Merges in a row before a pause (the service's version changed under each merged note before it
 * landed); the write stays queued, first in line, and is merged again after it.
 */
const MAX_MERGE_ROUNDS = 5

/**
 * Merges the update with `current`, the service's version now, and stores it as a PUT of the
 * merged note on that version. Answers true when there is nothing to send: the merged note is
 * `current` (my edit is in it already: a resend that met its own write, or the same edit made
 * there), so the write is done, with `current` as its answer.
 */
export async function mergeWrite(
  state: ReplicaState,
  entry: OutboxEntry,
  current: NoteResult,
  signal: AbortSignal,
): Promise<boolean> {
  if (entry.merged !== undefined && entry.merged.rounds >= MAX_MERGE_ROUNDS) {
    // The note keeps changing under the merged note: a pause, then the rounds start again.
    entry.merged.rounds = 0
    await sleep(backoffMs(MAX_MERGE_ROUNDS, state.maxDelayMs), signal)
  }
  const basis = entry.basis as { note: JsonObject }
  const base = entry.merged?.base ?? basis.note
  const mine = entry.merged?.mine ?? (applied(basis.note, entry) as JsonObject)
  const theirs = current.note as JsonObject
  const { merged, conflicts } = mergeNotes(base, mine, theirs)
  entry.fields = merged
  entry.replace = true
  delete entry.mergePatch
  // The request changed: a batch made of the old one is not sent again.
  delete entry.batch
  delete entry.single
  entry.basis = { etag: current.etag ?? null, note: theirs }
  entry.after = conflicts.length === 0 ? merged : withMine(merged, mine, conflicts)
  entry.merged = { base, mine, paths: conflicts, rounds: (entry.merged?.rounds ?? 0) + 1 }
  changed(state, 'change')
  await state.writes.write([{ table: 'outbox', key: outboxKey(entry.seq), value: entry }])
  return sameJson(merged, theirs)
}

/**
 * `merged` with mine's values at the conflicting paths (mine's absence where mine removed the
 * field): what the application would get by choosing mine there.
 * ({ t: 'theirs', b: 2 }, { t: 'mine', b: 1 }, ['/t']) -> { t: 'mine', b: 2 }
 */
function withMine(merged: JsonObject, mine: JsonObject, paths: string[]): JsonObject {
  const out = copyJson(merged)
  for (const path of paths) {
    const keys = path
      .split('/')
      .slice(1)
      .map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'))
    const last = keys.pop()
    if (last === undefined) return copyJson(mine)
    // The merge went into objects only where both sides had one: both hold every parent.
    let target: unknown = out
    let source: unknown = mine
    for (const key of keys) {
      target = isObject(target) ? target[key] : undefined
      source = isObject(source) ? source[key] : undefined
    }
    if (!isObject(target)) continue
    if (isObject(source) && Object.hasOwn(source, last)) {
      Object.defineProperty(target, last, {
        value: copyJson(source[last]),
        enumerable: true,
        writable: true,
        configurable: true,
      })
    } else delete target[last]
  }
  return out
}
