import type { NoteFields } from '../types.js'

/**
 * `note[key] = value`, except that '__proto__' becomes a plain field instead of a prototype:
 * setField(note, '__proto__', { a: 1 }) leaves Object.getPrototypeOf(note) alone and
 * JSON.stringify(note) holds '"__proto__":{"a":1}'.
 */
export function setField(note: NoteFields, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(note, key, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    })
  } else {
    note[key] = value
  }
}
