import type { NoteFields } from '../types.js'

/**
 * RFC 7396 MergePatch(target, patch) for an object patch, written into `target` (which the
 * caller owns, e.g. a note just parsed from its JSON): a null removes the field, an object merges
 * recursively (over {} when the target's field is absent or not an object, so nulls inside it
 * vanish too), anything else (arrays included) replaces. The patch is not modified.
 * Keys are own properties only and are set with defineProperty, so '__proto__' is plain data
 * at any depth. Recursion is as deep as the patch, which the body parser bounds (MAX_DEPTH).
 * { a: 1, b: { c: 2 } } patched with { a: null, b: { d: 3 } } -> { b: { c: 2, d: 3 } }
 */
export function mergePatchInto(target: NoteFields, patch: NoteFields): NoteFields {
  for (const key of Object.keys(patch)) {
    const value = patch[key]
    if (value === null) {
      if (Object.hasOwn(target, key)) delete target[key]
      continue
    }
    if (isPlainObject(value)) {
      const current = Object.hasOwn(target, key) ? target[key] : undefined
      const base: NoteFields = isPlainObject(current) ? current : {}
      defineField(target, key, mergePatchInto(base, value))
    } else {
      defineField(target, key, value)
    }
  }
  return target
}

/** A JSON object: not null, not an array. */
function isPlainObject(value: unknown): value is NoteFields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `target[key] = value` as an own data property: '__proto__' stays a field, an existing key keeps its place. */
function defineField(target: NoteFields, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  })
}
