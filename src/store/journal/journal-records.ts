import { parseJson } from '../../client/parse-json.js'
import { encodeRecord } from '../../durable/record-frame.js'
import { etagOf } from '../kernel/version-token.js'
import type { MemoryNoteStore } from '../memory/memory-store.js'
import type { ImageNote, RememberedKey, StoreImage } from '../memory/records.js'
import type { Change } from '../types.js'
import { SHARED_NOTEBOOK } from '../types.js'
import type { DecodedRecord } from './record-format.js'

/**
 * What the journal's records say, as JSON payloads of record-format's frames, and
 * how they are replayed into memory stores, one per notebook.
 *
 * A record of a notebook other than the shared one names it (`nb`); the shared notebook's carry
 * none, so a journal written without user tokens reads the same with them.
 *   {"t":"c","s":7,"id":1700000000000,"m":1700000000000,"json":"{...}","key":["k","fp",1700086400000]}
 *   {"t":"u","s":8,"p":7,"m":1700000000500,"json":"{...}","nb":"user:ann"}
 *   {"t":"d","s":9,"p":7,"id":1700000000000}
 *   a batch, whose writes are replayed all or none, as one record with its key and answer:
 *   {"t":"b","w":[{"t":"c",...},{"t":"u",...}],"key":["k","fp",1700086400000,1700000000000,"{...}"]}
 *   a snapshot (compaction, import) at the start of the file: per notebook an "image" record,
 *   {"t":"image","s":9,"hs":0,"last":1700000000000,"nb":"user:ann"}, then its "n" (a note), "h"
 *   (a change of the history) and "k" (an idempotency key) records.
 */
export type Payload =
  | WritePayload
  | {
      t: 'b'
      w: WritePayload[]
      key?: [key: string, fingerprint: string, expires: number, modified: number, body: string]
      nb?: string
    }
  | { t: 'image'; s: number; hs: number; last: number | null; nb?: string }
  | { t: 'n'; p: number; m: number; etag: string; json: string }
  | ({ t: 'h' } & Change)
  | { t: 'k'; k: string; f: string; x: number; m: number; etag: string; json: string }

/** The payload of one write. */
export type WritePayload =
  | {
      t: 'c'
      s: number
      id: number
      m: number
      json: string
      key?: [key: string, fingerprint: string, expires: number]
      nb?: string
    }
  | { t: 'u'; s: number; p: number; m: number; json: string; nb?: string }
  | { t: 'd'; s: number; p: number; id: number; nb?: string }

export type BatchKeyPayload = Extract<Payload, { t: 'b' }>['key']

/**
 * The snapshot records of one notebook's image, in the order replayJournal reads them (an import
 * writes them too); `notebook` is named in the head unless it is the shared one.
 */
export function imageRecords(image: StoreImage, notebook = SHARED_NOTEBOOK): Buffer[] {
  const frames: Buffer[] = []
  const add = (payload: Payload) => frames.push(encodeRecord(JSON.stringify(payload)))
  const last = Number.isFinite(image.lastId) ? image.lastId : null
  const head: Payload = { t: 'image', s: image.sequence, hs: image.historyStart, last }
  add(notebook === SHARED_NOTEBOOK ? head : { ...head, nb: notebook })
  for (const { position: p, modified: m, etag, json } of image.notes)
    add({ t: 'n', p, m, etag, json })
  for (const change of image.history) add({ t: 'h', ...change })
  for (const [k, { fingerprint: f, expires: x, note }] of image.keys) {
    add({ t: 'k', k, f, x, m: note.modified, etag: note.etag, json: note.json })
  }
  return frames
}

/** A record that does not follow from the ones before it: where it is and what is wrong. */
export class JournalDamage extends Error {
  readonly offset: number
  constructor(offset: number, message: string) {
    super(message)
    this.offset = offset
  }
}

/**
 * Replays `records` into the memory stores of their notebooks (`storeOf`, which makes a missing
 * one): the images at the start, then every write in order.
 * @throws JournalDamage naming the first record that does not follow
 */
export function replayJournal(
  records: readonly DecodedRecord[],
  storeOf: (notebook: string) => MemoryNoteStore,
): void {
  let i = 0
  try {
    while (i < records.length && parse(records[i] as DecodedRecord).t === 'image') {
      i = loadImage(storeOf, records, i)
    }
    for (; i < records.length; i++) {
      const payload = parse(records[i] as DecodedRecord)
      const notebook = (payload as { nb?: unknown }).nb ?? SHARED_NOTEBOOK
      if (typeof notebook !== 'string') throw new Error('a notebook name that is not a string')
      replayRecord(storeOf(notebook), payload)
    }
  } catch (err) {
    if (err instanceof JournalDamage) throw err
    const offset = (records[i] as DecodedRecord | undefined)?.offset ?? 0
    throw new JournalDamage(offset, (err as Error).message)
  }
}

/** Loads the image that starts at records[start]; returns the index of the first record after it. */
function loadImage(
  storeOf: (notebook: string) => MemoryNoteStore,
  records: readonly DecodedRecord[],
  start: number,
): number {
  const head = parse(records[start] as DecodedRecord) as Extract<Payload, { t: 'image' }>
  const notes: ImageNote[] = []
  const history: Change[] = []
  const keys: [string, RememberedKey][] = []
  let i = start + 1
  for (; i < records.length; i++) {
    const payload = parse(records[i] as DecodedRecord)
    if (payload.t === 'n') {
      notes.push({
        position: payload.p,
        modified: payload.m,
        etag: payload.etag,
        json: payload.json,
      })
    } else if (payload.t === 'h') {
      const { type, version, sequence, data } = payload
      history.push({ type, version, sequence, data })
    } else if (payload.t === 'k') {
      const note = { json: payload.json, etag: payload.etag, modified: payload.m }
      keys.push([payload.k, { fingerprint: payload.f, expires: payload.x, note }])
    } else break
  }
  try {
    storeOf(head.nb ?? SHARED_NOTEBOOK).load({
      sequence: head.s,
      historyStart: head.hs,
      lastId: head.last ?? Number.NEGATIVE_INFINITY,
      notes,
      history,
      keys,
    })
  } catch (err) {
    throw new JournalDamage((records[start] as DecodedRecord).offset, (err as Error).message)
  }
  return i
}

function replayRecord(memory: MemoryNoteStore, payload: Payload): void {
  switch (payload.t) {
    case 'c': {
      const { s: sequence, id, m: modified, json, key } = payload
      memory.replay({ type: 'created', sequence, id, json, modified })
      if (key !== undefined) {
        const note = { json, etag: etagOf(memory.version()), modified }
        memory.remember(key[0], { fingerprint: key[1], expires: key[2], note }, modified)
      }
      return
    }
    case 'u':
      memory.replay({
        type: 'updated',
        sequence: payload.s,
        position: payload.p,
        json: payload.json,
        modified: payload.m,
      })
      return
    case 'd':
      memory.replay({ type: 'deleted', sequence: payload.s, position: payload.p, id: payload.id })
      return
    case 'b': {
      for (const write of payload.w) {
        if ((write as Payload).t === 'b') throw new Error('a batch inside a batch')
        replayRecord(memory, write)
      }
      if (payload.key !== undefined) {
        const [key, fingerprint, expires, modified, body] = payload.key
        const note = { json: body, etag: '', modified }
        memory.remember(key, { fingerprint, expires, note }, modified)
      }
      return
    }
    default:
      throw new Error(`a record of type ${JSON.stringify(payload.t)} out of place`)
  }
}

function parse(record: DecodedRecord): Payload {
  const payload: unknown = parseJson(record.payload)
  if (typeof payload !== 'object' || payload === null || !('t' in payload)) {
    throw new Error('a record that is not a journal entry')
  }
  return payload as Payload
}
