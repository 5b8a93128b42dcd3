import { scanRecords } from '../../durable/record-frame.js'

/**
 * The journal's bytes (DATA_FILE), after LevelDB's log format: a header line naming the format
 * and the store's epoch, then records, each `[u32 BE length][u32 BE crc32 of payload][payload]`,
 * the payload UTF-8 JSON. 'notes-service journal 1 k2x9q1ab3c\n' then 8 + n bytes per record.
 */
const MAGIC = 'notes-service journal 1 '

/** 'k2x9q1ab3c' -> the header line's bytes. */
export function encodeHeader(epoch: string): Buffer {
  return Buffer.from(`${MAGIC}${epoch}\n`)
}

export interface DecodedRecord {
  /** Where its frame starts in the file. */
  readonly offset: number
  readonly payload: string
}

export type Decoded =
  | {
      readonly ok: true
      readonly epoch: string
      readonly records: readonly DecodedRecord[]
      /** Where the good records end: the length the file should have. */
      readonly end: number
    }
  | { readonly ok: false; readonly offset: number; readonly reason: string }

/**
 * The header and every record of a journal's bytes. A torn tail (durable/record-frame.ts) is not
 * an error: the records before it are all there and `end` is where they stop. A bad record with
 * good ones after it holds an acknowledged write, and is refused: { ok: false, offset, reason }.
 */
export function decodeJournal(bytes: Buffer): Decoded | 'foreign' {
  const newline = bytes.indexOf(10)
  const header = newline === -1 ? '' : bytes.toString('latin1', 0, newline)
  const epoch = header.startsWith(MAGIC) ? header.slice(MAGIC.length) : ''
  if (!/^[0-9a-z]{1,16}$/.test(epoch)) return 'foreign'
  const records: DecodedRecord[] = []
  const scanned = scanRecords(bytes, newline + 1, (payload, offset) =>
    records.push({ offset, payload }),
  )
  if (!scanned.ok) return scanned
  return { ok: true, epoch, records, end: scanned.end }
}
