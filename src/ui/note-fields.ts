/**
 * How a note's fields are shown and edited as text: which field is its body, the other fields as
 * JSON (long ones cut), a field set from an input, JSON read back from the editor, and the time
 * an id that is a creation time stands for.
 */
import type { Note } from './api.js'
import { parseJson } from './client-parts.js'
import { h } from './dom.js'
import { type Fields, isObject } from './note-patch.js'
import { DATE_TIME } from './note-text.js'

/** Fields shown as its text, likewise. */
export const BODY_FIELDS = ['body', 'text', 'content', 'description', 'note', 'message']
/** Longest JSON of the other fields shown before "Show all". */
const SHOWN_JSON = 2_000

/** The note without its id, for showing and editing as JSON. */
export function withoutId(note: Note): Fields {
  const { id: _id, ...fields } = note
  return fields
}

/** 1795531269679 -> a <time> for 2026-11-24T14:41:09.679Z, when the id looks like a creation time. */
export function createdAt(id: unknown): HTMLTimeElement | undefined {
  // 2001-09-09 to 2286-11-20: ids outside are not times (a PATCH can set any id).
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1e12 || id >= 1e13) {
    return undefined
  }
  const date = new Date(id)
  return h('time', { datetime: date.toISOString() }, DATE_TIME.format(date))
}

/** The other fields as compact JSON, long ones cut with a button to show all. */
export function fieldsJson(fields: Fields): HTMLElement {
  const json = JSON.stringify(fields)
  const pre = h(
    'pre',
    { class: 'fields' },
    json.length > SHOWN_JSON ? `${json.slice(0, SHOWN_JSON)}…` : json,
  )
  if (json.length <= SHOWN_JSON) return pre
  const more = h('button', { type: 'button', class: 'link' }, `Show all ${json.length} characters`)
  more.addEventListener('click', () => {
    pre.textContent = json
    more.remove()
  })
  return h('div', {}, pre, more)
}

/**
 * {a:1}, 'title', 'x' -> {a:1, title:'x'}. Left empty, a field that was absent stays absent and
 * one that held no text (title: 7) keeps its value.
 */
export function setText(fields: Fields, key: string, value: string, base: Note): void {
  if (value !== '' || typeof base[key] === 'string') fields[key] = value
  else if (Object.hasOwn(base, key)) fields[key] = base[key]
  else delete fields[key]
}

/** '{"a":1}' -> {a:1}; '[1]', '7', 'x' -> undefined. */
export function readJson(text: string): Fields | undefined {
  try {
    const value: unknown = parseJson(text)
    return isObject(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** 'title' -> 'Title' */
export function capitalised(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1)
}
