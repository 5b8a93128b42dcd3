const DECIMAL_INTEGER = /^-?[0-9]+$/

/**
 * Reads the `:id` path segment (already percent-decoded) as the note id it names.
 * '7' -> 7, '007' -> 7, '-3' -> -3; 'abc', '12abc', '0x1F', '1e3', '12.0', '' -> undefined.
 */
export function parseNoteId(segment: string): number | undefined {
  return DECIMAL_INTEGER.test(segment) ? Number(segment) : undefined
}
