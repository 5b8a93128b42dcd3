/**
 * Files on their way to the service, each attached to a note: sent with `files.upload` (its
 * progress shown in a <progress>), then the note gets its reference through the replica, as any
 * edit. With the network off, a file is kept in an IndexedDB database of its own (the Blob, the
 * note's key, its name and type) and shown as "waiting to upload"; it is sent when the network
 * returns, also after a reload.
 */
import { explain } from './api.js'
import { humanSize, withAttachment } from './attachments.js'
import { type FilesClient, NotesProblem, type Replica, type StoredFile } from './client-parts.js'
import { h, replaceChildren } from './dom.js'
import { planPatch } from './note-patch.js'

/** What the uploads need from the page. */
export interface UploadHost {
  files(): FilesClient | undefined
  replica(): Replica | undefined
  /** The uploads of the note `key` changed (one began, waits, or ended). */
  changed(key: string): void
  /** Says, at the note `key`, what became of one of its files. */
  say(key: string, text: string, kind: 'status' | 'error'): void
}

/** A file kept on this device until it is sent. */
interface Kept {
  /** Which notebook's copy the note is in (its replica's database name). */
  notebook: string
  /** The replica's key of the note. */
  note: string
  name: string
  type: string
  blob: Blob
}

interface Upload extends Kept {
  /** Its key in the database, while it is kept there. */
  seq: number | undefined
  sending: boolean
  readonly element: HTMLLIElement
}

const DATABASE = 'notes-service.uploads'
const STORE = 'uploads'
/** The wait before trying the kept files again after the network failed while sending. */
const RETRY_MS = 5_000

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result)
    request.onerror = () => reject(request.error)
  })
}

function openDatabase(): Promise<IDBDatabase> {
  const request = indexedDB.open(DATABASE, 1)
  request.onupgradeneeded = () => {
    request.result.createObjectStore(STORE, { autoIncrement: true })
  }
  return done(request)
}

/** Answers after which a file waits to be sent again: no key yet, or no service behind a gateway. */
const WAIT_STATUSES = new Set([401, 502, 503, 504])

/** Whether an upload failed for want of a network or a key (so it waits), rather than refused. */
function waits(err: unknown): boolean {
  return err instanceof NotesProblem ? WAIT_STATUSES.has(err.status) : true
}

/** The uploads of one notebook: the kept ones read at open, new ones as the person attaches. */
export class Uploads {
  readonly #notebook: string
  readonly #host: UploadHost
  /** No IndexedDB here (a private window): a file waits in memory only. */
  readonly #db: IDBDatabase | undefined
  readonly #uploads: Upload[] = []
  readonly #abort = new AbortController()
  #flushing = false
  #retry: ReturnType<typeof setTimeout> | undefined
  readonly #online = (): void => void this.flush()

  private constructor(notebook: string, host: UploadHost, db: IDBDatabase | undefined) {
    this.#notebook = notebook
    this.#host = host
    this.#db = db
    addEventListener('online', this.#online)
  }

  /** The uploads of the notebook whose replica's database is `notebook`, kept ones first. */
  static async open(notebook: string, host: UploadHost): Promise<Uploads> {
    let db: IDBDatabase | undefined
    let kept: [IDBValidKey[], Kept[]] = [[], []]
    try {
      db = await openDatabase()
      const store = db.transaction(STORE).objectStore(STORE)
      kept = await Promise.all([
        done(store.getAllKeys()),
        done(store.getAll() as IDBRequest<Kept[]>),
      ])
    } catch {
      // No IndexedDB here (a private window): files wait in memory only.
      db = undefined
    }
    const uploads = new Uploads(notebook, host, db)
    const [keys, values] = kept
    values.forEach((file, i) => {
      if (file.notebook === notebook) uploads.#add(file, keys[i] as number)
    })
    return uploads
  }

  /** How many files wait to be sent (kept, not under way). */
  waiting(): number {
    return this.#uploads.filter((upload) => upload.seq !== undefined && !upload.sending).length
  }

  /** The uploads shown under the note `key`. */
  of(key: string): HTMLLIElement[] {
    return this.#uploads.filter((upload) => upload.note === key).map((u) => u.element)
  }

  /** Attaches `file` to the note `key`: sent now, or kept until the network is back. */
  async attach(key: string, file: File): Promise<void> {
    const kept: Kept = {
      notebook: this.#notebook,
      note: key,
      name: file.name,
      type: file.type === '' ? 'application/octet-stream' : file.type,
      blob: file,
    }
    const upload = this.#add(kept, undefined)
    try {
      if (navigator.onLine && this.#host.replica()?.online !== false) {
        await this.#send(upload)
        return
      }
      await this.#keep(upload)
      this.#host.say(key, `“${file.name}” will be uploaded when the network is back.`, 'status')
    } catch (err) {
      // This device could not keep it (its storage is full, say).
      this.#drop(upload)
      this.#host.say(key, `“${file.name}” was not attached. ${explain(err)}`, 'error')
    }
  }

  /** Sends the files that wait, in the order they were attached, while the network holds. */
  async flush(): Promise<void> {
    if (this.#flushing || !navigator.onLine) return
    this.#flushing = true
    clearTimeout(this.#retry)
    try {
      const send = async (): Promise<void> => {
        for (const upload of [...this.#uploads]) {
          if (upload.sending || upload.seq === undefined) continue
          if (!(await this.#stillKept(upload))) {
            this.#drop(upload)
            continue
          }
          if (!(await this.#send(upload))) break
        }
      }
      // One tab at a time, so that two tabs do not send the same kept file (Web Locks are for
      // secure origins only: elsewhere each tab sends, and a note still refers to a file once).
      const locks = navigator.locks as LockManager | undefined
      await (locks === undefined ? send() : locks.request(DATABASE, send))
    } catch {
      // The database refused a read: the files stay kept, for the next flush.
    } finally {
      this.#flushing = false
    }
  }

  /** Stops: sends under way are ended, and their files kept for the next open. */
  close(): void {
    removeEventListener('online', this.#online)
    clearTimeout(this.#retry)
    this.#abort.abort()
  }

  #add(kept: Kept, seq: number | undefined): Upload {
    const upload: Upload = { ...kept, seq, sending: false, element: h('li', { class: 'upload' }) }
    this.#uploads.push(upload)
    this.#show(upload, undefined)
    return upload
  }

  /** The upload's line: its name and size, then its progress or "waiting to upload". */
  #show(upload: Upload, progress: HTMLProgressElement | undefined): void {
    const name = h('span', { class: 'name' }, upload.name)
    const size = ` ${humanSize(upload.blob.size)} · `
    if (progress !== undefined) {
      replaceChildren(upload.element, name, size, progress)
      return
    }
    const cancel = h(
      'button',
      { type: 'button', class: 'link remove', 'aria-label': `Cancel uploading ${upload.name}` },
      'Cancel',
    )
    cancel.addEventListener('click', () => void this.#cancel(upload))
    replaceChildren(upload.element, name, size, 'waiting to upload · ', cancel)
  }

  /** Sends one upload; false when the network failed (it is kept, and tried again later). */
  async #send(upload: Upload): Promise<boolean> {
    const files = this.#host.files()
    if (files === undefined) return false
    upload.sending = true
    const progress = h('progress', { max: String(upload.blob.size || 1), value: '0' })
    progress.setAttribute('aria-label', `Uploading ${upload.name}`)
    this.#show(upload, progress)
    this.#host.changed(upload.note)
    let stored: StoredFile
    try {
      stored = await files.upload(upload.blob, {
        type: upload.type,
        signal: this.#abort.signal,
        onProgress(sent, total) {
          progress.max = total || 1
          progress.value = sent
        },
      })
    } catch (err) {
      upload.sending = false
      // Ended by a switch to another notebook: kept, to go when this one opens again.
      if (this.#abort.signal.aborted) {
        await this.#keep(upload)
        return false
      }
      if (waits(err)) {
        await this.#keep(upload)
        // Without a key, the next flush comes with one (the notebook opened again).
        if (!(err instanceof NotesProblem)) {
          clearTimeout(this.#retry)
          this.#retry = setTimeout(() => void this.flush(), RETRY_MS)
        }
        return false
      }
      this.#host.say(upload.note, refusal(upload.name, err), 'error')
      await this.#forget(upload)
      return true
    }
    await this.#refer(upload, stored)
    await this.#forget(upload)
    return true
  }

  /** Puts the file's reference in its note (once: the same bytes are the same file). */
  async #refer(upload: Upload, stored: StoredFile): Promise<void> {
    const replica = this.#host.replica()
    const entry = replica?.get(upload.note)
    if (replica === undefined || entry === undefined) {
      this.#host.say(upload.note, `“${upload.name}” was uploaded, but its note is gone.`, 'error')
      return
    }
    const { id: _id, ...fields } = entry.note
    const file = { id: stored.id, name: upload.name, size: stored.size, type: stored.type }
    const after = withAttachment(fields, file)
    if (typeof after === 'string') {
      this.#host.say(upload.note, `“${upload.name}” was not attached. ${after}`, 'error')
      return
    }
    const plan = planPatch(fields, after)
    try {
      if (plan.kind === 'patch') {
        await replica.update(upload.note, plan.body, {
          mergePatch: plan.contentType === 'application/merge-patch+json',
        })
      }
      this.#host.say(upload.note, `Attached “${upload.name}”.`, 'status')
    } catch (err) {
      this.#host.say(upload.note, `“${upload.name}” was not attached. ${explain(err)}`, 'error')
    }
  }

  /** Keeps the upload in the database (once), shown as waiting. */
  async #keep(upload: Upload): Promise<void> {
    if (upload.seq === undefined && this.#db !== undefined) {
      const { notebook, note, name, type, blob } = upload
      const store = this.#db.transaction(STORE, 'readwrite').objectStore(STORE)
      upload.seq = (await done(store.add({ notebook, note, name, type, blob }))) as number
    }
    // Without a database it waits in memory: a key of its own marks it as waiting.
    upload.seq ??= -1
    this.#show(upload, undefined)
    this.#host.changed(upload.note)
  }

  async #stillKept(upload: Upload): Promise<boolean> {
    if (this.#db === undefined || upload.seq === undefined || upload.seq < 0) return true
    const store = this.#db.transaction(STORE).objectStore(STORE)
    return (await done(store.count(upload.seq))) > 0
  }

  async #cancel(upload: Upload): Promise<void> {
    if (upload.sending) return
    await this.#forget(upload)
    this.#host.say(upload.note, `“${upload.name}” will not be uploaded.`, 'status')
  }

  /** Done with the upload: out of the database and the list. */
  async #forget(upload: Upload): Promise<void> {
    const seq = upload.seq
    if (this.#db !== undefined && seq !== undefined && seq >= 0) {
      await done(this.#db.transaction(STORE, 'readwrite').objectStore(STORE).delete(seq))
    }
    this.#drop(upload)
  }

  #drop(upload: Upload): void {
    const at = this.#uploads.indexOf(upload)
    if (at >= 0) this.#uploads.splice(at, 1)
    this.#host.changed(upload.note)
  }
}

/** Why the service refused a file, in words: a 413 says the limit (its problem's detail). */
function refusal(name: string, err: unknown): string {
  if (err instanceof NotesProblem && err.status === 413) {
    return `“${name}” is too large to attach. ${err.detail}`
  }
  const why =
    err instanceof NotesProblem ? explain({ status: err.status, detail: err.detail }) : explain(err)
  return `“${name}” was not attached. ${why}`
}
