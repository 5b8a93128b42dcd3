import fc from 'fast-check'
import type { NoteFields, PatchKind } from '../../src/store/types.js'

/** Field names that have tripped up JavaScript stores before, plus ordinary ones. */
const fieldName = fc.oneof(
  fc.constantFrom(
    'id',
    'title',
    'body',
    '__proto__',
    'constructor',
    'prototype',
    'toJSON',
    '0',
    '',
  ),
  fc.string({ maxLength: 8 }),
)

/** A JSON object as a client might send it; sometimes with an `id` that is a nearby number. */
function noteFields(nearIds: fc.Arbitrary<number>): fc.Arbitrary<NoteFields> {
  const value = fc.oneof(fc.jsonValue({ maxDepth: 3 }), nearIds)
  return fc
    .array(fc.tuple(fieldName, value), { maxLength: 5 })
    .map((pairs) =>
      JSON.parse(
        `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`,
      ),
    )
}

/**
 * Objects over a few shared keys, nested up to 3 levels, with nulls, arrays and scalars: creates
 * and merge patches made of these overlap often, so RFC 7396's recursion, removals and
 * object-over-scalar cases (and '__proto__' at depth) come up in most runs.
 */
function nestedFields(): fc.Arbitrary<NoteFields> {
  const key = fc.constantFrom('a', 'b', '__proto__', 'constructor')
  const { tree } = fc.letrec<{ tree: unknown; leaf: unknown }>((tie) => ({
    leaf: fc.oneof(
      fc.constant(null),
      fc.integer({ min: 0, max: 3 }),
      fc.constant([null, { a: null }]),
    ),
    tree: fc.oneof(
      { depthSize: 'small', maxDepth: 3 },
      tie('leaf'),
      fc.array(fc.tuple(key, tie('tree')), { maxLength: 3 }).map(pairsToJson),
    ),
  }))
  return fc
    .array(fc.tuple(key, tree), { maxLength: 4 })
    .map(pairsToJson) as fc.Arbitrary<NoteFields>
}

/** [['a', 1], ['__proto__', {}]] -> JSON.parse('{"a":1,"__proto__":{}}'): own keys only, last wins. */
function pairsToJson(pairs: [string, unknown][]): unknown {
  return JSON.parse(
    `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`,
  )
}

export type Operation =
  | { kind: 'create'; fields: NoteFields; tick: number }
  | { kind: 'update'; pick: number; fields: NoteFields; patch: PatchKind }
  | { kind: 'delete'; pick: number }
  | { kind: 'get'; pick: number }
  | { kind: 'list' }

/** `pick` chooses an id: an existing note's id when one is numeric, else a near-miss. */
export function operations(): fc.Arbitrary<Operation[]> {
  return fc.array(operation(), { maxLength: 60 })
}

/** A write of a batch: a create, update or delete as it would be alone. */
export type WriteOperation = Extract<Operation, { kind: 'create' | 'update' | 'delete' }>

/** What the HTTP API takes: the single operations, and batches of 1 to 6 writes. */
export type ApiOperation = Operation | { kind: 'batch'; writes: WriteOperation[] }

/** operations(), with a batch now and then in place of an operation. */
export function apiOperations(): fc.Arbitrary<ApiOperation[]> {
  const write = operation().filter(
    (op): op is WriteOperation => op.kind !== 'get' && op.kind !== 'list',
  )
  const batch = fc.record({
    kind: fc.constant('batch' as const),
    writes: fc.array(write, { minLength: 1, maxLength: 6 }),
  })
  return fc.array(
    fc.oneof(
      { weight: 8, arbitrary: operation() as fc.Arbitrary<ApiOperation> },
      { weight: 1, arbitrary: batch as fc.Arbitrary<ApiOperation> },
    ),
    { maxLength: 60 },
  )
}

function operation(): fc.Arbitrary<Operation> {
  const nearIds = fc.integer({ min: 990, max: 1010 })
  const pick = fc.nat({ max: 1000 })
  const patch = fc.constantFrom<PatchKind>('merge', 'merge-patch', 'replace')
  return fc.oneof(
    fc.record({
      kind: fc.constant('create' as const),
      fields: noteFields(nearIds),
      tick: fc.integer({ min: 0, max: 2 }),
    }),
    fc.record({
      kind: fc.constant('create' as const),
      fields: nestedFields(),
      tick: fc.integer({ min: 0, max: 2 }),
    }),
    fc.record({ kind: fc.constant('update' as const), pick, fields: noteFields(nearIds), patch }),
    fc.record({ kind: fc.constant('update' as const), pick, fields: nestedFields(), patch }),
    // Moves a note onto an id near the others, to make duplicates and id collisions common
    // (or, as a merge patch with a null id, off every id).
    fc.record({
      kind: fc.constant('update' as const),
      pick,
      fields: fc.oneof(
        nearIds.map((id) => ({ id })),
        fc.constant({ id: null }),
      ),
      patch,
    }),
    fc.record({ kind: fc.constant('delete' as const), pick }),
    fc.record({ kind: fc.constant('get' as const), pick }),
    fc.record({ kind: fc.constant('list' as const) }),
  )
}

/** An id to aim at: most often one that a note holds, sometimes one that none does. */
export function pickId(ids: readonly number[], pick: number): number {
  if (ids.length === 0 || pick % 5 === 0) return 990 + (pick % 25)
  return ids[pick % ids.length] as number
}
