const ZERO = 0x30
const NINE = 0x39
const MINUS = 0x2d

/**
 * Reads the `:id` path segment (already percent-decoded) as the note id it names: an optional
 * '-' and decimal digits. It runs on every request for a note, so it scans the characters itself
 * instead of running a regular expression.
 * '7' -> 7, '007' -> 7, '-3' -> -3; 'abc', '12abc', '0x1F', '1e3', '12.0', '', '-' -> undefined.
 */
export function parseNoteId(segment: string): number | undefined {
  const start = segment.charCodeAt(0) === MINUS ? 1 : 0
  if (segment.length === start) return undefined
  for (let i = start; i < segment.length; i++) {
    const c = segment.charCodeAt(i)
    if (c < ZERO || c > NINE) return undefined
  }
  return Number(segment)
}
