/**
 * The notes page offline, in Chromium against the real service: its service worker keeps the
 * shell, so the page opens with the network off or the service down, and never serves a stale
 * shell once the service answers again (a new deployment is seen on the next reload).
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { axeClean } from '../support/axe.js'
import { CHROMIUM, launchChromium, MISSING, SKIP, until } from '../support/chromium.js'

let browser: Browser | undefined
const servers: ServerProcess[] = []

async function startService(port?: number): Promise<ServerProcess> {
  const server = await startServer(port === undefined ? {} : { port })
  servers.push(server)
  return server
}

type Json = Record<string, unknown>

/** The service's notes, asked from outside the browser (as curl would). */
async function listed(origin: string): Promise<Json[]> {
  const answer = await fetch(`${origin}/api/note`)
  return ((await answer.json()) as { data: Json[] }).data
}

async function create(origin: string, note: Json): Promise<Json> {
  const answer = await fetch(`${origin}/api/note`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(note),
  })
  assert.equal(answer.status, 200)
  return ((await answer.json()) as { data: Json }).data
}

/** Polls `check` (every 100 ms, at most `ms`) until it holds. */
async function eventually(check: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  for (const started = Date.now(); Date.now() - started < ms; ) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.fail(`never: ${what}`)
}

const item = (page: Page, text: string) =>
  page.locator('#notes > li').filter({ has: page.locator('h3', { hasText: text }) })

async function titles(page: Page): Promise<string[]> {
  return page.locator('#notes h3').allTextContents()
}

/** The page has its list from the service and follows the feed. */
async function synced(page: Page): Promise<void> {
  await page.locator('#list-status:not(:text("Loading"))').waitFor()
  await page.locator('#feed-status[data-state="live"]').waitFor()
}

async function editBody(page: Page, title: string, body: string): Promise<void> {
  await item(page, title).getByRole('button', { name: 'Edit' }).click()
  await page.locator('form.editor').getByLabel('Body').fill(body)
  await page.locator('form.editor').getByRole('button', { name: 'Save' }).click()
  await item(page, title).locator('.body', { hasText: body }).waitFor()
}

/**
 * An HTTP front for the service on a port of its own that can be taken down and brought back on
 * the same port, as a deployment would be; `version` 2 serves the page with a changed heading
 * (a new build of index.html, with its own ETag).
 */
class Front {
  port = 0
  version = 1
  /** Requests for the change feed forwarded: a second one is the feed connecting again. */
  feeds = 0
  #server: Server | undefined
  readonly #sockets = new Set<Socket>()
  readonly #target: number

  constructor(target: number) {
    this.#target = target
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`
  }

  async up(): Promise<void> {
    const server = createServer((req, res) => this.#forward(req, res))
    server.on('connection', (socket) => {
      this.#sockets.add(socket)
      socket.on('close', () => this.#sockets.delete(socket))
    })
    server.listen(this.port, '127.0.0.1')
    await once(server, 'listening')
    this.port = (server.address() as AddressInfo).port
    this.#server = server
  }

  async down(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    if (server === undefined) return
    for (const socket of this.#sockets) socket.destroy()
    server.close()
    await once(server, 'close')
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    if (req.url?.startsWith('/api/events') === true) this.feeds++
    const rewrite = this.version === 2 && (req.url === '/' || req.url?.startsWith('/?'))
    const headers = { ...req.headers }
    if (rewrite) {
      delete headers['if-none-match']
      delete headers['accept-encoding']
    }
    const upstream = request(
      { host: '127.0.0.1', port: this.#target, method: req.method, path: req.url, headers },
      (answer) => {
        if (!rewrite) {
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
          return
        }
        const chunks: Buffer[] = []
        answer.on('data', (chunk: Buffer) => chunks.push(chunk))
        answer.on('end', () => {
          const html = Buffer.concat(chunks)
            .toString('utf8')
            .replace('<h1>Notes</h1>', '<h1>Notes, version 2</h1>')
          const { etag: _etag, 'content-length': _length, ...rest } = answer.headers
          res.writeHead(answer.statusCode ?? 502, { ...rest, etag: '"version-2"' })
          res.end(html)
        })
      },
    )
    upstream.on('error', () => res.destroy())
    req.pipe(upstream)
  }
}

/** A fresh profile; `axe`: without the page's policy, which refuses axe's own innerHTML. */
async function newContext(options: { axe?: boolean } = {}): Promise<BrowserContext> {
  assert.ok(browser, `${MISSING}: CI must install it (.ci/run does).`)
  return browser.newContext({
    viewport: { width: 900, height: 900 },
    bypassCSP: options.axe === true,
  })
}

/** The page, once its service worker controls it (installed, activated, claimed). */
const pageErrors = new WeakMap<Page, string[]>()

async function openControlled(context: BrowserContext, origin: string): Promise<Page> {
  const page = await context.newPage()
  const errors: string[] = []
  pageErrors.set(page, errors)
  page.on('pageerror', (error) => errors.push(error.message))
  const response = await page.goto(`${origin}/`)
  assert.equal(response?.status(), 200)
  await until(page, 'navigator.serviceWorker.controller !== null')
  assert.deepEqual(errors, [])
  return page
}

describe('the notes page offline, in Chromium', { skip: SKIP, concurrency: false }, () => {
  before(async () => {
    if (existsSync(CHROMIUM)) browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await Promise.all(servers.map((server) => server.stop()))
  })

  it('opens from its service worker after a reload with the network off', async () => {
    const service = await startService()
    const context = await newContext()
    const origin = `http://127.0.0.1:${service.port}`
    const page = await openControlled(context, origin)
    await page.locator('#list-status:not(:text("Loading"))').waitFor()
    // The worker registered at the root, through the page's one Trusted Types policy.
    assert.equal(
      await page.evaluate('navigator.serviceWorker.getRegistration().then((r) => r.scope)'),
      `${origin}/`,
    )
    await context.setOffline(true)
    const reloaded = await page.reload()
    assert.equal(reloaded?.fromServiceWorker(), true)
    await page.locator('h1', { hasText: 'Notes' }).waitFor()
    // The shell's scripts ran (they came from the cache too), and the network was off for them.
    await page.locator('#list-status:not(:text("Loading"))').waitFor()
    assert.match(String(await page.locator('#list-status').textContent()), /could not be reached/)
    await context.setOffline(false)
    await context.close()

    // Without the worker, the same reload with the network off opens nothing.
    assert.ok(browser)
    const bare = await browser.newContext({ serviceWorkers: 'block' })
    const plain = await bare.newPage()
    await plain.goto(`${origin}/`)
    await bare.setOffline(true)
    await assert.rejects(plain.reload(), /ERR_INTERNET_DISCONNECTED/)
    await bare.close()
  })

  it('never serves a stale shell once the service answers: a new deployment shows on the next reload', {
    timeout: 60_000,
  }, async () => {
    const service = await startService()
    const front = new Front(service.port)
    await front.up()
    const context = await newContext()
    try {
      const page = await openControlled(context, front.origin)
      assert.equal(await page.locator('h1').textContent(), 'Notes')
      // The service goes away: the page still opens, from the cache.
      await front.down()
      await page.reload()
      assert.equal(await page.locator('h1').textContent(), 'Notes')
      // It comes back as a new version: the next reload shows that one, not the cached copy.
      front.version = 2
      await front.up()
      await page.reload()
      assert.equal(await page.locator('h1').textContent(), 'Notes, version 2')
      // And the cache now holds the new version: offline, the new one opens.
      await front.down()
      await page.reload()
      assert.equal(await page.locator('h1').textContent(), 'Notes, version 2')
    } finally {
      await context.close()
      await front.down()
    }
  })

  it('leaves the API to the network: no answer of /api/ is ever kept in its cache', async () => {
    const service = await startService()
    const context = await newContext()
    const origin = `http://127.0.0.1:${service.port}`
    const page = await openControlled(context, origin)
    await page.locator('#list-status:not(:text("Loading"))').waitFor()
    await page.reload()
    await page.locator('#list-status:not(:text("Loading"))').waitFor()
    const kept = (await page.evaluate(`(async () => {
      const urls = []
      for (const name of await caches.keys()) {
        for (const request of await (await caches.open(name)).keys()) urls.push(new URL(request.url).pathname)
      }
      return urls.sort()
    })()`)) as string[]
    assert.ok(kept.includes('/') && kept.includes('/ui/main.js'), JSON.stringify(kept))
    assert.deepEqual(
      kept.filter((path) => !(path === '/' || path.startsWith('/ui/'))),
      [],
    )
    await context.close()
  })

  it('keeps the notebook on this device: lists, searches, creates, edits and deletes offline, across reloads, and sends it all on reconnect', {
    timeout: 90_000,
  }, async () => {
    const service = await startService()
    const origin = `http://127.0.0.1:${service.port}`
    await create(origin, { title: 'Groceries', body: 'milk' })
    await create(origin, { title: 'Call Ann', body: 'about the trip' })
    const context = await newContext({ axe: true })
    const page = await openControlled(context, origin)
    await synced(page)
    assert.deepEqual(await titles(page), ['Call Ann', 'Groceries'])

    await context.setOffline(true)
    await page.reload()
    await page.locator('#feed-status[data-state="retrying"]').waitFor()
    assert.deepEqual(await titles(page), ['Call Ann', 'Groceries'])
    // Search runs on this device's copy.
    await page.getByLabel('Search the notes').fill('MILK')
    await eventually(async () => (await titles(page)).join() === 'Groceries', 'the search')
    assert.equal(await page.locator('#list-status').textContent(), '1 note matches “MILK”.')
    await page.getByLabel('Search the notes').fill('')

    await page.locator('#create-title').fill('Offline idea')
    await page.getByRole('button', { name: 'Create note' }).click()
    await item(page, 'Offline idea').waitFor()
    assert.equal(await item(page, 'Offline idea').locator('.meta').textContent(), 'not sent yet')
    await editBody(page, 'Groceries', 'milk, bread')
    await item(page, 'Call Ann').getByRole('button', { name: 'Delete' }).click()
    await item(page, 'Call Ann').getByRole('button', { name: 'Yes, delete it' }).click()
    await item(page, 'Call Ann').waitFor({ state: 'detached' })
    const waiting = page.locator('#waiting')
    assert.equal(await waiting.getAttribute('aria-live'), 'polite')
    assert.equal(await waiting.textContent(), '3 changes waiting to be sent.')
    await axeClean(page, 'offline, with changes waiting')

    // The outbox survives a reload with the network still off.
    await page.reload()
    await item(page, 'Offline idea').waitFor()
    assert.deepEqual(await titles(page), ['Offline idea', 'Groceries'])
    await waiting.filter({ hasText: '3 changes waiting' }).waitFor()
    // Nothing reached the service meanwhile.
    assert.deepEqual(
      (await listed(origin)).map((note) => note.title),
      ['Groceries', 'Call Ann'],
    )

    await context.setOffline(false)
    await eventually(async () => (await waiting.textContent()) === '', 'the outbox sent')
    const notes = await listed(origin)
    assert.deepEqual(
      notes.map(({ id: _id, ...fields }) => fields),
      [{ title: 'Groceries', body: 'milk, bread' }, { title: 'Offline idea' }],
    )
    // The created note now has the service's id.
    await eventually(
      async () =>
        /^id \d+/.test(String(await item(page, 'Offline idea').locator('.meta').textContent())),
      'the id shown',
    )
    await context.close()
  })

  it('creates nothing twice while the network flaps during the sync', {
    timeout: 90_000,
  }, async () => {
    const service = await startService()
    const origin = `http://127.0.0.1:${service.port}`
    const context = await newContext()
    const page = await openControlled(context, origin)
    await synced(page)
    await context.setOffline(true)
    const names = ['one', 'two', 'three', 'four', 'five', 'six']
    for (const name of names) {
      await page.locator('#create-title').fill(name)
      await page.getByRole('button', { name: 'Create note' }).click()
      await item(page, name)
        .waitFor({ timeout: 10_000 })
        .catch(async (err: unknown) => {
          const said: unknown[] = await page.evaluate(
            `[document.getElementById('create-error').textContent, document.getElementById('sync-error').textContent, document.getElementById('list-status').textContent, document.getElementById('create-title').value, [...document.querySelectorAll('#notes h3')].map((h) => h.textContent).join(), document.getElementById('create-button').disabled, document.activeElement?.id, document.getElementById('waiting').textContent]`,
          )
          said.push(pageErrors.get(page) ?? [])
          throw new Error(`${name}: ${JSON.stringify(said)}`, { cause: err })
        })
    }
    for (let flap = 0; flap < 8; flap++) {
      await context.setOffline(flap % 2 === 1)
      await new Promise((resolve) => setTimeout(resolve, 50 + flap * 40))
    }
    await context.setOffline(false)
    await eventually(async () => (await page.locator('#waiting').textContent()) === '', 'all sent')
    const sent = (await listed(origin)).map((note) => note.title)
    assert.deepEqual(sent, names)
    // And the page shows each once, too.
    await eventually(async () => (await titles(page)).length === names.length, 'six notes')
    assert.deepEqual(await titles(page), [...names].reverse())
    await context.close()
  })

  it('shows a clash between two browsers with both versions, and resolves it each way', {
    timeout: 90_000,
  }, async () => {
    const service = await startService()
    const origin = `http://127.0.0.1:${service.port}`
    await create(origin, { title: 'Plan', body: 'draft' })
    const mineContext = await newContext({ axe: true })
    const theirsContext = await newContext()
    const mine = await openControlled(mineContext, origin)
    const theirs = await openControlled(theirsContext, origin)
    await synced(mine)
    await synced(theirs)
    const conflicts = mine.locator('#conflicts')

    /**
     * Mine edits offline while theirs edits online; mine comes back and meets theirs. Each side
     * makes the body one word of its own: the same word changed differently, which the replica
     * cannot merge (a change of different words would be merged without asking).
     */
    const clash = async (body: string): Promise<void> => {
      await mineContext.setOffline(true)
      await editBody(mine, 'Plan', `${body}mine`)
      // The edit could not be sent: the page says so, and keeps it.
      await mine.locator('#waiting', { hasText: '1 change waiting' }).waitFor()
      await mine.locator('#feed-status[data-state="retrying"]').waitFor()
      await editBody(theirs, 'Plan', `${body}theirs`)
      await eventually(
        async () => (await listed(origin))[0]?.body === `${body}theirs`,
        'their edit saved',
      )
      await mineContext.setOffline(false)
      await conflicts.locator('li').waitFor()
    }

    await clash('first')
    assert.equal(await conflicts.locator('h3').textContent(), 'Your change to “Plan” clashed')
    // The disputed field alone, with both values (the title, the same on both, is not shown).
    assert.deepEqual(await conflicts.locator('dt').allTextContents(), ['body', 'body'])
    assert.deepEqual(
      (await conflicts.locator('pre').allTextContents()).map((text) => JSON.parse(text)),
      ['firstmine', 'firsttheirs'],
    )
    await axeClean(mine, 'a clash shown')
    await conflicts.getByRole('button', { name: 'Keep mine' }).click()
    await conflicts.waitFor({ state: 'hidden' })
    await eventually(
      async () => (await listed(origin))[0]?.body === 'firstmine',
      'mine sent over theirs',
    )
    await item(theirs, 'Plan').locator('.body', { hasText: 'firstmine' }).waitFor()

    await clash('second')
    await conflicts.getByRole('button', { name: 'Keep theirs' }).click()
    await conflicts.waitFor({ state: 'hidden' })
    await item(mine, 'Plan').locator('.body', { hasText: 'secondtheirs' }).waitFor()
    assert.equal(await mine.locator('#waiting').textContent(), '')
    assert.equal((await listed(origin))[0]?.body, 'secondtheirs')

    await clash('third')
    await conflicts.getByRole('button', { name: 'Edit a merged note' }).click()
    await conflicts
      .getByLabel('The merged note as JSON')
      .fill('{"title":"Plan","body":"third, merged"}')
    await conflicts.getByRole('button', { name: 'Save the merged note' }).click()
    await conflicts.waitFor({ state: 'hidden' })
    await eventually(
      async () => (await listed(origin))[0]?.body === 'third, merged',
      'the merged note sent',
    )
    await item(theirs, 'Plan').locator('.body', { hasText: 'third, merged' }).waitFor()
    await mineContext.close()
    await theirsContext.close()
  })

  it("merges two browsers' offline edits of one note, the title on one and a word of the body on the other, with no dialog", {
    timeout: 90_000,
  }, async () => {
    const service = await startService()
    const origin = `http://127.0.0.1:${service.port}`
    await create(origin, { title: 'Trip', body: 'pack the tent and the stove' })
    const oneContext = await newContext({ axe: true })
    const otherContext = await newContext()
    const one = await openControlled(oneContext, origin)
    const other = await openControlled(otherContext, origin)
    await synced(one)
    await synced(other)
    await oneContext.setOffline(true)
    await otherContext.setOffline(true)
    await item(one, 'Trip').getByRole('button', { name: 'Edit' }).click()
    await one.locator('form.editor').getByLabel('Title').fill('Trip to the lake')
    await one.locator('form.editor').getByRole('button', { name: 'Save' }).click()
    await item(one, 'Trip to the lake').waitFor()
    await editBody(other, 'Trip', 'pack the tarp and the stove')
    for (const page of [one, other]) {
      await page.locator('#waiting', { hasText: '1 change waiting' }).waitFor()
    }
    await oneContext.setOffline(false)
    await eventually(
      async () => (await listed(origin))[0]?.title === 'Trip to the lake',
      'the title sent',
    )
    await otherContext.setOffline(false)
    const both = { title: 'Trip to the lake', body: 'pack the tarp and the stove' }
    await eventually(async () => {
      const [note] = await listed(origin)
      return note?.title === both.title && note?.body === both.body
    }, 'both edits kept')
    for (const page of [one, other]) {
      await item(page, both.title).locator('.body', { hasText: both.body }).waitFor()
      await eventually(async () => (await page.locator('#waiting').textContent()) === '', 'sent')
      assert.equal(await page.locator('#conflicts li').count(), 0, 'no clash shown')
      assert.equal(await page.locator('#conflicts').isHidden(), true)
    }
    // Byte for byte the same note in both pages and on the service.
    const shown = await Promise.all(
      [one, other].map((page) => item(page, both.title).locator('.body').textContent()),
    )
    assert.deepEqual(shown, [both.body, both.body])
    await axeClean(one, 'after a merge')
    await oneContext.close()
    await otherContext.close()
  })

  it('recovers when the service restarts on the same port, sending what waited', {
    timeout: 90_000,
  }, async () => {
    const first = await startService()
    const origin = `http://127.0.0.1:${first.port}`
    await create(origin, { title: 'Before the restart' })
    const context = await newContext()
    const page = await openControlled(context, origin)
    await synced(page)
    await first.stop()
    await page.locator('#feed-status[data-state="retrying"]').waitFor()
    await page.locator('#create-title').fill('Written while it was down')
    await page.getByRole('button', { name: 'Create note' }).click()
    await page.locator('#waiting', { hasText: '1 change waiting' }).waitFor()
    // A new app (the memory store starts empty): the page reloads its copy, and sends its note.
    await startService(first.port)
    await eventually(async () => (await page.locator('#waiting').textContent()) === '', 'sent')
    assert.deepEqual(
      (await listed(origin)).map((note) => note.title),
      ['Written while it was down'],
    )
    await eventually(
      async () => (await titles(page)).join() === 'Written while it was down',
      'the page shows the new service',
    )
    await page.locator('#feed-status[data-state="live"]').waitFor()
    await context.close()
  })

  it('leaves "Offline" once a queued write reaches the service, though the feed never dropped, and never says "Live" while writes fail', {
    timeout: 90_000,
  }, async () => {
    const service = await startService()
    const front = new Front(service.port)
    await front.up()
    const context = await newContext({ axe: true })
    try {
      const page = await openControlled(context, front.origin)
      await synced(page)
      assert.equal(front.feeds, 1)
      const status = page.locator('#feed-status')
      // Chromium's offline fails new requests but leaves the feed's connection open (as when
      // only the way to the API breaks): it even brings a change made elsewhere meanwhile.
      await context.setOffline(true)
      await page.locator('#create-title').fill('Written offline')
      await page.getByRole('button', { name: 'Create note' }).click()
      await page.locator('#waiting', { hasText: '1 change waiting' }).waitFor()
      await page.locator('#feed-status[data-state="retrying"]').waitFor()
      // Every state the status goes to from now on, however briefly.
      await page.evaluate(`(() => {
        const status = document.getElementById('feed-status')
        window.states = [status.dataset.state]
        new MutationObserver(() => {
          if (window.states.at(-1) !== status.dataset.state) window.states.push(status.dataset.state)
        }).observe(status, { attributes: true, childList: true, characterData: true, subtree: true })
      })()`)
      await create(front.origin, { title: 'Made elsewhere' })
      await item(page, 'Made elsewhere').waitFor()
      // The change came in on the feed while the write still fails: not "Live", not for a moment.
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      assert.equal(await page.locator('#waiting').textContent(), '1 change waiting to be sent.')
      assert.deepEqual(await page.evaluate('window.states'), ['retrying'])
      assert.equal(await status.getAttribute('data-state'), 'retrying')
      assert.equal(
        await status.textContent(),
        'Offline: the notes shown are this device’s copy; changes are kept and sent when the service is back.',
      )

      await context.setOffline(false)
      await eventually(async () => (await page.locator('#waiting').textContent()) === '', 'sent')
      // The answer to that write is the first the page had since the outage began.
      await page.locator('#feed-status[data-state="live"]').waitFor({ timeout: 2_000 })
      assert.deepEqual(await page.evaluate('window.states'), ['retrying', 'live'])
      assert.equal(await status.textContent(), 'Live: changes made elsewhere appear here.')
      // On the same connection as before the outage, which still brings changes.
      assert.equal(front.feeds, 1)
      await create(front.origin, { title: 'Made elsewhere after' })
      await item(page, 'Made elsewhere after').waitFor()
      assert.equal(front.feeds, 1)
      assert.deepEqual(
        (await listed(front.origin)).map((note) => note.title),
        ['Made elsewhere', 'Written offline', 'Made elsewhere after'],
      )
      await axeClean(page, 'back online')
    } finally {
      await context.close()
      await front.down()
    }
  })
})
