import type { NoteFields } from '../types.js'

/**
 * The text that the `q` index (pg_trgm) searches: a note's string values at any depth, keys
 * excluded, one a line, case-folded by foldText. It only narrows the candidates: matchesText
 * (search.ts) decides on each one, so the index must never miss a match. It cannot: two characters
 * that a case-insensitive (`iu`) comparison takes as equal fold to the same text, so a value that
 * contains q contains fold(q) once folded.
 * { title: 'Buy BREAD', tags: ['Ä'] } -> 'buy bread\nä'
 * `except` leaves out one top-level field: a created note's body `id`, which the note does not keep.
 */
export function searchText(note: NoteFields, except?: string): string {
  const parts: string[] = []
  const collect = (value: unknown): void => {
    if (typeof value === 'string') parts.push(foldText(value))
    else if (Array.isArray(value)) for (const item of value) collect(item)
    else if (typeof value === 'object' && value !== null) {
      for (const key of Object.keys(value)) collect((value as Record<string, unknown>)[key])
    }
  }
  for (const key of Object.keys(note)) if (key !== except) collect(note[key])
  return parts.join('\n')
}

/**
 * Each character case-folded on its own, so that folding keeps substrings: upper-cased then
 * lower-cased where each step gives one character ('ſ' -> 'S' -> 's', 'K' (Kelvin) -> 'k'),
 * else lower-cased alone ('ß' stays 'ß', since 'SS' would be two). NUL (which PostgreSQL's text
 * cannot hold) and lone surrogates become U+FFFD, on both sides of the search alike.
 * 'BrÖt' -> 'bröt'
 */
export function foldText(text: string): string {
  // Printable ASCII (with tab and newlines) folds as toLowerCase does, a hundred times faster than
  // character by character: a 200 KiB value held the event loop 64 ms on each write, now under 1.
  if (PLAIN_ASCII.test(text)) return text.toLowerCase()
  let folded = ''
  for (const ch of text) folded += foldChar(ch)
  return folded
}

const PLAIN_ASCII = /^[\t\n\r\x20-\x7e]*$/

function foldChar(ch: string): string {
  if (ch === '\u0000' || (ch.length === 1 && ch >= '\ud800' && ch <= '\udfff')) return '\ufffd'
  const upper = ch.toUpperCase()
  const base = single(upper) ? upper : ch
  const lower = base.toLowerCase()
  return single(lower) ? lower : base
}

function single(text: string): boolean {
  return text.length === 1 || (text.length === 2 && (text.codePointAt(0) as number) > 0xffff)
}

/** foldText(q) as a LIKE pattern that finds it anywhere: 'a%b' -> '%a\%b%' */
export function likePattern(q: string): string {
  return `%${foldText(q).replace(/[\\%_]/g, '\\$&')}%`
}
