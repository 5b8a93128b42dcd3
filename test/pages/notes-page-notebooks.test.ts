import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { type Notebook, NotesClient } from '../../src/client/index.js'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { seriousViolations } from '../support/axe.js'
import { CHROMIUM, launchChromium, MISSING, SKIP, until } from '../support/chromium.js'
import { signed } from '../support/jwks-server.js'

const SECRET = 'a-secret-of-32-bytes-or-more-000'

let browser: Browser | undefined
const servers: ServerProcess[] = []

/** A service that gives each person (a user token signed with SECRET) notebooks of their own. */
interface Service {
  origin: string
  /** A user token for `sub`, valid for an hour. */
  token(sub: string): Promise<string>
  /** The service as `sub` sees it through the client library, as another program would. */
  as(sub: string): Promise<NotesClient>
}

async function serve(): Promise<Service> {
  const server = await startServer({ env: { AUTH_JWT_SECRET: SECRET } })
  servers.push(server)
  const origin = `http://127.0.0.1:${server.port}`
  const exp = Math.floor(Date.now() / 1000) + 3600
  const token = (sub: string) => signed(Buffer.from(SECRET), { alg: 'HS256' }, { sub, exp })
  return {
    origin,
    token,
    as: async (sub) => new NotesClient({ baseUrl: origin, token: await token(sub) }),
  }
}

/** The status the service answers `sub` for GET `path`. */
async function statusOf(service: Service, sub: string, path: string): Promise<number> {
  const response = await fetch(`${service.origin}${path}`, {
    headers: { authorization: `Bearer ${await service.token(sub)}` },
  })
  await response.body?.cancel()
  return response.status
}

/** A notebook `owner` made, with one note in it and the other people as members. */
async function notebookOf(
  service: Service,
  owner: string,
  name: string,
  note: string,
  members: Record<string, 'owner' | 'editor' | 'viewer'> = {},
): Promise<{ notebook: Notebook; noteId: number }> {
  const client = await service.as(owner)
  const notebook = await client.createNotebook(name)
  for (const [user, role] of Object.entries(members)) {
    await client.setMember(notebook.id, user, role)
  }
  const made = await client.notebook(notebook.id).create({ title: note })
  return { notebook, noteId: made.note.id }
}

/** A person's browser: their own storage at the service, watched for errors. */
interface Person {
  context: BrowserContext
  page: Page
  /** Uncaught exceptions, refused content, and requests to anything but the service. */
  errors: string[]
}

/**
 * Opens `url` (the page by default) in a fresh context and gives the key dialog `sub`'s user
 * token, as a person pasting it would; waits until the switcher lists their notebooks.
 */
async function person(
  service: Service,
  sub: string,
  options: { url?: string; bypassCSP?: boolean } = {},
): Promise<Person> {
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
    if (route.request().url().startsWith(`${service.origin}/`)) return route.continue()
    errors.push(`elsewhere: ${route.request().url()}`)
    return route.abort()
  })
  const response = await page.goto(options.url ?? `${service.origin}/`)
  assert.equal(response?.status(), 200)
  const dialog = page.getByRole('dialog', { name: 'Access key' })
  await dialog.getByLabel('Key').fill(await service.token(sub))
  await dialog.getByRole('button', { name: 'Use this key' }).click()
  await page.locator('#whoami', { hasText: `Notebook of ${sub}` }).waitFor()
  await page.locator('#notebook-select option').first().waitFor({ state: 'attached' })
  return { context, page, errors }
}

function inPage<T>(page: Page, expression: string): Promise<T> {
  return page.evaluate(expression) as Promise<T>
}

/** The switcher's options as shown: ['ann (yours)', 'Trip · editor']. */
const options = (page: Page): Promise<string[]> =>
  page.locator('#notebook-select option').allTextContents()

/** Waits until the switcher shows the notebook named `text` ('Trip · viewer'). */
function chosen(page: Page, text: string): Promise<void> {
  return until(
    page,
    `document.querySelector('#notebook-select')?.selectedOptions[0]?.textContent === ${JSON.stringify(text)}`,
  )
}

const item = (page: Page, text: string) =>
  page.locator('#notes > li').filter({ has: page.locator('h3', { hasText: text }) })

/** Shows the notebook `label` of the switcher and waits for its note `note`. */
async function pick(page: Page, label: string, note: string): Promise<void> {
  await page.locator('#notebook-select').selectOption({ label })
  await chosen(page, label)
  await item(page, note).waitFor()
}

/** Whether the page shows the rename and delete buttons, and what the share button says. */
async function controls(page: Page): Promise<{ rename: boolean; delete: boolean; share: string }> {
  return {
    rename: await page.locator('#notebook-rename').isVisible(),
    delete: await page.locator('#notebook-delete').isVisible(),
    share: String(await page.locator('#notebook-share').textContent()),
  }
}

async function close(...people: Person[]): Promise<void> {
  for (const one of people) {
    assert.deepEqual(one.errors, [])
    await one.context.close()
  }
}

describe("the notes page's notebooks: rename, delete, withdrawn invitations, in Chromium", {
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

  it('renames a notebook in its dialog: the switcher and the service have the new name, and a member sees it after a reload', async () => {
    const service = await serve()
    const { notebook } = await notebookOf(service, 'ann', 'Trip', 'Book the train', {
      bob: 'editor',
    })
    const ann = await person(service, 'ann')
    const bob = await person(service, 'bob')
    await pick(ann.page, 'Trip', 'Book the train')
    await pick(bob.page, 'Trip · editor', 'Book the train')

    await ann.page.getByRole('button', { name: 'Rename…' }).click()
    const dialog = ann.page.getByRole('dialog', { name: 'Rename the notebook' })
    const name = dialog.getByLabel('Name')
    assert.equal(await name.inputValue(), 'Trip')
    assert.equal(await inPage(ann.page, 'document.activeElement?.id'), 'notebook-name')
    // An empty name is refused in the dialog, which stays open; nothing is sent.
    await name.fill('   ')
    await dialog.getByRole('button', { name: 'Rename' }).click()
    await dialog.getByText('Give it a name of 1 to 200 characters.').waitFor()
    assert.equal((await (await service.as('ann')).getNotebook(notebook.id)).name, 'Trip')

    await name.fill('Summer trip')
    await dialog.getByRole('button', { name: 'Rename' }).click()
    await dialog.waitFor({ state: 'hidden' })
    await chosen(ann.page, 'Summer trip')
    assert.equal(
      await ann.page.locator('#announcer').textContent(),
      'Notebook renamed “Summer trip”.',
    )
    assert.deepEqual((await options(ann.page)).slice(1), ['Summer trip'])
    assert.equal(await item(ann.page, 'Book the train').count(), 1)
    assert.deepEqual(
      (await (await service.as('ann')).notebooks()).map(({ name, role }) => ({ name, role })),
      [
        { name: 'My notes', role: 'owner' },
        { name: 'Summer trip', role: 'owner' },
      ],
    )
    const bobs = await (await service.as('bob')).notebooks()
    assert.deepEqual(
      bobs.filter((one) => one.id === notebook.id).map(({ name, role }) => ({ name, role })),
      [{ name: 'Summer trip', role: 'editor' }],
    )

    // Bob's switcher reads the list when the page opens (and when he comes back to the tab):
    // a rename elsewhere shows after a reload, the same notebook still open.
    await bob.page.reload()
    await chosen(bob.page, 'Summer trip · editor')
    await item(bob.page, 'Book the train').waitFor()
    await close(ann, bob)
  })

  it('deletes a notebook after asking: gone from the switcher and the service, the page back on its own notebook, and gone for a member', async () => {
    const service = await serve()
    await (await service.as('ann')).create({ title: 'Ann own note' })
    const { notebook, noteId } = await notebookOf(service, 'ann', 'Trip', 'Book the train', {
      bob: 'viewer',
    })
    const ann = await person(service, 'ann')
    const bob = await person(service, 'bob')
    await item(ann.page, 'Ann own note').waitFor()
    // One's own notebook can be renamed, never deleted.
    assert.deepEqual(await controls(ann.page), { rename: true, delete: false, share: 'Share…' })
    await pick(ann.page, 'Trip', 'Book the train')
    assert.deepEqual(await controls(ann.page), { rename: true, delete: true, share: 'Share…' })
    await pick(bob.page, 'Trip · viewer', 'Book the train')

    // Asked first, the safe way out focused last: Cancel keeps it.
    await ann.page.getByRole('button', { name: 'Delete…' }).click()
    const dialog = ann.page.getByRole('dialog', { name: 'Delete the notebook' })
    await dialog.waitFor()
    assert.equal(
      await dialog.locator('#notebook-question').textContent(),
      'Delete “Trip” with every note in it, for every member? This cannot be undone.',
    )
    assert.equal(await dialog.getByLabel('Name').isVisible(), false)
    assert.equal(await inPage(ann.page, 'document.activeElement?.textContent'), 'Delete it')
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    await dialog.waitFor({ state: 'hidden' })
    assert.equal((await (await service.as('ann')).getNotebook(notebook.id)).name, 'Trip')
    await chosen(ann.page, 'Trip')

    await ann.page.getByRole('button', { name: 'Delete…' }).click()
    await dialog.getByRole('button', { name: 'Delete it' }).click()
    await dialog.waitFor({ state: 'hidden' })
    await chosen(ann.page, 'My notes (yours)')
    await item(ann.page, 'Ann own note').waitFor()
    assert.equal(await item(ann.page, 'Book the train').count(), 0)
    assert.deepEqual(await options(ann.page), ['My notes (yours)'])
    assert.equal(await ann.page.locator('#announcer').textContent(), 'Notebook “Trip” deleted.')
    assert.deepEqual(await controls(ann.page), { rename: true, delete: false, share: 'Share…' })

    // The service has it no more, nor its notes, for its owner or its member.
    assert.deepEqual(
      (await (await service.as('ann')).notebooks()).map((one) => one.name),
      ['My notes'],
    )
    assert.deepEqual(
      (await (await service.as('bob')).notebooks()).map((one) => one.name),
      ['My notes'],
    )
    const path = `/api/notebooks/${notebook.id}`
    for (const sub of ['ann', 'bob']) {
      for (const what of [path, `${path}/note`, `${path}/note/${noteId}`]) {
        assert.equal(await statusOf(service, sub, what), 404, `${sub} GET ${what}`)
      }
    }

    // Bob's page, on it meanwhile, is told at once (its feed is revoked) and shows his own.
    await chosen(bob.page, 'My notes (yours)')
    await bob.page.locator('#list-status', { hasText: 'No notes yet.' }).waitFor()
    assert.equal(
      await bob.page.locator('#sync-error').textContent(),
      '“Trip” is no longer one of your notebooks: it was deleted, or you are no longer a member.',
    )
    assert.deepEqual(await options(bob.page), ['My notes (yours)'])
    assert.equal(await item(bob.page, 'Book the train').count(), 0)
    // And after a reload, where it was the notebook chosen on this device.
    await bob.page.reload()
    await chosen(bob.page, 'My notes (yours)')
    await bob.page.locator('#list-status', { hasText: 'No notes yet.' }).waitFor()
    assert.deepEqual(await options(bob.page), ['My notes (yours)'])
    assert.equal(await bob.page.locator('#sync-error').textContent(), '')
    await close(ann, bob)
  })

  it('withdraws an invitation link in the share dialog: gone from the dialog and the service, and the link no longer lets anyone join', async () => {
    const service = await serve()
    const { notebook } = await notebookOf(service, 'ann', 'Trip', 'Book the train')
    const ann = await person(service, 'ann')
    await pick(ann.page, 'Trip', 'Book the train')
    await ann.page.getByRole('button', { name: 'Share…' }).click()
    const share = ann.page.getByRole('dialog', { name: 'Share “Trip”' })
    await share.getByText('ann (you)').waitFor()
    await share.getByText('No invitation is open.').waitFor()

    // Two links: one for an editor (used once), then one for viewers (three uses).
    const linkInput = share.getByLabel('Invitation link (shown this once)')
    const invite = async (role: string, uses: string): Promise<string> => {
      await share.getByLabel('Role the invitation gives').selectOption(role)
      await share.getByLabel('Uses').fill(uses)
      await share.getByRole('button', { name: 'Make an invitation link' }).click()
      await share
        .locator('.invites li', { hasText: new RegExp(`^${role}, ${uses} uses? left`) })
        .waitFor()
      return linkInput.inputValue()
    }
    const editorLink = await invite('editor', '1')
    const viewerLink = await invite('viewer', '3')
    assert.match(editorLink, new RegExp(`^${service.origin}/#invite=[\\w-]{22,}$`))
    assert.notEqual(editorLink, viewerLink)
    const listed = async () =>
      (await (await service.as('ann')).invites(notebook.id)).map(({ role, uses }) => ({
        role,
        uses,
      }))
    assert.deepEqual(
      (await listed()).sort((a, b) => a.role.localeCompare(b.role)),
      [
        { role: 'editor', uses: 1 },
        { role: 'viewer', uses: 3 },
      ],
    )

    await share
      .getByRole('button', { name: /^Withdraw the invitation: editor, 1 use left, until / })
      .click()
    await share.getByText('Invitation withdrawn.').waitFor()
    await share.locator('.invites li', { hasText: /^editor/ }).waitFor({ state: 'detached' })
    assert.deepEqual(
      (await share.locator('.invites li').allTextContents()).map(
        (text) => text.split(', until')[0],
      ),
      ['viewer, 3 uses left'],
    )
    assert.deepEqual(await listed(), [{ role: 'viewer', uses: 3 }])
    // The viewers' link, still shown to copy, is withdrawn too: the dialog no longer offers it.
    assert.equal(await linkInput.inputValue(), viewerLink)
    await share
      .getByRole('button', { name: /^Withdraw the invitation: viewer, 3 uses left/ })
      .click()
    await share.getByText('No invitation is open.').waitFor()
    assert.equal(await linkInput.count(), 0)
    assert.equal(await share.getByRole('button', { name: 'Copy the link' }).count(), 0)
    assert.deepEqual(await listed(), [])
    await share.getByRole('button', { name: 'Close' }).click()

    // Bob opens the withdrawn editors' link and signs in: he is told, and joins nothing.
    const bob = await person(service, 'bob', { url: editorLink })
    await bob.page
      .locator('#sync-error', { hasText: 'The invitation could not be used.' })
      .waitFor()
    await bob.page.locator('#list-status', { hasText: 'No notes yet.' }).waitFor()
    assert.equal(
      await bob.page.locator('#sync-error').textContent(),
      'The invitation could not be used. This invitation is unknown, expired, used up or withdrawn; ask for a new link.',
    )
    assert.deepEqual(await options(bob.page), ['My notes (yours)'])
    assert.deepEqual(
      (await (await service.as('bob')).notebooks()).map((one) => one.name),
      ['My notes'],
    )
    assert.deepEqual(await (await service.as('ann')).members(notebook.id), [
      { user: 'ann', role: 'owner' },
    ])
    await close(ann, bob)
  })

  it('shows an editor and a viewer no rename or delete, and the service refuses them', async () => {
    const service = await serve()
    const trip = await notebookOf(service, 'ann', 'Trip', 'Book the train', { bob: 'editor' })
    const camp = await notebookOf(service, 'ann', 'Camp', 'Buy a tent', { bob: 'viewer' })
    const bob = await person(service, 'bob')
    await bob.page.locator('#list-status', { hasText: 'No notes yet.' }).waitFor()
    assert.deepEqual(await options(bob.page), [
      'My notes (yours)',
      'Trip · editor',
      'Camp · viewer',
    ])
    assert.deepEqual(await controls(bob.page), { rename: true, delete: false, share: 'Share…' })
    for (const [label, note] of [
      ['Trip · editor', 'Book the train'],
      ['Camp · viewer', 'Buy a tent'],
    ] as const) {
      await pick(bob.page, label, note)
      assert.deepEqual(await controls(bob.page), {
        rename: false,
        delete: false,
        share: 'Members…',
      })
      assert.equal(await bob.page.getByRole('button', { name: 'New notebook…' }).isVisible(), true)
    }
    const client = await service.as('bob')
    for (const { notebook } of [trip, camp]) {
      await assert.rejects(client.renameNotebook(notebook.id, 'Mine now'), { status: 403 })
      await assert.rejects(client.deleteNotebook(notebook.id), { status: 403 })
    }
    assert.deepEqual(
      (await (await service.as('ann')).notebooks()).map((one) => one.name),
      ['My notes', 'Trip', 'Camp'],
    )
    await close(bob)
  })

  it('keeps a file whose upload a switch to another notebook ended, and sends it once that notebook is open again', async () => {
    const service = await serve()
    const { notebook, noteId } = await notebookOf(service, 'ann', 'Trip', 'Book the train')
    const ann = await person(service, 'ann')
    await pick(ann.page, 'Trip', 'Book the train')
    // The upload is held on its way until the page has moved to another notebook.
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const files = '**/api/notebooks/*/files'
    await ann.page.route(files, async (route) => {
      await held
      // Ended by the page meanwhile: nothing to send on.
      await route.continue().catch(() => {})
    })
    const chooser = ann.page.waitForEvent('filechooser')
    await item(ann.page, 'Book the train').getByRole('button', { name: 'Attach files…' }).click()
    const ticket = Buffer.from('Seat 42, coach 7')
    await (await chooser).setFiles([{ name: 'ticket.txt', mimeType: 'text/plain', buffer: ticket }])
    await ann.page.getByRole('progressbar', { name: 'Uploading ticket.txt' }).waitFor()
    await ann.page.locator('#notebook-select').selectOption({ label: 'My notes (yours)' })
    await chosen(ann.page, 'My notes (yours)')
    await ann.page.locator('#list-status', { hasText: 'No notes yet.' }).waitFor()
    release()
    await ann.page.unroute(files)

    await pick(ann.page, 'Trip', 'Book the train')
    const path = `/api/notebooks/${notebook.id}/note/${noteId}`
    const token = await service.token('ann')
    const filesOf = async (): Promise<unknown> => {
      const response = await fetch(`${service.origin}${path}`, {
        headers: { authorization: `Bearer ${token}` },
      })
      return ((await response.json()) as { data: { files?: unknown } }).data.files
    }
    for (const started = Date.now(); (await filesOf()) === undefined; ) {
      assert.ok(Date.now() - started < 15_000, 'the note came to refer to the file')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.deepEqual(await filesOf(), [
      {
        id: createHash('sha256').update(ticket).digest('hex'),
        name: 'ticket.txt',
        size: ticket.length,
        type: 'text/plain',
      },
    ])
    await item(ann.page, 'Book the train')
      .getByRole('link', { name: /ticket\.txt/ })
      .waitFor()
    await close(ann)
  })

  it('has no serious or critical accessibility violations (axe-core) with the notebook dialog or the share dialog open', async () => {
    const service = await serve()
    await notebookOf(service, 'ann', 'Trip', 'Book the train', { bob: 'editor' })
    const ann = await person(service, 'ann', { bypassCSP: true })
    await pick(ann.page, 'Trip', 'Book the train')
    const { page } = ann
    for (const [button, name] of [
      ['New notebook…', 'New notebook'],
      ['Rename…', 'Rename the notebook'],
      ['Delete…', 'Delete the notebook'],
    ] as const) {
      await page.getByRole('button', { name: button }).click()
      const dialog = page.getByRole('dialog', { name })
      await dialog.waitFor()
      assert.deepEqual(await seriousViolations(page), [], name)
      if (name === 'New notebook') {
        // With the reason it refuses an empty name.
        await dialog.getByRole('button', { name: 'Make it' }).click()
        await dialog.getByText('Give it a name of 1 to 200 characters.').waitFor()
        assert.deepEqual(await seriousViolations(page), [], `${name}, refused`)
      }
      await dialog.getByRole('button', { name: 'Cancel' }).click()
      await dialog.waitFor({ state: 'hidden' })
    }

    await page.getByRole('button', { name: 'Share…' }).click()
    const share = page.getByRole('dialog', { name: 'Share “Trip”' })
    await share.getByLabel('Role of bob').waitFor()
    await share.getByRole('button', { name: 'Make an invitation link' }).click()
    await share.getByLabel('Invitation link (shown this once)').waitFor()
    await share.locator('.invites li').waitFor()
    assert.deepEqual(await seriousViolations(page), [], 'the share dialog')
    await share.getByRole('button', { name: 'Close' }).click()

    const bob = await person(service, 'bob', { bypassCSP: true })
    await pick(bob.page, 'Trip · editor', 'Book the train')
    await bob.page.getByRole('button', { name: 'Members…' }).click()
    const members = bob.page.getByRole('dialog', { name: 'Members of “Trip”' })
    await members.getByRole('button', { name: 'Leave this notebook' }).waitFor()
    assert.deepEqual(await seriousViolations(bob.page), [], 'the members dialog')
    await close(ann, bob)
  })
})
