import { parseJson } from '../../client/parse-json.js'
import { encodeRecord } from '../../durable/record-frame.js'
import type { Revision } from '../archive.js'
import type { DirectoryRecord } from '../directory.js'
import { etagOf } from '../kernel/version-token.js'
import type { MemoryNoteStore } from '../memory/memory-store.js'
import type { ImageNote, ImageTrashed, RememberedKey, StoreImage } from '../memory/records.js'
import type { Change } from '../types.js'
import { SHARED_NOTEBOOK } from '../types.js'
import type { DecodedRecord } from './record-format.js'

/**
 * What the journal's records say, as JSON payloads of record-format's frames, and
 * how they are replayed into memory stores, one per notebook, and into the directory.
 *
 * A record of a notebook other than the shared one names it (`nb`); the shared notebook's carry
 * none, so a journal written without user tokens reads the same with them.
 *   {"t":"c","s":7,"id":1700000000000,"m":1700000000000,"json":"{...}","key":["k","fp",1700086400000]}
 *   {"t":"u","s":8,"p":7,"m":1700000000500,"json":"{...}","nb":"user:ann"}
 *   {"t":"d","s":9,"p":7,"id":1700000000000,"tr":1700000000900}   ("tr": into the trash, at that time)
 *   a note put back from the trash (the one deleted by change 9), and notes purged from it:
 *   {"t":"r","s":10,"tr":9,"m":1700000001000}   {"t":"x","tr":[9,12]}
 *   a batch, whose writes are replayed all or none, as one record with its key and answer:
 *   {"t":"b","w":[{"t":"c",...},{"t":"u",...}],"key":["k","fp",1700086400000,1700000000000,"{...}"]}
 *   an act of the directory (notebooks, members, invitations), its DirectoryRecords in one record,
 *   replayed all or none and in order with the writes (a "remove" drops its notebook's notes,
 *   which are all before it):
 *   {"t":"dir","r":[{"t":"notebook","id":"n4Q...","name":"Trip","store":"nb:n4Q..."},
 *     {"t":"role","id":"n4Q...","user":"ann","role":"owner"}]}
 *   a snapshot (compaction, import) at the start of the file: a compaction's first rebuilds the
 *   directory as it is, a "dir" record per notebook (an import writes none); then per notebook an
 *   "image" record, {"t":"image","s":9,"hs":0,"last":1700000000000,"nb":"user:ann"}, then its "n" (a note),
 *   "h" (a change of the history) and "k" (an idempotency key) records; a note's past states follow
 *   it as "pv" records, oldest first, {"t":"pv","v":"k2x9q1.5","at":1700000000000,"c":"u","json":"{...}"},
 *   and the trash's notes come as "tn" records ("n" with "del", when, and "ds", the delete's
 *   sequence), each followed by its "pv" records.
 *   a file stored (its bytes in place before the record is written), and one removed:
 *   {"t":"f","id":"9f86d0…","z":1234,"ty":"image/png","m":1700000000000,"s":3,"nb":"user:ann"}
 *   {"t":"fd","id":"9f86d0…","nb":"user:ann"}
 *   a snapshot ends with the files: {"t":"fs","s":3} (the last file sequence given), then an
 *   "f" record per file held; a notebook's "remove" drops its files as it drops its notes.
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
  | { t: 'n'; p: number; m: number; etag: string; json: string; ch?: 'u' }
  | { t: 'tn'; p: number; m: number; etag: string; json: string; ch?: 'u'; del: number; ds: number }
  | { t: 'pv'; v: string; at: number; c: 'c' | 'u'; json: string }
  | ({ t: 'h' } & Change)
  | { t: 'k'; k: string; f: string; x: number; m: number; etag: string; json: string }
  | { t: 'dir'; r: readonly DirectoryRecord[] }
  | FilePayload

/** The payload of a record of files: one stored, one removed, the sequence a snapshot keeps. */
export type FilePayload =
  | { t: 'f'; id: string; z: number; ty: string; m: number; s: number; nb?: string }
  | { t: 'fd'; id: string; nb?: string }
  | { t: 'fs'; s: number }

const FILE_RECORDS: ReadonlySet<unknown> = new Set<FilePayload['t']>(['f', 'fd', 'fs'])

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
  | { t: 'd'; s: number; p: number; id: number; tr?: number; nb?: string }
  | { t: 'r'; s: number; tr: number; m: number; nb?: string }
  | { t: 'x'; tr: readonly number[]; nb?: string }

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
  const addPast = (past: readonly Revision[] | undefined) => {
    for (const { version: v, at, change, json } of past ?? []) {
      add({ t: 'pv', v, at, c: change === 'created' ? 'c' : 'u', json })
    }
  }
  for (const { position: p, modified: m, etag, json, change, past } of image.notes) {
    add(change === 'updated' ? { t: 'n', p, m, etag, json, ch: 'u' } : { t: 'n', p, m, etag, json })
    addPast(past)
  }
  for (const { note, deleted: del, sequence: ds } of image.trash ?? []) {
    const { position: p, modified: m, etag, json, change, past } = note
    const record: Payload = { t: 'tn', p, m, etag, json, del, ds }
    if (change === 'updated') record.ch = 'u'
    add(record)
    addPast(past)
  }
  for (const change of image.history) add({ t: 'h', ...change })
  for (const [k, { fingerprint: f, expires: x, note }] of image.keys) {
    add({ t: 'k', k, f, x, m: note.modified, etag: note.etag, json: note.json })
  }
  return frames
}

/** The directory's `records` in frames for a snapshot: one per notebook, with its members and invitations. */
export function directoryRecords(records: Iterable<DirectoryRecord>): Buffer[] {
  const frames: Buffer[] = []
  let act: DirectoryRecord[] = []
  const add = () => {
    if (act.length > 0)
      frames.push(encodeRecord(JSON.stringify({ t: 'dir', r: act } satisfies Payload)))
    act = []
  }
  for (const record of records) {
    if (record.t === 'notebook') add()
    act.push(record)
  }
  add()
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
 * one), the directory (`directory`, told each DirectoryRecord) and the files' index (`files`,
 * told each record of files): the snapshot at the start, then every write and act in order.
 * @throws JournalDamage naming the first record that does not follow
 */
export function replayJournal(
  records: readonly DecodedRecord[],
  storeOf: (notebook: string) => MemoryNoteStore,
  directory: (record: DirectoryRecord) => void,
  files: (payload: FilePayload) => void,
): void {
  let i = 0
  try {
    // Images only in the snapshot: before the first write.
    let snapshot = true
    while (i < records.length) {
      const payload = parse(records[i] as DecodedRecord)
      if (payload.t === 'image' && snapshot) {
        i = loadImage(storeOf, records, i)
        continue
      }
      if (payload.t === 'dir') {
        replayDirectory(payload.r, directory)
      } else if (FILE_RECORDS.has(payload.t)) {
        files(payload as FilePayload)
      } else {
        snapshot = false
        const notebook = (payload as { nb?: unknown }).nb ?? SHARED_NOTEBOOK
        if (typeof notebook !== 'string') throw new Error('a notebook name that is not a string')
        replayRecord(storeOf(notebook), payload)
      }
      i++
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
  const trash: ImageTrashed[] = []
  const history: Change[] = []
  const keys: [string, RememberedKey][] = []
  /** The past states of the last note read, which its "pv" records fill. */
  let past: Revision[] | undefined
  const noteOf = (payload: Extract<Payload, { t: 'n' | 'tn' }>): ImageNote => {
    past = []
    const note: ImageNote = {
      position: payload.p,
      modified: payload.m,
      etag: payload.etag,
      json: payload.json,
      past,
    }
    if (payload.ch === 'u') note.change = 'updated'
    return note
  }
  let i = start + 1
  for (; i < records.length; i++) {
    const payload = parse(records[i] as DecodedRecord)
    if (payload.t === 'n') {
      notes.push(noteOf(payload))
    } else if (payload.t === 'tn') {
      trash.push({ note: noteOf(payload), deleted: payload.del, sequence: payload.ds })
    } else if (payload.t === 'pv') {
      if (past === undefined) throw new Error('a past state before any note')
      const change = payload.c === 'c' ? 'created' : 'updated'
      past.push({ version: payload.v, at: payload.at, change, json: payload.json })
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
      trash,
    })
  } catch (err) {
    throw new JournalDamage((records[start] as DecodedRecord).offset, (err as Error).message)
  }
  return i
}

const DIRECTORY_RECORDS: ReadonlySet<unknown> = new Set<DirectoryRecord['t']>([
  'notebook',
  'name',
  'remove',
  'role',
  'leave',
  'invite',
  'spend',
  'withdraw',
])

function replayDirectory(records: unknown, directory: (record: DirectoryRecord) => void): void {
  if (!Array.isArray(records)) throw new Error('a directory record without its changes')
  for (const record of records as unknown[]) {
    const type = typeof record === 'object' && record !== null && (record as { t?: unknown }).t
    if (!DIRECTORY_RECORDS.has(type)) {
      throw new Error(`a directory change of type ${JSON.stringify(type)}`)
    }
    directory(record as DirectoryRecord)
  }
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
    case 'd': {
      const { s: sequence, p: position, id, tr: trashed } = payload
      memory.replay(
        trashed === undefined
          ? { type: 'deleted', sequence, position, id }
          : { type: 'deleted', sequence, position, id, trashed },
      )
      return
    }
    case 'r':
      memory.replay({
        type: 'untrashed',
        sequence: payload.s,
        trashed: payload.tr,
        modified: payload.m,
      })
      return
    case 'x':
      if (!Array.isArray(payload.tr)) throw new Error('a purge without its notes')
      memory.replay({ type: 'purged', trashed: payload.tr })
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
