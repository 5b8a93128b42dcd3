/**
 * How a note is named and dated in words, the same in the list, its history and the trash.
 */
import type { Note } from './api.js'
import { h } from './dom.js'

/** Fields shown as the note's heading, the first one present holding a string. */
export const TITLE_FIELDS = ['title', 'name', 'subject', 'heading', 'summary']

/** 'title' of {title:'a'}; undefined for {title: 7} or {}. */
export function firstText(note: Note, names: readonly string[]): string | undefined {
  return names.find((name) => typeof note[name] === 'string')
}

/** {title:'Call Alice'} -> 'Call Alice'; {id: 7} -> 'Note 7'. */
export function noteName(note: Note): string {
  const key = firstText(note, TITLE_FIELDS)
  return key === undefined ? `Note ${JSON.stringify(note.id)}` : String(note[key])
}

/** One formatter for every note: toLocaleString() would build one per call. */
export const DATE_TIME = new Intl.DateTimeFormat(undefined, {
  dateStyle: 'medium',
  timeStyle: 'short',
})
/** With seconds: two edits a moment apart show two times. */
const PRECISE = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' })

/** '2026-11-24T14:41:09.679Z' -> <time datetime="2026-11-24T14:41:09.679Z">24 Nov 2026, 14:41:09</time> */
export function timeOf(iso: string): HTMLTimeElement {
  const date = new Date(iso)
  return h('time', { datetime: iso }, Number.isNaN(date.getTime()) ? iso : PRECISE.format(date))
}
