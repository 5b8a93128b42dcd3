import {
  type Answer,
  accessKey,
  call,
  describeFailure,
  etagOf,
  type Note,
  nextLink,
  problemDetail,
  randomKey,
  setAccessKey,
  tokenSubject,
  whenUnauthorized,
} from './api.js'
import { byId } from './dom.js'
import { ChangeFeed, type FeedState } from './feed.js'
import { type ItemContext, NoteItem } from './note-item.js'
import { isObject } from './note-patch.js'
import type { SseEvent } from './sse.js'

/** Notes per page: small enough to show at once, large enough to scroll through few pages. */
const PAGE_SIZE = 50
const FIRST_PAGE = `/api/note?limit=${PAGE_SIZE}&order=desc`

const list = byId('notes', HTMLOListElement)
const totalText = byId('total', HTMLElement)
const listStatus = byId('list-status', HTMLElement)
const moreButton = byId('more', HTMLButtonElement)
const feedStatus = byId('feed-status', HTMLElement)
const announcer = byId('announcer', HTMLElement)
const keyDialog = byId('key-dialog', HTMLDialogElement)
const keyForm = byId('key-form', HTMLFormElement)
const keyInput = byId('key-input', HTMLInputElement)
const keyReason = byId('key-reason', HTMLElement)
const keyCancel = byId('key-cancel', HTMLButtonElement)
const keyButton = byId('key-button', HTMLButtonElement)
const forgetButton = byId('forget-key', HTMLButtonElement)
const whoami = byId('whoami', HTMLElement)
const readOnlyNote = byId('read-only', HTMLElement)
const createForm = byId('create-form', HTMLFormElement)
const createTitle = byId('create-title', HTMLInputElement)
const createBody = byId('create-body', HTMLTextAreaElement)
const createJson = byId('create-json', HTMLTextAreaElement)
const createJsonMode = byId('create-mode-json', HTMLInputElement)
const createFieldsMode = byId('create-mode-fields', HTMLInputElement)
const createFieldsPart = byId('create-fields', HTMLElement)
const createJsonPart = byId('create-json-part', HTMLElement)
const createError = byId('create-error', HTMLElement)
const createButton = byId('create-button', HTMLButtonElement)

/** Notes shown, by id as JSON text (7 and "7" are different notes). */
const items = new Map<string, NoteItem>()
/** Notes this page created or deleted, whose feed event must not count them again. */
const ownCreates = new Set<string>()
const ownDeletes = new Set<string>()
let total: number | undefined
let next: string | undefined
let loading = false
/** Bumped by every reload, so that an older load's answer is dropped. */
let generation = 0

const keyOf = (id: unknown): string => JSON.stringify(id) ?? 'undefined'
const count = (n: number, one: string, many: string): string =>
  `${n.toLocaleString('en')} ${n === 1 ? one : many}`

const context: ItemContext = {
  announce,
  deleted(item) {
    const key = keyOf(item.note.id)
    if (items.get(key) === item) {
      removeItem(key)
      ownDeletes.add(key)
      if (total !== undefined) total -= 1
      showCounts()
    }
    announce('Note deleted.')
    createTitle.focus()
  },
  readOnly() {
    readOnlyNote.hidden = false
  },
}

function announce(text: string): void {
  announcer.textContent = text
}

function showCounts(): void {
  totalText.textContent = total === undefined ? '' : count(total, 'note', 'notes')
  if (loading) return
  if (next === undefined) {
    listStatus.textContent =
      items.size === 0 ? 'No notes yet.' : `All ${count(items.size, 'note', 'notes')} shown.`
  } else {
    listStatus.textContent = `Showing ${items.size.toLocaleString('en')} of ${count(total ?? items.size, 'note', 'notes')}.`
  }
  moreButton.hidden = next === undefined
}

function addItem(note: Note, where: 'top' | 'bottom', etag?: string): NoteItem {
  const item = new NoteItem(note, context, etag)
  items.set(keyOf(note.id), item)
  if (where === 'top') list.prepend(item.element)
  else list.append(item.element)
  return item
}

function removeItem(key: string): void {
  items.get(key)?.element.remove()
  items.delete(key)
}

/** The notes of a page answer, or undefined when it is not one. */
function notesOf(answer: Answer): Note[] | undefined {
  const data = (answer.body as { data?: unknown } | undefined)?.data
  return Array.isArray(data) && data.every(isObject) ? (data as Note[]) : undefined
}

/** Loads the newest page again, and follows the feed from the version it shows. */
async function reload(): Promise<void> {
  const run = ++generation
  feed.stop()
  loading = true
  listStatus.textContent = 'Loading notes…'
  const answer = await call('GET', FIRST_PAGE)
  if (run !== generation) return
  loading = false
  const notes = notesOf(answer)
  if (answer.status !== 200 || notes === undefined) {
    listStatus.textContent = `The notes could not be loaded. ${describeFailure(answer)}`
    moreButton.hidden = true
    feedState({ state: 'unavailable', why: 'Not following changes.' })
    return
  }
  items.clear()
  list.replaceChildren()
  for (const note of notes) addItem(note, 'bottom')
  next = nextLink(answer.headers.get('link'))
  total = Number(answer.headers.get('x-total-count') ?? notes.length)
  showCounts()
  feed.start(answer.headers.get('notes-version') ?? '')
  if (nearEnd()) void loadMore()
}

async function loadMore(): Promise<void> {
  if (loading || next === undefined) return
  const run = generation
  loading = true
  moreButton.disabled = true
  listStatus.textContent = 'Loading more notes…'
  const answer = await call('GET', next)
  moreButton.disabled = false
  if (run !== generation) return
  loading = false
  const notes = notesOf(answer)
  if (answer.status !== 200 || notes === undefined) {
    listStatus.textContent = `More notes could not be loaded. ${describeFailure(answer)}`
    return
  }
  // A note may already be here when the feed brought it first.
  for (const note of notes) if (!items.has(keyOf(note.id))) addItem(note, 'bottom')
  next = nextLink(answer.headers.get('link'))
  const counted = Number(answer.headers.get('x-total-count'))
  if (Number.isSafeInteger(counted)) total = counted
  showCounts()
  // A tall window may still show the end: fill it.
  if (nearEnd()) void loadMore()
}

function onEvent(event: SseEvent): void {
  if (event.type === 'reset') {
    void reload()
    return
  }
  let data: unknown
  try {
    data = JSON.parse(event.data)
  } catch {
    return
  }
  if (!isObject(data) || !('id' in data)) return
  const note = data as Note
  const key = keyOf(note.id)
  const item = items.get(key)
  if (event.type === 'created') {
    if (ownCreates.delete(key)) return
    if (item === undefined) addItem(note, 'top')
    else item.replace(note)
    if (total !== undefined) total += 1
    showCounts()
  } else if (event.type === 'updated') {
    item?.replace(note)
  } else if (event.type === 'deleted') {
    if (ownDeletes.delete(key)) return
    // Someone editing it is told, rather than losing the editor under the cursor.
    if (item?.editing) {
      item.gone()
      items.delete(key)
    } else if (item !== undefined) {
      removeItem(key)
    }
    if (total !== undefined) total = Math.max(0, total - 1)
    showCounts()
  }
}

function feedState(state: FeedState): void {
  feedStatus.dataset.state = state.state
  feedStatus.textContent =
    state.state === 'live'
      ? 'Live: changes made elsewhere appear here.'
      : state.state === 'connecting'
        ? 'Connecting to live changes…'
        : state.state === 'retrying'
          ? `Live changes interrupted; reconnecting in ${Math.ceil(state.inMs / 1000)} s…`
          : state.why
}

const feed = new ChangeFeed({
  onEvent,
  onState: feedState,
  onUnauthorized: () => askForKey(),
})

// The access key: asked for on the first 401, kept in sessionStorage for this tab only.
function askForKey(answer?: Answer): void {
  keyReason.textContent =
    (answer && problemDetail(answer)) ??
    'This service needs an access key. Ask whoever runs it for one.'
  keyButton.hidden = false
  if (!keyDialog.open) {
    keyInput.value = ''
    keyDialog.showModal()
  }
}

whenUnauthorized((answer) => askForKey(answer))

keyForm.addEventListener('submit', (event) => {
  event.preventDefault()
  const key = keyInput.value.trim()
  if (key === '') return
  setAccessKey(key)
  keyInput.value = ''
  keyDialog.close()
  readOnlyNote.hidden = true
  showKeyButtons()
  void reload()
})
keyCancel.addEventListener('click', () => keyDialog.close())
keyButton.addEventListener('click', () => askForKey())
forgetButton.addEventListener('click', () => {
  setAccessKey(null)
  showKeyButtons()
  void reload()
})
function showKeyButtons(): void {
  const key = accessKey()
  const hasKey = key !== null
  forgetButton.hidden = !hasKey
  if (hasKey) keyButton.hidden = false
  // A user token: whose notebook this is, and signing out forgets it.
  const user = tokenSubject(key)
  whoami.hidden = user === undefined
  whoami.textContent = user === undefined ? '' : `Notebook of ${user}`
  forgetButton.textContent = user === undefined ? 'Forget the key' : 'Sign out'
}

// Creating: a small form (title, body) or raw JSON, sent with an Idempotency-Key.
/** The last submit that got no answer: resubmitting the same body reuses its key. */
let unanswered: { body: string; key: string } | undefined

function switchCreateMode(): void {
  const json = createJsonMode.checked
  createFieldsPart.hidden = json
  createJsonPart.hidden = !json
  createError.textContent = ''
  if (json && createJson.value.trim() === '') {
    const fields: Record<string, string> = {}
    if (createTitle.value !== '') fields.title = createTitle.value
    if (createBody.value !== '') fields.body = createBody.value
    createJson.value = JSON.stringify(fields, null, 2)
  }
}
createJsonMode.addEventListener('change', switchCreateMode)
createFieldsMode.addEventListener('change', switchCreateMode)

/** The note to create, or why not. */
function noteToCreate(): Record<string, unknown> | string {
  if (createJsonMode.checked) {
    let value: unknown
    try {
      value = JSON.parse(createJson.value)
    } catch (err) {
      return `The JSON is not valid: ${(err as Error).message}`
    }
    return isObject(value) ? value : 'The JSON must be an object: { "field": value, ... }.'
  }
  const fields: Record<string, string> = {}
  if (createTitle.value.trim() !== '') fields.title = createTitle.value
  if (createBody.value.trim() !== '') fields.body = createBody.value
  return Object.keys(fields).length === 0 ? 'Write a title or a body first.' : fields
}

createForm.addEventListener('submit', (event) => {
  event.preventDefault()
  void create()
})

async function create(): Promise<void> {
  createError.textContent = ''
  const note = noteToCreate()
  if (typeof note === 'string') {
    createError.textContent = note
    return
  }
  const body = JSON.stringify(note)
  const key = unanswered?.body === body ? unanswered.key : randomKey()
  unanswered = { body, key }
  createButton.disabled = true
  let answer = await call('POST', '/api/note', { json: note, headers: { 'idempotency-key': key } })
  if (answer.status === 0) {
    // Lost on the way: the same key makes the retry safe, whether or not the first arrived.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    answer = await call('POST', '/api/note', { json: note, headers: { 'idempotency-key': key } })
  }
  createButton.disabled = false
  const data = (answer.body as { data?: unknown } | undefined)?.data
  if (answer.status === 200 && isObject(data)) {
    unanswered = undefined
    const created = data as Note
    const id = keyOf(created.id)
    if (!items.has(id)) {
      addItem(created, 'top', etagOf(answer))
      ownCreates.add(id)
      if (total !== undefined) total += 1
      showCounts()
    }
    createForm.reset()
    createJson.value = ''
    switchCreateMode()
    announce('Note created.')
    createTitle.focus()
    return
  }
  if (answer.status !== 0) unanswered = undefined
  if (answer.status === 403) context.readOnly()
  createError.textContent =
    answer.status === 0
      ? 'Not created: the service could not be reached. Submit again to retry; the note will not be created twice.'
      : `Not created. ${describeFailure(answer)}`
}

// More notes as the end of the list comes into view, or on the button.
moreButton.addEventListener('click', () => void loadMore())
let scrollCheck = false
addEventListener(
  'scroll',
  () => {
    if (scrollCheck) return
    scrollCheck = true
    requestAnimationFrame(() => {
      scrollCheck = false
      if (nearEnd()) void loadMore()
    })
  },
  { passive: true },
)

/** Whether the end of the list is in view, or nearly (600 px below it). */
function nearEnd(): boolean {
  return !moreButton.hidden && moreButton.getBoundingClientRect().top < innerHeight + 600
}

showKeyButtons()
void reload()
