import { crc32 } from 'node:zlib'

/**
 * The checksummed record frame of the service's journal and of the client's file storage, after
 * LevelDB's log format: `[u32 BE length][u32 BE crc32 of payload][payload]`, the payload UTF-8.
 * 'hi' -> 00 00 00 02 | d8 93 2a ac | 68 69. What a file puts before its first record (a header
 * line) and what a payload says is each caller's own; this module knows only the frames.
 */

/** Frame bytes before a payload: its length and its checksum. */
export const FRAME = 8
/**
 * The largest payload length read as a record: larger than any record either file writes (a note
 * is at most BODY_LIMIT, 64 MiB, escaped twice over), so a length above it is damage.
 */
export const MAX_PAYLOAD = 1 << 30

/** One record's bytes: its frame, then the payload. */
export function encodeRecord(payload: string): Buffer {
  const body = Buffer.from(payload)
  const frame = Buffer.allocUnsafe(FRAME + body.length)
  frame.writeUInt32BE(body.length, 0)
  frame.writeUInt32BE(crc32(body), 4)
  body.copy(frame, FRAME)
  return frame
}

/** What the records from an offset on hold: all read up to `end`, or damage at `offset`. */
export type Scanned =
  | { readonly ok: true; readonly end: number }
  | { readonly ok: false; readonly offset: number; readonly reason: string }

/**
 * Reads the records of `bytes` from `start`, calling `visit` with each payload and where its
 * frame starts, in order (an exception from `visit` stops the scan). Damage is told apart from a
 * torn tail, the trace of a crash during a write, which is not an error: the records before it
 * are all there and `end` is where they stop. A torn tail is damage that reaches the end of the
 * bytes: a frame or payload cut short, a bad checksum on the last record, or any damage followed
 * by zeros only (a file system may grow a file before its data reaches the disk, leaving zeros).
 * A write is only acknowledged after its fsync, so a torn tail never holds an acknowledged write;
 * a bad record with good bytes after it does, and is returned as { ok: false, offset, reason }.
 */
export function scanRecords(
  bytes: Buffer,
  start: number,
  visit: (payload: string, offset: number) => void,
): Scanned {
  let offset = start
  while (offset < bytes.length) {
    const damage = recordDamage(bytes, offset)
    if (damage !== undefined) {
      if (damage.torn || zerosFrom(bytes, offset)) break
      return { ok: false, offset, reason: damage.reason }
    }
    const length = bytes.readUInt32BE(offset)
    visit(bytes.toString('utf8', offset + FRAME, offset + FRAME + length), offset)
    offset += FRAME + length
  }
  return { ok: true, end: offset }
}

/**
 * What is wrong with the record at `offset`, and whether it reaches the end of the bytes;
 * undefined for a whole record whose checksum matches. A length of 0 or above MAX_PAYLOAD is
 * damage that no torn write leaves ('a record length of 0').
 */
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

/** Whether every byte from `offset` on is zero (true when there are none). */
function zerosFrom(bytes: Buffer, offset: number): boolean {
  for (let i = offset; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}
