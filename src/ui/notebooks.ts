/**
 * The notebooks a signed-in person belongs to (GET /api/notebooks), the switcher that picks the
 * one the notes view shows (remembered per user on this device, their default one first), and
 * the dialog that makes, renames and deletes one. The list is kept on this device too, so that
 * the page opens the chosen notebook offline as it does online.
 */
import { accessKey, client, tokenSubject } from './api.js'
import { type Notebook, NotesProblem } from './client-parts.js'
import { byId, h, replaceChildren } from './dom.js'

/** The notebook the notes view shows: `default` is the caller's own (/api/note). */
export interface OpenedNotebook {
  id: string
  name: string
  role: Notebook['role']
  default: boolean
}

const LIST_STORAGE = 'notes-service.notebooks.'
const CHOICE_STORAGE = 'notes-service.notebook-choice.'

const part = byId('notebooks', HTMLElement)
const select = byId('notebook-select', HTMLSelectElement)
const newButton = byId('notebook-new', HTMLButtonElement)
const renameButton = byId('notebook-rename', HTMLButtonElement)
const deleteButton = byId('notebook-delete', HTMLButtonElement)
const shareButton = byId('notebook-share', HTMLButtonElement)
const dialog = byId('notebook-dialog', HTMLDialogElement)
const form = byId('notebook-form', HTMLFormElement)
const heading = byId('notebook-heading', HTMLElement)
const question = byId('notebook-question', HTMLElement)
const namePart = byId('notebook-name-part', HTMLElement)
const nameInput = byId('notebook-name', HTMLInputElement)
const error = byId('notebook-error', HTMLElement)
const submit = byId('notebook-submit', HTMLButtonElement)
byId('notebook-cancel', HTMLButtonElement).addEventListener('click', () => dialog.close())

function stored(key: string): unknown {
  try {
    const text = localStorage.getItem(key)
    return text === null ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

function store(key: string, value: unknown): void {
  try {
    localStorage.setItem(key, JSON.stringify(value))
  } catch {
    // Not kept (a private mode): the page still works online.
  }
}

export interface NotebookSwitcherHooks {
  /** The notes view should show `notebook` (undefined: the one notebook of a service without). */
  open(notebook: OpenedNotebook | undefined): void
  /** The owner asked to share, or a member to see who is in it. */
  share(notebook: OpenedNotebook): void
  announce(text: string): void
}

/** The switcher over the caller's notebooks. */
export class NotebookSwitcher {
  readonly #hooks: NotebookSwitcherHooks
  #list: Notebook[] = []
  #user: string | undefined
  #current: OpenedNotebook | undefined
  /** Whether a notebook (or none) was shown yet: the first refresh always opens one. */
  #shown = false
  #action: (() => Promise<void>) | undefined

  constructor(hooks: NotebookSwitcherHooks) {
    this.#hooks = hooks
    select.addEventListener('change', () => this.choose(select.value))
    newButton.addEventListener('click', () => this.#ask('new'))
    renameButton.addEventListener('click', () => this.#ask('rename'))
    deleteButton.addEventListener('click', () => this.#ask('delete'))
    shareButton.addEventListener('click', () => {
      if (this.#current !== undefined) this.#hooks.share(this.#current)
    })
    form.addEventListener('submit', (event) => {
      event.preventDefault()
      void this.#act()
    })
  }

  get current(): OpenedNotebook | undefined {
    return this.#current
  }

  /**
   * Lists the caller's notebooks again and shows the chosen one (a removed one falls back to the
   * default); `choice` picks one by id. Offline, the list this device kept for this user.
   */
  async refresh(choice?: string): Promise<void> {
    const user = tokenSubject(accessKey())
    if (user !== this.#user || user === undefined) {
      // Someone else (or a key): nothing of the last person's stays on screen.
      this.#shown = false
      this.#current = undefined
    }
    this.#user = user
    // This device's list first (the page opens offline as online), then the service's.
    const kept = `${LIST_STORAGE}${user ?? '-'}`
    const cached = stored(kept)
    if (!this.#shown && Array.isArray(cached)) this.#apply(cached as Notebook[], choice)
    let list: Notebook[]
    try {
      list = await client.notebooks()
    } catch (err) {
      // A 401 asks for a key or a sign-in (api.ts): the page opens once there is one. A 404:
      // this service has one notebook for everyone (user tokens off). No answer: as kept.
      if (err instanceof NotesProblem && err.status === 401) {
        if (!this.#shown) this.#show(undefined)
        return
      }
      if (!(err instanceof NotesProblem)) {
        if (!this.#shown) this.#apply([], choice)
        return
      }
      list = []
    }
    store(kept, list)
    this.#apply(list, choice)
  }

  #apply(list: Notebook[], choice: string | undefined): void {
    const user = this.#user
    this.#list = list
    part.hidden = list.length === 0
    if (list.length === 0) {
      this.#show(undefined)
      return
    }
    const wanted =
      choice ??
      this.#current?.id ??
      (user === undefined ? undefined : stored(CHOICE_STORAGE + user))
    const found = list.find((notebook) => notebook.id === wanted) ?? list[0]
    replaceChildren(
      select,
      ...list.map((notebook, i) =>
        h(
          'option',
          { value: notebook.id, selected: notebook === found },
          i === 0 ? `${notebook.name} (yours)` : notebook.name,
          notebook.role === 'owner' ? '' : ` · ${notebook.role}`,
        ),
      ),
    )
    if (found !== undefined && user !== undefined) store(CHOICE_STORAGE + user, found.id)
    this.#show(found)
  }

  /** Shows notebook `id` of the list. */
  choose(id: string): void {
    const notebook = this.#list.find((one) => one.id === id)
    if (notebook === undefined) return
    if (this.#user !== undefined) store(CHOICE_STORAGE + this.#user, id)
    select.value = id
    this.#show(notebook)
  }

  #show(notebook: Notebook | undefined): void {
    const opened =
      notebook === undefined
        ? undefined
        : { ...notebook, default: notebook.id === this.#list[0]?.id }
    const changed =
      !this.#shown || opened?.id !== this.#current?.id || opened?.role !== this.#current?.role
    this.#shown = true
    this.#current = opened
    const owner = opened?.role === 'owner'
    renameButton.hidden = !owner
    deleteButton.hidden = !owner || opened?.default === true
    shareButton.textContent = owner ? 'Share…' : 'Members…'
    if (changed) this.#hooks.open(opened)
  }

  #ask(kind: 'new' | 'rename' | 'delete'): void {
    const current = this.#current
    if (kind !== 'new' && current === undefined) return
    error.textContent = ''
    namePart.hidden = kind === 'delete'
    nameInput.value = kind === 'rename' ? (current?.name ?? '') : ''
    heading.textContent =
      kind === 'new'
        ? 'New notebook'
        : kind === 'rename'
          ? 'Rename the notebook'
          : 'Delete the notebook'
    question.textContent =
      kind === 'delete'
        ? `Delete “${current?.name}” with every note in it, for every member? This cannot be undone.`
        : ''
    question.hidden = kind !== 'delete'
    submit.textContent = kind === 'new' ? 'Make it' : kind === 'rename' ? 'Rename' : 'Delete it'
    submit.classList.toggle('danger', kind === 'delete')
    this.#action = async () => {
      const name = nameInput.value.trim()
      if (kind !== 'delete' && (name === '' || name.length > 200)) {
        throw new Error('Give it a name of 1 to 200 characters.')
      }
      if (kind === 'new') {
        const made = await client.createNotebook(name)
        await this.refresh(made.id)
        this.#hooks.announce(`Notebook “${made.name}” made.`)
      } else if (kind === 'rename' && current !== undefined) {
        await client.renameNotebook(current.id, name)
        await this.refresh(current.id)
        this.#hooks.announce(`Notebook renamed “${name}”.`)
      } else if (current !== undefined) {
        await client.deleteNotebook(current.id)
        await this.refresh(this.#list[0]?.id)
        this.#hooks.announce(`Notebook “${current.name}” deleted.`)
      }
    }
    dialog.showModal()
    if (kind === 'delete') submit.focus()
    else nameInput.focus()
  }

  async #act(): Promise<void> {
    const action = this.#action
    if (action === undefined) return
    error.textContent = ''
    submit.disabled = true
    try {
      await action()
      dialog.close()
    } catch (err) {
      error.textContent = (err as Error).message
    } finally {
      submit.disabled = false
    }
  }
}
