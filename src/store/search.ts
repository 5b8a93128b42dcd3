/**
 * The `q` filter of DECISION 23: a note matches when one of its string values, at any depth (keys
 * excluded), contains the text, compared case-insensitively by Unicode simple case folding (as a
 * JavaScript regular expression with the `iu` flags compares). Both sides are compared as they
 * are: no normalization, no trimming.
 *
 * matchesText('bread')('{"title":"Buy BREAD","id":1}') -> true
 * matchesText('title')('{"title":"x","id":1}') -> false (a key, not a value)
 */
export function matchesText(q: string): (json: string) => boolean {
  const pattern = new RegExp(q.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&'), 'iu')
  // The text can be found in the note's JSON as it is, unless it holds a character that JSON
  // escapes inside strings ('"', '\', controls, lone surrogates): then the raw text is a quick,
  // complete first test (it can only over-match: on keys, or across escapes), and only the notes
  // it lets through are parsed. No character that JSON escapes folds to one that it does not.
  const quickTest = !/["\\\u0000-\u001f\ud800-\udfff]/.test(q)
  const inValues = (value: unknown): boolean => {
    if (typeof value === 'string') return pattern.test(value)
    if (typeof value !== 'object' || value === null) return false
    if (Array.isArray(value)) return value.some(inValues)
    for (const key in value) {
      if (inValues((value as Record<string, unknown>)[key])) return true
    }
    return false
  }
  return (json) => (!quickTest || pattern.test(json)) && inValues(JSON.parse(json))
}
