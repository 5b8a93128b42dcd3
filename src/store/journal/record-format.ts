import { crc32 } from 'node:zlib'

/**
 * The journal's bytes (DECISION 37), after LevelDB's log format: a header line naming the format
 * and the store's epoch, then records, each `[u32 BE length][u32 BE crc32 of payload][payload]`,
 * the payload UTF-8 JSON. 'notes-service journal 1 k2x9q1ab3c\n' then 8 + n bytes per record.
 */
const MAGIC = 'notes-service journal 1 '
/** Frame bytes before a payload: its length and its checksum. */
const FRAME = 8
/** Larger than any record we write (a note is at most BODY_LIMIT, 64 MiB, escaped twice over). */
const MAX_PAYLOAD = 1 << 30

/** 'k2x9q1ab3c' -> the header line's bytes. */
export function encodeHeader(epoch: string): Buffer {
  return Buffer.from(`${MAGIC}${epoch}\n`)
}

/** One record's bytes: its frame, then the payload. */
export function encodeRecord(payload: string): Buffer {
  const body = Buffer.from(payload)
  const frame = Buffer.allocUnsafe(FRAME + body.length)
  frame.writeUInt32BE(body.length, 0)
  frame.writeUInt32BE(crc32(body), 4)
  body.copy(frame, FRAME)
  return frame
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
 * The header and every record of a journal's bytes. Damage is told apart from a torn tail, the
 * trace of a crash during a write, which is not an error: the records before it are all there and
 * `end` is where they stop. A torn tail is damage that reaches the end of the file: a frame or
 * payload cut short, a bad checksum on the last record, or any damage followed by zeros only (a
 * file system may grow a file before its data reaches the disk, leaving zeros). A write is only
 * acknowledged after its fsync, so a torn tail never holds an acknowledged write; a bad record
 * with good ones after it does, and is refused: { ok: false, offset, reason }.
 */
export function decodeJournal(bytes: Buffer): Decoded | 'foreign' {
  const newline = bytes.indexOf(10)
  const header = newline === -1 ? '' : bytes.toString('latin1', 0, newline)
  const epoch = header.startsWith(MAGIC) ? header.slice(MAGIC.length) : ''
  if (!/^[0-9a-z]{1,16}$/.test(epoch)) return 'foreign'
  const records: DecodedRecord[] = []
  let offset = newline + 1
  while (offset < bytes.length) {
    const damage = recordDamage(bytes, offset)
    if (damage === undefined) {
      const length = bytes.readUInt32BE(offset)
      records.push({
        offset,
        payload: bytes.toString('utf8', offset + FRAME, offset + FRAME + length),
      })
      offset += FRAME + length
      continue
    }
    if (damage.torn || zerosFrom(bytes, offset)) break
    return { ok: false, offset, reason: damage.reason }
  }
  return { ok: true, epoch, records, end: offset }
}

/** What is wrong with the record at `offset`, and whether it reaches the end of the file. */
function recordDamage(
  bytes: Buffer,
  offset: number,
): { reason: string; torn: boolean } | undefined {
  if (bytes.length - offset < FRAME) return { reason: 'a record frame cut short', torn: true }
  const length = bytes.readUInt32BE(offset)
  if (length === 0 || length > MAX_PAYLOAD) {
    return { reason: `a record length of ${length}`, torn: false }
  }
  const end = offset + FRAME + length
  if (end > bytes.length) return { reason: 'a record cut short', torn: true }
  if (crc32(bytes.subarray(offset + FRAME, end)) !== bytes.readUInt32BE(offset + 4)) {
    return { reason: 'a record whose checksum does not match', torn: end === bytes.length }
  }
  return undefined
}

function zerosFrom(bytes: Buffer, offset: number): boolean {
  for (let i = offset; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}
