/**
 * Attachments on the notes page, in Chromium against the real service: a file attached with the
 * picker or dropped on a note is stored on the service and referred to by the note; an image
 * shows, any other file is a link that downloads the same bytes; offline, a file waits on the
 * device (across a reload) and goes when the network is back; an attachment can be removed.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { deflateSync } from 'node:zlib'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { type ServerProcess, startServer } from '../hostile/server-process.js'
import { axeClean } from '../support/axe.js'
import { CHROMIUM, launchChromium, MISSING, SKIP } from '../support/chromium.js'

type Json = Record<string, unknown>

/** CRC-32 of PNG chunks (ISO 3309). */
function crc32(bytes: Buffer): number {
  let crc = 0xffffffff
  for (const byte of bytes) {
    crc ^= byte
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1
  }
  return (crc ^ 0xffffffff) >>> 0
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4)
  length.writeUInt32BE(data.length)
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body))
  return Buffer.concat([length, body, crc])
}

/** A valid 2x2 RGB PNG: red, green / blue, white. */
function tinyPng(): Buffer {
  const header = Buffer.alloc(13)
  header.writeUInt32BE(2, 0)
  header.writeUInt32BE(2, 4)
  header[8] = 8 // bit depth
  header[9] = 2 // colour type: RGB
  const rows = Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255])
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

let browser: Browser | undefined
const servers: ServerProcess[] = []

async function serve(env: Record<string, string> = {}): Promise<string> {
  const server = await startServer({ env })
  servers.push(server)
  return `http://127.0.0.1:${server.port}`
}

async function create(origin: string, note: Json, key?: string): Promise<Json> {
  const answer = await fetch(`${origin}/api/note`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
    },
    body: JSON.stringify(note),
  })
  assert.equal(answer.status, 200)
  return ((await answer.json()) as { data: Json }).data
}

/** The note as the service holds it, read from outside the browser. */
async function stored(origin: string, id: unknown, key?: string): Promise<Json> {
  const answer = await fetch(`${origin}/api/note/${id}`, { headers: bearer(key) })
  assert.equal(answer.status, 200)
  return ((await answer.json()) as { data: Json }).data
}

/** The file's bytes as the service serves them. */
async function fileBytes(origin: string, id: string, key?: string): Promise<Buffer> {
  const answer = await fetch(`${origin}/api/files/${id}`, { headers: bearer(key) })
  assert.equal(answer.status, 200)
  return Buffer.from(await answer.arrayBuffer())
}

const bearer = (key: string | undefined): Record<string, string> =>
  key === undefined ? {} : { authorization: `Bearer ${key}` }

async function fileCount(origin: string): Promise<number> {
  return Number((await fetch(`${origin}/api/files`)).headers.get('x-total-count'))
}

/** Polls `check` (every 100 ms, at most 20 s) until it holds. */
async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  for (const started = Date.now(); Date.now() - started < 20_000; ) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.fail(`never: ${what}`)
}

const item = (page: Page, text: string) =>
  page.locator('#notes > li').filter({ has: page.locator('h3', { hasText: text }) })

interface Watched {
  page: Page
  context: BrowserContext
  /** Uncaught exceptions and content the page's policy refused. */
  errors: string[]
}

/**
 * The page in a fresh profile, once its service worker controls it (so that it reloads offline);
 * `axe`: without the page's policy, which refuses axe's own innerHTML.
 */
async function open(
  origin: string,
  options: { axe?: boolean; key?: string } = {},
): Promise<Watched> {
  assert.ok(browser, `${MISSING}: CI must install it (.ci/run does).`)
  const context = await browser.newContext({
    viewport: { width: 900, height: 900 },
    bypassCSP: options.axe === true,
  })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (/^Refused to|violates|Trusted ?Type/i.test(message.text())) errors.push(message.text())
  })
  const response = await page.goto(`${origin}/`)
  assert.equal(response?.status(), 200)
  for (const started = Date.now(); ; ) {
    if ((await page.evaluate('navigator.serviceWorker.controller !== null')) === true) break
    assert.ok(Date.now() - started < 10_000, 'the service worker never took control')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  if (options.key !== undefined) {
    const dialog = page.getByRole('dialog', { name: 'Access key' })
    await dialog.getByLabel('Key').fill(options.key)
    await dialog.getByRole('button', { name: 'Use this key' }).click()
  }
  await page.locator('#list-status:not(:text("Loading"))').waitFor()
  await page.locator('#feed-status[data-state="live"]').waitFor()
  return { page, context, errors }
}

/** Picks files with the note's "Attach files…" button, through the browser's file chooser. */
async function pick(
  page: Page,
  title: string,
  files: { name: string; mimeType: string; buffer: Buffer }[],
): Promise<void> {
  const chooser = page.waitForEvent('filechooser')
  await item(page, title).getByRole('button', { name: 'Attach files…' }).click()
  await (await chooser).setFiles(files)
}

/** The image shown for `name` is decoded (its natural width is known). */
async function decoded(page: Page, title: string, name: string): Promise<number> {
  const image = item(page, title).getByRole('img', { name })
  await image.waitFor()
  for (const started = Date.now(); Date.now() - started < 10_000; ) {
    const width = await image.evaluate((img: { complete: boolean; naturalWidth: number }) =>
      img.complete ? img.naturalWidth : 0,
    )
    if (width > 0) return width
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`the image ${name} was never decoded`)
}

const PNG = tinyPng()
const TEXT = Buffer.from('Milk, eggs, bread, and 12,345 other things.\n'.repeat(280))

describe("the notes page's attachments, in Chromium", { skip: SKIP, concurrency: false }, () => {
  before(async () => {
    if (existsSync(CHROMIUM)) browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await Promise.all(servers.map((server) => server.stop()))
  })

  it('names sizes in words, and adds and removes attachments in a note’s own fields (table)', async () => {
    const origin = await serve()
    const { page, context } = await open(origin)
    const sizes = (await page.evaluate(`import('/ui/attachments.js').then(({ humanSize }) =>
      [0, 1, 999, 1000, 12345, 999949, 999950, 5000000, 1.5e9, 2e15].map(humanSize))`)) as string[]
    assert.deepEqual(sizes, [
      '0 bytes',
      '1 byte',
      '999 bytes',
      '1 KB',
      '12.3 KB',
      '999.9 KB',
      '1 MB',
      '5 MB',
      '1.5 GB',
      '2,000 TB',
    ])
    const a = { id: 'a'.repeat(64), name: 'a.png', size: 1, type: 'image/png' }
    const b = { id: 'b'.repeat(64), name: 'b.txt', size: 2, type: 'text/plain' }
    // Adding one is the replica's (attachFile writes the reference, once per file).
    const cases: [string, Json, Json | string][] = [
      ['withoutAttachment', { title: 't', files: [a, b] }, { title: 't', files: [b] }],
      ['withoutAttachment', { title: 't', files: [a] }, { title: 't' }],
      ['withoutAttachment', { files: ['x', a] }, { files: ['x'] }],
      ['withoutAttachment', { files: 'mine' }, { files: 'mine' }],
    ]
    for (const [call, note, expected] of cases) {
      const got = await page.evaluate(
        `import('/ui/attachments.js').then((m) => m.${call}(${JSON.stringify(note)}, ${JSON.stringify(a.id)}))`,
      )
      assert.deepEqual(got, expected, `${call}(${JSON.stringify(note)})`)
    }
    await context.close()
  })

  it('attaches with the picker: the image shows, another file is a link with its size, the note refers to both, the bytes are those picked', async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Trip', body: 'photos', place: { lake: true } })
    const { page, context, errors } = await open(origin)
    await pick(page, 'Trip', [{ name: 'map.png', mimeType: 'image/png', buffer: PNG }])
    assert.equal(await decoded(page, 'Trip', 'map.png'), 2)
    await item(page, 'Trip').locator('.message', { hasText: 'Attached “map.png”.' }).waitFor()
    const pngFile = { id: sha256(PNG), name: 'map.png', size: PNG.length, type: 'image/png' }
    await eventually(
      async () =>
        JSON.stringify((await stored(origin, note.id)).files) === JSON.stringify([pngFile]),
      'the note refers to the image',
    )
    assert.deepEqual(await fileBytes(origin, pngFile.id), PNG)

    await pick(page, 'Trip', [{ name: 'list.txt', mimeType: 'text/plain', buffer: TEXT }])
    const link = item(page, 'Trip').getByRole('link', { name: 'list.txt' })
    await link.waitFor()
    assert.equal(TEXT.length, 12_320)
    assert.equal(
      await item(page, 'Trip')
        .locator('.files li', { has: page.getByRole('link', { name: 'list.txt' }) })
        .textContent(),
      'list.txt 12.3 KB · Remove',
    )
    const textFile = { id: sha256(TEXT), name: 'list.txt', size: TEXT.length, type: 'text/plain' }
    await eventually(
      async () => ((await stored(origin, note.id)).files as unknown[]).length === 2,
      'the note refers to both',
    )
    // Every other field of the note stays as it was.
    assert.deepEqual(await stored(origin, note.id), {
      ...note,
      files: [pngFile, textFile],
    })
    assert.deepEqual(await fileBytes(origin, textFile.id), TEXT)
    // The files field is shown as attachments, not as JSON.
    assert.equal(
      await item(page, 'Trip').locator('pre.fields').textContent(),
      '{"place":{"lake":true}}',
    )
    // The link downloads the file's bytes, read with the client (a blob: URL).
    const download = page.waitForEvent('download')
    await link.click()
    const saved = await download
    assert.equal(saved.suggestedFilename(), 'list.txt')
    assert.match(saved.url(), /^blob:/)
    assert.deepEqual(readFileSync(await saved.path()), TEXT)
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('reads and sends the files with the tab’s access key, which an <img src> could not carry', async () => {
    const origin = await serve({ API_KEYS: 'write-key' })
    const note = await create(origin, { title: 'Locked' }, 'write-key')
    const { page, context, errors } = await open(origin, { key: 'write-key' })
    assert.equal((await fetch(`${origin}/api/files`)).status, 401)
    await pick(page, 'Locked', [
      { name: 'key.png', mimeType: 'image/png', buffer: PNG },
      { name: 'key.txt', mimeType: 'text/plain', buffer: TEXT },
    ])
    assert.equal(await decoded(page, 'Locked', 'key.png'), 2)
    await eventually(
      async () =>
        ((await stored(origin, note.id, 'write-key')).files as unknown[] | undefined)?.length === 2,
      'the note refers to both',
    )
    assert.deepEqual(await fileBytes(origin, sha256(PNG), 'write-key'), PNG)
    const download = page.waitForEvent('download')
    await item(page, 'Locked').getByRole('link', { name: 'key.txt' }).click()
    assert.deepEqual(readFileSync(await (await download).path()), TEXT)
    assert.equal(await page.getByRole('dialog', { name: 'Access key' }).isVisible(), false)
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('attaches the files picked in the new-note form to the note it creates', async () => {
    const origin = await serve()
    const { page, context, errors } = await open(origin)
    await page.locator('#create-title').fill('With a picture')
    await page.getByLabel('Attach files').setInputFiles({
      name: 'new.png',
      mimeType: 'image/png',
      buffer: PNG,
    })
    await page.getByRole('button', { name: 'Create note' }).click()
    assert.equal(await decoded(page, 'With a picture', 'new.png'), 2)
    assert.equal(await page.getByLabel('Attach files').inputValue(), '')
    let notes: Json[] = []
    await eventually(async () => {
      notes = ((await (await fetch(`${origin}/api/note`)).json()) as { data: Json[] }).data
      return Array.isArray(notes[0]?.files)
    }, 'the created note refers to the file')
    assert.deepEqual(
      notes.map(({ id: _id, ...fields }) => fields),
      [
        {
          title: 'With a picture',
          files: [{ id: sha256(PNG), name: 'new.png', size: PNG.length, type: 'image/png' }],
        },
      ],
    )
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('attaches files dropped on a note', async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Drop here' })
    await create(origin, { title: 'Not here' })
    const { page, context, errors } = await open(origin)
    // A drop as the browser makes it: a DataTransfer holding files (the Node side has no DOM).
    const transfer = await page.evaluateHandle(`(() => {
      const data = new DataTransfer()
      const png = Uint8Array.from(atob('${PNG.toString('base64')}'), (c) => c.charCodeAt(0))
      data.items.add(new File([png], 'drop.png', { type: 'image/png' }))
      data.items.add(new File(['dropped *text*'], 'notes.md', { type: 'text/markdown' }))
      return data
    })()`)
    const target = item(page, 'Drop here')
    await target.dispatchEvent('dragenter', { dataTransfer: transfer })
    await target.dispatchEvent('dragover', { dataTransfer: transfer })
    assert.equal(await target.evaluate((li) => li.classList.contains('dropping')), true)
    await target.locator('h3').dispatchEvent('drop', { dataTransfer: transfer })
    assert.equal(await target.evaluate((li) => li.classList.contains('dropping')), false)
    assert.equal(await decoded(page, 'Drop here', 'drop.png'), 2)
    await target.getByRole('link', { name: 'notes.md' }).waitFor()
    const markdown = Buffer.from('dropped *text*')
    await eventually(async () => {
      const files = (await stored(origin, note.id)).files as Json[] | undefined
      return files?.length === 2
    }, 'the note refers to both dropped files')
    const files = (await stored(origin, note.id)).files as Json[]
    assert.deepEqual(
      [...files].sort((a, b) => String(a.name).localeCompare(String(b.name))),
      [
        { id: sha256(PNG), name: 'drop.png', size: PNG.length, type: 'image/png' },
        { id: sha256(markdown), name: 'notes.md', size: markdown.length, type: 'text/markdown' },
      ],
    )
    assert.deepEqual(await fileBytes(origin, sha256(markdown)), markdown)
    assert.equal(await item(page, 'Not here').locator('.files li').count(), 0)
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('keeps a file attached offline on the device, across a reload, and sends it when the network is back', {
    timeout: 90_000,
  }, async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Offline photo' })
    const { page, context, errors } = await open(origin, { axe: true })
    await context.setOffline(true)
    await pick(page, 'Offline photo', [{ name: 'later.png', mimeType: 'image/png', buffer: PNG }])
    const waiting = item(page, 'Offline photo').locator('.uploads li')
    await waiting.filter({ hasText: 'waiting to upload' }).waitFor()
    assert.equal(
      await waiting.textContent(),
      `later.png ${PNG.length} bytes · waiting to upload · Cancel`,
    )
    // A note made offline, with a file: both wait, the file for the note's id.
    await page.locator('#create-title').fill('Made offline')
    await page.getByLabel('Attach files').setInputFiles({
      name: 'made.txt',
      mimeType: 'text/plain',
      buffer: TEXT,
    })
    await page.getByRole('button', { name: 'Create note' }).click()
    await item(page, 'Made offline')
      .locator('.uploads li', { hasText: 'waiting to upload' })
      .waitFor()
    await axeClean(page, 'files waiting to upload')
    // Counted with the changes that wait: the note made offline, and both files.
    assert.equal(
      await page.locator('#waiting').textContent(),
      '1 change and 2 files waiting to be sent.',
    )

    await page.reload()
    await page.locator('#feed-status[data-state="retrying"]').waitFor()
    await waiting.filter({ hasText: 'waiting to upload' }).waitFor()
    await item(page, 'Made offline').locator('.uploads li', { hasText: 'made.txt' }).waitFor()
    assert.equal(await fileCount(origin), 0)
    assert.equal((await stored(origin, note.id)).files, undefined)

    await context.setOffline(false)
    await eventually(
      async () => Array.isArray((await stored(origin, note.id)).files),
      'the note refers to the file',
    )
    assert.deepEqual((await stored(origin, note.id)).files, [
      { id: sha256(PNG), name: 'later.png', size: PNG.length, type: 'image/png' },
    ])
    assert.deepEqual(await fileBytes(origin, sha256(PNG)), PNG)
    assert.equal(await decoded(page, 'Offline photo', 'later.png'), 2)
    await waiting.waitFor({ state: 'detached' })
    let made: Json | undefined
    await eventually(async () => {
      const notes = ((await (await fetch(`${origin}/api/note`)).json()) as { data: Json[] }).data
      made = notes.find((n) => n.title === 'Made offline')
      return Array.isArray(made?.files)
    }, 'the note made offline refers to its file')
    assert.deepEqual(made?.files, [
      { id: sha256(TEXT), name: 'made.txt', size: TEXT.length, type: 'text/plain' },
    ])
    assert.deepEqual(await fileBytes(origin, sha256(TEXT)), TEXT)
    // Sent once: nothing waits on the device any more, and a reload sends nothing again.
    await page.reload()
    await page.locator('#feed-status[data-state="live"]').waitFor()
    assert.equal(await item(page, 'Offline photo').locator('.uploads').count(), 0)
    assert.equal(await fileCount(origin), 2)
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('sends a file attached offline once, with two tabs open on the notebook, and the note refers to it once', {
    timeout: 90_000,
  }, async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Two tabs' })
    const { page, context, errors } = await open(origin)
    const second = await context.newPage()
    second.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
    await second.goto(`${origin}/`)
    await second.locator('#feed-status[data-state="live"]').waitFor()
    // Every upload either tab makes that the service answers (small files go as one POST; the
    // tries made offline get no answer).
    const uploads: string[] = []
    context.on('response', (response) => {
      const request = response.request()
      const path = new URL(request.url()).pathname
      if (request.method() !== 'GET' && /^\/api\/(files|uploads)/.test(path)) {
        uploads.push(`${request.method()} ${path} ${response.status()}`)
      }
    })
    await context.setOffline(true)
    await pick(page, 'Two tabs', [{ name: 'both.png', mimeType: 'image/png', buffer: PNG }])
    await item(page, 'Two tabs').locator('.uploads li', { hasText: 'waiting to upload' }).waitFor()
    // The second tab opens again offline (from the service worker) and finds the file queued.
    await second.reload()
    await item(second, 'Two tabs')
      .locator('.uploads li', { hasText: 'waiting to upload' })
      .waitFor()

    await context.setOffline(false)
    await eventually(
      async () => Array.isArray((await stored(origin, note.id)).files),
      'the note refers to the file',
    )
    // Neither tab keeps it (as refused, its bytes gone with the other's send, say).
    for (const tab of [page, second]) {
      await item(tab, 'Two tabs').locator('.uploads').waitFor({ state: 'detached' })
      assert.equal(await decoded(tab, 'Two tabs', 'both.png'), 2)
    }
    assert.deepEqual(uploads, ['POST /api/files 201'])
    assert.deepEqual((await stored(origin, note.id)).files, [
      { id: sha256(PNG), name: 'both.png', size: PNG.length, type: 'image/png' },
    ])
    assert.equal(await fileCount(origin), 1)
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('moves the files an older page kept in notes-service.uploads into the replica, sends them, and deletes that database', {
    timeout: 90_000,
  }, async () => {
    const origin = await serve()
    const note = await create(origin, { title: 'Kept before' })
    const { page, context, errors } = await open(origin)
    await context.setOffline(true)
    // What the older page left: a file for this note, and one whose note is gone.
    await page.evaluate(`new Promise((resolve, reject) => {
      const opening = indexedDB.open('notes-service.uploads', 1)
      opening.onupgradeneeded = () => opening.result.createObjectStore('uploads', { autoIncrement: true })
      opening.onerror = () => reject(opening.error)
      opening.onsuccess = () => {
        const db = opening.result
        const tx = db.transaction('uploads', 'readwrite')
        const png = Uint8Array.from(atob('${PNG.toString('base64')}'), (c) => c.charCodeAt(0))
        const notebook = 'notes-service.notebook'
        tx.objectStore('uploads').add({ notebook, note: 'n:${note.id}', name: 'old.png', type: 'image/png', blob: new Blob([png]) })
        tx.objectStore('uploads').add({ notebook, note: 'n:1', name: 'gone.txt', type: 'text/plain', blob: new Blob(['gone']) })
        tx.oncomplete = () => { db.close(); resolve() }
        tx.onerror = () => reject(tx.error)
      }
    })`)
    await page.reload()
    await item(page, 'Kept before')
      .locator('.uploads li', { hasText: 'old.png' })
      .filter({ hasText: 'waiting to upload' })
      .waitFor()
    await page
      .locator('#sync-error', {
        hasText: '“gone.txt”, kept on this device to be attached, was not: its note is gone.',
      })
      .waitFor()
    const oldDatabase = `indexedDB.databases().then((all) => all.some((db) => db.name === 'notes-service.uploads'))`
    await eventually(
      async () => (await page.evaluate(oldDatabase)) === false,
      'the old database gone',
    )
    assert.equal(await page.locator('#waiting').textContent(), '1 file waiting to be sent.')

    await context.setOffline(false)
    await eventually(
      async () => Array.isArray((await stored(origin, note.id)).files),
      'the note refers to the file',
    )
    assert.deepEqual((await stored(origin, note.id)).files, [
      { id: sha256(PNG), name: 'old.png', size: PNG.length, type: 'image/png' },
    ])
    assert.deepEqual(await fileBytes(origin, sha256(PNG)), PNG)
    assert.equal(await decoded(page, 'Kept before', 'old.png'), 2)
    assert.equal(await fileCount(origin), 1)
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('removes an attachment from the note, keeping the others and every other field', async () => {
    const origin = await serve()
    const png = { id: sha256(PNG), name: 'a.png', size: PNG.length, type: 'image/png' }
    const text = { id: sha256(TEXT), name: 'b.txt', size: TEXT.length, type: 'text/plain' }
    for (const [bytes, type] of [
      [PNG, 'image/png'],
      [TEXT, 'text/plain'],
    ] as const) {
      const answer = await fetch(`${origin}/api/files`, {
        method: 'POST',
        headers: { 'content-type': type },
        body: bytes,
      })
      assert.equal(answer.status, 201)
    }
    const note = await create(origin, { title: 'Two files', body: 'keep me', files: [png, text] })
    const { page, context, errors } = await open(origin)
    assert.equal(await decoded(page, 'Two files', 'a.png'), 2)
    await item(page, 'Two files')
      .getByRole('button', { name: 'Remove a.png from Two files' })
      .click()
    await item(page, 'Two files').getByRole('img').waitFor({ state: 'detached' })
    await eventually(
      async () => ((await stored(origin, note.id)).files as unknown[]).length === 1,
      'one file left',
    )
    assert.deepEqual(await stored(origin, note.id), { ...note, files: [text] })
    await item(page, 'Two files')
      .getByRole('button', { name: 'Remove b.txt from Two files' })
      .click()
    await eventually(
      async () => !Object.hasOwn(await stored(origin, note.id), 'files'),
      'the files field gone',
    )
    assert.deepEqual(await stored(origin, note.id), {
      id: note.id,
      title: 'Two files',
      body: 'keep me',
    })
    assert.equal(
      await item(page, 'Two files').locator('.message').textContent(),
      'Removed “b.txt” from this note.',
    )
    assert.deepEqual(errors, [])
    await context.close()
  })

  it('says a file is too large, with the limit, at its note; shows progress with a label; stays axe-clean', async () => {
    const origin = await serve({ MAX_FILE_BYTES: '1000' })
    await create(origin, { title: 'Small only' })
    await create(origin, { title: 'Own files', files: 'mine' })
    const { page, context, errors } = await open(origin, { axe: true })
    // A files field of the note's own, not a list: said, and nothing is sent.
    await pick(page, 'Own files', [{ name: 'dot.png', mimeType: 'image/png', buffer: PNG }])
    assert.equal(
      await item(page, 'Own files').locator('.message.error').textContent(),
      'Not attached. This note’s “files” field is not a list, so it cannot hold attachments.',
    )
    assert.equal(
      await item(page, 'Own files').locator('pre.fields').textContent(),
      '{"files":"mine"}',
    )
    await pick(page, 'Small only', [{ name: 'big.txt', mimeType: 'text/plain', buffer: TEXT }])
    await item(page, 'Small only')
      .locator('.message.error', {
        hasText:
          '“big.txt” is too large to attach. A file may hold at most 1000 bytes. Send a smaller file.',
      })
      .waitFor()
    assert.equal(await page.locator('#create-error').textContent(), '')
    assert.equal(await page.locator('#sync-error').textContent(), '')
    // Kept listed as refused, not counted as waiting, until dismissed (off the device then).
    const refused = item(page, 'Small only').locator('.uploads li', { hasText: 'big.txt' })
    assert.equal(await refused.textContent(), 'big.txt 12.3 KB · not attached · Dismiss')
    assert.equal(await page.locator('#waiting').textContent(), '')
    await axeClean(page, 'a file refused')
    await refused.getByRole('button', { name: 'Dismiss big.txt' }).click()
    await refused.waitFor({ state: 'detached' })
    const keptBytes = `new Promise((resolve) => {
      const opening = indexedDB.open('notes-service.notebook')
      opening.onsuccess = () => {
        const count = opening.result.transaction('bytes').objectStore('bytes').count()
        count.onsuccess = () => { opening.result.close(); resolve(count.result) }
      }
    })`
    await eventually(async () => (await page.evaluate(keptBytes)) === 0, 'its bytes gone')

    // An upload held on its way shows its progress, labelled with the file's name.
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    await page.route('**/api/files', async (route) => {
      await held
      await route.continue()
    })
    await pick(page, 'Small only', [{ name: 'dot.png', mimeType: 'image/png', buffer: PNG }])
    const progress = page.getByRole('progressbar', { name: 'Uploading dot.png' })
    await progress.waitFor()
    assert.equal(await progress.getAttribute('max'), String(PNG.length))
    await axeClean(page, 'an upload in progress')
    release()
    assert.equal(await decoded(page, 'Small only', 'dot.png'), 2)
    await progress.waitFor({ state: 'detached' })
    await axeClean(page, 'an image attached')
    // Only the one picked for "Small only" was stored.
    assert.equal(await fileCount(origin), 1)
    assert.deepEqual(errors, [])
    await context.close()
  })
})
