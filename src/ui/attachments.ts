/**
 * A note's attachments: the page keeps them in the note's `files` field, as
 * [{"id", "name", "size", "type"}] (the id is the file's, so the note refers to the file), and
 * shows each under the note: an image as itself, any other file as a link that downloads it. The
 * bytes come through the client (with the tab's key), as blob: URLs this view revokes when the
 * attachment or the note goes away.
 */
import { hasPath, type Note } from './api.js'
import type { FilesClient } from './client-parts.js'
import { h, replaceChildren } from './dom.js'
import type { Fields } from './note-patch.js'

/** The note's field the page owns. */
export const FILES_FIELD = 'files'

export interface Attachment {
  /** The file's id: the lowercase hex SHA-256 of its bytes. */
  id: string
  name: string
  size: number
  type: string
}

/** Shown as images (the service serves these inline). */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])

/** {id: '<64 hex>', name: 'a.png', size: 3, type: 'image/png'} -> true; {id: 'x'} -> false. */
function isAttachment(value: unknown): value is Attachment {
  const v = value as Partial<Attachment> | null
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.id === 'string' &&
    /^[0-9a-f]{64}$/.test(v.id) &&
    typeof v.name === 'string' &&
    typeof v.size === 'number' &&
    typeof v.type === 'string'
  )
}

/** The note's attachments (members of `files` the page did not write are left out). */
function attachmentsOf(note: Note): Attachment[] {
  const files = note[FILES_FIELD]
  return Array.isArray(files) ? files.filter(isAttachment) : []
}

/** Whether `files` holds attachments only (so the note's JSON need not show it). */
export function onlyAttachments(note: Note): boolean {
  const files = note[FILES_FIELD]
  return Array.isArray(files) && files.length > 0 && files.every(isAttachment)
}

/** Why the note cannot hold attachments (a `files` field of its own that is not a list), if so. */
export function cannotAttach(note: Fields): string | undefined {
  const files = note[FILES_FIELD]
  return files === undefined || Array.isArray(files)
    ? undefined
    : `This note’s “${FILES_FIELD}” field is not a list, so it cannot hold attachments.`
}

/** The note's fields without the attachment `id`; the field goes when nothing is left in it. */
export function withoutAttachment(note: Fields, id: string): Fields {
  const files = note[FILES_FIELD]
  if (!Array.isArray(files)) return note
  const left = files.filter((f) => !(isAttachment(f) && f.id === id))
  const { [FILES_FIELD]: _files, ...rest } = note
  return left.length === 0 ? rest : { ...rest, [FILES_FIELD]: left }
}

/** 999 -> '999 bytes', 12345 -> '12.3 KB', 5_000_000 -> '5 MB' (powers of 1000, as disks say). */
export function humanSize(bytes: number): string {
  if (bytes < 1000) return `${bytes} ${bytes === 1 ? 'byte' : 'bytes'}`
  const units = ['KB', 'MB', 'GB', 'TB']
  let value = bytes / 1000
  let unit = 0
  while (value >= 999.95 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return `${Number(value.toFixed(1)).toLocaleString('en')} ${units[unit]}`
}

/** What the view needs from the note around it. */
export interface AttachmentHost {
  /** The open notebook's files, or undefined while none is open. */
  files(): FilesClient | undefined
  /** The open notebook's API path ('/api', or '/api/notebooks/<id>'). */
  base(): string
  /** The person removes an attachment. */
  remove(file: Attachment): void
}

/** The attachments of one note, shown in one element kept across the note's renders. */
export class AttachmentView {
  readonly element = h('div', { class: 'attachments' })
  readonly #host: AttachmentHost
  /** Each attachment's bytes as a blob: URL, once read (undefined: the read failed). */
  readonly #urls = new Map<string, Promise<string | undefined>>()
  #disposed = false

  constructor(host: AttachmentHost) {
    this.#host = host
  }

  /** Shows the note's attachments, then the uploads still on their way (`waiting`). */
  show(note: Note, waiting: readonly HTMLElement[], label: string): void {
    const files = attachmentsOf(note)
    for (const [id, url] of this.#urls) {
      if (files.some((file) => file.id === id)) continue
      this.#urls.delete(id)
      void url.then((u) => u !== undefined && URL.revokeObjectURL(u))
    }
    const canChange = note.id === undefined || hasPath(note.id)
    const items = files.map((file) => this.#item(file, label, canChange))
    this.element.hidden = items.length === 0 && waiting.length === 0
    replaceChildren(
      this.element,
      items.length > 0 &&
        h('ul', { class: 'files', 'aria-label': `Attachments of ${label}` }, ...items),
      waiting.length > 0 &&
        h('ul', { class: 'files uploads', 'aria-label': `Uploads to ${label}` }, ...waiting),
    )
  }

  #item(file: Attachment, label: string, canChange: boolean): HTMLLIElement {
    const size = h('span', { class: 'size' }, humanSize(file.size))
    const remove = h(
      'button',
      { type: 'button', class: 'link remove', 'aria-label': `Remove ${file.name} from ${label}` },
      'Remove',
    )
    remove.addEventListener('click', () => this.#host.remove(file))
    const status = h('span', { class: 'message error' })
    const tail = [' ', size, canChange && ' · ', canChange && remove, status] as const
    if (IMAGE_TYPES.has(file.type)) {
      const image = h('img', { alt: file.name })
      void this.#url(file).then((url) => {
        if (url === undefined) status.textContent = ' The image could not be loaded.'
        else image.src = url
      })
      return h(
        'li',
        { class: 'file image' },
        h('figure', {}, image, h('figcaption', {}, file.name, ...tail)),
      )
    }
    const link = h(
      'a',
      {
        href: `${this.#host.base()}/files/${encodeURIComponent(file.id)}`,
        download: file.name,
        type: file.type,
      },
      file.name,
    )
    link.addEventListener('click', (event) => {
      if (link.href.startsWith('blob:')) return
      // The service needs the tab's key, which a plain link would not send: the bytes come
      // through the client, then the link downloads them from memory.
      event.preventDefault()
      status.textContent = ''
      void this.#url(file).then((url) => {
        if (url === undefined) {
          status.textContent = ' The file could not be downloaded. Try again.'
          return
        }
        link.href = url
        link.click()
      })
    })
    const known = this.#urls.get(file.id)
    void known?.then((url) => {
      if (url !== undefined) link.href = url
    })
    return h('li', { class: 'file' }, link, ...tail)
  }

  /** The file's bytes as a blob: URL, read once. */
  #url(file: Attachment): Promise<string | undefined> {
    let url = this.#urls.get(file.id)
    if (url === undefined) {
      const read = this.#read(file)
      // A read that failed (offline, say) is tried again on the next render.
      void read.then(
        (u) => u === undefined && this.#urls.get(file.id) === read && this.#urls.delete(file.id),
      )
      this.#urls.set(file.id, read)
      url = read
    }
    return url
  }

  async #read(file: Attachment): Promise<string | undefined> {
    const files = this.#host.files()
    if (files === undefined) return undefined
    try {
      const blob = await (await files.download(file.id)).blob()
      if (this.#disposed) return undefined
      return URL.createObjectURL(new Blob([blob], { type: file.type }))
    } catch {
      return undefined
    }
  }

  /** The note went away: every blob: URL made for it is revoked. */
  dispose(): void {
    this.#disposed = true
    for (const url of this.#urls.values()) {
      void url.then((u) => u !== undefined && URL.revokeObjectURL(u))
    }
    this.#urls.clear()
  }
}

/**
 * Files dropped on `element` go to `attach` while `accepts()` (the note is shown, not edited, and
 * may be changed); the element is marked `dropping` while files are over it.
 */
export function listenForDrops(
  element: HTMLElement,
  accepts: () => boolean,
  attach: (files: FileList | null) => void,
): void {
  const carriesFiles = (event: DragEvent): boolean =>
    accepts() && event.dataTransfer?.types.includes('Files') === true
  const over = (event: DragEvent): void => {
    if (!carriesFiles(event)) return
    event.preventDefault()
    if (event.dataTransfer !== null) event.dataTransfer.dropEffect = 'copy'
    element.classList.add('dropping')
  }
  element.addEventListener('dragenter', over)
  element.addEventListener('dragover', over)
  element.addEventListener('dragleave', (event) => {
    if (!element.contains(event.relatedTarget as Node | null)) element.classList.remove('dropping')
  })
  element.addEventListener('drop', (event) => {
    element.classList.remove('dropping')
    if (!carriesFiles(event)) return
    event.preventDefault()
    attach(event.dataTransfer?.files ?? null)
  })
}

/** A note's "Attach files…" button and the hidden picker it opens, whose files go to `attach`. */
export function attachControls(
  headingId: string,
  attach: (files: FileList | null) => void,
): [HTMLButtonElement, HTMLInputElement] {
  const picker = h('input', { type: 'file', multiple: true, hidden: true, tabindex: '-1' })
  picker.setAttribute('aria-label', 'Files to attach')
  const button = h(
    'button',
    { type: 'button', class: 'attach', 'aria-describedby': headingId },
    'Attach files…',
  )
  button.addEventListener('click', () => picker.click())
  picker.addEventListener('change', () => {
    attach(picker.files)
    picker.value = ''
  })
  return [button, picker]
}
