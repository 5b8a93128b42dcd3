/**
 * The page's link to the service: one NotesClient (notes-service/client, served under
 * /ui/client/) on this origin, with the access key of this tab; and what a failed call means,
 * in words, for the person who asked.
 */
import {
  type Note as ClientNote,
  NoteNotFoundError,
  NotesClient,
  NotesNetworkError,
  NotesProblem,
} from './client/index.js'

/** A note as the API answers it: any JSON object with an `id`. */
export type Note = ClientNote

/** What a failed call answered. Status 0: no answer (the network failed). */
export interface Failure {
  status: number
  /** The problem's `detail`, when the service sent one. */
  detail: string | undefined
}

const KEY_STORAGE = 'notes-service.access-key'

/**
 * The access key, kept in sessionStorage: it lasts as long as this tab and is never written to
 * disk by the page, nor sent anywhere but this origin's API.
 */
export function accessKey(): string | null {
  try {
    return sessionStorage.getItem(KEY_STORAGE)
  } catch {
    return null
  }
}

export function setAccessKey(key: string | null): void {
  try {
    if (key === null) sessionStorage.removeItem(KEY_STORAGE)
    else sessionStorage.setItem(KEY_STORAGE, key)
  } catch {
    // Storage refused (a private mode): the key then lasts until the page is left.
  }
  memoryKey = key
}

/**
 * The user a user token names (its `sub`), read without checking it (the service checks it on
 * every request): 'eyJ...' with {"sub":"alice"} -> 'alice'; an access key -> undefined.
 */
export function tokenSubject(value: string | null): string | undefined {
  const parts = value?.split('.') ?? []
  if (parts.length !== 3) return undefined
  try {
    const base64 = (parts[1] as string).replaceAll('-', '+').replaceAll('_', '/')
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))
    const claims: unknown = JSON.parse(new TextDecoder().decode(bytes))
    const sub = (claims as { sub?: unknown } | null)?.sub
    return typeof sub === 'string' && sub !== '' ? sub : undefined
  } catch {
    return undefined
  }
}

/** The key when sessionStorage refuses to keep it. */
let memoryKey: string | null = null

/** Called on every 401, so the page can ask for a key. */
let onUnauthorized: (failure: Failure) => void = () => {}

export function whenUnauthorized(handler: (failure: Failure) => void): void {
  onUnauthorized = handler
}

/** Told when the feed connects, streams and drops (the client's feed says nothing of it). */
export interface FeedWatcher {
  connecting(): void
  live(): void
  dropped(): void
}

let feedWatcher: FeedWatcher | undefined

export function watchFeed(watcher: FeedWatcher): void {
  feedWatcher = watcher
}

/**
 * The fetch the client calls: this origin only, no cookies, no HTTP cache (answers depend on the
 * key), and the change feed's connection watched, so the page can say whether it is live.
 */
const pageFetch: typeof fetch = async (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input), location.href)
  if (url.origin !== location.origin) throw new TypeError(`not this origin: ${url}`)
  const feed = url.pathname === '/api/events'
  if (feed) feedWatcher?.connecting()
  let response: Response
  try {
    response = await fetch(url, { ...init, cache: 'no-store', credentials: 'omit' })
  } catch (err) {
    if (feed && init?.signal?.aborted !== true) feedWatcher?.dropped()
    throw err
  }
  if (!feed || response.status !== 200 || response.body === null) {
    if (feed && response.status >= 500) feedWatcher?.dropped()
    return response
  }
  feedWatcher?.live()
  const signal = init?.signal
  const dropped = (): void => {
    if (signal?.aborted !== true) feedWatcher?.dropped()
  }
  const reader = response.body.getReader()
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read()
        if (done) {
          dropped()
          controller.close()
        } else {
          controller.enqueue(value)
        }
      } catch (err) {
        dropped()
        controller.error(err)
      }
    },
    cancel: (reason) => reader.cancel(reason),
  })
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  })
}

/** The client of this origin's API, with this tab's key. */
export const client = new NotesClient({
  baseUrl: location.origin,
  token: () => accessKey() ?? memoryKey ?? '',
  fetch: pageFetch,
  // The page says which version each write is made on: never an ETag remembered elsewhere.
  rememberEtags: 0,
})

/**
 * What an error thrown by the client means: its status and detail; status 0 when the service
 * could not be reached. A 401 also asks for a key. Anything else is a bug, thrown again.
 */
export function failureOf(err: unknown): Failure {
  if (err instanceof NotesNetworkError) return { status: 0, detail: undefined }
  if (err instanceof NoteNotFoundError) return { status: 404, detail: undefined }
  if (err instanceof NotesProblem) {
    const failure = { status: err.status, detail: err.detail === '' ? undefined : err.detail }
    if (failure.status === 401) onUnauthorized(failure)
    return failure
  }
  throw err
}

/**
 * What went wrong, in words, for the person who asked: the problem's own `detail` when it has
 * one, else a sentence for the status.
 */
export function describeFailure(failure: Failure): string {
  if (failure.status === 0) {
    return 'The service could not be reached. Check the connection, then try again.'
  }
  if (failure.status === 403) {
    return `Your access key may only read: it cannot create, change or delete notes. Use a key that may write. (${failure.detail ?? 'Forbidden.'})`
  }
  const detail = failure.detail
  // The service's 401 detail already says that a key is needed (and how to send it).
  if (failure.status === 401) return detail ?? 'This service needs an access key.'
  if (detail !== undefined) return detail
  if (failure.status === 404) return 'This note no longer exists: it was deleted elsewhere.'
  return `The service answered with status ${failure.status}, and no explanation.`
}

/** 24 random hex digits for an Idempotency-Key (crypto.randomUUID needs a secure context). */
export function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12))
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

/** Whether a note's id can name it in a URL (DECISION 2): 7 -> true, "7" -> false. */
export function hasPath(id: unknown): id is number {
  return typeof id === 'number' && Number.isSafeInteger(id)
}
