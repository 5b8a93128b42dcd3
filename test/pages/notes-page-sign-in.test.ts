import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { after, before, describe, it } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { CHROMIUM, launchChromium, MISSING, SKIP, until } from '../support/chromium.js'
import {
  AUDIENCE,
  IdentityProvider,
  PAGE_CLIENT,
  PAGE_TOKEN_SECONDS,
  providerKey,
} from '../support/identity-provider.js'

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')

/** A person's browser: their own cookies at the provider, their own storage at the service. */
interface Person {
  context: BrowserContext
  page: Page
  /** Requests of the notes page to any host but 127.0.0.1 (aborted, as all such are). */
  elsewhere: string[]
  /** Uncaught exceptions and console messages about refused content. */
  errors: string[]
  /** The grant_type of every request the page made to the provider's token endpoint. */
  grants: string[]
}

let browser: Browser | undefined
let provider: IdentityProvider | undefined
let server: ServerProcess | undefined
let origin = ''

function inPage<T>(page: Page, expression: string): Promise<T> {
  return page.evaluate(expression) as Promise<T>
}

async function person(url = `${origin}/`): Promise<Person> {
  assert.ok(browser, `${MISSING}: CI must install it (.ci/run does).`)
  const context = await browser.newContext({
    viewport: { width: 900, height: 900 },
    permissions: ['clipboard-read', 'clipboard-write'],
  })
  const page = await context.newPage()
  const watched: Person = { context, page, elsewhere: [], errors: [], grants: [] }
  page.on('pageerror', (error) => watched.errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (/^Refused to|violates|Trusted ?Type/i.test(message.text())) {
      watched.errors.push(message.text())
    }
  })
  await context.route('**/*', (route) => {
    const request = route.request()
    if (!request.url().startsWith('http://127.0.0.1:')) {
      // The notes page asks nothing of another host; the provider's own forms do (a web font).
      if (request.frame().url().startsWith(`${origin}/`)) watched.elsewhere.push(request.url())
      return route.abort()
    }
    if (request.url() === `${provider?.issuer}/token`) {
      watched.grants.push(new URLSearchParams(request.postData() ?? '').get('grant_type') ?? '')
    }
    return route.continue()
  })
  await page.goto(url)
  return watched
}

/** Signs in at the provider's development forms: the login, then the consent. */
async function signIn(who: Person, login: string): Promise<void> {
  const { page } = who
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${provider?.issuer}/**`)
  await page.locator('input[name="login"]').fill(login)
  await page.locator('input[name="password"]').fill('any')
  await page.getByRole('button', { name: 'Sign-in' }).click()
  await page.getByRole('button', { name: 'Continue' }).click()
  await page.waitForURL(`${origin}/`)
  await page.locator('#whoami', { hasText: `Signed in as ${login}` }).waitFor()
}

async function loaded(page: Page): Promise<void> {
  await page.locator('#list-status:not(:text("Loading"))').waitFor()
  await page.locator('#feed-status[data-state="live"]').waitFor()
}

/** Waits until the switcher shows the notebook named `text` ('Trip · viewer'). */
function chosen(page: Page, text: string): Promise<void> {
  return until(
    page,
    `document.querySelector('#notebook-select')?.selectedOptions[0]?.textContent === ${JSON.stringify(text)}`,
  )
}

const item = (page: Page, text: string) =>
  page.locator('#notes > li').filter({ has: page.locator('h3', { hasText: text }) })

function clean(who: Person): void {
  assert.deepEqual(who.elsewhere, [])
  assert.deepEqual(who.errors, [])
}

/** The serious and critical axe-core violations on the page as it is. */
async function violations(page: Page): Promise<unknown[]> {
  const found = await inPage<{ id: string; impact: string; targets: string[] }[]>(
    page,
    `axe.run({ runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] }).then((result) =>
      result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) })))`,
  )
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical')
}

describe('the notes page signing in with OpenID Connect, in Chromium', {
  skip: SKIP,
  concurrency: false,
}, () => {
  before(async () => {
    if (existsSync(CHROMIUM)) browser = await launchChromium()
    provider = await IdentityProvider.start([await providerKey('k1')])
    server = await startServer({
      env: {
        AUTH_JWKS_URL: provider.jwksUrl.href,
        AUTH_ISSUER: provider.issuer,
        AUTH_AUDIENCE: AUDIENCE,
        AUTH_PAGE_CLIENT_ID: PAGE_CLIENT,
        AUTH_PAGE_SCOPE: 'openid notes',
      },
    })
    origin = `http://127.0.0.1:${server.port}`
    provider.allowPage(`${origin}/`)
  })
  after(async () => {
    await browser?.close()
    await server?.stop()
    await provider?.close()
  })

  it('signs ann in, shares a notebook by link with bob, lets her make him a viewer, and signs out', async () => {
    const ann = await person()
    // Signed out: no notes, no way to write, only "Sign in".
    await ann.page.locator('#list-status', { hasText: 'Sign in to see your notes.' }).waitFor()
    assert.equal(await ann.page.locator('section.create').isVisible(), false)
    assert.equal(await ann.page.getByRole('button', { name: 'Access key…' }).isVisible(), false)
    await signIn(ann, 'ann')
    assert.deepEqual(ann.grants, ['authorization_code'])
    // The access token (an RFC 9068 JWT for this service) is what the page sends, kept per tab.
    const token = await inPage<string>(
      ann.page,
      `sessionStorage.getItem('notes-service.access-key')`,
    )
    const header = JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString())
    assert.equal(header.typ, 'at+jwt')
    await loaded(ann.page)
    assert.equal(await ann.page.locator('#notebook-select option').count(), 1)

    // Ann makes a notebook; the notes view switches to it.
    await ann.page.getByRole('button', { name: 'New notebook…' }).click()
    const made = ann.page.getByRole('dialog', { name: 'New notebook' })
    await made.getByLabel('Name').fill('Trip')
    await made.getByRole('button', { name: 'Make it' }).click()
    await chosen(ann.page, 'Trip')
    await loaded(ann.page)
    await ann.page.locator('#create-title').fill('Book the train')
    await ann.page.getByRole('button', { name: 'Create note' }).click()
    await item(ann.page, 'Book the train').waitFor()
    await until(ann.page, `document.querySelector('#waiting').textContent === ''`)

    // The share dialog: ann alone, as owner; an invitation link for an editor.
    await ann.page.getByRole('button', { name: 'Share…' }).click()
    const share = ann.page.getByRole('dialog', { name: 'Share “Trip”' })
    await share.getByText('ann (you)').waitFor()
    assert.equal(await share.getByLabel('Role of ann').inputValue(), 'owner')
    await share.getByLabel('Role the invitation gives').selectOption('editor')
    await share.getByRole('button', { name: 'Make an invitation link' }).click()
    const linkInput = share.getByLabel('Invitation link (shown this once)')
    await linkInput.waitFor()
    const link = await linkInput.inputValue()
    assert.match(link, new RegExp(`^${origin}/#invite=[\\w-]{22,}$`))
    await share.getByRole('button', { name: 'Copy the link' }).click()
    await share.getByText('Link copied.').waitFor()
    assert.equal(await inPage(ann.page, 'navigator.clipboard.readText()'), link)
    await share
      .getByRole('listitem')
      .filter({ hasText: /^editor, 1 use left, until / })
      .waitFor()
    // axe: the page with the switcher, and the share dialog open.
    await ann.page.evaluate(readFileSync(AXE, 'utf8'))
    assert.deepEqual(await violations(ann.page), [])
    await share.getByRole('button', { name: 'Close' }).click()

    // Bob opens the link, signs in, joins as an editor and sees ann's note.
    const bob = await person(link)
    await bob.page.locator('#list-status', { hasText: 'Sign in to see your notes.' }).waitFor()
    await signIn(bob, 'bob')
    await chosen(bob.page, 'Trip · editor')
    await item(bob.page, 'Book the train').waitFor()
    assert.equal(await bob.page.locator('section.create').isVisible(), true)
    assert.equal(
      await item(bob.page, 'Book the train').getByRole('button', { name: 'Edit' }).isVisible(),
      true,
    )
    // A member who is not an owner sees who is in it, and may leave.
    await bob.page.getByRole('button', { name: 'Members…' }).click()
    const members = bob.page.getByRole('dialog', { name: 'Members of “Trip”' })
    await members.getByRole('button', { name: 'Leave this notebook' }).waitFor()
    assert.deepEqual(await members.locator('.members li').allTextContents(), [
      'ann · owner',
      'bob (you) · editor',
    ])
    await members.getByRole('button', { name: 'Close' }).click()

    // Ann makes bob a viewer: after a reload his page offers no way to change the notes.
    await ann.page.getByRole('button', { name: 'Share…' }).click()
    await share.getByLabel('Role of bob').selectOption('viewer')
    await share.getByText('bob is now viewer.').waitFor()
    assert.deepEqual(await share.locator('.invites li').count(), 0)
    await share.getByRole('button', { name: 'Close' }).click()
    await bob.page.reload()
    await chosen(bob.page, 'Trip · viewer')
    await item(bob.page, 'Book the train').waitFor()
    assert.equal(await bob.page.locator('section.create').isVisible(), false)
    assert.equal(
      await item(bob.page, 'Book the train').getByRole('button', { name: 'Edit' }).isVisible(),
      false,
    )
    assert.equal(
      await item(bob.page, 'Book the train').getByRole('button', { name: 'Delete' }).isVisible(),
      false,
    )

    // The access token lasts PAGE_TOKEN_SECONDS: the page renews it with its refresh token.
    await until(
      ann.page,
      `sessionStorage.getItem('notes-service.access-key') !== ${JSON.stringify(token)}`,
      PAGE_TOKEN_SECONDS * 1000 + 5000,
    )
    // Signed in once, then renewed (more than once when the machine is slow to get here).
    assert.equal(ann.grants[0], 'authorization_code')
    assert.ok(ann.grants.length >= 2, JSON.stringify(ann.grants))
    assert.deepEqual(new Set(ann.grants.slice(1)), new Set(['refresh_token']))
    await ann.page.locator('#create-title').fill('Pack')
    await ann.page.getByRole('button', { name: 'Create note' }).click()
    await item(bob.page, 'Pack').waitFor()

    // Ann signs out: the tokens are forgotten, the provider's session ended, and she is back.
    await ann.page.getByRole('button', { name: 'Sign out' }).click()
    await ann.page.waitForURL(`${provider?.issuer}/**`)
    await ann.page.getByRole('button', { name: 'Yes, sign me out' }).click()
    await ann.page.waitForURL(`${origin}/`)
    await ann.page.locator('#list-status', { hasText: 'Sign in to see your notes.' }).waitFor()
    assert.equal(await ann.page.locator('#whoami').isVisible(), false)
    assert.equal(await ann.page.locator('#notes > li').count(), 0)
    assert.deepEqual(
      await inPage(
        ann.page,
        `[sessionStorage.getItem('notes-service.access-key'), sessionStorage.getItem('notes-service.sign-in')]`,
      ),
      [null, null],
    )
    clean(ann)
    clean(bob)
    await ann.context.close()
    await bob.context.close()
  })
})
