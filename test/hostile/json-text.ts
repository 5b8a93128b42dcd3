import type { Random } from './prng.js'

/**
 * Random JSON text of every shape: numbers in every notation, strings with escapes, astral
 * characters and lone surrogates, keys like '__proto__' and 'id', duplicate keys, odd whitespace.
 * It is written as text (not through JSON.stringify) so that forms such as '1E+2', '-0',
 * '1e400' and '"\u005f_proto__"' reach the server.
 */
export interface JsonTextOptions {
  /** Most objects and arrays nested inside one another; the outer object is level 1. */
  maxDepth: number
  /** Rough ceiling on the text's length, in characters. */
  budget: number
  /** Leave out 'id' keys: a PATCH with a random id makes a note no path reaches again. */
  noIdKey?: boolean
}

const KEYS = [
  'a',
  'b',
  'title',
  'body',
  'tags',
  'id',
  'ID',
  'Id',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '',
  ' ',
  '0',
  '1',
  '-1',
  '10',
  '1.5',
  'data',
  'length',
  'é',
  '中文',
  '😀',
  'a b',
  'a"b',
  'a\\b',
  'null',
  'undefined',
  '__defineGetter__',
  'then',
]

const NUMBERS = [
  '0',
  '-0',
  '1',
  '-1',
  '7',
  '42',
  '1.5',
  '-2.25',
  '1e3',
  '1E+2',
  '1e-7',
  '0.1',
  '123456789012',
  '9007199254740991',
  '9007199254740993',
  '-9007199254740993',
  '1e308',
  '1e400',
  '-1e400',
  '5e-324',
  '2e-400',
  '0.0',
  '100000000000000000000000',
  '1.7976931348623157e308',
  '1700000000000',
]

const ESCAPES = [
  '\\"',
  '\\\\',
  '\\/',
  '\\b',
  '\\f',
  '\\n',
  '\\r',
  '\\t',
  '\\u0000',
  '\\u001f',
  '\\u00e9',
  '\\ud83d\\ude00',
  '\\ud800',
  '\\udfff',
  '\\u2028',
  '\\ufeff',
  '\\u005f',
]

const RAW = ['a', 'Z', '0', ' ', '~', 'é', 'ß', '中', '😀', '\u2028', '\ufeff', '\u00a0', '𝄞', 'ﬃ']

function jsonString(rng: Random, maxLength = 12): string {
  const n = rng.int(maxLength + 1)
  let out = '"'
  for (let i = 0; i < n; i++) {
    const r = rng.next()
    if (r < 0.6) out += String.fromCharCode(0x20 + rng.int(0x5f)).replace(/["\\]/, 'x')
    else if (r < 0.8) out += rng.pick(RAW)
    else out += rng.pick(ESCAPES)
  }
  return `${out}"`
}

function key(rng: Random, options: JsonTextOptions): string {
  if (rng.chance(0.7)) {
    const picked = rng.pick(KEYS)
    return JSON.stringify(picked === 'id' && options.noIdKey === true ? 'notId' : picked)
  }
  if (rng.chance(0.1)) return '"\\u005f_proto__"'
  return jsonString(rng, 8)
}

function space(rng: Random): string {
  return rng.chance(0.9) ? '' : rng.pick([' ', '\n', '\t', '\r\n', '  '])
}

function jsonValue(rng: Random, depth: number, options: JsonTextOptions): string {
  const room = options.budget > 0 && depth < options.maxDepth
  const r = rng.next()
  if (room && r < 0.12) return jsonObject(rng, depth + 1, options)
  if (room && r < 0.22) return jsonArray(rng, depth + 1, options)
  if (r < 0.45) return jsonString(rng)
  if (r < 0.75) return rng.pick(NUMBERS)
  if (r < 0.85) return String(rng.between(-1000, 1_000_000))
  return rng.pick(['true', 'false', 'null'])
}

/** An object at nesting level `depth` (the body itself is level 1). */
export function jsonObject(rng: Random, depth: number, options: JsonTextOptions): string {
  const count = rng.chance(0.05) ? rng.int(40) : rng.int(6)
  const parts: string[] = []
  for (let i = 0; i < count && options.budget > 0; i++) {
    const part = `${space(rng)}${key(rng, options)}${space(rng)}:${space(rng)}${jsonValue(rng, depth, options)}${space(rng)}`
    options.budget -= part.length
    parts.push(part)
  }
  return `{${parts.join(',')}${space(rng)}}`
}

function jsonArray(rng: Random, depth: number, options: JsonTextOptions): string {
  const count = rng.int(6)
  const parts: string[] = []
  for (let i = 0; i < count && options.budget > 0; i++) {
    const part = `${space(rng)}${jsonValue(rng, depth, options)}${space(rng)}`
    options.budget -= part.length
    parts.push(part)
  }
  return `[${parts.join(',')}]`
}

/** An object nested exactly `depth` levels: 2 -> '{"k":[]}' or '{"k":{}}'. */
export function nestedObject(rng: Random, depth: number): string {
  let inner = rng.chance(0.5) ? '{}' : '[]'
  for (let level = depth - 1; level >= 2; level--) {
    inner = rng.chance(0.5) ? `[${inner}]` : `{"k${level}":${inner}}`
  }
  return depth <= 1 ? '{}' : `{"deep":${inner}}`
}

/** A JSON value that is not an object, which a body may not be. */
export function nonObject(rng: Random): string {
  return rng.pick([
    '[]',
    '[{}]',
    '[1,2]',
    '"text"',
    '""',
    '0',
    '-1.5',
    'true',
    'false',
    'null',
    ' null ',
    '1e400',
  ])
}

/** Text that JSON.parse rejects: cut, corrupted or simply not JSON. */
export function malformed(rng: Random): string {
  const valid = jsonObject(rng, 1, { maxDepth: 4, budget: 200 })
  switch (rng.int(9)) {
    case 0:
      return valid.slice(0, Math.max(1, rng.int(valid.length)))
    case 1:
      return `${valid},`
    case 2:
      return `${valid}}`
    case 3:
      return rng.pick([
        "{'a':1}",
        '{a:1}',
        '{"a":1,}',
        '{"a":01}',
        '{"a":+1}',
        '{"a":.5}',
        '{"a":NaN}',
        '{"a":Infinity}',
        '{"a":undefined}',
        '{"a":"\\x41"}',
        '{"a":"\\u12"}',
        '{"a" 1}',
        '{,}',
        '{"a":1}{"b":2}',
      ])
    case 4:
      return `{"a":"${String.fromCharCode(rng.int(0x20))}"}`
    case 5:
      return '\ufeff{"bom":1}'
    case 6:
      return rng.pick([
        '{',
        '}',
        '[',
        'nul',
        'tru',
        '"',
        '{"a":[1,2}',
        '{"a":{"b":1]}',
        '/* c */{}',
        '{}//',
      ])
    case 7:
      return `{"a":"${'\\'.repeat(1 + 2 * rng.int(3))}"}`
    default:
      return valid.replace(/[:,]/, rng.pick(['', ';', '=']))
  }
}
