/**
 * JSON.parse, exact for object keys written with escapes.
 *
 * V8 from 12.8 on (Node 24 and later, Chromium) can read an escaped key as another key that an
 * earlier text held, one that starts with a backslash: once '{"h":[],"\\\\":0}' has been parsed,
 * '{"h":1,"\\"":2}' and '{"h":1,"\\n":2}' come back with the key '\\'
 * (https://github.com/nodejs/node/issues/63785). One caller's text would so change the notes
 * of the next.
 *
 * A text with no backslash in it, or none in its keys, goes to JSON.parse as it is. In any other
 * each key is first swapped for a plain name (one name per distinct key, so that duplicates
 * resolve as JSON.parse resolves them: the first one's place, the last one's value), the text is
 * parsed, and its objects are made again with the real keys, which JSON.parse reads correctly as
 * strings on their own. A text that is not JSON throws JSON.parse's own SyntaxError.
 *
 * One module for the client, the page and the service: the service imports it from here, the one
 * module of client/ it may import (test/layers.unit.test.ts), as it imports nothing itself.
 */
export function parseJson(text: string): unknown {
  if (!text.includes('\\')) return JSON.parse(text)
  const keys = keyLiterals(text)
  if (keys === undefined) return JSON.parse(text)
  const names = new Map<string, number>()
  // A key written the same way again (as in an array of like objects) is not decoded again.
  const byLiteral = new Map<string, number>()
  const real: string[] = []
  const pieces: string[] = []
  let last = 0
  for (const [start, end] of keys) {
    const literal = text.slice(start, end)
    let name = byLiteral.get(literal)
    if (name === undefined) {
      let key: unknown
      try {
        key = JSON.parse(literal)
      } catch {
        return JSON.parse(text) // not a string: the text is not JSON, and this says where
      }
      name = names.get(key as string)
      if (name === undefined) {
        name = real.length
        names.set(key as string, name)
        real.push(key as string)
      }
      byLiteral.set(literal, name)
    }
    pieces.push(text.slice(last, start), `"k${name}"`)
    last = end
  }
  pieces.push(text.slice(last))
  let value: unknown
  try {
    value = JSON.parse(pieces.join(''))
  } catch {
    return JSON.parse(text)
  }
  return withKeys(value, real)
}

/**
 * The [start, end) of every object key's string literal, quotes included, when at least one of
 * them holds a backslash; undefined when none does. A key is a string followed by ':' (after
 * whitespace); a text that is not JSON may be read wrongly here, and JSON.parse refuses it anyway.
 */
function keyLiterals(text: string): [number, number][] | undefined {
  const keys: [number, number][] = []
  let escaped = false
  // The first backslash at or after the key being read, while no key has held one: it only moves
  // forward, so the whole scan reads the text once (a search per key from the key on read it
  // again to the next backslash for every key: a second of CPU for a 1 MiB body).
  let slash = -1
  for (let start = text.indexOf('"'); start !== -1; ) {
    let close = text.indexOf('"', start + 1)
    // A quote after an odd run of backslashes is part of the string.
    while (close !== -1 && oddBackslashesBefore(text, close)) close = text.indexOf('"', close + 1)
    if (close === -1) break
    let after = close + 1
    while (isSpace(text.charCodeAt(after))) after++
    if (text.charCodeAt(after) === 0x3a) {
      keys.push([start, close + 1])
      if (!escaped) {
        if (slash < start) slash = text.indexOf('\\', start + 1)
        // No backslash from here on: no key holds one.
        if (slash === -1) return undefined
        escaped = slash < close
      }
    }
    start = text.indexOf('"', close + 1)
  }
  return escaped ? keys : undefined
}

function oddBackslashesBefore(text: string, at: number): boolean {
  let odd = false
  for (let i = at - 1; text.charCodeAt(i) === 0x5c; i--) odd = !odd
  return odd
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d
}

/** The value with every object made again under its real keys, 'k<n>' being real[n]. */
function withKeys(value: unknown, real: readonly string[]): unknown {
  if (typeof value !== 'object' || value === null) return value
  const top: Record<string, unknown> = { value }
  // Where each object or array still to fix sits (in `holders[i]` at `places[i]`), depth first
  // without recursion: a text may nest as deep as its length allows.
  const holders: (Record<string, unknown> | unknown[])[] = [top]
  const places: (string | number)[] = ['value']
  for (let holder = holders.pop(); holder !== undefined; holder = holders.pop()) {
    const at = places.pop() as string | number
    const item = (holder as Record<string | number, unknown>)[at] as object
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) {
        const element: unknown = item[i]
        if (typeof element !== 'object' || element === null) continue
        holders.push(item)
        places.push(i)
      }
      continue
    }
    const fresh: Record<string, unknown> = {}
    const names = Object.keys(item)
    for (let i = 0; i < names.length; i++) {
      const name = names[i] as string
      const key = real[Number(name.slice(1))] as string
      const field: unknown = (item as Record<string, unknown>)[name]
      put(fresh, key, field)
      if (typeof field !== 'object' || field === null) continue
      holders.push(fresh)
      places.push(key)
    }
    if (Array.isArray(holder)) holder[at as number] = fresh
    else put(holder, at as string, fresh)
  }
  return top.value
}

/**
 * As JSON.parse adds a property: '__proto__' is data, not the prototype. Each key comes once (the
 * text's duplicates were made one name), and one set again keeps its place.
 */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key !== '__proto__') {
    target[key] = value
    return
  }
  Object.defineProperty(target, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  })
}
