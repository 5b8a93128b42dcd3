import type { SseMessage } from '../support/sse-client.js'

/** A change of a note, named so that its event can be told from every other change of the run. */
export type ChangeKey = string

/**
 * 'created' {"id": 7} -> 'c:7'; 'updated' {"id": 7, "n": 1312} -> 'u:7:1312'; 'deleted' {"id": 7}
 * -> 'd:7'. Every write of the run gives `n` a value no other write gives, so an update is named by
 * its note and its `n`, and a create or delete by its note alone (ids are never reused).
 */
export function changeKey(type: string, note: { id: unknown; n?: unknown }): ChangeKey {
  if (type === 'created') return `c:${String(note.id)}`
  if (type === 'deleted') return `d:${String(note.id)}`
  return `u:${String(note.id)}:${String(note.n)}`
}

export const NOTE_EVENTS: ReadonlySet<string> = new Set(['created', 'updated', 'deleted'])

/** The note events of a member stream (data: the note) or of the all-notebooks stream. */
export function noteEvents(
  messages: readonly SseMessage[],
): { event: string; notebook: string | undefined; key: ChangeKey }[] {
  const events: { event: string; notebook: string | undefined; key: ChangeKey }[] = []
  for (const message of messages) {
    if (message.event === undefined || !NOTE_EVENTS.has(message.event)) continue
    const data = JSON.parse(message.data ?? 'null') as {
      notebook?: string
      note?: { id: unknown; n?: unknown }
      id?: unknown
      n?: unknown
    }
    const note = data.note ?? (data as { id: unknown; n?: unknown })
    events.push({
      event: message.event,
      notebook: data.notebook,
      key: changeKey(message.event, note),
    })
  }
  return events
}

/**
 * Whether `actual` is `expected` with some adjacent joined-then-left pairs left out: a stream may
 * tell nothing of a notebook it was given and lost before it could follow it. ['joined', 'left',
 * 'joined'] matches ['joined'] and itself, not ['left'].
 */
export function accessMatches(expected: readonly string[], actual: readonly string[]): boolean {
  const failed = new Set<number>()
  const from = (i: number, j: number): boolean => {
    if (i === expected.length) return j === actual.length
    const at = i * (actual.length + 1) + j
    if (failed.has(at)) return false
    const ok =
      (j < actual.length && expected[i] === actual[j] && from(i + 1, j + 1)) ||
      (expected[i] === 'joined' && expected[i + 1] === 'left' && from(i + 2, j))
    if (!ok) failed.add(at)
    return ok
  }
  return from(0, 0)
}
