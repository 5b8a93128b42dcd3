import type { FileLimits } from '../files.js'
import type { UploadRoom } from '../uploads.js'
import { checkFileRoom } from './file-intake.js'

/** What a store's files hold now: one notebook's bytes, and every notebook's. */
export interface FilesHeld {
  notebookBytes(notebook: string): number
  serviceBytes(): number
}

/**
 * The bytes unfinished uploads hold, counted live beside the files of a store one process keeps
 * (memory, DATA_FILE): each chunk of an upload is checked against the caps with every file and
 * every other upload's bytes, and counted, in one synchronous step, so two uploads growing at once
 * never pass a cap together, and a file put meanwhile sees what they hold. A put that makes an
 * upload its file names it: that upload's bytes are the file's own, not counted twice, and they
 * stop counting as the upload's in the step that counts them as the file's.
 */
export class HeldUploads implements UploadRoom {
  readonly #files: FilesHeld
  readonly #limits: FileLimits
  readonly #byUpload = new Map<string, { notebook: string; bytes: number }>()
  readonly #byNotebook = new Map<string, number>()
  #service = 0

  constructor(files: FilesHeld, limits: FileLimits) {
    this.#files = files
    this.#limits = limits
  }

  hold(id: string, notebook: string, bytes: number, checked = true): void {
    const held = this.#byUpload.get(id)
    const more = bytes - (held?.bytes ?? 0)
    if (checked && more > 0) this.check(notebook, more)
    this.#add(notebook, more)
    if (bytes === 0) this.#byUpload.delete(id)
    else this.#byUpload.set(id, { notebook, bytes })
  }

  release(id: string): void {
    const held = this.#byUpload.get(id)
    if (held === undefined) return
    this.#add(held.notebook, -held.bytes)
    this.#byUpload.delete(id)
  }

  /**
   * Throws StoreFullError unless `more` bytes of `notebook` fit beside its files and every
   * upload's bytes; those of upload `own` (a put of its bytes as a file) are the new bytes' own.
   */
  check(notebook: string, more: number, own?: string): void {
    const ownHeld = own === undefined ? undefined : this.#byUpload.get(own)
    const carried = ownHeld?.notebook === notebook ? ownHeld.bytes : 0
    checkFileRoom(
      this.#files.notebookBytes(notebook) + (this.#byNotebook.get(notebook) ?? 0) - carried,
      this.#files.serviceBytes() + this.#service - carried,
      more,
      this.#limits,
    )
  }

  #add(notebook: string, bytes: number): void {
    if (bytes === 0) return
    const now = (this.#byNotebook.get(notebook) ?? 0) + bytes
    if (now === 0) this.#byNotebook.delete(notebook)
    else this.#byNotebook.set(notebook, now)
    this.#service += bytes
  }
}
