import type { Capacity } from '../kernel/capacity.js'

/**
 * The room a memory store's files and unfinished uploads take in its Capacity: they are held in
 * the same memory as the notes, so they count toward the same byte cap (MAX_STORE_BYTES), each at
 * its byte length. An upload's bytes count as they arrive; read back to become a file, the stream
 * that carries them says how many are counted already, so that the file they become needs no room
 * twice: an upload of 600 bytes into a cap of 1000 with 300 of notes becomes a file, although
 * 300 + 600 + 600 > 1000.
 */
export class FileRoom {
  readonly #capacity: Capacity
  /** Streams of bytes already counted (an upload's, read to become a file), and how many. */
  readonly #carried = new WeakMap<object, number>()

  constructor(capacity: Capacity) {
    this.#capacity = capacity
  }

  /**
   * Throws StoreFullError unless `bytes` more of files fit beside the notes; the bytes `body`
   * carries are counted already.
   */
  check(bytes: number, body?: object): void {
    const carried = body === undefined ? 0 : (this.#carried.get(body) ?? 0)
    this.#capacity.roomForFiles(bytes - carried)
  }

  /** Records `bytes` more of files (fewer when negative). */
  add(bytes: number): void {
    this.#capacity.addFiles(bytes)
  }

  /** Marks `stream` as bringing `bytes` that are counted already (an upload's). */
  carry(stream: object, bytes: number): void {
    this.#carried.set(stream, bytes)
  }
}
