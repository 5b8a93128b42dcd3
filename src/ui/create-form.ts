/**
 * The "New note" form: a title and a body, or the note as raw JSON, and files to attach. The
 * note is kept on this device at once and sent from there (offline too); its files go to it once
 * it is kept. The form is emptied then, except for what the person has typed since.
 */
import { parseJson, type Replica } from './client-parts.js'
import { byId } from './dom.js'
import { isObject } from './note-patch.js'
import type { Uploads } from './uploads.js'

/** What the form needs from the page. */
export interface CreateFormHost {
  announce(text: string): void
  replica(): Replica | undefined
  uploads(): Uploads | undefined
  /** A note was created: the list shows it (a search typed is cleared). */
  created(): void
}

export class CreateForm {
  readonly #form = byId('create-form', HTMLFormElement)
  readonly #title = byId('create-title', HTMLInputElement)
  readonly #body = byId('create-body', HTMLTextAreaElement)
  readonly #json = byId('create-json', HTMLTextAreaElement)
  readonly #jsonMode = byId('create-mode-json', HTMLInputElement)
  readonly #fieldsMode = byId('create-mode-fields', HTMLInputElement)
  readonly #fieldsPart = byId('create-fields', HTMLElement)
  readonly #jsonPart = byId('create-json-part', HTMLElement)
  readonly #files = byId('create-files', HTMLInputElement)
  readonly #error = byId('create-error', HTMLElement)
  readonly #button = byId('create-button', HTMLButtonElement)
  readonly #host: CreateFormHost

  constructor(host: CreateFormHost) {
    this.#host = host
    this.#jsonMode.addEventListener('change', () => this.#switchMode())
    this.#fieldsMode.addEventListener('change', () => this.#switchMode())
    this.#form.addEventListener('submit', (event) => {
      event.preventDefault()
      void this.#create()
    })
  }

  /** Puts the focus on the title field. */
  focus(): void {
    this.#title.focus()
  }

  /** Says, under the form, why a note was not created. */
  showError(text: string): void {
    this.#error.textContent = text
  }

  /** Shows the title and body fields, or the JSON (filled from the fields when empty). */
  #switchMode(): void {
    const json = this.#jsonMode.checked
    this.#fieldsPart.hidden = json
    this.#jsonPart.hidden = !json
    this.#error.textContent = ''
    if (json && this.#json.value.trim() === '') {
      const fields: Record<string, string> = {}
      if (this.#title.value !== '') fields.title = this.#title.value
      if (this.#body.value !== '') fields.body = this.#body.value
      this.#json.value = JSON.stringify(fields, null, 2)
    }
  }

  /** The note to create, or why not. */
  #noteToCreate(): Record<string, unknown> | string {
    if (this.#jsonMode.checked) {
      let value: unknown
      try {
        value = parseJson(this.#json.value)
      } catch (err) {
        return `The JSON is not valid: ${(err as Error).message}`
      }
      return isObject(value) ? value : 'The JSON must be an object: { "field": value, ... }.'
    }
    const fields: Record<string, string> = {}
    if (this.#title.value.trim() !== '') fields.title = this.#title.value
    if (this.#body.value.trim() !== '') fields.body = this.#body.value
    const files = this.#files.files?.length ?? 0
    return Object.keys(fields).length === 0 && files === 0
      ? 'Write a title or a body first, or pick a file.'
      : fields
  }

  async #create(): Promise<void> {
    this.#error.textContent = ''
    const note = this.#noteToCreate()
    if (typeof note === 'string') {
      this.#error.textContent = note
      return
    }
    const open = this.#host.replica()
    if (open === undefined) {
      this.#error.textContent = 'Not created: the notes are still being opened. Try again.'
      return
    }
    this.#button.disabled = true
    const sent = this.#fields()
    const picked = [...(this.#files.files ?? [])]
    try {
      // Kept on this device at once (durably), sent with an Idempotency-Key: never twice.
      const entry = await open.create(note)
      // The files go to the note once it is kept (offline too: they wait on the device).
      this.#files.value = ''
      for (const file of picked) void this.#host.uploads()?.attach(entry.key, file)
    } catch (err) {
      this.#error.textContent = `Not created. ${(err as Error).message}`
      return
    } finally {
      this.#button.disabled = false
    }
    this.#host.created()
    this.#clearCreated(sent)
    this.#host.announce(
      open.online ? 'Note created.' : 'Note created; it will be sent when the service is back.',
    )
  }

  /** The form's fields, as the person left them. */
  #fields(): string[] {
    return [this.#title.value, this.#body.value, this.#json.value]
  }

  /**
   * Empties the form once its note is kept. The note shows before this device's storage confirms
   * it, and a person may be typing the next one by then: a field that no longer holds what was
   * sent is theirs, and stays, and so does their place in the form.
   */
  #clearCreated(sent: string[]): void {
    const fields = [this.#title, this.#body, this.#json]
    if (fields.some((field, i) => field.value !== sent[i])) {
      for (const [i, field] of fields.entries()) if (field.value === sent[i]) field.value = ''
      return
    }
    this.#form.reset()
    this.#json.value = ''
    this.#switchMode()
    this.#title.focus()
  }
}
