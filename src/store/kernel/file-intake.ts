import { createHash } from 'node:crypto'
import { FileTooLargeError } from '../files.js'
import { StoreFullError } from '../types.js'

/** What an upload read to its end was: its id (the hex SHA-256 of its bytes) and its length. */
export interface Intake {
  readonly id: string
  readonly size: number
}

/**
 * Reads `body` to its end, hashing and counting its bytes as they arrive and handing each chunk to
 * `keep` (awaited, so a slow disk slows the reader rather than filling memory). Throws
 * FileTooLargeError as soon as more than `maxFileBytes` have arrived, and whatever `roomFor`
 * throws (StoreFullError) when asked, after each chunk, whether that many bytes still fit.
 */
export async function takeIn(
  body: AsyncIterable<Uint8Array>,
  maxFileBytes: number,
  keep: (chunk: Buffer) => void | Promise<void>,
  roomFor: (size: number) => void,
): Promise<Intake> {
  const hash = createHash('sha256')
  let size = 0
  for await (const piece of body) {
    const chunk = Buffer.isBuffer(piece)
      ? piece
      : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength)
    size += chunk.length
    if (size > maxFileBytes) throw new FileTooLargeError(maxFileBytes)
    roomFor(size)
    hash.update(chunk)
    const kept = keep(chunk)
    if (kept !== undefined) await kept
  }
  return { id: hash.digest('hex'), size }
}

/**
 * The room files have: a notebook's bytes against its cap and the service's against its own.
 * Throws StoreFullError naming the cap, the notebook's before the service's, and nothing of any
 * other notebook.
 */
export function checkFileRoom(
  notebookBytes: number,
  serviceBytes: number,
  more: number,
  limits: { readonly maxNotebookBytes: number; readonly maxBytes: number },
): void {
  if (notebookBytes + more > limits.maxNotebookBytes) {
    throw new StoreFullError(
      `This notebook holds its maximum of ${limits.maxNotebookBytes} bytes of files.`,
      'Delete files to make room.',
    )
  }
  if (serviceBytes + more > limits.maxBytes) {
    throw new StoreFullError(
      `The service holds its maximum of ${limits.maxBytes} bytes of files.`,
      'Its room is shared by every notebook; try again later.',
    )
  }
}
