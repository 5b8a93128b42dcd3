/**
 * The page's link to the service: one NotesClient (notes-service/client, served under
 * /ui/client/) on this origin, with the access key of this tab, whose answers the page hears
 * (a 401 asks for a key, a refused write is said); and what a failure means, in words.
 */
import { type Note as ClientNote, NotesClient } from './client-parts.js'

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

/** What the page hears of the answers the replica gets (it retries them itself). */
interface AnswerWatcher {
  /** A 401, on any request: the page asks for a key. */
  unauthorized(failure: Failure): void
  /** A write (POST, PATCH, DELETE) refused, or not applied (403, 507, ...). */
  writeRefused(method: string, failure: Failure): void
  /** A read of the list failed: unreachable (status 0), or refused. */
  listFailed(failure: Failure): void
  /**
   * Whether a request reached the service: true for an answer, false for none (the network
   * failed, a connection broke) or a 502, 503 or 504 (a gateway, or a service shedding load).
   */
  reached(reachable: boolean): void
}

/**
 * Whether a path lists a notebook's notes, or follows its changes: '/api/note' and
 * '/api/notebooks/n4Q/note' -> 'note', '/api/events' and '/api/notebooks/n4Q/events' -> 'events'.
 */
function notebookPath(pathname: string): 'note' | 'events' | undefined {
  return /^\/api(?:\/notebooks\/[^/]+)?\/(note|events)$/.exec(pathname)?.[1] as
    | 'note'
    | 'events'
    | undefined
}

/** '/api/files', '/api/notebooks/n4Q/uploads/u1' -> true: a file's, or its upload's. */
function filesPath(pathname: string): boolean {
  return /^\/api(?:\/notebooks\/[^/]+)?\/(?:files|uploads)(?:\/|$)/.test(pathname)
}

/** Answers that say the service itself could not answer: a gateway's, or load shedding's. */
const UNREACHABLE = new Set([502, 503, 504])

let answerWatcher: AnswerWatcher | undefined

export function watchAnswers(watcher: AnswerWatcher): void {
  answerWatcher = watcher
}

/** The problem's detail of an answer, read from a copy (the client reads the answer itself). */
async function failureFrom(response: Response): Promise<Failure> {
  let detail: string | undefined
  try {
    const body: unknown = await response.clone().json()
    const value = (body as { detail?: unknown } | null)?.detail
    if (typeof value === 'string' && value !== '') detail = value
  } catch {
    // No problem document: the status says it.
  }
  return { status: response.status, detail }
}

/** The Authorization header of this tab's key now: 'Bearer k', or null while it has none. */
function authorizationNow(): string | null {
  const key = accessKey() ?? memoryKey ?? ''
  return key === '' ? null : `Bearer ${key}`
}

/**
 * The failure an answer says, or undefined when the request carried a key the tab no longer uses
 * (`sent`, the Authorization sent: null for none), whose refusal says nothing of this one. Asked
 * again once the answer is read: a key entered while a 401 of the keyless page was still arriving
 * must not be asked for again.
 */
async function refusal(response: Response, sent: string | null): Promise<Failure | undefined> {
  if (sent !== authorizationNow()) return undefined
  const failure = await failureFrom(response)
  return sent === authorizationNow() ? failure : undefined
}

/** Tells the watcher what an answer means for the page, sent with Authorization `sent`. */
async function heard(
  method: string,
  url: URL,
  response: Response,
  sent: string | null,
): Promise<void> {
  answerWatcher?.reached(!UNREACHABLE.has(response.status))
  if (response.ok) return
  const list = method === 'GET' && notebookPath(url.pathname) === 'note'
  // A refused file is said at the note it was attached to.
  const write = method !== 'GET' && method !== 'HEAD' && !filesPath(url.pathname)
  if (response.status !== 401 && !write && !list) return
  // A 412 or an empty 404 on a write is the replica's to handle (a conflict).
  if (write && (response.status === 412 || response.status === 404)) return
  const failure = await refusal(response, sent)
  if (failure === undefined) return
  if (failure.status === 401) answerWatcher?.unauthorized(failure)
  else if (write) answerWatcher?.writeRefused(method, failure)
  else answerWatcher?.listFailed(failure)
}

/** Told when the feed connects, streams and drops (the client's feed says nothing of it). */
interface FeedWatcher {
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
  const feed = notebookPath(url.pathname) === 'events'
  const method = (init?.method ?? 'GET').toUpperCase()
  if (feed) feedWatcher?.connecting()
  let response: Response
  try {
    response = await fetch(url, { ...init, cache: 'no-store', credentials: 'omit' })
  } catch (err) {
    if (init?.signal?.aborted !== true) {
      answerWatcher?.reached(false)
      if (feed) feedWatcher?.dropped()
      if (method === 'GET' && notebookPath(url.pathname) === 'note') {
        answerWatcher?.listFailed({ status: 0, detail: undefined })
      }
    }
    throw err
  }
  // The headers fetch sent: init's, else those of a Request given.
  const sent = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined))
  await heard(method, url, response, sent.get('authorization'))
  if (!feed || response.status !== 200 || response.body === null) {
    if (feed && response.status >= 500) feedWatcher?.dropped()
    return response
  }
  feedWatcher?.live()
  const signal = init?.signal
  /** `broken`: the connection failed, rather than the service ending the stream. */
  const dropped = (broken: boolean): void => {
    if (signal?.aborted === true) return
    if (broken) answerWatcher?.reached(false)
    feedWatcher?.dropped()
  }
  const reader = response.body.getReader()
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read()
        if (done) {
          dropped(false)
          controller.close()
        } else {
          controller.enqueue(value)
        }
      } catch (err) {
        dropped(true)
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

/**
 * A request the client library has no call for (a note's history, the trash): this origin, the
 * tab's key, no HTTP cache. A 401 asks for a key as the client's do; the caller says any other
 * refusal itself. Throws a Failure with status 0 when no answer came.
 */
export async function send(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  const authorization = authorizationNow()
  if (authorization !== null) headers.set('authorization', authorization)
  const sent = headers.get('authorization')
  let response: Response
  try {
    response = await fetch(path, { ...init, headers, cache: 'no-store', credentials: 'omit' })
  } catch {
    answerWatcher?.reached(false)
    throw { status: 0, detail: undefined } satisfies Failure
  }
  answerWatcher?.reached(!UNREACHABLE.has(response.status))
  if (response.status === 401) {
    const failure = await refusal(response, sent)
    if (failure !== undefined) answerWatcher?.unauthorized(failure)
  }
  return response
}

/** The answer's JSON `data`, or its Failure thrown: what a refused or unanswered call says. */
export async function dataOf(response: Response): Promise<unknown> {
  if (!response.ok) throw await failureFrom(response)
  return response.status === 204 ? undefined : ((await response.json()) as { data?: unknown }).data
}

/** What went wrong with a call of `send`, in words: a Failure's, or an Error's message. */
export function explain(err: unknown): string {
  return isFailure(err) ? describeFailure(err) : (err as Error).message
}

function isFailure(err: unknown): err is Failure {
  return typeof err === 'object' && err !== null && typeof (err as Failure).status === 'number'
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

/** Whether a note's id can name it in a URL: 7 -> true, "7" -> false. */
export function hasPath(id: unknown): id is number {
  return typeof id === 'number' && Number.isSafeInteger(id)
}
