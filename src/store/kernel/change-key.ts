import type { ChangeKey } from '../types.js'
import { isIndexable } from './id-placement.js'

/** The id that a ChangeKey holds for a note's `id` field. 7 -> 7; '7' -> Infinity; absent -> Infinity */
export function keyId(id: unknown): number {
  return isIndexable(id) ? id : Number.POSITIVE_INFINITY
}

/** The order of last change: < 0 when `a` comes first. (5, 9, 2) < (5, Infinity, 1) */
export function compareKeys(a: ChangeKey, b: ChangeKey): number {
  if (a.modified !== b.modified) return a.modified < b.modified ? -1 : 1
  if (a.id !== b.id) return a.id < b.id ? -1 : 1
  return a.position - b.position
}
