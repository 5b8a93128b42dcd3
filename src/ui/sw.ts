/**
 * The page's service worker: it keeps the page's shell (the HTML, style, scripts, icons and
 * manifest: every file the page links) so that the page opens with the network off. Network
 * first: while the service answers (within SHELL_TIMEOUT_MS), the page gets what it answers
 * now, and the cache is refreshed with it, so a new deployment is seen on the next load and a
 * stale shell is never served while the service is reachable; only when it fails or is slow does
 * the cached copy answer. It never touches the API (/api/...): the notes live in the replica.
 * A new version of this file takes over at once (skipWaiting, then clients.claim).
 */
export {}

/** The parts of the service worker's scope used here (the DOM lib has no worker types). */
interface ExtendableEvent extends Event {
  waitUntil(promise: Promise<unknown>): void
}
interface FetchEvent extends ExtendableEvent {
  readonly request: Request
  respondWith(response: Promise<Response>): void
}
interface WorkerScope {
  readonly location: Location
  skipWaiting(): Promise<void>
  readonly clients: { claim(): Promise<void> }
  addEventListener(type: 'install' | 'activate', listener: (event: ExtendableEvent) => void): void
  addEventListener(type: 'fetch', listener: (event: FetchEvent) => void): void
}
declare const self: WorkerScope

/** Not linked from the page (it is loaded on first use), but needed offline. */
const QUEUED_FILES = '/ui/client/replica/queued-files.js'
/** One cache for the shell; a change of its name drops the old one on activate. */
const CACHE = 'notes-shell-1'
/** How long the service has to answer a shell request before the cached copy is used. */
const SHELL_TIMEOUT_MS = 3_000

/** The shell's files as the page at `/` links them: '/ui/main.js', '/ui/style.css' ... */
function linkedFiles(html: string): string[] {
  return [...html.matchAll(/(?:href|src)="(\/ui\/[^"]+)"/g)].map((match) => match[1] as string)
}

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(CACHE)
      const page = await fetch('/', { cache: 'no-cache' })
      if (!page.ok) throw new Error(`the page answered ${page.status}`)
      const html = await page.clone().text()
      await cache.put('/', page)
      // And the replica's file module, which it loads when a file is first attached: offline too.
      await cache.addAll([...linkedFiles(html), QUEUED_FILES])
      await self.skipWaiting()
    })(),
  )
})

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) if (name !== CACHE) await caches.delete(name)
      await self.clients.claim()
    })(),
  )
})

self.addEventListener('fetch', (event) => {
  const { request } = event
  const url = new URL(request.url)
  if (request.method !== 'GET' || url.origin !== self.location.origin) return
  // The page (whatever its query) and its files; nothing else, the API least of all.
  if (url.pathname === '/') event.respondWith(networkFirst(request, '/'))
  else if (url.pathname.startsWith('/ui/')) event.respondWith(networkFirst(request, url.pathname))
})

/** The service's answer when it comes in time (and kept), else the cached copy, else an error. */
async function networkFirst(request: Request, key: string): Promise<Response> {
  const cache = await caches.open(CACHE)
  const fromNetwork = fetch(request).then(async (response) => {
    if (response.ok) await cache.put(key, response.clone())
    return response
  })
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, SHELL_TIMEOUT_MS, undefined)
  })
  try {
    const answer = await Promise.race([fromNetwork, late])
    if (answer !== undefined) return answer
    return (await cache.match(key, { ignoreVary: true })) ?? (await fromNetwork)
  } catch {
    return (await cache.match(key, { ignoreVary: true })) ?? Response.error()
  } finally {
    clearTimeout(timer)
  }
}
