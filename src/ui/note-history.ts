/**
 * A note's history, opened from its view: the revisions the service keeps (newest first, the
 * note as it is now the first), one of them shown as JSON, and a restore to it, a new write
 * made with the If-Match of the note's version when the history was read. It needs the network,
 * as the trash does: the replica keeps no history on the device.
 */
import { dataOf, explain, type Note, send } from './api.js'
import { h, replaceChildren, uniqueId } from './dom.js'
import { timeOf } from './note-text.js'

/** One revision, as GET /api/note/:id/revisions lists it. */
interface Revision {
  /** The ETag the note had then, without its quotes. */
  version: string
  at: string
  change: string
  note: Note
}

/** What the history needs from the page. */
export interface HistoryContext {
  /** The open notebook's API path: '/api', or '/api/notebooks/<id>'. */
  base(): string
  announce(text: string): void
}

/** Says that these views need the network, when the device knows it has none. */
export function offlineText(what: string): string | undefined {
  return navigator.onLine ? undefined : `${what} needs the network, and this device is offline.`
}

export class NoteHistory {
  readonly element: HTMLElement
  readonly #id: number
  readonly #context: HistoryContext
  readonly #status = h('p', { class: 'message', role: 'status' })
  readonly #list = h('ol', { class: 'revisions' })
  readonly #shown = h('div', { class: 'revision' })
  #revisions: Revision[] = []
  /** The version shown, if any. */
  #chosen: string | undefined
  #run = 0

  constructor(id: number, context: HistoryContext, close: () => void) {
    this.#id = id
    this.#context = context
    const headingId = uniqueId('history-')
    const closeButton = h('button', { type: 'button' }, 'Close the history')
    closeButton.addEventListener('click', close)
    this.element = h(
      'section',
      { class: 'history', 'aria-labelledby': headingId },
      h('h4', { id: headingId }, 'History'),
      this.#status,
      this.#list,
      this.#shown,
      h('div', { class: 'actions' }, closeButton),
    )
    this.element.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') close()
    })
  }

  /** Reads the revisions again (the note changed, or a restore was made). */
  async load(): Promise<void> {
    const run = ++this.#run
    const offline = offlineText('The history')
    if (offline !== undefined) {
      this.#say(offline, 'error')
      return
    }
    this.#say('Loading the history…')
    try {
      const data = await dataOf(await send(`${this.#path()}/revisions`))
      if (run !== this.#run) return
      this.#revisions = data as Revision[]
    } catch (err) {
      if (run === this.#run) this.#say(`The history could not be loaded. ${explain(err)}`, 'error')
      return
    }
    this.#say(`${this.#revisions.length} versions, newest first.`)
    this.#render()
  }

  #path(): string {
    return `${this.#context.base()}/note/${this.#id}`
  }

  #say(text: string, kind: 'status' | 'error' = 'status'): void {
    this.#status.className = kind === 'error' ? 'message error' : 'message'
    this.#status.textContent = text
  }

  #render(): void {
    const items = this.#revisions.map((revision, index) => {
      const button = h(
        'button',
        {
          type: 'button',
          class: 'link',
          'aria-pressed': String(revision.version === this.#chosen),
        },
        timeOf(revision.at),
        ` · ${index === 0 ? 'now' : revision.change}`,
      )
      button.addEventListener('click', () => {
        this.#chosen = revision.version
        this.#render()
        this.#focus(revision.version)
      })
      return h('li', { 'data-version': revision.version }, button)
    })
    replaceChildren(this.#list, ...items)
    const index = this.#revisions.findIndex((revision) => revision.version === this.#chosen)
    const chosen = this.#revisions[index]
    if (chosen === undefined) {
      replaceChildren(this.#shown)
      return
    }
    const { id: _id, ...fields } = chosen.note
    const restore = h('button', { type: 'button', class: 'restore' }, 'Restore this version')
    restore.addEventListener('click', () => void this.#restore(chosen, restore))
    replaceChildren(
      this.#shown,
      h(
        'p',
        {},
        'The version of ',
        timeOf(chosen.at),
        index === 0 ? ' (the note as it is now):' : ':',
      ),
      h('pre', { class: 'fields' }, JSON.stringify(fields, null, 2)),
      index > 0 && h('div', { class: 'actions' }, restore),
    )
  }

  #focus(version: string): void {
    this.#list
      .querySelector<HTMLButtonElement>(`li[data-version="${CSS.escape(version)}"] button`)
      ?.focus()
  }

  /** POST .../restore with the If-Match of the newest revision: the note as this history saw it. */
  async #restore(revision: Revision, button: HTMLButtonElement): Promise<void> {
    const current = this.#revisions[0]
    if (current === undefined) return
    const offline = offlineText('Restoring')
    if (offline !== undefined) {
      this.#say(offline, 'error')
      return
    }
    button.disabled = true
    try {
      const response = await send(`${this.#path()}/restore`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'if-match': `"${current.version}"` },
        body: JSON.stringify({ version: revision.version }),
      })
      if (response.status === 412) {
        await this.load()
        this.#say(
          'The note changed since its history was shown: here is its history again.',
          'error',
        )
        return
      }
      await dataOf(response)
    } catch (err) {
      this.#say(`Not restored. ${explain(err)}`, 'error')
      button.disabled = false
      return
    }
    this.#chosen = undefined
    await this.load()
    const text = `Restored the version of ${timeOf(revision.at).textContent ?? revision.at}.`
    // The count stays said: a reload the change feed started may have said it first.
    this.#say(`${text} ${this.#revisions.length} versions, newest first.`)
    this.#context.announce(text)
    this.#list.querySelector('button')?.focus()
  }
}
