import { Readable } from 'node:stream'
import {
  bytesHeld,
  UploadBusyError,
  type UploadInfo,
  type UploadStaging,
  type UploadState,
  type UploadsHeld,
} from '../uploads.js'

interface Held {
  state: UploadState
  chunks: Buffer[]
}

/** Uploads in memory: their parts as they arrived, until they become files (or go). */
export class MemoryUploads implements UploadStaging {
  readonly #uploads = new Map<string, Held>()

  async create(info: UploadInfo): Promise<void> {
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
        const chunk = Buffer.from(piece)
        room(held.state.offset + chunk.length)
        held.chunks.push(chunk)
        held.state = { ...held.state, offset: held.state.offset + chunk.length, touched }
      }
    } finally {
      held.state = { ...held.state, touched }
    }
    return held.state.offset
  }

  read(id: string): Readable {
    return Readable.from(this.#uploads.get(id)?.chunks ?? [])
  }

  async finish(id: string, file: string): Promise<void> {
    const held = this.#uploads.get(id)
    if (held === undefined) return
    held.chunks = []
    held.state = { ...held.state, file }
  }

  async remove(id: string): Promise<void> {
    this.#uploads.delete(id)
  }

  async drop(notebook: string): Promise<void> {
    for (const [id, held] of this.#uploads) {
      if (held.state.notebook === notebook) this.#uploads.delete(id)
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
