/** A JSON object: a note's fields. */
export type Fields = Record<string, unknown>

/** How to send an edit: the body and its media type, or why it cannot be sent as one PATCH. */
export type PatchPlan =
  | { kind: 'unchanged' }
  | {
      kind: 'patch'
      contentType: 'application/json' | 'application/merge-patch+json'
      body: Fields
    }
  | { kind: 'impossible'; why: string }

/**
 * The PATCH that turns the note `before` into `after` (both without concern for key order).
 * The spec's PATCH (application/json) replaces each field sent and cannot remove one; RFC 7396
 * (application/merge-patch+json) can, with null, but cannot then set a value to null.
 * {a:1,b:2} -> {a:1,b:3}: application/json {b:3} (every value, null included, as typed);
 * {a:1,b:2} -> {a:1}: merge patch {b:null}; {m:{x:1,y:2}} -> {m:{x:1}}: merge patch {m:{y:null}}.
 */
export function planPatch(before: Fields, after: Fields): PatchPlan {
  const changed: Fields = {}
  for (const [key, value] of Object.entries(after)) {
    if (!Object.hasOwn(before, key) || !sameJson(before[key], value)) changed[key] = value
  }
  const removed = Object.keys(before).filter((key) => !Object.hasOwn(after, key))
  if (removed.length === 0) {
    return Object.keys(changed).length === 0
      ? { kind: 'unchanged' }
      : { kind: 'patch', contentType: 'application/json', body: changed }
  }
  try {
    return {
      kind: 'patch',
      contentType: 'application/merge-patch+json',
      body: mergeDiff(before, after),
    }
  } catch {
    return {
      kind: 'impossible',
      why: 'Removing a field and setting another value to null cannot be saved at once: save the removal first, then the null.',
    }
  }
}

/** The RFC 7396 patch from `before` to `after`; throws when it would need to set a null. */
function mergeDiff(before: Fields, after: Fields): Fields {
  const patch: Fields = {}
  for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) patch[key] = null
  for (const [key, value] of Object.entries(after)) {
    const old = before[key]
    if (Object.hasOwn(before, key) && sameJson(old, value)) continue
    if (isObject(value) && isObject(old)) patch[key] = mergeDiff(old, value)
    else if (value === null || (isObject(value) && holdsNull(value))) throw new Error('null')
    else patch[key] = value
  }
  return patch
}

/** Whether an object would lose members to a merge patch: a null member at any depth. */
function holdsNull(value: Fields): boolean {
  return Object.values(value).some((v) => v === null || (isObject(v) && holdsNull(v)))
}

export function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The same JSON value, whatever the order of object keys. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((v, i) => sameJson(v, b[i]))
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a)
    return (
      keys.length === Object.keys(b).length &&
      keys.every((key) => Object.hasOwn(b, key) && sameJson(a[key], b[key]))
    )
  }
  return false
}
