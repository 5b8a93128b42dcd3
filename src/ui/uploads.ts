/**
 * The files attached to notes, as the replica keeps them: `replica.attachFile` stores the bytes
 * on the device and sends them while it syncs, then writes the reference into the note. This
 * module draws each file's line under its note from `replica.files()` at each 'files' event
 * (its progress while it goes, "waiting to upload" with Cancel while it waits, a refusal with
 * Dismiss), says "Attached" once one is sent, and moves the files an older page kept in a
 * database of its own into the replica.
 */
import { explain } from './api.js'
import { humanSize } from './attachments.js'
import type { Replica, ReplicaFile } from './client-parts.js'
import { h, replaceChildren } from './dom.js'

/** What the uploads need from the page. */
export interface UploadHost {
  /** The uploads of the note `key` changed (one began, moved on, waits, or ended). */
  changed(key: string): void
  /** Says, at the note `key` (or at the top when it is not shown), what became of a file. */
  say(key: string, text: string, kind: 'status' | 'error'): void
}

/** Why the service refused a file, in words: a 413 says the limit (its problem's detail). */
function refusal(file: ReplicaFile): string {
  const { status = 0, detail } = file
  if (status === 413) return `“${file.name}” is too large to attach. ${detail}`
  // 0: the device lost its bytes; 404: its note was deleted; 400: its files field is no list.
  const why =
    status === 0 || status === 404 || status === 400 ? detail : explain({ status, detail })
  return `“${file.name}” was not attached. ${why}`
}

/** The files of one notebook's replica, shown under their notes. */
export class Uploads {
  readonly #replica: Replica
  readonly #host: UploadHost
  /** Each file's line, by its key, as last drawn (and the state it was drawn in). */
  readonly #lines = new Map<string, { file: ReplicaFile; element: HTMLLIElement }>()
  /** Files the person cancelled or dismissed here: their end is no "Attached". */
  readonly #dropped = new Set<string>()
  readonly #unsubscribe: () => void

  constructor(replica: Replica, host: UploadHost) {
    this.#replica = replica
    this.#host = host
    this.#unsubscribe = replica.subscribe((event) => {
      if (event.type === 'files') this.#refresh()
    })
    this.#refresh()
  }

  /** How many files wait to be sent (or are on their way): not the refused ones. */
  waiting(): number {
    return this.#replica.files().filter((file) => file.state !== 'refused').length
  }

  /** The lines shown under the note `key`. */
  of(key: string): HTMLLIElement[] {
    return [...this.#lines.values()].filter((l) => l.file.entry === key).map((l) => l.element)
  }

  /** Attaches `file` to the note `key`: kept on the device, and sent as soon as it can be. */
  async attach(key: string, file: File): Promise<void> {
    try {
      await this.#replica.attachFile(key, file, { name: file.name })
      if (!navigator.onLine || !this.#replica.online) {
        this.#host.say(key, `“${file.name}” will be uploaded when the network is back.`, 'status')
      }
    } catch (err) {
      // This device could not keep it (its storage is full, say), or the note is gone.
      this.#host.say(key, `“${file.name}” was not attached. ${explain(err)}`, 'error')
    }
  }

  close(): void {
    this.#unsubscribe()
  }

  /** Draws the lines again from replica.files(), telling each note whose lines changed. */
  #refresh(): void {
    const touched = new Set<string>()
    const now = new Map(this.#replica.files().map((file) => [file.key, file]))
    for (const [key, { file }] of this.#lines) {
      if (now.has(key)) continue
      this.#lines.delete(key)
      touched.add(file.entry)
      if (!this.#dropped.delete(key) && file.state !== 'refused') {
        this.#host.say(file.entry, `Attached “${file.name}”.`, 'status')
      }
    }
    for (const file of now.values()) {
      // On its way off the device (cancelled, dismissed, or its note gone).
      if (this.#dropped.has(file.key)) continue
      const line = this.#lines.get(file.key)
      if (line !== undefined && sameLine(line.file, file)) continue
      if (file.state === 'refused' && line?.file.state !== 'refused') {
        this.#host.say(file.entry, refusal(file), 'error')
        // A note gone has no line to show it at: said (at the top), and taken off the device.
        if (file.status === 404) {
          void this.#drop(file.key)
          continue
        }
      }
      const element = line?.element ?? h('li', { class: 'upload' })
      this.#draw(element, file, line?.file)
      this.#lines.set(file.key, { file, element })
      touched.add(file.entry)
    }
    for (const key of touched) this.#host.changed(key)
  }

  /** The line of `file`: its name and size, then its progress, "waiting to upload", or why not. */
  #draw(element: HTMLLIElement, file: ReplicaFile, before: ReplicaFile | undefined): void {
    const progress = element.querySelector('progress')
    // While sending, only the progress moves: the rest of the line stays as it is.
    if (file.state === 'sending' && before?.state === 'sending' && progress !== null) {
      progress.value = file.sent
      return
    }
    const name = h('span', { class: 'name' }, file.name)
    const size = ` ${humanSize(file.size)} · `
    // Offline, the replica's tries fail at once: the file is shown waiting all along.
    if (file.state === 'sending' && navigator.onLine) {
      const bar = h('progress', { max: String(file.size || 1), value: String(file.sent) })
      bar.setAttribute('aria-label', `Uploading ${file.name}`)
      replaceChildren(element, name, size, bar)
      return
    }
    const refused = file.state === 'refused'
    const button = h(
      'button',
      {
        type: 'button',
        class: 'link remove',
        'aria-label': `${refused ? 'Dismiss' : 'Cancel uploading'} ${file.name}`,
      },
      refused ? 'Dismiss' : 'Cancel',
    )
    button.addEventListener('click', () => void this.#cancel(file, refused))
    replaceChildren(
      element,
      name,
      size,
      refused ? 'not attached · ' : 'waiting to upload · ',
      button,
    )
  }

  async #cancel(file: ReplicaFile, refused: boolean): Promise<void> {
    await this.#drop(file.key)
    if (!refused) this.#host.say(file.entry, `“${file.name}” will not be uploaded.`, 'status')
  }

  async #drop(key: string): Promise<void> {
    this.#dropped.add(key)
    await this.#replica.removeFile(key).catch(() => {})
  }
}

function sameLine(a: ReplicaFile, b: ReplicaFile): boolean {
  return a.state === b.state && a.sent === b.sent
}

/** The database where pages before this one kept the files attached offline. */
const OLD_DATABASE = 'notes-service.uploads'
const OLD_STORE = 'uploads'

/** A file an older page kept: its notebook's replica database, the note's key in it. */
interface OldUpload {
  notebook: string
  note: string
  name: string
  type: string
  blob: Blob
}

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result)
    request.onerror = () => reject(request.error)
  })
}

/**
 * Moves the files an older page kept for the notebook `notebook` (its replica's database name)
 * into its replica, each deleted from the old database once the replica holds it; one whose
 * note is gone is said (`lost`) and deleted. The old database goes once it is empty. Tabs do
 * it one at a time (a Web Lock), so that a file is not moved twice.
 */
export async function moveOldUploads(
  notebook: string,
  replica: Replica,
  lost: (text: string) => void,
): Promise<void> {
  // Opening a database that is not there would make it: only one that exists is opened.
  const known = await indexedDB.databases?.().catch(() => undefined)
  if (known !== undefined && !known.some((db) => db.name === OLD_DATABASE)) return
  const move = async (): Promise<void> => {
    const opening = indexedDB.open(OLD_DATABASE)
    opening.onupgradeneeded = () =>
      opening.result.createObjectStore(OLD_STORE, { autoIncrement: true })
    const db = await done(opening)
    const store = () => db.transaction(OLD_STORE, 'readwrite').objectStore(OLD_STORE)
    try {
      const keys = await done(store().getAllKeys())
      for (const key of keys) {
        const old = (await done(store().get(key))) as OldUpload | undefined
        if (old?.notebook !== notebook) continue
        if (replica.get(old.note) === undefined) {
          lost(`“${old.name}”, kept on this device to be attached, was not: its note is gone.`)
        } else await replica.attachFile(old.note, old.blob, { name: old.name, type: old.type })
        await done(store().delete(key))
      }
      if ((await done(store().count())) > 0) return
    } finally {
      db.close()
    }
    await done(indexedDB.deleteDatabase(OLD_DATABASE))
  }
  // Web Locks are for secure origins only (localhost included).
  const locks = navigator.locks as LockManager | undefined
  await (locks === undefined ? move() : locks.request(OLD_DATABASE, move))
}
