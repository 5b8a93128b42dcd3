/**
 * RFC 7396 Appendix A, row by row: target, patch, result. A note is always an object and the body
 * parser takes only objects, so the rows with an array target ('["a","b"]' + '["c","d"]' and
 * '[1,2]' + '{"a":"b","c":null}') cannot be stored; the rows whose patch is not an object
 * ('["c"]', 'null', '"bar"') are NON_OBJECT_PATCHES: a 400 over HTTP, the note unchanged.
 */
export const RFC7396_EXAMPLES: readonly { target: string; patch: string; result: string }[] = [
  { target: '{"a":"b"}', patch: '{"a":"c"}', result: '{"a":"c"}' },
  { target: '{"a":"b"}', patch: '{"b":"c"}', result: '{"a":"b","b":"c"}' },
  { target: '{"a":"b"}', patch: '{"a":null}', result: '{}' },
  { target: '{"a":"b","b":"c"}', patch: '{"a":null}', result: '{"b":"c"}' },
  { target: '{"a":["b"]}', patch: '{"a":"c"}', result: '{"a":"c"}' },
  { target: '{"a":"c"}', patch: '{"a":["b"]}', result: '{"a":["b"]}' },
  {
    target: '{"a":{"b":"c"}}',
    patch: '{"a":{"b":"d","c":null}}',
    result: '{"a":{"b":"d"}}',
  },
  { target: '{"a":[{"b":"c"}]}', patch: '{"a":[1]}', result: '{"a":[1]}' },
  { target: '{"e":null}', patch: '{"a":1}', result: '{"e":null,"a":1}' },
  { target: '{}', patch: '{"a":{"bb":{"ccc":null}}}', result: '{"a":{"bb":{}}}' },
]

/** RFC 7396 Appendix A's patches that are not objects, with the 400 detail they earn. */
export const NON_OBJECT_PATCHES: readonly { patch: string; detail: string }[] = [
  { patch: '["c"]', detail: 'The request body must be a JSON object, not an array.' },
  { patch: 'null', detail: 'The request body must be a JSON object, not null.' },
  { patch: '"bar"', detail: 'The request body must be a JSON object, not a string.' },
]

/** '{"a":1}' with id 5 -> '{"a":1,"id":5}'; '{}' -> '{"id":5}': the JSON a create stores. */
export function withIdJson(json: string, id: number): string {
  return json === '{}' ? `{"id":${id}}` : `${json.slice(0, -1)},"id":${id}}`
}
