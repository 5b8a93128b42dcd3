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
import { CHROMIUM, launchChromium, MISSING, SKIP } from './chromium.js'
import { type ServerProcess, startServer } from './hostile/server-process.js'

let browser: Browser | undefined
const servers: ServerProcess[] = []

async function startService(): Promise<ServerProcess> {
  const server = await startServer({})
  servers.push(server)
  return server
}

/**
 * An HTTP front for the service on a port of its own that can be taken down and brought back on
 * the same port, as a deployment would be; `version` 2 serves the page with a changed heading
 * (a new build of index.html, with its own ETag).
 */
class Front {
  port = 0
  version = 1
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

async function newContext(): Promise<BrowserContext> {
  assert.ok(browser, `${MISSING}: CI must install it (.ci/run does).`)
  return browser.newContext({ viewport: { width: 900, height: 900 } })
}

/**
 * Waits until `expression` holds in the page (waitForFunction would eval a string, which the
 * page's policy refuses), polling every 50 ms for at most 10 s.
 */
async function until(page: Page, expression: string): Promise<void> {
  for (const started = Date.now(); Date.now() - started < 10_000; ) {
    if ((await page.evaluate(expression)) === true) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`never held: ${expression}`)
}

/** The page, once its service worker controls it (installed, activated, claimed). */
async function openControlled(context: BrowserContext, origin: string): Promise<Page> {
  const page = await context.newPage()
  const errors: string[] = []
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
})
