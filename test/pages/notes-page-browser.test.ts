import assert from 'node:assert/strict'
import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
} from 'node:http'
import { createRequire } from 'node:module'
import { type AddressInfo, connect, createServer, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { preload } from '../../bench/preload.js'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { CHROMIUM, launchChromium, MISSING, SKIP, until } from '../support/chromium.js'
import { signed } from '../support/jwks-server.js'

/** Where to save the README's screenshot, when set: `NOTES_PAGE_SCREENSHOT=docs/page.png`. */
const SCREENSHOT = process.env.NOTES_PAGE_SCREENSHOT
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')

type Json = Record<string, unknown>

/** A client of the API, as curl or another program would be: the "second client". */
async function api(
  origin: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: Json | undefined }> {
  const response = await fetch(`${origin}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await response.text()
  return {
    status: response.status,
    headers: response.headers,
    json: text === '' ? undefined : (JSON.parse(text) as Json),
  }
}

async function create(origin: string, note: Json, headers?: Record<string, string>): Promise<Json> {
  const answer = await api(origin, 'POST', '/api/note', note, headers)
  assert.equal(answer.status, 200, JSON.stringify(answer.json))
  return answer.json?.data as Json
}

async function listed(origin: string, headers?: Record<string, string>): Promise<Json[]> {
  return (await api(origin, 'GET', '/api/note', undefined, headers)).json?.data as Json[]
}

/** A page on a fresh context, watched: requests to other hosts, uncaught errors, CSP reports. */
interface Watched {
  page: Page
  context: BrowserContext
  /** Requests to anything but the service (aborted). */
  elsewhere: string[]
  /** Uncaught exceptions and console messages about refused content. */
  errors: string[]
  /** Every request to the service: 'GET /api/note?limit=50&order=desc'. */
  requested: string[]
  /** The Last-Event-ID of every request for the change feed ('' without one). */
  resumedFrom: string[]
}

let browser: Browser | undefined
const servers: ServerProcess[] = []

/** Starts the service (`node dist/src/server.js`) and answers its origin. */
async function serve(env: Record<string, string> = {}): Promise<string> {
  return originOf(await startService(env))
}

async function startService(env: Record<string, string>, port?: number): Promise<ServerProcess> {
  const server = await startServer({ env, ...(port === undefined ? {} : { port }) })
  servers.push(server)
  return server
}

const originOf = (server: { port: number }): string => `http://127.0.0.1:${server.port}`

/**
 * A TCP proxy in front of the service whose connections the test can cut, as a network drop
 * would: the service and its change history stay.
 */
async function cuttableProxy(
  target: number,
): Promise<{ port: number; cut(): void; close(): void }> {
  const sockets = new Set<Socket>()
  const proxy = createServer((client) => {
    const upstream = connect(target, '127.0.0.1')
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
  })
  proxy.listen(0, '127.0.0.1')
  await once(proxy, 'listening')
  return {
    port: (proxy.address() as AddressInfo).port,
    cut: () => {
      for (const socket of sockets) socket.destroy()
    },
    close: () => {
      for (const socket of sockets) socket.destroy()
      proxy.close()
    },
  }
}

/**
 * An HTTP proxy in front of the service that, until `release()`, sends the head of the answer to
 * each request `holds` picks at once and holds its body: answers still arriving when the person
 * acts. `holding` resolves once the first head is sent.
 */
async function heldBodyProxy(
  target: number,
  holds: (request: IncomingMessage) => boolean,
): Promise<{ port: number; holding: Promise<void>; release(): void; close(): void }> {
  let held = (): void => {}
  const holding = new Promise<void>((resolve) => {
    held = resolve
  })
  let releasing = false
  let release = (): void => {}
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  const proxy = createHttpServer((request, response) => {
    const hold = !releasing && holds(request)
    response.on('error', () => {})
    const upstream = httpRequest(
      {
        host: '127.0.0.1',
        port: target,
        method: request.method,
        path: request.url,
        headers: request.headers,
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers)
        if (!hold) {
          answer.pipe(response)
          return
        }
        response.flushHeaders()
        held()
        void released.then(() => answer.pipe(response))
      },
    )
    upstream.on('error', () => response.destroy())
    request.pipe(upstream)
  })
  proxy.listen(0, '127.0.0.1')
  await once(proxy, 'listening')
  return {
    port: (proxy.address() as AddressInfo).port,
    holding,
    release: () => {
      releasing = true
      release()
    },
    close: () => {
      proxy.closeAllConnections()
      proxy.close()
    },
  }
}

async function open(
  origin: string,
  options: { width?: number; bypassCSP?: boolean; context?: BrowserContext } = {},
): Promise<Watched> {
  assert.ok(browser, `${MISSING}: CI must install it (.ci/run does).`)
  const context =
    options.context ??
    (await browser.newContext({
      viewport: { width: options.width ?? 900, height: 900 },
      bypassCSP: options.bypassCSP ?? false,
    }))
  const page = await context.newPage()
  const watched: Watched = {
    page,
    context,
    elsewhere: [],
    errors: [],
    requested: [],
    resumedFrom: [],
  }
  page.on('pageerror', (error) => watched.errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (/^Refused to|violates|Trusted ?Type/i.test(message.text()))
      watched.errors.push(message.text())
  })
  await page.route('**/*', (route) => {
    const url = route.request().url()
    if (url.startsWith(`${origin}/`)) {
      watched.requested.push(`${route.request().method()} ${url.slice(origin.length)}`)
      if (url === `${origin}/api/events`) {
        watched.resumedFrom.push(route.request().headers()['last-event-id'] ?? '')
      }
      return route.continue()
    }
    watched.elsewhere.push(url)
    return route.abort()
  })
  const response = await page.goto(`${origin}/`)
  assert.equal(response?.status(), 200)
  return watched
}

/** The page has loaded its list and follows the change feed. */
async function loaded(page: Page): Promise<void> {
  await page.locator('#list-status:not(:text("Loading"))').waitFor()
  await page.locator('#feed-status[data-state="live"]').waitFor()
}

/** Evaluates a JavaScript expression in the page (the tests are compiled without DOM types). */
function inPage<T>(page: Page, expression: string): Promise<T> {
  return page.evaluate(expression) as Promise<T>
}

const item = (page: Page, text: string) =>
  page.locator('#notes > li').filter({ has: page.locator('h3', { hasText: text }) })

/** Every check that holds after any test: nothing from elsewhere, no error, no refused content. */
function clean(watched: Watched): void {
  assert.deepEqual(watched.elsewhere, [])
  assert.deepEqual(watched.errors, [])
}

describe('the notes page in Chromium', { skip: SKIP, concurrency: false }, () => {
  before(async () => {
    if (existsSync(CHROMIUM)) {
      browser = await launchChromium()
    }
  })
  after(async () => {
    await browser?.close()
    await Promise.all(servers.map((server) => server.stop()))
  })

  it('creates, edits and deletes notes, by mouse and by keyboard', async () => {
    const origin = await serve()
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    assert.equal(await page.locator('#list-status').textContent(), 'No notes yet.')

    // By keyboard alone: Tab to the title, type, Tab to the body, type, Tab past the files to
    // attach to the button, Enter.
    for (let i = 0; i < 6; i++) {
      await page.keyboard.press('Tab')
      if ((await inPage(page, 'document.activeElement?.id')) === 'create-title') break
    }
    await page.keyboard.type('Groceries')
    await page.keyboard.press('Tab')
    await page.keyboard.type('milk, eggs')
    await page.keyboard.press('Tab')
    assert.equal(await inPage(page, 'document.activeElement?.id'), 'create-files')
    await page.keyboard.press('Tab')
    assert.equal(await inPage(page, 'document.activeElement?.id'), 'create-button')
    await page.keyboard.press('Enter')
    await item(page, 'Groceries').locator('.body', { hasText: 'milk, eggs' }).waitFor()
    // The note shows as soon as the replica holds it; the form is cleared and the title focused
    // once its write is durable on the device, a moment later.
    for (const started = Date.now(); Date.now() - started < 5000; ) {
      if ((await inPage(page, 'document.activeElement?.id')) === 'create-title') break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.equal(await inPage(page, 'document.activeElement?.id'), 'create-title')
    assert.equal(await page.locator('#total').textContent(), '1 note')

    // Raw JSON; then a body that is not an object, refused with a reason where it was typed.
    await page.getByLabel('JSON', { exact: true }).check()
    await page.locator('#create-json').fill('{"title":"Call Ann","tags":["work"],"done":false}')
    await page.getByRole('button', { name: 'Create note' }).click()
    await item(page, 'Call Ann').locator('pre.fields').waitFor()
    assert.equal(
      await item(page, 'Call Ann').locator('pre.fields').textContent(),
      '{"tags":["work"],"done":false}',
    )
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['Call Ann', 'Groceries'])
    await page.getByLabel('JSON', { exact: true }).check()
    await page.locator('#create-json').fill('[1, 2]')
    await page.getByRole('button', { name: 'Create note' }).click()
    assert.equal(
      await page.locator('#create-error').textContent(),
      'The JSON must be an object: { "field": value, ... }.',
    )
    await page.getByLabel('Title and body').check()

    // Edit a field.
    await item(page, 'Groceries').getByRole('button', { name: 'Edit' }).click()
    await page.locator('form.editor').getByLabel('Body').fill('milk, eggs, bread')
    await page.locator('form.editor').getByRole('button', { name: 'Save' }).click()
    await item(page, 'Groceries').locator('.body', { hasText: 'milk, eggs, bread' }).waitFor()
    assert.equal(await item(page, 'Groceries').locator('.message').textContent(), 'Saved.')

    // Edit the raw JSON: a field removed (a merge patch), a field changed.
    await item(page, 'Call Ann').getByRole('button', { name: 'Edit' }).click()
    const editor = page.locator('form.editor')
    await editor.getByLabel('JSON', { exact: true }).check()
    await editor.locator('textarea[name="json"]').fill('{"title":"Call Ann","done":true}')
    await editor.getByRole('button', { name: 'Save' }).click()
    await item(page, 'Call Ann').locator('pre.fields', { hasText: '{"done":true}' }).waitFor()

    // Delete: asked first; "Keep it" keeps it, "Yes, delete it" deletes it.
    await item(page, 'Groceries').getByRole('button', { name: 'Delete' }).click()
    await item(page, 'Groceries').getByRole('button', { name: 'Keep it' }).click()
    await item(page, 'Groceries').getByRole('button', { name: 'Delete' }).click()
    await item(page, 'Groceries').getByRole('button', { name: 'Yes, delete it' }).click()
    await item(page, 'Groceries').waitFor({ state: 'detached' })
    assert.equal(await page.locator('#total').textContent(), '1 note')

    // The page keeps its writes on the device and sends them from there: wait until the service
    // has them all (the delete is the last), at most 15 s.
    const expected = [{ title: 'Call Ann', done: true }]
    let fields: unknown[] = []
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
      fields = (await listed(origin)).map(({ id: _id, ...rest }) => rest)
      if (fields.length === 1) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.deepEqual(fields, expected)
    // Every write sent If-Match, and every create an Idempotency-Key (checked by the API's
    // answers: a PATCH or DELETE with a stale ETag would have been a 412).
    clean(watched)
    await watched.context.close()
  })

  it('keeps what the person types for the next note while the last one is still being kept', async () => {
    const origin = await serve()
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    // The moment the note shows in the list (before this device's storage has confirmed it), the
    // person starts the next one: a new title, typed as input events would set it.
    await inPage(
      page,
      `new MutationObserver((_, observer) => {
        if (![...document.querySelectorAll('#notes h3')].some((h) => h.textContent === 'First')) return
        observer.disconnect()
        const title = document.getElementById('create-title')
        title.value = 'Second'
        title.dispatchEvent(new Event('input', { bubbles: true }))
        document.body.dataset.typedAt = 'shown'
      }).observe(document.getElementById('notes'), { childList: true, subtree: true })`,
    )
    await page.locator('#create-title').fill('First')
    await page.locator('#create-body').fill('the body of the first')
    await page.getByRole('button', { name: 'Create note' }).click()
    await item(page, 'First').waitFor()
    assert.equal(await inPage(page, 'document.body.dataset.typedAt'), 'shown')
    // Once the first is kept: the title typed meanwhile stays, the body that was sent is cleared.
    await page.locator('#create-button:not([disabled])').waitFor()
    await page.locator('#announcer', { hasText: 'Note created' }).waitFor({ state: 'attached' })
    assert.equal(await page.locator('#create-title').inputValue(), 'Second')
    assert.equal(await page.locator('#create-body').inputValue(), '')
    await page.getByRole('button', { name: 'Create note' }).click()
    await item(page, 'Second').waitFor()
    // Nothing was typed while the second was kept: the form is emptied, ready for the next.
    await until(page, "document.getElementById('create-title').value === ''")
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['Second', 'First'])
    clean(watched)
    await watched.context.close()
  })

  it('shows note content only as text: markup and script in fields never run', async () => {
    const origin = await serve()
    const hostile = {
      title: '<img src=x onerror="window.__xss=1">',
      body: '</script><script>window.__xss=2</script>',
      html: '<b onmouseover="window.__xss=3">bold</b>',
      '<svg onload="window.__xss=4">': '"><script>window.__xss=5</script>',
    }
    await create(origin, hostile)
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    const note = page.locator('#notes > li').first()
    assert.equal(await note.locator('h3').textContent(), hostile.title)
    assert.equal(await note.locator('.body').textContent(), hostile.body)
    const { title: _t, body: _b, ...rest } = hostile
    assert.equal(await note.locator('pre.fields').textContent(), JSON.stringify(rest))
    // The same text in the editor, and from the form through the feed.
    await note.getByRole('button', { name: 'Edit' }).click()
    assert.equal(await page.locator('form.editor input[name="title"]').inputValue(), hostile.title)
    await page.locator('form.editor').getByRole('button', { name: 'Cancel' }).click()
    await page.locator('#create-title').fill('</script><img src=x onerror="window.__xss=6">')
    await page.getByRole('button', { name: 'Create note' }).click()
    await page.locator('#notes > li').nth(1).waitFor()
    assert.equal(
      await page.locator('#notes h3').first().textContent(),
      '</script><img src=x onerror="window.__xss=6">',
    )
    assert.equal(await page.locator('#notes img, #notes script, #notes svg, #notes b').count(), 0)
    assert.equal(await inPage(page, 'typeof window.__xss'), 'undefined')
    // The <img src=x> was never requested, and the policy refuses HTML from strings outright.
    assert.deepEqual(
      watched.requested.filter((r) => r.startsWith('GET /x')),
      [],
    )
    assert.equal(
      await inPage(
        page,
        `(() => { try { document.body.innerHTML = '<b>x</b>'; return 'assigned' } catch (error) { return error.name } })()`,
      ),
      'TypeError',
    )
    watched.errors.length = 0 // the refused innerHTML above is reported on the console
    clean(watched)
    await watched.context.close()
  })

  it('shows a full store (507) as its detail, where the person created, and keeps the note here', async () => {
    const origin = await serve({ MAX_NOTES: '2' })
    await create(origin, { title: 'one' })
    await create(origin, { title: 'two' })
    const full = await api(origin, 'POST', '/api/note', { title: 'three' })
    assert.equal(full.status, 507)
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    await page.locator('#create-title').fill('three')
    await page.getByRole('button', { name: 'Create note' }).click()
    await page.locator('#create-error:not(:empty)').waitFor()
    assert.equal(
      await page.locator('#create-error').textContent(),
      `Not created. ${String(full.json?.detail)}`,
    )
    // Kept on this device, not sent: the replica tries again later (room may be made).
    assert.equal(await item(page, 'three').locator('.meta').textContent(), 'not sent yet')
    assert.equal(await page.locator('#waiting').textContent(), '1 change waiting to be sent.')
    assert.equal((await listed(origin)).length, 2)
    clean(watched)
    await watched.context.close()
  })

  it('asks for a key on 401, keeps it for the tab only, and says when it may only read', async () => {
    const origin = await serve({ API_KEYS: 'write-key', API_READ_KEYS: 'read-key' })
    await create(origin, { title: 'Secret plans' }, { authorization: 'Bearer write-key' })
    const watched = await open(origin)
    const { page, context } = watched
    const dialog = page.getByRole('dialog', { name: 'Access key' })
    await dialog.waitFor()
    assert.equal(
      await page.locator('#key-reason').textContent(),
      'This API needs an access key: send Authorization: Bearer <key>.',
    )
    await dialog.getByLabel('Key').fill('wrong-key')
    await dialog.getByRole('button', { name: 'Use this key' }).click()
    await page.locator('#key-reason', { hasText: 'not valid' }).waitFor()
    assert.equal(
      await page.locator('#key-reason').textContent(),
      'The access key is not valid; send Authorization: Bearer <key> with a key that is.',
    )
    await dialog.getByLabel('Key').fill('read-key')
    await dialog.getByRole('button', { name: 'Use this key' }).click()
    await item(page, 'Secret plans').waitFor()
    await loaded(page)
    // A write with the read key: said plainly, where it was tried and at the top.
    await page.locator('#create-title').fill('More plans')
    await page.getByRole('button', { name: 'Create note' }).click()
    await page.locator('#create-error:not(:empty)').waitFor()
    assert.match(
      String(await page.locator('#create-error').textContent()),
      /^Not created\. Your access key may only read: it cannot create, change or delete notes\./,
    )
    assert.equal(await page.locator('#read-only').isVisible(), true)
    // Another key, that may write.
    await page.getByRole('button', { name: 'Access key…' }).click()
    await dialog.getByLabel('Key').fill('write-key')
    await dialog.getByRole('button', { name: 'Use this key' }).click()
    await loaded(page)
    await page.getByRole('button', { name: 'Create note' }).click()
    await item(page, 'More plans').waitFor()
    assert.equal(await page.locator('#read-only').isVisible(), false)
    // Kept in sessionStorage only: a reload keeps it, a new tab does not have it. The device
    // keeps only how the page signs in and that this service has no notebooks (it opens offline).
    assert.deepEqual(
      await inPage(
        page,
        `[sessionStorage.getItem('notes-service.access-key'), Object.entries(localStorage).sort()]`,
      ),
      [
        'write-key',
        [
          ['notes-service.notebooks.-', '[]'],
          ['notes-service.sign-in-settings', '{}'],
        ],
      ],
    )
    await page.reload()
    await loaded(page)
    assert.equal(await dialog.isVisible(), false)
    const other = await context.newPage()
    await other.goto(`${origin}/`)
    await other.getByRole('dialog', { name: 'Access key' }).waitFor()
    clean(watched)
    await context.close()
  })

  it('asks for a user token when the service gives each person a notebook, says whose it is, and forgets the token on sign-out', async () => {
    const secret = 'a-secret-of-32-bytes-or-more-000'
    const origin = await serve({ AUTH_JWT_SECRET: secret })
    const exp = Math.floor(Date.now() / 1000) + 3600
    const key = Buffer.from(secret)
    const alice = await signed(key, { alg: 'HS256' }, { sub: 'alice', exp })
    const bob = await signed(key, { alg: 'HS256' }, { sub: 'bob', exp })
    await create(origin, { title: 'Alice plans' }, { authorization: `Bearer ${alice}` })
    const watched = await open(origin)
    const { page } = watched
    const dialog = page.getByRole('dialog', { name: 'Access key' })
    await dialog.waitFor()
    assert.equal(
      await page.locator('#key-reason').textContent(),
      'This API needs a user token: send Authorization: Bearer <token>.',
    )
    await dialog.getByLabel('Key').fill(alice)
    await dialog.getByRole('button', { name: 'Use this key' }).click()
    await item(page, 'Alice plans').waitFor()
    await loaded(page)
    assert.equal(await page.locator('#whoami').textContent(), 'Notebook of alice')
    // Signed out: the token is forgotten, and the page asks again.
    await page.getByRole('button', { name: 'Sign out' }).click()
    await dialog.waitFor()
    assert.equal(await inPage(page, `sessionStorage.getItem('notes-service.access-key')`), null)
    assert.equal(await page.locator('#whoami').isVisible(), false)
    await dialog.getByLabel('Key').fill(bob)
    await dialog.getByRole('button', { name: 'Use this key' }).click()
    await loaded(page)
    assert.equal(await page.locator('#whoami').textContent(), 'Notebook of bob')
    assert.equal(await page.locator('#notes > li').count(), 0)
    // Bob's page follows Bob's notebook alone: Alice's next note never shows, his own does.
    await create(origin, { title: 'More of Alice' }, { authorization: `Bearer ${alice}` })
    await create(origin, { title: 'Bob idea' }, { authorization: `Bearer ${bob}` })
    await item(page, 'Bob idea').waitFor()
    assert.equal(await item(page, 'More of Alice').count(), 0)
    assert.equal(await item(page, 'Alice plans').count(), 0)
    clean(watched)
    await watched.context.close()
  })

  it('asks no more for a key once one is entered when a request sent before it is refused after', async () => {
    const secret = 'a-secret-of-32-bytes-or-more-000'
    const server = await startService({ AUTH_JWT_SECRET: secret })
    const exp = Math.floor(Date.now() / 1000) + 3600
    const alice = await signed(Buffer.from(secret), { alg: 'HS256' }, { sub: 'alice', exp })
    await create(originOf(server), { title: 'Alice plans' }, { authorization: `Bearer ${alice}` })
    // The lists the page asks for before it has a key: their 401s come, and are still being
    // read when the key is entered.
    const proxy = await heldBodyProxy(
      server.port,
      (request) =>
        request.method === 'GET' &&
        request.url?.split('?')[0] === '/api/note' &&
        request.headers.authorization === undefined,
    )
    try {
      const watched = await open(`http://127.0.0.1:${proxy.port}`)
      const { page } = watched
      const dialog = page.getByRole('dialog', { name: 'Access key' })
      await dialog.waitFor()
      await proxy.holding
      await dialog.getByLabel('Key').fill(alice)
      await dialog.getByRole('button', { name: 'Use this key' }).click()
      await page.locator('#whoami', { hasText: 'Notebook of alice' }).waitFor()
      proxy.release()
      // Alice's notebook opens only once the keyless one has stopped: its 401s were heard by then.
      await item(page, 'Alice plans').waitFor()
      await loaded(page)
      assert.equal(await dialog.isVisible(), false)
      clean(watched)
      await watched.context.close()
    } finally {
      proxy.close()
    }
  })

  it('shows 10,000 notes newest first, 50 more at a time, as the person scrolls', {
    timeout: 120_000,
  }, async () => {
    const server = await startService({})
    const origin = originOf(server)
    const count = 10_000
    // Pipelined POSTs, as the benchmark preloads its servers: seconds, not tens of them.
    await preload(server.port, count)
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    assert.equal(await page.locator('#total').textContent(), '10,000 notes')
    assert.equal(await page.locator('#list-status').textContent(), 'Showing 50 of 10,000 notes.')
    // Does what a person does (scrolls to the end, or presses the button) and waits for the list
    // to grow, in the page: a Playwright locator polling 10,000 elements would be the slow part.
    const grow = (action: string) => `new Promise((resolve) => {
      const list = document.getElementById('notes')
      const before = list.children.length
      const grown = new MutationObserver(() => {
        if (list.children.length === before) return
        grown.disconnect()
        resolve(list.children.length)
      })
      grown.observe(list, { childList: true })
      setTimeout(() => resolve(list.children.length), 10000)
      ${action}
    })`
    const scroll = grow('window.scrollTo(0, document.documentElement.scrollHeight)')
    const press = grow("document.getElementById('more').click()")
    for (let shown = 50; shown < count; ) {
      const now = await inPage<number>(page, shown < 200 ? scroll : press)
      // One page per scroll or press: the end of the list is out of view once it grew.
      assert.equal(now, shown + 50)
      shown = now
    }
    await page.locator('#list-status', { hasText: 'All 10,000 notes shown.' }).waitFor()
    assert.equal(await page.locator('#more').isVisible(), false)
    // Every note once, newest first.
    const titles = await page.locator('#notes h3').allTextContents()
    assert.equal(titles.length, count)
    assert.equal(new Set(titles).size, count)
    const ids = await inPage<number[]>(
      page,
      `[...document.querySelectorAll('#notes .meta')].map((p) => Number(/^id (\\d+)/.exec(p.textContent)[1]))`,
    )
    assert.equal(new Set(ids).size, count)
    assert.ok(
      ids.every((id, i) => i === 0 || id < (ids[i - 1] as number)),
      'ids fall, newest first',
    )
    // The notebook was loaded once, into this device's copy, 1,000 notes a request; the pages
    // shown as the person scrolls come from that copy.
    const pages = watched.requested.filter(
      (r) => r.startsWith('GET /api/note?limit=1000') && !r.includes('sort=updated'),
    )
    assert.equal(pages.length, count / 1000)
    assert.ok(pages.slice(1).every((r) => /^GET \/api\/note\?limit=1000&after=/.test(r)))
    // And the order of last change, read once, as many pages (the list's order needs it).
    const order = watched.requested.filter((r) => r.includes('sort=updated'))
    assert.equal(order.length, count / 1000)
    clean(watched)
    await watched.context.close()
  })

  it('after Cancel on an editor whose note changed elsewhere, shows the new version and drops the warning', async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Plan', body: 'draft 1' })
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    // The only note; while it is edited it has no heading to find it by.
    const plan = page.locator('#notes > li')
    await plan.getByRole('button', { name: 'Edit' }).click()
    await page.locator('form.editor').waitFor()
    const path = `/api/note/${String(note.id)}`
    assert.equal((await api(origin, 'PATCH', path, { body: 'theirs' })).status, 200)
    await plan.locator('.message', { hasText: 'changed elsewhere' }).waitFor()
    await page.locator('form.editor').getByRole('button', { name: 'Cancel' }).click()
    await plan.locator('.body', { hasText: 'theirs' }).waitFor()
    // No editor, no Save button: nothing is left to say about saving.
    assert.equal(await plan.locator('.message').textContent(), '')
    await plan.getByRole('button', { name: 'Delete' }).click()
    await plan.getByRole('button', { name: 'Yes, delete it' }).waitFor()
    assert.equal(await plan.locator('.message').textContent(), '')
    clean(watched)
    await watched.context.close()
  })

  it('keeps "Delete this note?" open when the note changes elsewhere, and says so', async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Plan', body: 'draft 1' })
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    const plan = item(page, 'Plan')
    await plan.getByRole('button', { name: 'Delete' }).click()
    await plan.getByText('Delete this note?').waitFor()
    const path = `/api/note/${String(note.id)}`
    assert.equal((await api(origin, 'PATCH', path, { body: 'theirs' })).status, 200)
    await plan.locator('.body', { hasText: 'theirs' }).waitFor()
    assert.equal(await plan.getByText('Delete this note?').isVisible(), true)
    assert.equal(
      await plan.locator('.message').textContent(),
      'This note was just changed elsewhere: above is the new version.',
    )
    // The safe answer has the focus; the person sees the new version and decides.
    assert.equal(await inPage(page, 'document.activeElement?.textContent'), 'Keep it')
    await plan.getByRole('button', { name: 'Yes, delete it' }).click()
    await plan.waitFor({ state: 'detached' })
    // Deleted on this device at once, and sent from there.
    await page.locator('#waiting:empty').waitFor({ state: 'attached' })
    assert.deepEqual(await listed(origin), [])
    clean(watched)
    await watched.context.close()
  })

  it("shows what is typed in the editor's inputs in normal weight, under bold labels", async () => {
    const origin = await serve()
    await create(origin, { title: 'Plan', body: 'draft 1' })
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    await item(page, 'Plan').getByRole('button', { name: 'Edit' }).click()
    // The click returns before the editor is drawn: wait for it, else querySelector can find nothing.
    await page.locator('form.editor textarea[name="json"]').waitFor({ state: 'attached' })
    const weight = (selector: string) =>
      inPage<string>(page, `getComputedStyle(document.querySelector('${selector}')).fontWeight`)
    assert.equal(await weight('form.editor .fields-part label'), '600')
    for (const selector of [
      'form.editor input[name="title"]',
      'form.editor textarea[name="body"]',
      'form.editor textarea[name="json"]',
      '#create-title',
      '#key-input',
    ]) {
      assert.equal(await weight(selector), '400', selector)
    }
    clean(watched)
    await watched.context.close()
  })

  it('says once, where the list would be, that the service needs an access key', async () => {
    const origin = await serve({ API_KEYS: 'write-key' })
    const watched = await open(origin)
    const { page } = watched
    await page.getByRole('dialog', { name: 'Access key' }).waitFor()
    await page.locator('#list-status:not(:text("Loading"))').waitFor()
    assert.equal(
      await page.locator('#list-status').textContent(),
      'The notes could not be loaded. This API needs an access key: send Authorization: Bearer <key>.',
    )
    assert.equal(
      await page.locator('#key-reason').textContent(),
      'This API needs an access key: send Authorization: Bearer <key>.',
    )
    clean(watched)
    await watched.context.close()
  })

  it('shows what another page creates, edits and deletes as it happens, from the feed, without loading the list again', async () => {
    const origin = await serve()
    const a = await open(origin)
    const b = await open(origin)
    await loaded(a.page)
    await loaded(b.page)
    // A bound on waiting, not a speed check (a second here, on a quiet machine): each change
    // reaches the other page through the change feed, since neither loads the list again.
    const soon = { timeout: 15_000 }

    await a.page.locator('#create-title').fill('From A')
    await a.page.getByRole('button', { name: 'Create note' }).click()
    await item(a.page, 'From A').waitFor()
    await item(b.page, 'From A').waitFor(soon)
    assert.equal(await b.page.locator('#total').textContent(), '1 note')

    await item(b.page, 'From A').getByRole('button', { name: 'Edit' }).click()
    await b.page.locator('form.editor').getByLabel('Body').fill('edited in B')
    await b.page.locator('form.editor').getByRole('button', { name: 'Save' }).click()
    await item(b.page, 'From A').locator('.body', { hasText: 'edited in B' }).waitFor()
    await item(a.page, 'From A').locator('.body', { hasText: 'edited in B' }).waitFor(soon)

    await create(origin, { title: 'From curl' })
    await item(a.page, 'From curl').waitFor(soon)
    await item(b.page, 'From curl').waitFor(soon)

    await item(a.page, 'From A').getByRole('button', { name: 'Delete' }).click()
    await item(a.page, 'From A').getByRole('button', { name: 'Yes, delete it' }).click()
    await item(a.page, 'From A').waitFor({ state: 'detached' })
    await item(b.page, 'From A').waitFor({ state: 'detached', ...soon })
    for (const { page, requested } of [a, b]) {
      assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['From curl'])
      assert.equal(await page.locator('#total').textContent(), '1 note')
      assert.equal(requested.filter((r) => r.startsWith('GET /api/note?limit=1000')).length, 1)
    }
    clean(a)
    clean(b)
    await a.context.close()
    await b.context.close()
  })

  it('resumes from its last event after a network drop, missing nothing and reloading nothing', async () => {
    const server = await startService({})
    const origin = originOf(server)
    const proxy = await cuttableProxy(server.port)
    try {
      const watched = await open(`http://127.0.0.1:${proxy.port}`)
      const { page } = watched
      await loaded(page)
      await create(origin, { title: 'Before the drop' })
      await item(page, 'Before the drop').waitFor()
      const version = (await api(origin, 'GET', '/api/note')).headers.get('notes-version')
      proxy.cut()
      await page.locator('#feed-status:not([data-state="live"])').waitFor()
      await create(origin, { title: 'During the drop' })
      await loaded(page)
      await item(page, 'During the drop').waitFor()
      assert.deepEqual(await page.locator('#notes h3').allTextContents(), [
        'During the drop',
        'Before the drop',
      ])
      assert.equal(await page.locator('#total').textContent(), '2 notes')
      // The whole list was loaded once; the feed was asked again, from where it was.
      assert.equal(
        watched.requested.filter((r) => r.startsWith('GET /api/note?limit=1000')).length,
        1,
      )
      assert.ok(watched.resumedFrom.length >= 2, JSON.stringify(watched.resumedFrom))
      assert.equal(watched.resumedFrom.at(-1), version)
      clean(watched)
      await watched.context.close()
    } finally {
      proxy.close()
    }
  })

  it('resumes after the server restarts, and reloads the list when the feed says reset', {
    timeout: 60_000,
  }, async () => {
    const first = await startService({})
    const origin = originOf(first)
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    await create(origin, { title: 'Before the restart' })
    await item(page, 'Before the restart').waitFor()
    await first.stop()
    await page.locator('#feed-status[data-state="retrying"]').waitFor()
    // The memory store starts empty: the page's last event id means nothing to it (reset).
    await startService({}, first.port)
    await create(origin, { title: 'After the restart' })
    await item(page, 'After the restart').waitFor({ timeout: 15_000 })
    await loaded(page)
    assert.deepEqual(await page.locator('#notes h3').allTextContents(), ['After the restart'])
    assert.equal(await page.locator('#total').textContent(), '1 note')
    clean(watched)
    await watched.context.close()
  })

  it('loads in under 80 KB compressed, everything counted, and makes no request elsewhere', async (t) => {
    const origin = await serve()
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    // What the browser received for each request (Resource Timing: headers and encoded body),
    // but the feed's stream, which never finishes and carries events, not the page.
    const transferred = await inPage<{ name: string; transfer: number; body: number }[]>(
      page,
      `performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
        .filter((e) => !e.name.endsWith('/api/events'))
        .map((e) => ({ name: new URL(e.name).pathname + new URL(e.name).search, transfer: e.transferSize, body: e.decodedBodySize }))`,
    )
    const total = transferred.reduce((sum, e) => sum + e.transfer, 0)
    const raw = transferred.reduce((sum, e) => sum + e.body, 0)
    t.diagnostic(
      `transferred ${total} bytes (bodies ${raw} bytes decoded): ${JSON.stringify(transferred)}`,
    )
    // The page, its style and icon, and every module it preloads (its own and the client
    // library's: each once); the notebook loaded once, and the replica's look at the version.
    const html = readFileSync(new URL('../../../src/ui/index.html', import.meta.url), 'utf8')
    const modules = [...html.matchAll(/<link rel="modulepreload" href="([^"]+)">/g)].map(
      (m) => m[1] as string,
    )
    const names = transferred.map((e) => e.name)
    assert.deepEqual(
      names.filter((name) => !name.startsWith('/api/')).sort(),
      // How the page signs in (it does not here, and never loads oauth4webapi then).
      ['/', '/ui/icon.svg', '/ui/main.js', '/ui/style.css', '/ui/sign-in.json', ...modules].sort(),
    )
    assert.ok(modules.includes('/ui/client/replica/replica.js'))
    assert.deepEqual(
      names.filter((name) => name === '/api/note?limit=1000'),
      ['/api/note?limit=1000'],
    )
    // Besides: which notebooks there are (none without user tokens), and the order of last
    // change, once each.
    assert.deepEqual(
      names.filter((name) => name.startsWith('/api/') && name !== '/api/note?limit=1000').sort(),
      [
        '/api/notebooks',
        ...names.filter((name) => name === '/api/note?limit=1'),
        '/api/note?sort=updated&order=desc&limit=1000',
      ].sort(),
    )
    assert.ok(total < 80 * 1024, `${total} bytes`)
    clean(watched)
    await watched.context.close()
  })

  it('has no serious or critical accessibility violations (axe-core), and fits 360 px', async () => {
    const origin = await serve()
    await create(origin, { title: 'Groceries', body: 'milk, eggs', tags: ['home'] })
    await create(origin, { body: 'A note without a title' })
    await create(origin, { title: 'Call Ann', done: false })
    const axe = readFileSync(AXE, 'utf8')
    for (const width of [900, 360]) {
      // axe builds its own nodes with innerHTML, which the page's Trusted Types policy refuses.
      const watched = await open(origin, { width, bypassCSP: true })
      const { page } = watched
      await loaded(page)
      await page.evaluate(axe)
      const run = async (state: string): Promise<void> => {
        const violations = await inPage<{ id: string; impact: string; targets: string[] }[]>(
          page,
          `axe.run({ runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] }).then((result) =>
            result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) })))`,
        )
        assert.deepEqual(
          violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
          [],
          `${state} at ${width} px: ${JSON.stringify(violations)}`,
        )
      }
      await run('the list')
      await item(page, 'Groceries').getByRole('button', { name: 'Edit' }).click()
      await page.locator('form.editor').waitFor()
      await run('the editor')
      assert.equal(
        await inPage(page, 'document.documentElement.scrollWidth'),
        width,
        `no sideways scrolling at ${width} px`,
      )
      if (SCREENSHOT !== undefined && width === 900) {
        await page.locator('form.editor').getByRole('button', { name: 'Cancel' }).click()
        await page.screenshot({ path: SCREENSHOT, fullPage: true })
      }
      clean(watched)
      await watched.context.close()
    }
  })
})
