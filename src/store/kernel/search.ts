/**
 * The `q` filter of the list: a note matches when one of its string values, at any depth (keys
 * excluded), contains the text, compared case-insensitively by Unicode simple case folding (as a
 * JavaScript regular expression with the `iu` flags compares). Both sides are compared as they
 * are: no normalization, no trimming.
 *
 * matchesText('bread')('{"title":"Buy BREAD","id":1}') -> true
 * matchesText('title')('{"title":"x","id":1}') -> false (a key, not a value)
 */
export function matchesText(q: string): (json: string) => boolean {
  const source = q.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&')
  const pattern = new RegExp(source, 'iu')
  const inValues = (value: unknown): boolean => {
    if (typeof value === 'string') return pattern.test(value)
    if (typeof value !== 'object' || value === null) return false
    if (Array.isArray(value)) return value.some(inValues)
    for (const key in value) {
      if (inValues((value as Record<string, unknown>)[key])) return true
    }
    return false
  }
  // Text with a character that JSON escapes inside strings ('"', '\', controls, lone surrogates)
  // is looked for in the parsed note. Any other text is found in the note's JSON as it is: no
  // character that JSON escapes folds to one that it does not, so the raw JSON holds every match,
  // and only has to be told apart from matches in keys, outside strings, or across escapes.
  if (JSON.stringify(q) !== `"${q}"`) {
    // JSON escapes each character on its own, so the escaped text is in the JSON of every match.
    const escapedText = JSON.stringify(q).slice(1, -1)
    const raw = new RegExp(escapedText.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'), 'iu')
    return (json) => raw.test(json) && inValues(JSON.parse(json))
  }
  const everywhere = new RegExp(source, 'giu')
  return (json) => inRawValues(json, everywhere, inValues)
}

/**
 * Whether a match of `pattern` (global) in the JSON text of a note lies inside a string value:
 * not a key (a string followed by ':'), not across a string's end. A string holding escapes is
 * parsed and tested whole, since a raw match could begin inside an escape ('\\n' + 'nb').
 * JSON.stringify's output is assumed: no whitespace between tokens.
 */
function inRawValues(
  json: string,
  pattern: RegExp,
  inValues: (value: unknown) => boolean,
): boolean {
  pattern.lastIndex = 0
  let match = pattern.exec(json)
  // The string token around or after the match: its content is [start, end).
  let start = -1
  let end = -1
  let escaped = false
  let isKey = false
  while (match !== null) {
    const at = match.index
    while (end <= at) {
      const open = json.indexOf('"', end + 1)
      if (open === -1) return false
      let close = open + 1
      escaped = false
      for (;;) {
        const code = json.charCodeAt(close)
        if (code === 92) {
          escaped = true
          close += 2
        } else if (code === 34) {
          break
        } else {
          close++
        }
      }
      start = open + 1
      end = close
      isKey = json.charCodeAt(close + 1) === 58
    }
    if (at >= start && at + match[0].length <= end && !isKey) {
      if (!escaped || inValues(JSON.parse(json.slice(start - 1, end + 1)))) return true
      pattern.lastIndex = end
    } else {
      // Past the match's first character, a whole code point: with the u flag, a lastIndex in
      // the middle of a surrogate pair would find the same match again, for ever.
      pattern.lastIndex = at + ((json.codePointAt(at) as number) > 0xffff ? 2 : 1)
    }
    match = pattern.exec(json)
  }
  return false
}
