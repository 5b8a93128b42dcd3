import { Readable } from 'node:stream'
import {
  bytesHeld,
  UploadBusyError,
  type UploadInfo,
  type UploadRoom,
  type UploadStaging,
  type UploadState,
  type UploadsHeld,
} from '../uploads.js'
import type { FileRoom } from './file-room.js'

interface Held {
  state: UploadState
  chunks: Buffer[]
}

/** The bytes an unfinished upload holds (a finished one's went with its parts). */
const heldBytes = (held: Held): number => (held.state.file === undefined ? held.state.offset : 0)

/**
 * Uploads in memory: their parts as they arrived, until they become files (or go). An unfinished
 * upload's bytes count as they arrive toward the caps of files of `files` (the space its files go
 * to) and, with a `room`, toward its store's byte cap; its termination, expiry or becoming a file
 * gives them back.
 */
export class MemoryUploads implements UploadStaging {
  readonly #uploads = new Map<string, Held>()
  readonly #room: FileRoom | undefined
  readonly #files: UploadRoom | undefined

  constructor({ room, files }: { room?: FileRoom; files?: UploadRoom } = {}) {
    this.#room = room
    this.#files = files
  }

  async create(info: UploadInfo): Promise<void> {
    // A first look: a length the store's room cannot hold now is refused at once, not part way.
    this.#room?.check(info.length)
    this.#uploads.set(info.id, {
      state: { ...info, offset: 0, touched: info.created, file: undefined },
      chunks: [],
    })
  }

  async state(id: string): Promise<UploadState | undefined> {
    return this.#uploads.get(id)?.state
  }

  async append(
    id: string,
    at: number,
    body: AsyncIterable<Uint8Array>,
    room: (offset: number) => void,
    touched: number,
  ): Promise<number> {
    const held = this.#uploads.get(id)
    if (held === undefined || held.state.offset !== at) throw new UploadBusyError(id)
    try {
      for await (const piece of body) {
        // Removed meanwhile (terminated, expired, its notebook gone): nothing more is kept.
        if (this.#uploads.get(id) !== held) throw new UploadBusyError(id)
        const chunk = Buffer.from(piece)
        const offset = held.state.offset
        room(offset + chunk.length)
        this.#files?.hold(id, held.state.notebook, offset + chunk.length)
        try {
          this.#room?.check(chunk.length)
        } catch (err) {
          this.#files?.hold(id, held.state.notebook, offset)
          throw err
        }
        this.#room?.add(chunk.length)
        held.chunks.push(chunk)
        held.state = { ...held.state, offset: held.state.offset + chunk.length, touched }
      }
    } finally {
      held.state = { ...held.state, touched }
    }
    return held.state.offset
  }

  read(id: string): Readable {
    const held = this.#uploads.get(id)
    const stream = Readable.from(held?.chunks ?? [])
    // Its bytes are counted as the upload's until it is finished: the file is not counted twice.
    if (held !== undefined) this.#room?.carry(stream, heldBytes(held))
    return stream
  }

  async finish(id: string, file: string): Promise<void> {
    const held = this.#uploads.get(id)
    if (held === undefined) return
    this.#room?.add(-heldBytes(held))
    this.#files?.release(id)
    held.chunks = []
    held.state = { ...held.state, file }
  }

  async remove(id: string): Promise<void> {
    const held = this.#uploads.get(id)
    if (held === undefined) return
    this.#room?.add(-heldBytes(held))
    this.#files?.release(id)
    this.#uploads.delete(id)
  }

  async drop(notebook: string): Promise<void> {
    for (const [id, held] of this.#uploads) {
      if (held.state.notebook === notebook) await this.remove(id)
    }
  }

  async list(): Promise<readonly UploadState[]> {
    return [...this.#uploads.values()].map((held) => held.state)
  }

  async held(notebook: string, except: string | undefined): Promise<UploadsHeld> {
    return bytesHeld(
      [...this.#uploads.values()].map((held) => held.state),
      notebook,
      except,
    )
  }
}
