import { exceedsDepth } from '../api/json-depth.js'
import { parseJson } from '../client/parse-json.js'
import type { Revision } from '../store/archive.js'
import type { NotebookArchive } from '../store/kernel/import-archive.js'

/*
 * The history and trash in an export file, after every notebook's notes and before the files: a
 * line {"history":<count>}, then that many blocks, one per notebook, in the order of the
 * notebooks' lines. A block names its notebook and how many of its notes and deleted notes follow;
 * each note of its list, in list order, is a line of its current state's time and kind and of how
 * many past states follow it, oldest first; then each deleted note, oldest delete first, with the
 * note as it was and its past states after it:
 *   {"history":1}
 *   {"notebook":"shared","notes":2,"trash":1}
 *   {"at":1700000000000,"change":"created","past":0}
 *   {"at":1700000002000,"change":"updated","past":1}
 *   {"at":1700000001000,"change":"created","note":{"title":"draft","id":1700000000001}}
 *   {"deleted":1700000003000,"at":1700000000500,"change":"created","past":0,"note":{"id":1700000000002}}
 * Times are ms since 1970; versions are not written: the store an import writes gives its own.
 */

/** (1) -> '{"history":1}' */
function historyLine(count: number): string {
  return JSON.stringify({ history: count })
}

/** The count of a `{"history":N}` line, or undefined for any other line. */
export function historyCount(value: unknown): number | undefined {
  if (!isObject(value)) return undefined
  const keys = Object.keys(value)
  if (keys.length !== 1 || keys[0] !== 'history') return undefined
  const count = value.history
  return Number.isSafeInteger(count) && (count as number) >= 0 ? (count as number) : undefined
}

/**
 * Writes the history section of `notebooks` (in the order of their notebook lines) with `write`
 * (awaited: backpressure), a note at a time; nothing at all without a notebook.
 * @throws Error when a notebook gives other counts than it said (it changed while exported)
 */
export async function writeHistory(
  notebooks: readonly NotebookArchive[],
  write: (text: string) => Promise<void>,
): Promise<void> {
  if (notebooks.length === 0) return
  await write(`${historyLine(notebooks.length)}\n`)
  for (const notebook of notebooks) {
    const { name, notes, trash } = notebook
    await write(`${JSON.stringify({ notebook: name, notes, trash })}\n`)
    const changed = (what: string) =>
      new Error(`the ${what} of notebook ${JSON.stringify(name)} changed while it was exported`)
    let states = 0
    for await (const { at, change, past } of notebook.states()) {
      if (++states > notes) throw changed('notes')
      await write(
        `${[JSON.stringify({ at, change, past: past.length }), ...pastLines(past)].join('\n')}\n`,
      )
    }
    if (states !== notes) throw changed('notes')
    let trashed = 0
    for await (const { deleted, at, change, past, json } of notebook.trashed()) {
      if (++trashed > trash) throw changed('trash')
      const head = `{"deleted":${deleted},"at":${at},"change":"${change}","past":${past.length},"note":${json}}`
      await write(`${[head, ...pastLines(past)].join('\n')}\n`)
    }
    if (trashed !== trash) throw changed('trash')
  }
}

function pastLines(past: readonly Revision[]): string[] {
  return past.map(({ at, change, json }) => `{"at":${at},"change":"${change}","note":${json}}`)
}

type Change = 'created' | 'updated'

/** A block's line, a state's, a past state's, a deleted note's: as read, or what is wrong. */
export interface Block {
  readonly name: string
  readonly notes: number
  readonly trash: number
}
export interface State {
  readonly at: number
  readonly change: Change
  readonly past: number
}
export interface Past {
  readonly at: number
  readonly change: Change
  readonly json: string
  readonly id: unknown
}
export interface Trashed extends State, Past {
  readonly deleted: number
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const isTime = (value: unknown): value is number =>
  Number.isSafeInteger(value) && (value as number) >= 0
const isCount = isTime
const isChange = (value: unknown): value is Change => value === 'created' || value === 'updated'

/** The line's object with exactly these fields (sorted), or undefined. */
function fieldsOf(text: string, fields: string): Record<string, unknown> | undefined {
  let value: unknown
  try {
    value = parseJson(text)
  } catch {
    return undefined
  }
  return isObject(value) && Object.keys(value).sort().join() === fields ? value : undefined
}

const TIMES = 'its times are whole numbers of ms since 1970'

export function blockOf(text: string): Block | string {
  const value = fieldsOf(text, 'notebook,notes,trash')
  const expected =
    'expected a notebook\'s history, {"notebook":"<name>","notes":<count>,"trash":<count>}.'
  if (value === undefined || typeof value.notebook !== 'string') return expected
  if (!isCount(value.notes) || !isCount(value.trash))
    return `${expected.slice(0, -1)}, counts 0 or more.`
  return { name: value.notebook, notes: value.notes, trash: value.trash }
}

export function stateOf(text: string): State | string {
  const value = fieldsOf(text, 'at,change,past')
  if (value === undefined) {
    return 'expected a note\'s state, {"at":<ms>,"change":"created" or "updated","past":<count>}.'
  }
  const { at, change, past } = value
  if (!isTime(at) || !isChange(change) || !isCount(past)) {
    return `a note's state: ${TIMES}, its change "created" or "updated", its past a count.`
  }
  return { at, change, past }
}

function noteOf(value: Record<string, unknown>, text: string, maxDepth: number): Past | string {
  const { at, change, note } = value
  if (!isObject(note)) return 'its note must be a JSON object.'
  // The note is one level inside the line, whose other fields are flat.
  if (exceedsDepth(text, maxDepth + 1)) {
    return `a note nested deeper than ${maxDepth} levels (MAX_DEPTH).`
  }
  if (!isTime(at) || !isChange(change)) return `${TIMES}, its change "created" or "updated".`
  return { at, change, json: JSON.stringify(note), id: note.id }
}

export function pastOf(text: string, maxDepth: number): Past | string {
  const value = fieldsOf(text, 'at,change,note')
  if (value === undefined) {
    return 'expected a past state, {"at":<ms>,"change":"created" or "updated","note":{...}}.'
  }
  const past = noteOf(value, text, maxDepth)
  return typeof past === 'string' ? `a past state: ${past}` : past
}

export function trashedOf(text: string, maxDepth: number): Trashed | string {
  const value = fieldsOf(text, 'at,change,deleted,note,past')
  if (value === undefined) {
    return 'expected a deleted note, {"deleted":<ms>,"at":<ms>,"change":...,"past":<count>,"note":{...}}.'
  }
  const note = noteOf(value, text, maxDepth)
  if (typeof note === 'string') return `a deleted note: ${note}`
  if (!isTime(value.deleted) || !isCount(value.past)) {
    return `a deleted note: ${TIMES}, its past a count.`
  }
  return { ...note, deleted: value.deleted, past: value.past }
}
