/**
 * The changes that clashed: what the replica could not merge with a change made elsewhere (the
 * same word or value changed both ways), or a change the service refused because the note was
 * deleted (or changed, against a delete) elsewhere meanwhile. A merged note shows only the
 * disputed fields, each with both values (every other change is merged and sent already); a
 * clash of the whole note shows both versions. Then the three choices: keep mine, keep theirs, or
 * edit a merged note (the replica resolves it).
 */
import { parseJson, type Replica, type ReplicaConflict } from './client-parts.js'
import { h, replaceChildren, uniqueId } from './dom.js'
import { isObject, sameJson } from './note-patch.js'

export interface ConflictContext {
  announce(text: string): void
  replica(): Replica | undefined
}

/** A version as text: the note as JSON, or that it was deleted. */
function version(note: Record<string, unknown> | null): HTMLElement {
  return note === null
    ? h('p', { class: 'gone' }, 'Deleted.')
    : h('pre', { class: 'code' }, JSON.stringify(note, null, 2))
}

/** '/meta/a~1b' -> ['meta', 'a/b'] (a JSON Pointer's keys) */
function keysOf(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'))
}

/** The value at `keys` in `note`, or undefined where it has none. */
function valueAt(note: unknown, keys: readonly string[]): unknown {
  let value = note
  for (const key of keys) {
    if (!isObject(value) || !Object.hasOwn(value, key)) return undefined
    value = value[key]
  }
  return value
}

/** One side's values at the disputed paths, each under its field's name. */
function values(note: Record<string, unknown> | null, paths: readonly string[]): HTMLElement {
  if (note === null || paths.includes('')) return version(note)
  const rows = paths.flatMap((path) => {
    const keys = keysOf(path)
    const value = valueAt(note, keys)
    return [
      h('dt', {}, keys.join(' › ')),
      h(
        'dd',
        {},
        value === undefined
          ? h('p', { class: 'gone' }, 'Removed.')
          : h('pre', { class: 'code' }, JSON.stringify(value, null, 2)),
      ),
    ]
  })
  return h('dl', { class: 'paths' }, ...rows)
}

/** 'Groceries' for {title:'Groceries'}, else the id, else 'a new note'. */
function nameOf(conflict: ReplicaConflict): string {
  const note = conflict.mine ?? conflict.theirs ?? {}
  for (const field of ['title', 'name', 'subject', 'heading']) {
    if (typeof note[field] === 'string' && note[field] !== '') return `“${note[field]}”`
  }
  return note.id === undefined ? 'a new note' : `note ${JSON.stringify(note.id)}`
}

export class ConflictList {
  readonly #section: HTMLElement
  readonly #list: HTMLElement
  readonly #context: ConflictContext
  /** What is shown, by conflict key: kept while unchanged (an open merge editor stays). */
  #shown = new Map<string, { conflict: ReplicaConflict; element: HTMLElement }>()

  constructor(section: HTMLElement, context: ConflictContext) {
    this.#section = section
    this.#context = context
    const list = section.querySelector('ol')
    if (!(list instanceof HTMLElement)) throw new Error('the conflicts section has no list')
    this.#list = list
  }

  show(conflicts: readonly ReplicaConflict[]): void {
    const next = new Map<string, { conflict: ReplicaConflict; element: HTMLElement }>()
    for (const conflict of conflicts) {
      const old = this.#shown.get(conflict.key)
      const same =
        old !== undefined &&
        sameJson(old.conflict.mine, conflict.mine) &&
        sameJson(old.conflict.theirs, conflict.theirs)
      next.set(conflict.key, same ? old : { conflict, element: this.#item(conflict) })
    }
    this.#shown = next
    replaceChildren(this.#list, ...[...next.values()].map((shown) => shown.element))
    this.#section.hidden = next.size === 0
  }

  #item(conflict: ReplicaConflict): HTMLElement {
    const headingId = uniqueId('conflict-')
    const merged =
      conflict.mine !== null && conflict.theirs !== null && !conflict.paths.includes('')
    const why = merged
      ? 'It was changed elsewhere too: every other change is merged, but not these.'
      : conflict.theirs === null
        ? 'It was deleted elsewhere before your change was sent.'
        : conflict.mine === null
          ? 'You deleted it, but it was changed elsewhere meanwhile.'
          : conflict.status === 412
            ? 'It was changed elsewhere before your change was sent.'
            : `The service refused your change (status ${conflict.status}).`
    const message = h('p', { class: 'message', role: 'status' })
    const mine = h('button', { type: 'button' }, 'Keep mine')
    const theirs = h('button', { type: 'button' }, 'Keep theirs')
    const merge = h('button', { type: 'button' }, 'Edit a merged note')
    const actions = h('div', { class: 'actions' }, mine, theirs, merge)
    const editorPart = h('div', { class: 'merge', hidden: true })
    const resolve = async (
      choice: 'mine' | 'theirs' | { note: Record<string, unknown> },
      said: string,
    ): Promise<void> => {
      const replica = this.#context.replica()
      if (replica === undefined) return
      try {
        await replica.resolve(conflict.key, choice)
        this.#context.announce(said)
      } catch (err) {
        message.className = 'message error'
        message.textContent = `Not resolved. ${(err as Error).message}`
      }
    }
    mine.addEventListener(
      'click',
      () => void resolve('mine', 'Your version is kept; it will be sent.'),
    )
    theirs.addEventListener('click', () => void resolve('theirs', 'Their version is kept.'))
    merge.addEventListener('click', () => {
      const start = conflict.mine ?? conflict.theirs ?? {}
      const { id: _id, ...fields } = start
      const input = h('textarea', { name: 'merged', rows: '8', class: 'code', spellcheck: 'false' })
      input.value = JSON.stringify(fields, null, 2)
      const error = h('p', { class: 'message error', role: 'alert' })
      const save = h('button', { type: 'submit' }, 'Save the merged note')
      const form = h(
        'form',
        { class: 'editor', 'aria-label': 'The merged note' },
        h('label', {}, 'The merged note as JSON', input),
        error,
        h('div', { class: 'actions' }, save),
      )
      form.addEventListener('submit', (event) => {
        event.preventDefault()
        let value: unknown
        try {
          value = parseJson(input.value)
        } catch (err) {
          error.textContent = `The JSON is not valid: ${(err as Error).message}`
          return
        }
        if (!isObject(value)) {
          error.textContent = 'The JSON must be an object: { "field": value, ... }.'
          return
        }
        const { id: _ignored, ...note } = value
        void resolve({ note }, 'The merged note is kept; it will be sent.')
      })
      replaceChildren(editorPart, form)
      editorPart.hidden = false
      input.focus()
    })
    return h(
      'li',
      { class: 'conflict' },
      h(
        'article',
        { 'aria-labelledby': headingId },
        h('h3', { id: headingId }, `Your change to ${nameOf(conflict)} clashed`),
        h('p', {}, why, merged ? ' Choose which to keep.' : ' Choose which version to keep.'),
        h(
          'div',
          { class: 'versions' },
          h(
            'section',
            { 'aria-label': 'Your version' },
            h('h4', {}, 'Yours'),
            values(conflict.mine, conflict.paths),
          ),
          h(
            'section',
            { 'aria-label': 'Their version' },
            h('h4', {}, 'Theirs'),
            values(conflict.theirs, conflict.paths),
          ),
        ),
        actions,
        editorPart,
        message,
      ),
    )
  }
}
