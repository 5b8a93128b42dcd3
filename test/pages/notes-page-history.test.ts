import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { seriousViolations } from '../support/axe.js'
import { CHROMIUM, launchChromium, MISSING, SKIP } from '../support/chromium.js'
import { signed } from '../support/jwks-server.js'

type Json = Record<string, unknown>

/** A client of the API, as another program would be. */
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

async function create(
  origin: string,
  note: Json,
  headers?: Record<string, string>,
  path = '/api/note',
): Promise<Json> {
  const answer = await api(origin, 'POST', path, note, headers)
  assert.equal(answer.status, 200, JSON.stringify(answer.json))
  return answer.json?.data as Json
}

async function patch(origin: string, id: unknown, fields: Json): Promise<void> {
  const answer = await api(origin, 'PATCH', `/api/note/${id}`, fields)
  assert.equal(answer.status, 200, JSON.stringify(answer.json))
}

/** Waits until `check` holds, at most 10 s. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (const end = Date.now() + 10_000; !(await check()); ) {
    if (Date.now() > end) throw new Error(`still not so after 10 s: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** How many notes the service's trash holds. */
async function trashed(origin: string): Promise<number> {
  return Number((await api(origin, 'GET', '/api/trash')).headers.get('x-total-count'))
}

let browser: Browser | undefined
const servers: ServerProcess[] = []

async function serve(env: Record<string, string> = {}): Promise<string> {
  const server = await startServer({ env })
  servers.push(server)
  return `http://127.0.0.1:${server.port}`
}

interface Watched {
  page: Page
  context: BrowserContext
  /** Uncaught exceptions, refused content, and requests to anything but the service. */
  errors: string[]
}

async function open(origin: string, options: { bypassCSP?: boolean } = {}): Promise<Watched> {
  assert.ok(browser, `${MISSING}: CI must install it (.ci/run does).`)
  const context = await browser.newContext({
    viewport: { width: 900, height: 900 },
    bypassCSP: options.bypassCSP ?? false,
  })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (/^Refused to|violates|Trusted ?Type/i.test(message.text())) errors.push(message.text())
  })
  await page.route('**/*', (route) => {
    if (route.request().url().startsWith(`${origin}/`)) return route.continue()
    errors.push(`elsewhere: ${route.request().url()}`)
    return route.abort()
  })
  const response = await page.goto(`${origin}/`)
  assert.equal(response?.status(), 200)
  return { page, context, errors }
}

async function loaded(page: Page): Promise<void> {
  await page.locator('#list-status:not(:text("Loading"))').waitFor()
  await page.locator('#feed-status[data-state="live"]').waitFor()
}

const item = (page: Page, text: string) =>
  page.locator('#notes > li').filter({ has: page.locator('h3', { hasText: text }) })

const titles = (page: Page): Promise<string[]> => page.locator('#notes h3').allTextContents()

describe("the notes page's history, trash and order by last change", {
  skip: SKIP,
  concurrency: false,
}, () => {
  before(async () => {
    if (existsSync(CHROMIUM)) browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await Promise.all(servers.map((server) => server.stop()))
  })

  it('lists the last edited note first, moves a note edited elsewhere to the top, and orders by creation on request', async () => {
    const origin = await serve()
    const first = await create(origin, { title: 'First' })
    await create(origin, { title: 'Second' })
    await create(origin, { title: 'Third' })
    await patch(origin, first.id, { body: 'edited' })
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    await until(async () => (await titles(page))[0] === 'First', 'First on top')
    assert.deepEqual(await titles(page), ['First', 'Third', 'Second'])
    // Edited by another client: the feed brings it, and it moves to the top.
    const second = (await api(origin, 'GET', '/api/note')).json?.data as Json[]
    await patch(origin, second[1]?.id, { body: 'edited too' })
    await until(async () => (await titles(page))[0] === 'Second', 'Second on top')
    assert.deepEqual(await titles(page), ['Second', 'First', 'Third'])
    // The other order: the newest created first.
    await page.getByLabel('Order').selectOption('created')
    assert.deepEqual(await titles(page), ['Third', 'Second', 'First'])
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })

  it('keeps a note made here in its place when the service takes it after a newer one was made', async () => {
    const origin = await serve()
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    // The service takes the first note (the feed brings it) but its answer is held until the
    // second is on the page: the first gaining its id then is no change, the second stays on top.
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    let posts = 0
    await page.route(/\/api\/(note|batch)$/, async (route) => {
      if (route.request().method() !== 'POST' || posts++ !== 0) return route.continue()
      // Taken by the service (the feed brings it), its answer held back.
      const answer = await route.fetch()
      await held
      return route.fulfill({ response: answer })
    })
    for (const title of ['First', 'Second']) {
      await page.locator('#create-title').fill(title)
      await page.getByRole('button', { name: 'Create note' }).click()
      await item(page, title).waitFor()
      await page.locator('#create-button:not([disabled])').waitFor()
    }
    assert.deepEqual(await titles(page), ['Second', 'First'])
    release()
    await until(
      async () => (await page.locator('#notes', { hasText: 'not sent yet' }).count()) === 0,
      'both notes sent',
    )
    const stored = (await api(origin, 'GET', '/api/note')).json?.data as Json[] | undefined
    assert.equal(stored?.length, 2)
    assert.deepEqual(await titles(page), ['Second', 'First'])
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })

  it("shows a note's revisions, one of them, and restores it, by keyboard; axe-clean", async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Plan', body: 'first draft' })
    await patch(origin, note.id, { body: 'second draft' })
    await patch(origin, note.id, { body: 'third draft', tags: ['late'] })
    const watched = await open(origin, { bypassCSP: true })
    const { page } = watched
    await loaded(page)
    await item(page, 'Plan').locator('.body', { hasText: 'third draft' }).waitFor()
    await item(page, 'Plan').getByRole('button', { name: 'History' }).focus()
    await page.keyboard.press('Enter')
    const history = item(page, 'Plan').locator('section.history')
    await history.getByText('3 versions, newest first.').waitFor()
    const revisions = history.locator('.revisions li button')
    assert.equal(await revisions.count(), 3)
    assert.match((await revisions.nth(0).textContent()) ?? '', / · now$/)
    assert.match((await revisions.nth(1).textContent()) ?? '', / · updated$/)
    assert.match((await revisions.nth(2).textContent()) ?? '', / · created$/)
    // The first version, chosen by keyboard, shown as JSON.
    await revisions.nth(2).focus()
    await page.keyboard.press('Enter')
    await history.locator('pre.fields').waitFor()
    assert.deepEqual(JSON.parse((await history.locator('pre.fields').textContent()) ?? ''), {
      title: 'Plan',
      body: 'first draft',
    })
    assert.equal(await revisions.nth(2).getAttribute('aria-pressed'), 'true')
    assert.deepEqual(await seriousViolations(page), [])
    await history.getByRole('button', { name: 'Restore this version' }).focus()
    await page.keyboard.press('Enter')
    // Back as it was (the field added since is gone), in the service and, from the feed, here.
    await item(page, 'Plan').locator('.body', { hasText: 'first draft' }).waitFor()
    const now = await api(origin, 'GET', `/api/note/${note.id}`)
    assert.deepEqual(now.json?.data, { title: 'Plan', body: 'first draft', id: note.id })
    await history.getByText(/4 versions, newest first\.$/).waitFor()
    assert.equal(await item(page, 'Plan').locator('pre.fields').count(), 0)
    // Escape closes the history; the History button has the focus again.
    await history.locator('.revisions button').first().focus()
    await page.keyboard.press('Escape')
    assert.equal(await item(page, 'Plan').locator('section.history').count(), 0)
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'History')
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })

  it('says so when the note changed since its history was read (412), and reads it again', async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Draft', body: 'one' })
    await patch(origin, note.id, { body: 'two' })
    const watched = await open(origin)
    const { page } = watched
    // No feed (its connection refused, as a proxy that drops it would): the page does not hear
    // of the next change, so its history is one version behind when the person restores.
    await page.route(`${origin}/api/events`, (route) => route.abort())
    await page.reload()
    await page.locator('#list-status:not(:text("Loading"))').waitFor()
    await item(page, 'Draft').getByRole('button', { name: 'History' }).click()
    const history = item(page, 'Draft').locator('section.history')
    await history.getByText('2 versions, newest first.').waitFor()
    await patch(origin, note.id, { body: 'three' })
    await history.locator('.revisions button').nth(1).click()
    await history.getByRole('button', { name: 'Restore this version' }).click()
    await history
      .getByText('The note changed since its history was shown: here is its history again.')
      .waitFor()
    assert.equal(await history.locator('.revisions li').count(), 3)
    const now = await api(origin, 'GET', `/api/note/${note.id}`)
    assert.deepEqual(now.json?.data, { title: 'Draft', body: 'three', id: note.id })
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })

  it('shows the deleted notes in the trash, restores one to the list, and empties the trash after asking; axe-clean', async () => {
    const origin = await serve()
    await create(origin, { title: 'Keep me' })
    await create(origin, { title: 'Lose me' })
    const watched = await open(origin, { bypassCSP: true })
    const { page } = watched
    await loaded(page)
    await item(page, 'Keep me').getByRole('button', { name: 'Delete' }).click()
    await item(page, 'Keep me').getByRole('button', { name: 'Yes, delete it' }).click()
    await item(page, 'Keep me').waitFor({ state: 'detached' })
    await until(async () => (await trashed(origin)) === 1, 'the delete sent')

    await page.getByRole('button', { name: 'Show the trash' }).click()
    const trash = page.locator('#trash-list > li')
    await page.locator('#trash-status', { hasText: '1 note in the trash.' }).waitFor()
    assert.equal(await trash.locator('h3').textContent(), 'Keep me')
    assert.match((await trash.locator('.meta').textContent()) ?? '', /^id \d+ · deleted \S/)
    assert.deepEqual(await seriousViolations(page), [])
    await trash.getByRole('button', { name: 'Restore' }).click()
    await item(page, 'Keep me').waitFor()
    await page.locator('#trash-status', { hasText: 'The trash is empty.' }).waitFor()
    assert.equal(await trashed(origin), 0)

    // Another deleted; "Delete for good" refused after the trash was emptied elsewhere says why.
    await item(page, 'Lose me').getByRole('button', { name: 'Delete' }).click()
    await item(page, 'Lose me').getByRole('button', { name: 'Yes, delete it' }).click()
    await until(async () => (await trashed(origin)) === 1, 'the second delete sent')
    await page.getByRole('button', { name: 'Read the trash again' }).click()
    await page.locator('#trash-status', { hasText: '1 note in the trash.' }).waitFor()
    await page.getByRole('button', { name: 'Empty the trash…' }).click()
    await page.getByText('Delete the 1 note in the trash for good?').waitFor()
    await page.getByRole('button', { name: 'Keep them' }).click()
    assert.equal(await trashed(origin), 1)
    await page.getByRole('button', { name: 'Empty the trash…' }).click()
    await page.getByRole('button', { name: 'Yes, empty it' }).click()
    await page.locator('#trash-status', { hasText: 'The trash is empty.' }).waitFor()
    assert.equal(await page.locator('#announcer').textContent(), '1 note deleted for good.')
    assert.equal(await trashed(origin), 0)
    assert.deepEqual(await titles(page), ['Keep me'])
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })

  it("shows a failure's detail, and says the trash needs the network when offline", async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Twice' })
    await api(origin, 'DELETE', `/api/note/${note.id}`)
    const watched = await open(origin)
    const { page } = watched
    await loaded(page)
    await page.getByRole('button', { name: 'Show the trash' }).click()
    await page.locator('#trash-status', { hasText: '1 note in the trash.' }).waitFor()
    // A live note takes the id again (a PATCH may set any id): the restore is a 409.
    const other = await create(origin, { title: 'Holder' })
    await patch(origin, other.id, { id: note.id })
    await page.locator('#trash-list').getByRole('button', { name: 'Restore' }).click()
    const message = page.locator('#trash-list .message.error')
    await message.waitFor()
    const problem = await api(origin, 'POST', `/api/trash/${note.id}/restore`)
    assert.equal(problem.status, 409)
    assert.equal(await message.textContent(), `Not restored. ${problem.json?.detail}`)
    await watched.context.setOffline(true)
    await page.getByRole('button', { name: 'Read the trash again' }).click()
    await page
      .locator('#trash-status', {
        hasText: 'The trash needs the network, and this device is offline.',
      })
      .waitFor()
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })

  it('shows a viewer of a shared notebook the history and the trash, without restore or empty', async () => {
    const secret = 'a-secret-of-32-bytes-or-more-000'
    const origin = await serve({ AUTH_JWT_SECRET: secret })
    const exp = Math.floor(Date.now() / 1000) + 3600
    const key = Buffer.from(secret)
    const ann = {
      authorization: `Bearer ${await signed(key, { alg: 'HS256' }, { sub: 'ann', exp })}`,
    }
    const bob = await signed(key, { alg: 'HS256' }, { sub: 'bob', exp })
    const notebook = (await api(origin, 'POST', '/api/notebooks', { name: 'Trip' }, ann)).json
      ?.data as Json
    const base = `/api/notebooks/${notebook.id}`
    const member = await api(origin, 'PUT', `${base}/members/bob`, { role: 'viewer' }, ann)
    assert.equal(member.status, 200)
    const note = await create(origin, { title: 'Route', body: 'north' }, ann, `${base}/note`)
    const edited = await api(origin, 'PATCH', `${base}/note/${note.id}`, { body: 'south' }, ann)
    assert.equal(edited.status, 200)
    const gone = await create(origin, { title: 'Dropped' }, ann, `${base}/note`)
    assert.equal(
      (await api(origin, 'DELETE', `${base}/note/${gone.id}`, undefined, ann)).status,
      200,
    )

    const watched = await open(origin)
    const { page } = watched
    const dialog = page.getByRole('dialog', { name: 'Access key' })
    await dialog.getByLabel('Key').fill(bob)
    await dialog.getByRole('button', { name: 'Use this key' }).click()
    await page.locator('#notebook-select').selectOption({ label: 'Trip · viewer' })
    await item(page, 'Route').waitFor()
    await loaded(page)
    assert.equal(await item(page, 'Route').getByRole('button', { name: 'Edit' }).isVisible(), false)
    await item(page, 'Route').getByRole('button', { name: 'History' }).click()
    const history = item(page, 'Route').locator('section.history')
    await history.getByText('2 versions, newest first.').waitFor()
    await history.locator('.revisions button').nth(1).click()
    await history.locator('pre.fields').waitFor()
    assert.equal(
      await history.getByRole('button', { name: 'Restore this version' }).isVisible(),
      false,
    )
    await page.getByRole('button', { name: 'Show the trash' }).click()
    await page.locator('#trash-status', { hasText: '1 note in the trash.' }).waitFor()
    assert.equal(await page.locator('#trash-list h3').textContent(), 'Dropped')
    for (const name of ['Restore', 'Delete for good', 'Empty the trash…']) {
      assert.equal(
        await page.locator('#trash').getByRole('button', { name }).isVisible(),
        false,
        name,
      )
    }
    assert.deepEqual(watched.errors, [])
    await watched.context.close()
  })
})
