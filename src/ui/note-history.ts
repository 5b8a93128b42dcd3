/**
 * A note's history, opened from its view: the revisions the service keeps (newest first, the
 * note as it is now the first), one of them shown as JSON, and a restore to it, a new write
 * made with the If-Match of the note's version when the history was read. It needs the network,
 * as the trash does: the replica keeps no history on the device. Both ask the service through a
 * client of their own (archiveClient), whose requests go the way of `send`.
 */
import { explain, send } from './api.js'
import { NotesClient, NotesProblem } from './client-parts.js'
import { h, replaceChildren, uniqueId } from './dom.js'
import { timeOf } from './note-text.js'

/** One revision, as the client's `revisions` answers it. */
type Revision = NonNullable<Awaited<ReturnType<NotesClient['revision']>>>

/**
 * A client of the notebook whose API path is `base` ('/api', or '/api/notebooks/<id>'), for the
 * history and the trash: its requests go through `send` (this origin, the tab's key, a 401 asking
 * for one), are not retried, and remember no ETag (the page says which version it writes on).
 */
export function archiveClient(base: string): NotesClient {
  const notebook = /^\/api\/notebooks\/([^/]+)$/.exec(base)?.[1]
  return new NotesClient({
    baseUrl: location.origin,
    fetch: (input, init) => send(String(input), init),
    retries: { limit: 0 },
    rememberEtags: 0,
    ...(notebook === undefined ? {} : { notebook: decodeURIComponent(notebook) }),
  })
}

/** The empty 404 of a note (or deleted note) that is not there, as `explain` says it. */
export const GONE = { status: 404, detail: undefined }

/** What a failed call of archiveClient's said, in words, as `explain` says a refused `send`. */
export function explainCall(err: unknown): string {
  if (err instanceof NotesProblem) {
    return explain(
      err.name === 'NoteNotFoundError' ? GONE : { status: err.status, detail: err.detail },
    )
  }
  if (err instanceof Error && err.name === 'NotesNetworkError') {
    return explain({ status: 0, detail: undefined })
  }
  return explain(err)
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
      const page = await archiveClient(this.#context.base()).revisions(this.#id)
      if (run !== this.#run) return
      if (page === undefined) {
        this.#say(`The history could not be loaded. ${explain(GONE)}`, 'error')
        return
      }
      this.#revisions = page.revisions
    } catch (err) {
      if (run === this.#run)
        this.#say(`The history could not be loaded. ${explainCall(err)}`, 'error')
      return
    }
    this.#say(`${this.#revisions.length} versions, newest first.`)
    this.#render()
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

  /** A restore with the If-Match of the newest revision: the note as this history saw it. */
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
      const ifMatch = `"${current.version}"`
      await archiveClient(this.#context.base()).restore(this.#id, revision.version, { ifMatch })
    } catch (err) {
      if (err instanceof NotesProblem && err.status === 412) {
        await this.load()
        this.#say(
          'The note changed since its history was shown: here is its history again.',
          'error',
        )
        return
      }
      this.#say(`Not restored. ${explainCall(err)}`, 'error')
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
