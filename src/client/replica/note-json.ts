/**
 * What the replica does to notes without the service: the two PATCH merges (the spec's shallow
 * one and RFC 7396), the service's `q` rule, and comparing two notes as JSON values. Each means
 * exactly what the service means, so the local view shows what the service will store.
 */

import { parseJson } from '../parse-json.js'

export type JsonObject = Record<string, unknown>

/** A JSON object: not null, not an array. */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A copy of `value` (JSON values only). */
export function copyJson<T>(value: T): T {
  return value === undefined ? value : (parseJson(JSON.stringify(value)) as T)
}

/** PATCH with application/json: each field of `patch` replaces the note's field of that name. */
export function shallowPatch(note: JsonObject, patch: JsonObject): JsonObject {
  const out = copyJson(note)
  for (const key of Object.keys(patch)) setField(out, key, copyJson(patch[key]))
  return out
}

/** PATCH with application/merge-patch+json (RFC 7396): null removes, objects merge. */
export function mergePatch(note: JsonObject, patch: JsonObject): JsonObject {
  const out = copyJson(note)
  mergeInto(out, patch)
  return out
}

function mergeInto(target: JsonObject, patch: JsonObject): void {
  for (const key of Object.keys(patch)) {
    const value = patch[key]
    if (value === null) {
      if (Object.hasOwn(target, key)) delete target[key]
    } else if (isObject(value)) {
      const current = Object.hasOwn(target, key) ? target[key] : undefined
      const base: JsonObject = isObject(current) ? current : {}
      mergeInto(base, value)
      setField(target, key, base)
    } else {
      setField(target, key, copyJson(value))
    }
  }
}

/** Sets a field as plain data ('__proto__' included). */
function setField(target: JsonObject, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  })
}

/** Whether two JSON values are equal (object keys in any order). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => sameJson(item, b[i]))
  }
  const left = a as JsonObject
  const right = b as JsonObject
  const keys = Object.keys(left)
  if (keys.length !== Object.keys(right).length) return false
  return keys.every((key) => Object.hasOwn(right, key) && sameJson(left[key], right[key]))
}

/**
 * The service's `q` rule: a note matches when one of its string values, at any depth (keys
 * excluded), contains the text, compared case-insensitively (a regular expression's `iu` flags).
 */
export function matchesText(text: string): (note: unknown) => boolean {
  const pattern = new RegExp(text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'), 'iu')
  const inValues = (value: unknown): boolean => {
    if (typeof value === 'string') return pattern.test(value)
    if (typeof value !== 'object' || value === null) return false
    if (Array.isArray(value)) return value.some(inValues)
    return Object.values(value).some(inValues)
  }
  return inValues
}
