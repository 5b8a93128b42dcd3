import {
  accessKey,
  client,
  describeFailure,
  type Failure,
  failureOf,
  type Note,
  randomKey,
  setAccessKey,
  tokenSubject,
  watchFeed,
  whenUnauthorized,
} from './api.js'
import type { ChangeEvent, NotePage } from './client/index.js'
import { NotesProblem } from './client/index.js'
import { byId } from './dom.js'
import { type ItemContext, NoteItem } from './note-item.js'
import { isObject } from './note-patch.js'

/** Notes per page: small enough to show at once, large enough to scroll through few pages. */
const PAGE_SIZE = 50

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
/** The pages after the ones shown, while there are more. */
let next: AsyncGenerator<NotePage, undefined> | undefined
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

/** The next page, or why not. */
async function nextPage(
  pages: AsyncGenerator<NotePage, undefined>,
): Promise<{ page: NotePage | undefined } | { failure: Failure }> {
  try {
    const page = await pages.next()
    return { page: page.done ? undefined : page.value }
  } catch (err) {
    return { failure: failureOf(err) }
  }
}

/** Loads the newest page again, and follows the feed from the version it shows. */
async function reload(): Promise<void> {
  const run = ++generation
  stopFeed()
  loading = true
  listStatus.textContent = 'Loading notes…'
  const pages = client.pages({ limit: PAGE_SIZE, order: 'desc' })
  const answer = await nextPage(pages)
  if (run !== generation) return
  loading = false
  const page = 'page' in answer ? answer.page : undefined
  if (page === undefined) {
    const failure = 'failure' in answer ? answer.failure : { status: 0, detail: undefined }
    listStatus.textContent = `The notes could not be loaded. ${describeFailure(failure)}`
    moreButton.hidden = true
    next = undefined
    feedState({ state: 'unavailable', why: 'Not following changes.' })
    return
  }
  items.clear()
  list.replaceChildren()
  for (const note of page.notes) addItem(note, 'bottom')
  next = page.next === undefined ? undefined : pages
  total = page.total ?? page.notes.length
  showCounts()
  startFeed(page.version ?? '')
  if (nearEnd()) void loadMore()
}

async function loadMore(): Promise<void> {
  if (loading || next === undefined) return
  const run = generation
  const pages = next
  loading = true
  moreButton.disabled = true
  listStatus.textContent = 'Loading more notes…'
  const answer = await nextPage(pages)
  moreButton.disabled = false
  if (run !== generation) return
  loading = false
  const page = 'page' in answer ? answer.page : undefined
  if (page === undefined) {
    // The walk ended with the failure: the list as shown is what there is until a reload.
    next = undefined
    moreButton.hidden = true
    const failure = 'failure' in answer ? answer.failure : { status: 0, detail: undefined }
    listStatus.textContent = `More notes could not be loaded. ${describeFailure(failure)}`
    return
  }
  // A note may already be here when the feed brought it first.
  for (const note of page.notes) if (!items.has(keyOf(note.id))) addItem(note, 'bottom')
  if (page.next === undefined) next = undefined
  if (page.total !== undefined) total = page.total
  showCounts()
  // A tall window may still show the end: fill it.
  if (nearEnd()) void loadMore()
}

function onEvent(event: ChangeEvent): void {
  if (event.type === 'reset') {
    void reload()
    return
  }
  if (event.type === 'deleted') {
    const key = keyOf(event.id)
    const item = items.get(key)
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
    return
  }
  const note = event.note
  if (!isObject(note) || !('id' in note)) return
  const key = keyOf(note.id)
  const item = items.get(key)
  if (event.type === 'created') {
    if (ownCreates.delete(key)) return
    if (item === undefined) addItem(note, 'top')
    else item.replace(note)
    if (total !== undefined) total += 1
    showCounts()
  } else {
    item?.replace(note)
  }
}

type FeedState =
  | { state: 'connecting' }
  | { state: 'live' }
  | { state: 'retrying' }
  | { state: 'unavailable'; why: string }

function feedState(state: FeedState): void {
  feedStatus.dataset.state = state.state
  feedStatus.textContent =
    state.state === 'live'
      ? 'Live: changes made elsewhere appear here.'
      : state.state === 'connecting'
        ? 'Connecting to live changes…'
        : state.state === 'retrying'
          ? 'Live changes interrupted; reconnecting…'
          : state.why
}

watchFeed({
  connecting: () => feedState({ state: 'connecting' }),
  live: () => feedState({ state: 'live' }),
  dropped: () => feedState({ state: 'retrying' }),
})

/** Ends the feed being followed. */
let stopFeed: () => void = () => {}

/** Follows the change feed after `since` (the client resumes it across drops and restarts). */
function startFeed(since: string): void {
  stopFeed()
  const controller = new AbortController()
  stopFeed = () => controller.abort()
  void (async () => {
    try {
      for await (const event of client.events({ since, signal: controller.signal })) {
        if (controller.signal.aborted) return
        onEvent(event)
      }
    } catch (err) {
      if (controller.signal.aborted || !(err instanceof NotesProblem)) return
      if (err.status === 401) {
        feedState({ state: 'unavailable', why: 'Not following changes: a key is needed.' })
        askForKey()
      } else {
        feedState({
          state: 'unavailable',
          why:
            err.status === 404
              ? 'This service has no change feed: reload the page to see changes made elsewhere.'
              : `Not following changes. ${err.detail}`,
        })
      }
    }
  })()
}

// The access key: asked for on the first 401, kept in sessionStorage for this tab only.
function askForKey(failure?: Failure): void {
  keyReason.textContent =
    failure?.detail ?? 'This service needs an access key. Ask whoever runs it for one.'
  keyButton.hidden = false
  if (!keyDialog.open) {
    keyInput.value = ''
    keyDialog.showModal()
  }
}

whenUnauthorized((failure) => askForKey(failure))

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
  let result: { created: Note } | { failure: Failure }
  try {
    // The client retries a lost request with the same key: it is never created twice.
    result = { created: (await client.create(note, { idempotencyKey: key })).note }
  } catch (err) {
    result = { failure: failureOf(err) }
  }
  createButton.disabled = false
  if ('created' in result) {
    const { created } = result
    unanswered = undefined
    const id = keyOf(created.id)
    if (!items.has(id)) {
      addItem(created, 'top')
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
  const { failure } = result
  if (failure.status !== 0) unanswered = undefined
  if (failure.status === 403) context.readOnly()
  createError.textContent =
    failure.status === 0
      ? 'Not created: the service could not be reached. Submit again to retry; the note will not be created twice.'
      : `Not created. ${describeFailure(failure)}`
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

/**
 * The service worker that keeps the page's shell for offline use (sw.ts). Registered through
 * the one Trusted Types policy the page's CSP allows, which makes a script URL of its address
 * and of nothing else.
 */
function registerServiceWorker(): void {
  if (!('serviceWorker' in navigator)) return
  const policy = (window as TrustedTypesWindow).trustedTypes?.createPolicy('notes-service-worker', {
    createScriptURL: (url: string) => {
      if (url !== SERVICE_WORKER) throw new TypeError(`not the service worker: ${url}`)
      return url
    },
  })
  const url = policy?.createScriptURL(SERVICE_WORKER) ?? SERVICE_WORKER
  navigator.serviceWorker
    .register(url as string, { scope: '/', type: 'module', updateViaCache: 'none' })
    .catch(() => {
      // No offline shell (a private window may refuse workers): the page works online as before.
    })
}
const SERVICE_WORKER = '/ui/sw.js'

/** What the page uses of the Trusted Types API (not in TypeScript's DOM lib). */
interface TrustedTypesWindow {
  trustedTypes?: {
    createPolicy(
      name: string,
      rules: { createScriptURL(url: string): string },
    ): { createScriptURL(url: string): unknown }
  }
}
registerServiceWorker()
