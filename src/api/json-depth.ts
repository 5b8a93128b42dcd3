const OPEN_BRACE = 0x7b
const OPEN_BRACKET = 0x5b
const CLOSE_BRACE = 0x7d
const CLOSE_BRACKET = 0x5d
const QUOTE = 0x22
const BACKSLASH = 0x5c

/**
 * Whether valid JSON `text` nests objects and arrays deeper than `maxDepth`.
 * '{"a":[1]}' has depth 2; '"[[["' has depth 0 (brackets inside strings do not count).
 */
export function exceedsDepth(text: string, maxDepth: number): boolean {
  // Each level needs at least two characters, so short texts cannot be too deep.
  if (text.length <= maxDepth * 2) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === BACKSLASH) i++
      else if (c === QUOTE) inString = false
    } else if (c === QUOTE) {
      inString = true
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return true
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--
    }
  }
  return false
}
