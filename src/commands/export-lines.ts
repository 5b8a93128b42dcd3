import { createReadStream } from 'node:fs'

/** A line of an export file, as UTF-8 text, and where the line after it starts. */
export interface Line {
  readonly text: string
  /** The byte offset in the file of the line after this one. */
  readonly next: number
}

/**
 * The lines of the file at `path` (of its bytes [start, end) when given), split at '\n' only, as
 * UTF-8 (split as bytes: a '\n' byte is never part of another character); the last may lack its
 * '\n'. A file that ends with '\n' has no empty last line: 'a\nb\n' -> 'a' (next 2), 'b' (next
 * 4); 'a\nb' -> 'a', 'b'.
 */
export async function* linesOf(
  path: string,
  range: { start: number; end: number } = { start: 0, end: Number.POSITIVE_INFINITY },
): AsyncGenerator<Line> {
  const { start, end } = range
  if (end <= start) return
  /** The bytes of a line not yet ended, from byte `offset` of the file. */
  let rest: Buffer | undefined
  let offset = start
  const stream = createReadStream(path, {
    start,
    ...(Number.isFinite(end) ? { end: end - 1 } : {}),
    // Never more than the range: a few lines of a small file read no more than they are.
    highWaterMark: Math.min(1 << 20, end - start),
  })
  for await (const chunk of stream) {
    const bytes = rest === undefined ? (chunk as Buffer) : Buffer.concat([rest, chunk as Buffer])
    let from = 0
    for (let end = bytes.indexOf(10); end !== -1; end = bytes.indexOf(10, from)) {
      yield { text: bytes.toString('utf8', from, end), next: offset + end + 1 }
      from = end + 1
    }
    offset += from
    rest = from === bytes.length ? undefined : bytes.subarray(from)
  }
  if (rest !== undefined) yield { text: rest.toString('utf8'), next: offset + rest.length }
}
