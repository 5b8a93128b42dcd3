import { hasPath, type Note } from './api.js'
import {
  type Attachment,
  AttachmentView,
  attachControls,
  cannotAttach,
  FILES_FIELD,
  listenForDrops,
  onlyAttachments,
  withoutAttachment,
} from './attachments.js'
import type { FilesClient, Replica, ReplicaEntry } from './client-parts.js'
import { h, replaceChildren, uniqueId } from './dom.js'
import {
  BODY_FIELDS,
  capitalised,
  createdAt,
  fieldsJson,
  readJson,
  setText,
  withoutId,
} from './note-fields.js'
import { type HistoryContext, NoteHistory } from './note-history.js'
import { type Fields, planPatch, sameJson } from './note-patch.js'
import { firstText, TITLE_FIELDS } from './note-text.js'
import type { Uploads } from './uploads.js'

/** What a note item needs from the list around it. */
export interface ItemContext extends HistoryContext {
  /** The notebook the note is in, while it is open. */
  replica(): Replica | undefined
  /** The person deleted the note (on this device; the replica sends it). */
  deleted(item: NoteItem): void
  /** The open notebook's files, and the uploads to its notes. */
  files(): FilesClient | undefined
  uploads(): Uploads | undefined
}

/**
 * One note in the list: shown as text, edited in place, deleted after a confirmation; both
 * through the replica, which applies them on this device at once and sends them from there
 * (a clash with a change made elsewhere is shown in the list of conflicts, with both versions).
 */
export class NoteItem {
  readonly element: HTMLLIElement
  #note: Note
  /** The replica's key of this note ('n:<id>', or 'local:...' for one created here). */
  readonly key: string
  /** It has changes not sent yet. */
  #pending: boolean
  readonly #context: ItemContext
  readonly #headingId = uniqueId('note-')
  /** The open editor, while the person edits. */
  #editor: HTMLFormElement | undefined
  /** "Delete this note?" is open: a newer version shown meanwhile keeps it open. */
  #confirming = false
  #message: HTMLElement
  /** The note's history, while it is open. */
  #history: NoteHistory | undefined
  readonly #attachments: AttachmentView
  /** How the note is named to assistive technology: its heading. */
  #label = ''

  constructor(entry: ReplicaEntry, context: ItemContext) {
    this.#note = entry.note as Note
    this.key = entry.key
    this.#pending = entry.pending
    this.#context = context
    this.#message = h('p', { class: 'message', role: 'status' })
    this.element = h('li', { class: 'note' })
    this.#attachments = new AttachmentView({
      files: () => context.files(),
      base: () => context.base(),
      remove: (file) => void this.#removeAttachment(file),
    })
    listenForDrops(
      this.element,
      () => this.#editor === undefined && this.#changeable(),
      (files) => this.#attach(files),
    )
    this.#show()
  }

  /** The uploads to this note changed: its attachments are shown again (nothing else). */
  showUploads(): void {
    this.#attachments.show(this.#note, this.#context.uploads()?.of(this.key) ?? [], this.#label)
  }

  /** Says something about the note, under it (an upload's end, say). */
  say(text: string, kind: 'status' | 'error'): void {
    this.#say(text, kind)
  }

  /** The note left the list: the bytes read for its attachments are let go. */
  dispose(): void {
    this.#attachments.dispose()
  }

  get note(): Note {
    return this.#note
  }

  /** Whether the person has the editor open. */
  get editing(): boolean {
    return this.#editor !== undefined
  }

  /** The replica's entry again: shown anew when the note or its sending changed. */
  replace(entry: ReplicaEntry): void {
    const note = entry.note as Note
    if (sameJson(note, this.#note) && entry.pending === this.#pending) return
    const changed = !sameJson(note, this.#note)
    this.#note = note
    this.#pending = entry.pending
    if (this.#editor !== undefined) {
      if (changed) {
        this.#say('This note was just changed elsewhere. Saving applies your edit to that version.')
      }
      return
    }
    if (!changed) {
      // Only whether it is sent changed: an open question stays, and so does what was said.
      if (this.#confirming) return
      const said = { text: this.#message.textContent ?? '', kind: this.#message.className }
      this.#show()
      this.#message.textContent = said.text
      this.#message.className = said.kind
      return
    }
    const confirming = this.#confirming
    this.#show()
    void this.#history?.load()
    if (confirming) {
      // Closing the question under the person's pointer would look as if it had been answered.
      this.#confirmDelete('keep')
      this.#say('This note was just changed elsewhere: above is the new version.')
    }
  }

  /** The note was deleted elsewhere. */
  gone(): void {
    this.#editor = undefined
    this.dispose()
    replaceChildren(this.element, h('p', { class: 'gone' }, 'This note was deleted.'))
  }

  #say(text: string, kind: 'status' | 'error' = 'status'): void {
    this.#message.className = kind === 'error' ? 'message error' : 'message'
    this.#message.textContent = text
  }

  /**
   * The note as text: heading, body, the other fields as compact JSON, its id and time. What was
   * said about the previous view (an editor's warning, a question) goes with it.
   */
  #show(): void {
    this.#editor = undefined
    this.#confirming = false
    this.#say('')
    const active = document.activeElement
    const focused = this.#history?.element.contains(active) === true ? active : null
    const note = this.#note
    const titleKey = firstText(note, TITLE_FIELDS)
    const bodyKey = firstText(note, BODY_FIELDS)
    const rest = withoutId(note)
    if (titleKey !== undefined) delete rest[titleKey]
    if (bodyKey !== undefined) delete rest[bodyKey]
    // Shown as attachments, not as JSON.
    if (onlyAttachments(note)) delete rest[FILES_FIELD]
    const editButton = h('button', { type: 'button', 'aria-describedby': this.#headingId }, 'Edit')
    const deleteButton = h(
      'button',
      { type: 'button', class: 'danger', 'aria-describedby': this.#headingId },
      'Delete',
    )
    const historyButton = h(
      'button',
      {
        type: 'button',
        class: 'history-toggle',
        'aria-describedby': this.#headingId,
        'aria-expanded': String(this.#history !== undefined),
      },
      'History',
    )
    historyButton.addEventListener('click', () => this.#toggleHistory())
    editButton.addEventListener('click', () => this.#openEditor())
    deleteButton.addEventListener('click', () => this.#confirmDelete('yes'))
    const [attachButton, picker] = attachControls(this.#headingId, (files) => this.#attach(files))
    const actions = h(
      'div',
      { class: 'actions' },
      ...(note.id !== undefined && !hasPath(note.id)
        ? [h('span', { class: 'hint' }, 'Its id is not a number, so it cannot be changed here.')]
        : [editButton, attachButton, picker, historyButton, deleteButton]),
    )
    const heading = h(
      'h3',
      { id: this.#headingId, class: titleKey === undefined ? 'untitled' : undefined },
      titleKey === undefined
        ? note.id === undefined
          ? 'New note'
          : `Note ${JSON.stringify(note.id)}`
        : String(note[titleKey]),
    )
    this.#label = heading.textContent ?? ''
    this.showUploads()
    const time = createdAt(note.id)
    const where =
      note.id === undefined
        ? 'not sent yet'
        : `id ${JSON.stringify(note.id)}${this.#pending ? ' · changes not sent yet' : ''}`
    replaceChildren(
      this.element,
      h(
        'article',
        { 'aria-labelledby': this.#headingId },
        heading,
        bodyKey !== undefined && h('p', { class: 'body' }, String(note[bodyKey])),
        Object.keys(rest).length > 0 && fieldsJson(rest),
        this.#attachments.element,
        h('p', { class: 'meta' }, where, time && ' · ', time),
        actions,
        this.#message,
        this.#history?.element,
      ),
    )
    // Shown anew (the note changed): the person stays where they were in its history.
    if (focused instanceof HTMLElement) focused.focus()
  }

  /** Whether the person may change this note here (an editor, and an id the API can name). */
  #changeable(): boolean {
    const role = document.body.dataset.role
    return (
      role !== 'viewer' &&
      role !== 'none' &&
      (this.#note.id === undefined || hasPath(this.#note.id))
    )
  }

  #attach(files: FileList | null): void {
    const uploads = this.#context.uploads()
    if (files === null || files.length === 0) return
    if (uploads === undefined) {
      this.#say('Not attached: the notes are being opened again. Try once more.', 'error')
      return
    }
    // A `files` field of the note's own that cannot hold them: said before anything is sent.
    const refused = cannotAttach(this.#note)
    if (refused !== undefined) {
      this.#say(`Not attached. ${refused}`, 'error')
      return
    }
    this.#say('')
    for (const file of files) void uploads.attach(this.key, file)
  }

  /** Takes the attachment out of the note (the service removes the file once nothing refers to it). */
  async #removeAttachment(file: Attachment): Promise<void> {
    const replica = this.#context.replica()
    if (replica === undefined) return
    const fields = withoutId(this.#note)
    const plan = planPatch(fields, withoutAttachment(fields, file.id))
    if (plan.kind === 'impossible') {
      this.#say(`Not removed. ${plan.why}`, 'error')
      return
    }
    if (plan.kind === 'unchanged') return
    try {
      const saved = await replica.update(this.key, plan.body, {
        mergePatch: plan.contentType === 'application/merge-patch+json',
      })
      this.#note = saved.note as Note
      this.#pending = saved.pending
    } catch (err) {
      this.#say(`Not removed. ${(err as Error).message}`, 'error')
      return
    }
    if (this.#editor === undefined) this.#show()
    this.#say(`Removed “${file.name}” from this note.`)
    this.#focusButton('Attach files…')
  }

  /** Opens the note's history under it, or closes it. */
  #toggleHistory(): void {
    if (this.#history !== undefined) {
      this.#history = undefined
      this.#show()
      this.#focusButton('History')
      return
    }
    if (!hasPath(this.#note.id)) return
    this.#history = new NoteHistory(this.#note.id, this.#context, () => this.#toggleHistory())
    this.#show()
    void this.#history.load()
    this.#focusButton('History')
  }

  /** Opens the editor on the version shown (this device's copy is the latest it knows). */
  #openEditor(): void {
    this.#say('')
    this.#edit(this.#note)
  }

  /** The editor: the heading and body fields, or the whole note as JSON. */
  #edit(base: Note, draft?: { json: string } | undefined): void {
    const titleKey = firstText(base, TITLE_FIELDS) ?? 'title'
    const bodyKey = firstText(base, BODY_FIELDS) ?? 'body'
    const name = uniqueId('mode-')
    const fieldsRadio = h('input', { type: 'radio', name, value: 'fields', checked: !draft })
    const jsonRadio = h('input', { type: 'radio', name, value: 'json', checked: !!draft })
    const titleInput = h('input', { type: 'text', name: 'title', autocomplete: 'off' })
    titleInput.value = typeof base[titleKey] === 'string' ? (base[titleKey] as string) : ''
    const bodyInput = h('textarea', { name: 'body', rows: '4' })
    bodyInput.value = typeof base[bodyKey] === 'string' ? (base[bodyKey] as string) : ''
    const jsonInput = h('textarea', { name: 'json', rows: '8', class: 'code', spellcheck: 'false' })
    jsonInput.value = draft?.json ?? JSON.stringify(withoutId(base), null, 2)
    const fieldsPart = h(
      'div',
      { class: 'fields-part', hidden: !!draft },
      h('label', {}, capitalised(titleKey), titleInput),
      h('label', {}, capitalised(bodyKey), bodyInput),
    )
    const jsonPart = h(
      'div',
      { class: 'json-part', hidden: !draft },
      h('label', {}, 'The note as JSON (without its id, which stays as it is)', jsonInput),
    )
    const error = h('p', { class: 'message error', role: 'alert' })
    const save = h('button', { type: 'submit' }, 'Save')
    const cancel = h('button', { type: 'button' }, 'Cancel')
    const form = h(
      'form',
      {
        class: 'editor',
        'aria-label': `Edit note ${base.id === undefined ? '(not sent yet)' : JSON.stringify(base.id)}`,
      },
      h(
        'fieldset',
        { class: 'mode' },
        h('legend', {}, 'Edit'),
        h('label', { class: 'inline' }, fieldsRadio, 'Fields'),
        h('label', { class: 'inline' }, jsonRadio, 'JSON'),
      ),
      fieldsPart,
      jsonPart,
      error,
      h('div', { class: 'actions' }, save, cancel),
    )
    const jsonMode = (): boolean => jsonRadio.checked
    const switchMode = (): void => {
      fieldsPart.hidden = jsonMode()
      jsonPart.hidden = !jsonMode()
      error.textContent = ''
      if (jsonMode()) {
        // Carry the typed title and body into the JSON.
        const fields: Fields = readJson(jsonInput.value) ?? withoutId(base)
        setText(fields, titleKey, titleInput.value, base)
        setText(fields, bodyKey, bodyInput.value, base)
        jsonInput.value = JSON.stringify(fields, null, 2)
      } else {
        const fields = readJson(jsonInput.value)
        if (fields !== undefined) {
          if (typeof fields[titleKey] === 'string') titleInput.value = fields[titleKey] as string
          if (typeof fields[bodyKey] === 'string') bodyInput.value = fields[bodyKey] as string
        }
      }
    }
    fieldsRadio.addEventListener('change', switchMode)
    jsonRadio.addEventListener('change', switchMode)
    cancel.addEventListener('click', () => {
      this.#show()
      this.#focusButton('Edit')
    })
    form.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') cancel.click()
    })

    /** The note the person wants, relative to `on` (the version it overwrites). */
    const wanted = (on: Note): Fields | string => {
      if (!jsonMode()) {
        const fields = withoutId(on)
        setText(fields, titleKey, titleInput.value, on)
        setText(fields, bodyKey, bodyInput.value, on)
        return fields
      }
      const fields = readJson(jsonInput.value)
      if (fields === undefined) {
        return 'The JSON is not valid, or not an object: write the note as { "field": value, ... }.'
      }
      return fields
    }

    const submit = async (on: Note): Promise<void> => {
      error.textContent = ''
      const after = wanted(on)
      if (typeof after === 'string') {
        error.textContent = after
        return
      }
      if (Object.hasOwn(after, 'id') && !sameJson(after.id, on.id)) {
        error.textContent = 'A note keeps its id: leave "id" out, or as it is.'
        return
      }
      const { id: _id, ...fields } = after
      const plan = planPatch(withoutId(on), fields)
      if (plan.kind === 'unchanged') {
        this.#show()
        this.#say('Nothing changed.')
        this.#focusButton('Edit')
        return
      }
      if (plan.kind === 'impossible') {
        error.textContent = plan.why
        return
      }
      const replica = this.#context.replica()
      if (replica === undefined) {
        error.textContent = 'Not saved: the notes are being opened again. Try once more.'
        return
      }
      save.disabled = true
      try {
        const saved = await replica.update(this.key, plan.body, {
          mergePatch: plan.contentType === 'application/merge-patch+json',
        })
        this.#note = saved.note as Note
        this.#pending = saved.pending
        this.#show()
        this.#say(
          replica.online
            ? 'Saved.'
            : 'Saved on this device; it will be sent when the service is back.',
        )
        this.#focusButton('Edit')
      } catch (err) {
        error.textContent = `Not saved. ${(err as Error).message}`
      } finally {
        save.disabled = false
      }
    }

    form.addEventListener('submit', (event) => {
      event.preventDefault()
      void submit(this.#note)
    })
    this.#editor = form
    replaceChildren(this.element, form, this.#message)
    ;(draft ? jsonInput : titleInput).focus()
  }

  /** Asks first, in the shown note's actions; then deletes the version shown, with If-Match. */
  #confirmDelete(focus: 'yes' | 'keep'): void {
    const actions = this.element.querySelector('article > .actions')
    if (!(actions instanceof HTMLElement)) return
    const yes = h('button', { type: 'button', class: 'danger' }, 'Yes, delete it')
    const no = h('button', { type: 'button' }, 'Keep it')
    const question = h('span', { class: 'question' }, 'Delete this note?')
    const buttons = Array.from(actions.children)
    replaceChildren(actions, question, yes, no)
    this.#confirming = true
    no.addEventListener('click', () => {
      this.#confirming = false
      this.#say('')
      replaceChildren(actions, ...buttons)
      this.#focusButton('Delete')
    })
    yes.addEventListener('click', () => {
      this.#confirming = false
      void this.#delete()
    })
    ;(focus === 'yes' ? yes : no).focus()
  }

  async #delete(): Promise<void> {
    const replica = this.#context.replica()
    if (replica === undefined) return
    try {
      await replica.delete(this.key)
    } catch (err) {
      this.#say(`Not deleted. ${(err as Error).message}`, 'error')
      return
    }
    this.#context.deleted(this)
  }

  #focusButton(text: string): void {
    for (const button of this.element.querySelectorAll('button')) {
      if (button.textContent === text) {
        button.focus()
        return
      }
    }
  }
}
