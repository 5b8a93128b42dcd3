/** A note as the API answers it: any JSON object with an `id`. */
export type Note = { id: unknown } & Record<string, unknown>

/** What one call to the API answered. Status 0: no answer (the network failed). */
export interface Answer {
  status: number
  headers: Headers
  /** The body parsed as JSON, or undefined when it was empty or not JSON. */
  body: unknown
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
let onUnauthorized: (answer: Answer) => void = () => {}

export function whenUnauthorized(handler: (answer: Answer) => void): void {
  onUnauthorized = handler
}

export interface CallOptions {
  /** A JSON value, sent as the body. */
  json?: unknown
  contentType?: string
  headers?: Record<string, string>
  signal?: AbortSignal
}

/** The headers every call sends: Authorization when a key is set. */
export function authorizationHeaders(): Record<string, string> {
  const key = accessKey() ?? memoryKey
  return key === null ? {} : { authorization: `Bearer ${key}` }
}

/**
 * Calls the API on this origin (a relative URL only: the page never talks to another host).
 * Never throws for an HTTP status or a network failure: the answer says what happened.
 */
export async function call(
  method: string,
  url: string,
  options: CallOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = {
    accept: 'application/json',
    ...authorizationHeaders(),
    ...options.headers,
  }
  const init: RequestInit = { method, headers, cache: 'no-store', credentials: 'omit' }
  if (options.json !== undefined) {
    headers['content-type'] = options.contentType ?? 'application/json'
    init.body = JSON.stringify(options.json)
  }
  if (options.signal !== undefined) init.signal = options.signal
  let response: Response
  try {
    response = await fetch(sameOrigin(url), init)
  } catch {
    return { status: 0, headers: new Headers(), body: undefined }
  }
  let body: unknown
  try {
    const text = await response.text()
    body = text === '' ? undefined : JSON.parse(text)
  } catch {
    body = undefined
  }
  const answer = { status: response.status, headers: response.headers, body }
  if (answer.status === 401) onUnauthorized(answer)
  return answer
}

/** '/api/note?x' -> the same URL on this origin; 'https://elsewhere/...' -> an error. */
export function sameOrigin(url: string): string {
  const resolved = new URL(url, location.href)
  if (resolved.origin !== location.origin) throw new Error(`not this origin: ${url}`)
  return resolved.pathname + resolved.search
}

/** The `detail` of a problem answer, when it has one. */
export function problemDetail(answer: Answer): string | undefined {
  const body = answer.body
  if (typeof body === 'object' && body !== null && 'detail' in body) {
    const detail = (body as { detail: unknown }).detail
    if (typeof detail === 'string' && detail !== '') return detail
  }
  return undefined
}

/**
 * What went wrong, in words, for the person who asked: the problem's own `detail` when it has
 * one, else a sentence for the status.
 */
export function describeFailure(answer: Answer): string {
  if (answer.status === 0) {
    return 'The service could not be reached. Check the connection, then try again.'
  }
  if (answer.status === 403) {
    return `Your access key may only read: it cannot create, change or delete notes. Use a key that may write. (${problemDetail(answer) ?? 'Forbidden.'})`
  }
  const detail = problemDetail(answer)
  // The service's 401 detail already says that a key is needed (and how to send it).
  if (answer.status === 401) return detail ?? 'This service needs an access key.'
  if (detail !== undefined) return detail
  if (answer.status === 404) return 'This note no longer exists: it was deleted elsewhere.'
  return `The service answered with status ${answer.status}, and no explanation.`
}

/** The ETag of an answer, as sent, or undefined. */
export function etagOf(answer: Answer): string | undefined {
  return answer.headers.get('etag') ?? undefined
}

/** The `next` URL of a Link header: '</api/note?after=x>; rel="next"' -> '/api/note?after=x'. */
export function nextLink(link: string | null): string | undefined {
  if (link === null) return undefined
  for (const part of link.split(/,(?=\s*<)/)) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part)
    if (match === null) continue
    const rel = /;\s*rel\s*=\s*"?([^";]*)"?/i.exec(match[2] ?? '')?.[1] ?? ''
    if (rel.split(/\s+/).includes('next')) return sameOrigin(match[1] ?? '')
  }
  return undefined
}

/** 24 random hex digits for an Idempotency-Key (crypto.randomUUID needs a secure context). */
export function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12))
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

/** The path of a note, when its id can name it in a URL (DECISION 2): 7 -> '/api/note/7'. */
export function notePath(id: unknown): string | undefined {
  if (typeof id !== 'number' || !Number.isSafeInteger(id)) return undefined
  return `/api/note/${id}`
}
