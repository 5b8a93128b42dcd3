import assert from 'node:assert/strict'
import { it } from 'node:test'
import fc from 'fast-check'
import { SHARED_ROOM_ADVICE, TRASH_ROOM_ADVICE } from '../../src/store/kernel/capacity.js'
import {
  type Change,
  type Notebooks,
  type NoteStore,
  StoreFullError,
} from '../../src/store/types.js'
import { operations, pickId } from './arbitraries.js'
import { NoteModel } from './note-model.js'
import type { ContractNotebooksOptions } from './notebooks.contract.js'
import { waitUntil } from './store.contract.js'

/** Small enough that random runs meet every one of the four caps. */
const CAPS = { maxNotes: 8, maxBytes: 800, maxNotesPerNotebook: 4, maxBytesPerNotebook: 400 }

const NAMES = ['a', 'b', 'c']

/**
 * The model-based property every Notebooks implementation must pass: random operations, each in
 * one of three notebooks, answered exactly as three independent models answer them, with one id
 * rule over all three (max(now, last id given anywhere + 1), stepping over any id a
 * note in any notebook holds) and the caps per notebook and overall. Ids are picked from every
 * notebook's notes, so most operations on another notebook's id must find nothing. After each
 * operation every notebook's version must be its own writes alone; at the end each notebook's
 * subscribers and history must have seen its own changes, and only those.
 */
export function runNotebooksModelProperty(
  makeNotebooks: (options: Required<ContractNotebooksOptions>) => Notebooks,
  options: { numRuns: number; close?: (notebooks: Notebooks) => Promise<void> },
): void {
  it('answers random operations over three notebooks as three models with one id rule do', async () => {
    // A few runs of operations() end to end: one alone averages 5 operations, too few to fill
    // three notebooks.
    const sequences = fc
      .array(operations(), { minLength: 4, maxLength: 12 })
      .map((runs) => runs.flat())
    const where = fc.array(fc.nat({ max: NAMES.length - 1 }), { minLength: 120, maxLength: 120 })
    await fc.assert(
      fc.asyncProperty(sequences, where, async (ops, notebookOf) => {
        let t = 1000
        const now = () => t
        const notebooks = makeNotebooks({ now, ...CAPS })
        const stores = NAMES.map((name) => notebooks.notebook(name))
        const models = NAMES.map(() => {
          const model = new NoteModel(undefined, now)
          model.keepsTrash = true
          return model
        })
        const starts = await Promise.all(stores.map(async (store) => store.version()))
        const epochs = starts.map((token) => token.slice(0, token.lastIndexOf('.')))
        assert.equal(new Set(epochs).size, NAMES.length)
        const heard = NAMES.map((): Change[] => [])
        const stops = stores.map((store, i) => store.subscribe((change) => heard[i]?.push(change)))
        const expected = NAMES.map((): [string, string][] => [])
        let lastId = 0
        const allIds = () => models.flatMap((model) => model.ids())
        const sum = (count: (model: NoteModel) => number) =>
          models.reduce((total, model) => total + count(model), 0)
        /** The refusal the store throws for that message (the service's caps advise otherwise). */
        const fullError = (message: string, model: NoteModel) =>
          message.startsWith('The service')
            ? new StoreFullError(message, SHARED_ROOM_ADVICE)
            : model.trashNotes > 0
              ? new StoreFullError(message, TRASH_ROOM_ADVICE)
              : new StoreFullError(message)
        /** The cap a write of `notes` more notes and `bytes` more bytes passes, in the store's words. */
        const refusal = (model: NoteModel, notes: number, bytes: number) => {
          if (notes > 0 && model.heldNotes >= CAPS.maxNotesPerNotebook)
            return `This notebook holds its maximum of ${CAPS.maxNotesPerNotebook} notes.`
          if (notes > 0 && sum((m) => m.heldNotes) >= CAPS.maxNotes)
            return `The service holds its maximum of ${CAPS.maxNotes} notes.`
          if (model.heldBytes + bytes > CAPS.maxBytesPerNotebook)
            return `This notebook holds its maximum of ${CAPS.maxBytesPerNotebook} bytes of notes.`
          if (sum((m) => m.heldBytes) + bytes > CAPS.maxBytes)
            return `The service holds its maximum of ${CAPS.maxBytes} bytes of notes.`
          return undefined
        }
        try {
          for (const [i, op] of ops.entries()) {
            const at = notebookOf[i] ?? 0
            const store = stores[at] as NoteStore
            const model = models[at] as NoteModel
            const changes = expected[at] as [string, string][]
            switch (op.kind) {
              case 'create': {
                t += op.tick
                let id = Math.max(t, lastId + 1)
                while (models.some((m) => m.holds(id))) id++
                const json = new NoteModel().create(op.fields, id)
                const refused = refusal(model, 1, Buffer.byteLength(json))
                if (refused !== undefined) {
                  await assert.rejects(
                    async () => store.create(op.fields),
                    fullError(refused, model),
                  )
                } else {
                  assert.equal((await store.create(op.fields)).json, model.create(op.fields, id))
                  lastId = id
                  changes.push(['created', json])
                }
                break
              }
              case 'update': {
                const id = pickId(allIds(), op.pick)
                const index = model.notes.findIndex((note) => note.value.id === id)
                if (index === -1) {
                  assert.equal(await store.update(id, op.fields, op.patch), undefined)
                  break
                }
                const before = model.notes[index]?.json ?? ''
                const { json } = model.merged(index, op.fields, op.patch)
                const growth = Buffer.byteLength(json) - Buffer.byteLength(before)
                const refused = refusal(model, 0, growth)
                if (refused !== undefined) {
                  await assert.rejects(
                    async () => store.update(id, op.fields, op.patch),
                    fullError(refused, model),
                  )
                } else {
                  const updated = await store.update(id, op.fields, op.patch)
                  assert.equal(updated !== undefined && 'json' in updated && updated.json, json)
                  model.replace(index, json)
                  changes.push(['updated', json])
                }
                break
              }
              case 'delete': {
                const id = pickId(allIds(), op.pick)
                const deleted = model.delete(id)
                assert.equal(await store.delete(id), deleted)
                if (deleted) changes.push(['deleted', `{"id":${JSON.stringify(id)}}`])
                break
              }
              case 'get': {
                const id = pickId(allIds(), op.pick)
                assert.equal((await store.get(id))?.json, model.get(id))
                break
              }
              case 'list':
                assert.equal((await store.list()).json, model.list())
            }
            for (const [n, other] of stores.entries()) {
              const writes = (models[n] as NoteModel).version
              assert.equal(await other.version(), `${epochs[n]}.${writes.toString(36)}`)
            }
          }
          await waitUntil(() => heard.every((got, n) => got.length >= (expected[n]?.length ?? 0)))
          for (const [n, store] of stores.entries()) {
            const model = models[n] as NoteModel
            assert.equal((await store.list()).json, model.list())
            const stats = await store.stats()
            assert.deepEqual(
              [stats.notes, stats.bytes],
              [model.notes.length, model.bytes],
              `notebook ${NAMES[n]}`,
            )
            const history = (await store.changesSince(starts[n] as string, 1000)) ?? []
            assert.deepEqual(
              history.map(({ type, data }) => [type, data]),
              expected[n],
            )
            assert.deepEqual(
              heard[n]?.map(({ type, data }) => [type, data]),
              expected[n],
            )
          }
          const stats = await notebooks.stats()
          assert.deepEqual(stats, {
            notes: sum((m) => m.notes.length),
            bytes: sum((m) => m.bytes),
            maxNotes: CAPS.maxNotes,
            maxBytes: CAPS.maxBytes,
          })
        } finally {
          for (const stop of stops) stop()
          await options.close?.(notebooks)
        }
      }),
      { numRuns: options.numRuns },
    )
  })
}
