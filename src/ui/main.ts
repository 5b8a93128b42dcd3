/**
 * The notes page: the notebook kept in a Replica (notes-service/client) over IndexedDB, so that
 * it opens, lists, searches, creates, edits and deletes with the network off; the replica sends
 * the queued changes when the service is back, and a change that clashed with one made
 * elsewhere is shown with both versions, for the person to choose.
 */
import { Access } from './access.js'
import {
  accessKey,
  client,
  describeFailure,
  type Failure,
  tokenSubject,
  watchAnswers,
  watchFeed,
} from './api.js'
import {
  type FilesClient,
  IndexedDbReplicaStorage,
  MemoryReplicaStorage,
  NotesProblem,
  Replica,
  type ReplicaEntry,
  type ReplicaStorage,
} from './client-parts.js'
import { ConflictList } from './conflicts.js'
import { CreateForm } from './create-form.js'
import { byId } from './dom.js'
import { LinkStatus } from './link-status.js'
import { ListOrder } from './list-order.js'
import { type ItemContext, NoteItem } from './note-item.js'
import { sameJson } from './note-patch.js'
import { NotebookSwitcher, type OpenedNotebook } from './notebooks.js'
import { registerServiceWorker } from './service-worker.js'
import { ShareDialog } from './share-dialog.js'
import { OidcSignIn, signInSettings } from './sign-in.js'
import { TrashView } from './trash.js'
import { moveOldUploads, Uploads } from './uploads.js'

/** Notes shown at first, and added by each "Load more notes". */
const PAGE_SIZE = 50

const list = byId('notes', HTMLOListElement)
const totalText = byId('total', HTMLElement)
const listStatus = byId('list-status', HTMLElement)
const moreButton = byId('more', HTMLButtonElement)
const feedStatus = byId('feed-status', HTMLElement)
const announcer = byId('announcer', HTMLElement)
const readOnlyNote = byId('read-only', HTMLElement)
const searchInput = byId('search', HTMLInputElement)
const orderSelect = byId('order', HTMLSelectElement)
const waitingText = byId('waiting', HTMLElement)
const syncError = byId('sync-error', HTMLElement)
const conflicts = new ConflictList(byId('conflicts', HTMLElement), {
  announce,
  replica: () => replica,
})

/** The notebook on this device, while one is open. */
let replica: Replica | undefined
/** Its files, and the files on their way to its notes. */
let files: FilesClient | undefined
let uploads: Uploads | undefined
/** Its API path: '/api' for the default notebook, '/api/notebooks/<id>' for another. */
let base = '/api'
const order = new ListOrder()
const trash = new TrashView(() => base, announce)
let unsubscribe: () => void = () => {}
/** Notes shown, by entry key. */
const items = new Map<string, NoteItem>()
/** How many of the (matching) notes are shown, newest first. */
let shown = PAGE_SIZE
/** The search typed, or ''. */
let query = ''
/** The replica has the notebook (from a load, or from this device's copy). */
let loaded = false
/** Why the list could not be loaded, while it could not. */
let loadFailure: Failure | undefined
/** Bumped by every notebook opened, so that an older open is dropped. */
let generation = 0
/** A 401 stopped the replica: it waits for a key (the requests still under way say it again). */
let waitingForKey = false
/** What #sync-error says of a change the service refused: cleared once nothing waits. */
let sendFailure: string | undefined

const count = (n: number, one: string, many: string): string =>
  `${n.toLocaleString('en')} ${n === 1 ? one : many}`

const context: ItemContext = {
  announce,
  base: () => base,
  replica: () => replica,
  files: () => files,
  uploads: () => uploads,
  deleted() {
    announce('Note deleted.')
    createForm.focus()
  },
}

function announce(text: string): void {
  announcer.textContent = text
}

/**
 * The notes to show, the last changed (or the newest) first: all, or those matching the search
 * (the service's q rule).
 */
function matching(open: Replica): ReplicaEntry[] {
  const entries = query === '' ? open.notes() : open.search(query)
  // A create on its way: the feed may bring the service's note before the replica has linked
  // it to the local one. Shown once, as the local one, until it has.
  const sending = entries.filter((entry) => entry.id === undefined)
  const shown =
    sending.length === 0
      ? entries
      : entries.filter(
          (entry) =>
            entry.id === undefined ||
            !sending.some((local) => sameJson(local.note, withoutId(entry.note))),
        )
  return orderSelect.value === 'created' ? [...shown].reverse() : order.sort(shown)
}

function withoutId(note: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, ...fields } = note
  return fields
}

/** Shows the replica's view: the first `shown` notes, items kept (an open editor stays). */
function render(): void {
  const open = replica
  if (open === undefined) return
  const view = matching(open)
  const visible = view.slice(0, shown)
  const keep = new Set(visible.map((entry) => entry.key))
  for (const [key, item] of items) {
    if (keep.has(key)) continue
    items.delete(key)
    item.dispose()
    // Someone editing a note deleted elsewhere is told, rather than losing the editor.
    if (item.editing && open.get(key) === undefined) item.gone()
    else item.element.remove()
  }
  let previous: Element | null = null
  for (const entry of visible) {
    let item = items.get(entry.key)
    if (item === undefined) {
      item = new NoteItem(entry, context)
      items.set(entry.key, item)
    } else {
      item.replace(entry)
    }
    const at: Element | null =
      previous === null ? list.firstElementChild : previous.nextElementSibling
    if (at !== item.element) list.insertBefore(item.element, at)
    previous = item.element
  }
  showCounts(view.length, open.notes().length)
}

function showCounts(matches: number, total: number): void {
  totalText.textContent = loaded ? count(total, 'note', 'notes') : ''
  moreButton.hidden = !loaded || matches <= shown
  if (!loaded) {
    listStatus.textContent =
      loadFailure === undefined
        ? 'Loading notes…'
        : `The notes could not be loaded. ${describeFailure(loadFailure)}`
    return
  }
  if (query !== '') {
    listStatus.textContent =
      matches === 0
        ? `No note matches “${query}”.`
        : matches <= shown
          ? `${count(matches, 'note matches', 'notes match')} “${query}”.`
          : `Showing ${Math.min(shown, matches).toLocaleString('en')} of ${count(matches, 'note', 'notes')} matching “${query}”.`
  } else if (matches <= shown) {
    listStatus.textContent =
      matches === 0 ? 'No notes yet.' : `All ${count(matches, 'note', 'notes')} shown.`
  } else {
    listStatus.textContent = `Showing ${shown.toLocaleString('en')} of ${count(total, 'note', 'notes')}.`
  }
}

function showWaiting(): void {
  const waiting = replica?.waiting ?? 0
  const files = uploads?.waiting() ?? 0
  const parts = [
    waiting === 0 ? '' : count(waiting, 'change', 'changes'),
    files === 0 ? '' : count(files, 'file', 'files'),
  ].filter((part) => part !== '')
  const text = parts.length === 0 ? '' : `${parts.join(' and ')} waiting to be sent.`
  if (waitingText.textContent !== text) waitingText.textContent = text
  // Only the refusal of a change: why an invitation or this device's storage failed stays.
  if (waiting === 0 && syncError.textContent === sendFailure) syncError.textContent = ''
}

/**
 * The name of a notebook's copy on this device: one for the shared notebook, one per user for
 * their default one, and one per user and notebook for the others.
 */
function notebookName(notebook: OpenedNotebook | undefined): string {
  const user = tokenSubject(accessKey())
  if (user === undefined) return 'notes-service.notebook'
  const own = `notes-service.notebook.user.${user}`
  return notebook === undefined || notebook.default ? own : `${own}.${notebook.id}`
}

/**
 * Opens a notebook (its copy on this device first), then starts syncing it: `notebook`, or the
 * only one of a service without notebooks; none while the page waits for a sign-in.
 */
async function openNotebook(notebook: OpenedNotebook | undefined): Promise<void> {
  const run = ++generation
  // A viewer sees no create form, edit or delete buttons (style.css), nor anyone signed out.
  document.body.dataset.role = access.signedOut ? 'none' : (notebook?.role ?? 'editor')
  const old = replica
  replica = undefined
  files = undefined
  uploads?.close()
  uploads = undefined
  unsubscribe()
  await old?.close()
  for (const item of items.values()) item.dispose()
  items.clear()
  list.replaceChildren()
  order.reset()
  trash.close()
  base =
    notebook === undefined || notebook.default
      ? '/api'
      : `/api/notebooks/${encodeURIComponent(notebook.id)}`
  loaded = false
  loadFailure = undefined
  waitingForKey = false
  // This notebook's feed has not connected yet (the last one's was stopped).
  link.feed(false)
  shown = PAGE_SIZE
  showCounts(0, 0)
  if (access.signedOut) {
    loadFailure = { status: 401, detail: 'Sign in to see your notes.' }
    showCounts(0, 0)
    return
  }
  let storage: ReplicaStorage
  try {
    storage = await IndexedDbReplicaStorage.open(notebookName(notebook))
  } catch (err) {
    // No IndexedDB here (a private window): the page works, but keeps nothing when closed.
    storage = new MemoryReplicaStorage()
    syncError.textContent = `This browser keeps no copy of the notes here, so they are not available offline. (${(err as Error).message})`
  }
  // The default notebook at /api/note, as the page has always kept it; any other at its own path.
  const notebookClient =
    notebook === undefined || notebook.default ? client : client.notebook(notebook.id)
  const opened = await Replica.open({ client: notebookClient, storage, maxDelayMs: 5_000 })
  if (run !== generation) {
    await opened.close()
    return
  }
  replica = opened
  files = notebookClient.files
  uploads = new Uploads(opened, uploadHost)
  loaded = opened.notes().length > 0 || opened.waiting > 0 || opened.conflicts.length > 0
  unsubscribe = opened.subscribe((event) => {
    if (replica !== opened) return
    // A load, or the service reached with this device's copy current (kept from a visit).
    if (event.type === 'reset' || (event.type === 'online' && opened.online)) {
      loaded = true
      loadFailure = undefined
      render()
      void order.read(base, render)
    }
    if (event.type === 'change' || event.type === 'reset') render()
    if (event.type === 'waiting' || event.type === 'online') showWaiting()
    if (event.type === 'conflict' || event.type === 'change') conflicts.show(opened.conflicts)
    if (event.type === 'lost') {
      // Deleted, or the person removed from it, elsewhere: the switcher lists the notebooks
      // again, and shows their own one instead.
      syncError.textContent = `“${notebook?.name}” is no longer one of your notebooks: it was deleted, or you are no longer a member.`
      void switcher.refresh()
    }
  })
  render()
  showWaiting()
  conflicts.show(opened.conflicts)
  opened.start()
  // Files an older page kept in a database of its own: now the replica's to send (not into a
  // copy in memory, which a reload would lose).
  if (storage instanceof IndexedDbReplicaStorage) {
    void moveOldUploads(notebookName(notebook), opened, (text) => {
      syncError.textContent = `${syncError.textContent ?? ''} ${text}`.trim()
    }).catch(() => {})
  }
  if (nearEnd()) showMore()
}

const uploadHost = {
  changed(key: string) {
    items.get(key)?.showUploads()
    showWaiting()
  },
  say(key: string, text: string, kind: 'status' | 'error') {
    const item = items.get(key)
    if (item === undefined) announce(text)
    else item.say(text, kind)
  },
}

// A file dropped beside a note is not opened in place of the page (which would leave it).
for (const type of ['dragover', 'drop'] as const) {
  addEventListener(type, (event) => {
    if (event.dataTransfer?.types.includes('Files') === true) event.preventDefault()
  })
}

const link = new LinkStatus(feedStatus, () => waitingForKey)

watchFeed({
  connecting: () => link.feed(false),
  live: () => link.feed(true),
  dropped: () => link.feed(false),
})

watchAnswers({
  unauthorized(failure) {
    if (waitingForKey) return
    waitingForKey = true
    // The replica would ask again and again: it waits for a key instead.
    void replica?.stop()
    if (!loaded) {
      loadFailure = failure
      showCounts(0, 0)
    }
    link.show()
    access.refused(failure)
  },
  writeRefused(method, failure) {
    // A notebook's viewer (made one since the page opened it): its role is read again.
    if (failure.status === 403 && switcher.current !== undefined) void switcher.refresh()
    else if (failure.status === 403) readOnlyNote.hidden = false
    const why = describeFailure(failure)
    if (method === 'POST') createForm.showError(`Not created. ${why}`)
    else {
      sendFailure = `A change could not be sent. ${why}`
      syncError.textContent = sendFailure
    }
  },
  listFailed(failure) {
    if (loaded) return
    loadFailure = failure
    showCounts(0, 0)
  },
  reached(reachable) {
    link.reached(reachable)
    if (reachable && !loaded && loadFailure?.status === 0) {
      loadFailure = undefined
      showCounts(0, 0)
    }
  },
})

// Creating: a small form (title, body) or raw JSON, kept on this device and sent from there.
const createForm = new CreateForm({
  announce,
  replica: () => replica,
  uploads: () => uploads,
  created() {
    if (query !== '') {
      query = ''
      searchInput.value = ''
      render()
    }
  },
})

// Search: the service's q rule, on this device's copy (so it works offline too).
searchInput.addEventListener('input', () => {
  query = searchInput.value.trim()
  shown = PAGE_SIZE
  render()
})
orderSelect.addEventListener('change', () => render())

// More notes as the end of the list comes into view, or on the button.
function showMore(): void {
  if (moreButton.hidden) return
  shown += PAGE_SIZE
  render()
}
moreButton.addEventListener('click', () => showMore())
let scrollCheck = false
addEventListener(
  'scroll',
  () => {
    if (scrollCheck) return
    scrollCheck = true
    requestAnimationFrame(() => {
      scrollCheck = false
      if (nearEnd()) showMore()
    })
  },
  { passive: true },
)

/** Whether the end of the list is in view, or nearly (600 px below it). */
function nearEnd(): boolean {
  return !moreButton.hidden && moreButton.getBoundingClientRect().top < innerHeight + 600
}

const switcher = new NotebookSwitcher({
  open: (notebook) => void openNotebook(notebook),
  share: (notebook) => void share.open(notebook),
  announce,
})
const share = new ShareDialog({ changed: () => switcher.refresh(), announce })
let access: Access

// An invitation link (/#invite=<token>) is kept for this tab until someone is signed in.
const INVITE_STORAGE = 'notes-service.invite'
const invited = /^#invite=([\w-]+)$/.exec(location.hash)?.[1]
if (invited !== undefined) {
  sessionStorage.setItem(INVITE_STORAGE, invited)
  history.replaceState(null, '', '/')
}

/** Joins the notebook of the invitation this tab holds, if any, and switches to it. */
async function join(): Promise<string | undefined> {
  const token = sessionStorage.getItem(INVITE_STORAGE)
  if (token === null || accessKey() === null) return undefined
  sessionStorage.removeItem(INVITE_STORAGE)
  try {
    const notebook = await client.redeemInvite(token)
    announce(`You joined “${notebook.name}” as ${notebook.role}.`)
    return notebook.id
  } catch (err) {
    // The service's detail says why in words ('unknown, expired, used up or withdrawn').
    const why = err instanceof NotesProblem ? err.detail : (err as Error).message
    syncError.textContent = `The invitation could not be used. ${why}`
    return undefined
  }
}

/** Opens the notes as whoever the page acts as now: their notebooks, the chosen one shown. */
async function start(): Promise<void> {
  waitingForKey = false
  if (access.signedOut) {
    await openNotebook(undefined)
    return
  }
  await switcher.refresh(await join())
}

const settings = await signInSettings()
const signIn = settings === undefined ? undefined : new OidcSignIn(settings)
try {
  await signIn?.start()
} catch (err) {
  syncError.textContent = `Signing in did not work. ${(err as Error).message}`
}
access = new Access(signIn, () => void start())
// A role changed elsewhere (a demotion to viewer) shows when the person comes back to the page.
addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && switcher.current !== undefined) {
    void switcher.refresh(switcher.current.id)
  }
})
void start()
registerServiceWorker()
