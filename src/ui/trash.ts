/**
 * The trash of the open notebook: the deleted notes the service keeps, most recently deleted
 * first, each with "Restore" and "Delete for good", and "Empty the trash" after a question. It
 * needs the network (the replica keeps no trash on the device). A viewer sees it, without the
 * buttons (style.css).
 */

import { explain } from './api.js'
import type { NotesClient } from './client-parts.js'
import { byId, h, replaceChildren } from './dom.js'
import { archiveClient, explainCall, GONE, offlineText } from './note-history.js'
import { noteName, timeOf } from './note-text.js'

/** A deleted note, as the client's `trash` answers it. */
type Deleted = Awaited<ReturnType<NotesClient['trash']>>['notes'][number]

const count = (n: number): string => `${n.toLocaleString('en')} ${n === 1 ? 'note' : 'notes'}`

export class TrashView {
  readonly #toggle = byId('trash-toggle', HTMLButtonElement)
  readonly #content = byId('trash-content', HTMLElement)
  readonly #status = byId('trash-status', HTMLElement)
  readonly #list = byId('trash-list', HTMLOListElement)
  readonly #more = byId('trash-more', HTMLButtonElement)
  readonly #actions = byId('trash-actions', HTMLElement)
  readonly #base: () => string
  readonly #announce: (text: string) => void
  /** Where the next page starts (its `after`), if any. */
  #next: string | undefined
  #total = 0
  #run = 0

  constructor(base: () => string, announce: (text: string) => void) {
    this.#base = base
    this.#announce = announce
    this.#toggle.addEventListener('click', () => {
      if (this.#content.hidden) void this.#open()
      else this.close()
    })
    this.#more.addEventListener('click', () => {
      if (this.#next !== undefined) void this.#load(this.#next)
    })
    byId('trash-refresh', HTMLButtonElement).addEventListener('click', () => void this.#open())
    this.#showEmptyButton()
  }

  /** Hidden and forgotten (another notebook is opened, or the person closes it). */
  close(): void {
    this.#run++
    this.#content.hidden = true
    this.#toggle.setAttribute('aria-expanded', 'false')
    this.#toggle.textContent = 'Show the trash'
    this.#list.replaceChildren()
    this.#status.textContent = ''
  }

  async #open(): Promise<void> {
    this.#content.hidden = false
    this.#toggle.setAttribute('aria-expanded', 'true')
    this.#toggle.textContent = 'Hide the trash'
    this.#showEmptyButton()
    await this.#load(undefined)
  }

  #say(text: string, kind: 'status' | 'error' = 'status'): void {
    this.#status.className = kind === 'error' ? 'message error' : 'message'
    this.#status.textContent = text
  }

  /** The first page, or with `after` the page that starts there, added to the list. */
  async #load(after: string | undefined): Promise<void> {
    const run = ++this.#run
    const offline = offlineText('The trash')
    if (offline !== undefined) {
      this.#say(offline, 'error')
      return
    }
    this.#say('Loading the trash…')
    let page: Awaited<ReturnType<NotesClient['trash']>>
    try {
      page = await archiveClient(this.#base()).trash({ limit: 100, after })
    } catch (err) {
      if (run === this.#run)
        this.#say(`The trash could not be loaded. ${explainCall(err)}`, 'error')
      return
    }
    if (run !== this.#run) return
    this.#total = page.total ?? page.notes.length
    this.#next = page.next
    const items = page.notes.map((entry) => this.#item(entry))
    if (after !== undefined) this.#list.append(...items)
    else replaceChildren(this.#list, ...items)
    this.#more.hidden = this.#next === undefined
    this.#actions.hidden = this.#total === 0
    this.#say(this.#total === 0 ? 'The trash is empty.' : `${count(this.#total)} in the trash.`)
  }

  #item(entry: Deleted): HTMLLIElement {
    const id = entry.note.id
    const name = noteName(entry.note)
    const restore = h('button', { type: 'button' }, 'Restore')
    const purge = h('button', { type: 'button', class: 'danger' }, 'Delete for good')
    const message = h('p', { class: 'message', role: 'status' })
    const item = h(
      'li',
      { class: 'note' },
      h(
        'article',
        { 'aria-label': name },
        h('h3', {}, name),
        h('p', { class: 'meta' }, `id ${JSON.stringify(id)} · deleted `, timeOf(entry.deleted_at)),
        h('div', { class: 'actions' }, restore, purge),
        message,
      ),
    )
    const act = async (
      button: HTMLButtonElement,
      call: (client: NotesClient, id: number | string) => Promise<unknown>,
      done: string,
    ) => {
      const offline = offlineText('The trash')
      if (offline !== undefined) {
        message.className = 'message error'
        message.textContent = offline
        return
      }
      button.disabled = true
      let why: string | undefined
      try {
        // A purge of a note no longer there answers false: the empty 404 of before.
        if ((await call(archiveClient(this.#base()), id as number | string)) === false) {
          why = explain(GONE)
        }
      } catch (err) {
        why = explainCall(err)
      }
      if (why !== undefined) {
        message.className = 'message error'
        message.textContent = `${button === restore ? 'Not restored' : 'Not deleted'}. ${why}`
        button.disabled = false
        return
      }
      this.#announce(`“${name}” ${done}.`)
      await this.#load(undefined)
      this.#toggle.focus()
    }
    restore.addEventListener(
      'click',
      () => void act(restore, (client, id) => client.restoreFromTrash(id), 'restored'),
    )
    purge.addEventListener(
      'click',
      () => void act(purge, (client, id) => client.purge(id), 'deleted for good'),
    )
    return item
  }

  /** "Empty the trash…", or its question. */
  #showEmptyButton(focus = false): void {
    const empty = h('button', { type: 'button', class: 'danger' }, 'Empty the trash…')
    empty.addEventListener('click', () => this.#confirmEmpty())
    replaceChildren(this.#actions, empty)
    if (focus) empty.focus()
  }

  #confirmEmpty(): void {
    const yes = h('button', { type: 'button', class: 'danger' }, 'Yes, empty it')
    const no = h('button', { type: 'button' }, 'Keep them')
    replaceChildren(
      this.#actions,
      h('span', { class: 'question' }, `Delete the ${count(this.#total)} in the trash for good?`),
      yes,
      no,
    )
    no.addEventListener('click', () => this.#showEmptyButton(true))
    yes.addEventListener('click', () => void this.#empty(yes))
    no.focus()
  }

  async #empty(button: HTMLButtonElement): Promise<void> {
    const offline = offlineText('Emptying the trash')
    if (offline !== undefined) {
      this.#say(offline, 'error')
      return
    }
    button.disabled = true
    let purged: number
    try {
      purged = await archiveClient(this.#base()).emptyTrash()
    } catch (err) {
      this.#say(`The trash was not emptied. ${explainCall(err)}`, 'error')
      this.#showEmptyButton(true)
      return
    }
    this.#announce(`${count(purged)} deleted for good.`)
    this.#showEmptyButton()
    await this.#load(undefined)
    this.#toggle.focus()
  }
}
