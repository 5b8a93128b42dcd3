import {
  closeSync,
  createReadStream,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs'
import { type FileHandle, open, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { replaceFile } from '../../durable/file-steps.js'
import {
  bytesHeld,
  UploadBusyError,
  type UploadInfo,
  type UploadRoom,
  type UploadStaging,
  type UploadState,
  type UploadsHeld,
} from '../uploads.js'

/*
 * Uploads of a DATA_FILE store, in a folder beside the journal (`<DATA_FILE>.uploads/`): for each,
 * `<id>.json` (what it is, and the file it became once finished: written whole, atomically) and
 * `<id>.part` (its bytes so far, appended, fsynced before each part is answered). The offset is
 * the length of `.part`, so a crash keeps every acknowledged byte and at most some bytes after
 * them, which the client's next HEAD learns and does not send again. Read at start-up.
 *
 * An unfinished upload's bytes count toward the caps of files through `files` (the uploadRoom of
 * the journal's files, which it becomes one of) as they arrive, each part's before it is written.
 */

/** An upload id as this folder names its files: the id's own characters only. */
const ID = /^[A-Za-z0-9_-]{16,64}$/

export class UploadFolder implements UploadStaging {
  readonly #folder: string
  readonly #uploads = new Map<string, UploadState>()
  /** Uploads being appended to now: one append at a time per upload. */
  readonly #busy = new Set<string>()
  readonly #files: UploadRoom | undefined

  constructor(folder: string, files?: UploadRoom) {
    this.#folder = folder
    this.#files = files
    mkdirSync(folder, { recursive: true })
    const names = readdirSync(folder)
    for (const name of names) {
      if (name.endsWith('.tmp')) rmSync(join(folder, name), { force: true })
      // Bytes of an upload whose record was never written (a crash inside create) or is gone.
      if (name.endsWith('.part') && !names.includes(`${name.slice(0, -'.part'.length)}.json`)) {
        rmSync(join(folder, name), { force: true })
      }
      if (!name.endsWith('.json')) continue
      const id = name.slice(0, -'.json'.length)
      if (!ID.test(id)) continue
      const kept = JSON.parse(readFileSync(join(folder, name), 'utf8')) as UploadState
      const part = this.#part(id)
      let offset = kept.file === undefined ? 0 : kept.length
      let touched = kept.touched
      if (kept.file === undefined) {
        try {
          const stats = statSync(part)
          offset = Math.min(stats.size, kept.length)
          touched = Math.max(touched, stats.mtimeMs)
        } catch {
          offset = 0
        }
      }
      this.#uploads.set(id, { ...kept, offset, touched })
      if (kept.file === undefined) files?.hold(id, kept.notebook, offset, false)
    }
  }

  async create(info: UploadInfo): Promise<void> {
    const state: UploadState = { ...info, offset: 0, touched: info.created, file: undefined }
    const part = await open(this.#part(info.id), 'a')
    try {
      await part.sync()
    } finally {
      await part.close()
    }
    await this.#record(state)
    this.#uploads.set(info.id, state)
  }

  async state(id: string): Promise<UploadState | undefined> {
    return this.#uploads.get(id)
  }

  async append(
    id: string,
    at: number,
    body: AsyncIterable<Uint8Array>,
    room: (offset: number) => void,
    touched: number,
  ): Promise<number> {
    const state = this.#uploads.get(id)
    if (state === undefined || state.offset !== at || this.#busy.has(id)) {
      throw new UploadBusyError(id)
    }
    this.#busy.add(id)
    let part: FileHandle
    try {
      // Not 'a': each byte is written at its offset, so bytes of a write that failed part way
      // (a full disk) are written over by the next part rather than shifting it.
      part = await open(this.#part(id), 'r+')
    } catch (err) {
      // Not opened (removed meanwhile, a full disk): the upload is not left busy.
      this.#busy.delete(id)
      throw err
    }
    let offset = state.offset
    let synced = false
    try {
      for await (const piece of body) {
        room(offset + piece.byteLength)
        if (this.#uploads.get(id) !== state) throw new UploadBusyError(id)
        this.#files?.hold(id, state.notebook, offset + piece.byteLength)
        // In order, each write awaited: a slow disk slows the reader, not memory.
        for (let done = 0; done < piece.byteLength; ) {
          const { bytesWritten } = await part.write(
            piece,
            done,
            piece.byteLength - done,
            offset + done,
          )
          done += bytesWritten
        }
        offset += piece.byteLength
      }
    } finally {
      try {
        await part.sync()
        synced = true
      } finally {
        await part.close()
        this.#busy.delete(id)
        // Only what is on disk counts; an upload removed meanwhile (expired, its notebook gone)
        // stays removed, its bytes with it.
        if (this.#uploads.get(id) === state) {
          const kept = synced ? offset : state.offset
          this.#files?.hold(id, state.notebook, kept, false)
          this.#uploads.set(id, { ...state, offset: kept, touched })
        } else {
          await rm(this.#part(id), { force: true })
        }
      }
    }
    return offset
  }

  read(id: string): Readable {
    const length = this.#uploads.get(id)?.length ?? 0
    // Its bytes up to its length, never more.
    return length === 0 ? Readable.from([]) : createReadStream(this.#part(id), { end: length - 1 })
  }

  async finish(id: string, file: string): Promise<void> {
    const state = this.#uploads.get(id)
    if (state === undefined) return
    const finished = { ...state, file }
    await this.#record(finished)
    this.#uploads.set(id, finished)
    this.#files?.release(id)
    await rm(this.#part(id), { force: true })
  }

  async remove(id: string): Promise<void> {
    this.#uploads.delete(id)
    this.#files?.release(id)
    await rm(join(this.#folder, `${id}.json`), { force: true })
    await rm(this.#part(id), { force: true })
  }

  async drop(notebook: string): Promise<void> {
    for (const state of [...this.#uploads.values()]) {
      if (state.notebook === notebook) await this.remove(state.id)
    }
  }

  async list(): Promise<readonly UploadState[]> {
    return [...this.#uploads.values()]
  }

  async held(notebook: string, except: string | undefined): Promise<UploadsHeld> {
    return bytesHeld(this.#uploads.values(), notebook, except)
  }

  #part(id: string): string {
    return join(this.#folder, `${id}.part`)
  }

  async #record(state: UploadState): Promise<void> {
    const fd = await replaceFile(
      join(this.#folder, `${state.id}.json`),
      Buffer.from(JSON.stringify(state)),
    )
    closeSync(fd)
  }
}
