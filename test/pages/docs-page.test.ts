import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { describe, it } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import type { Page } from 'playwright-core'
import { DOCS_PAGE_FILE_NAMES } from '../../src/pages/api-docs.js'
import { CHROMIUM, launchChromium, MISSING, SKIP } from '../support/chromium.js'
import { buildOpsApp } from '../support/ops-app.js'

/** Where to save a screenshot of the page after the operations ran, when set (for a human). */
const SCREENSHOT = process.env.DOCS_PAGE_SCREENSHOT

/** What the page shows of one executed operation: the request it sent and the answer. */
interface Execution {
  requestUrl: string
  status: string
  body: string
}

/**
 * Opens the operation `operationId`, clicks Try it out, fills its `id` (and the body, for
 * PATCH), clicks Execute and reads what the page shows, as a user would.
 */
async function execute(
  page: Page,
  operationId: string,
  id: string,
  body?: string,
): Promise<Execution> {
  const block = page.locator(`#operations-notes-${operationId}`)
  await block.locator('.opblock-summary').click()
  await block.getByRole('button', { name: 'Try it out' }).click()
  // Each parameter row: its name (the cell also shows '*' and 'required' for a required one).
  const parameters = await block
    .locator('.parameters tbody tr')
    .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-param-name') ?? ''))
  const conditions =
    operationId === 'getNote'
      ? ['If-None-Match', 'If-Modified-Since']
      : ['If-Match', 'If-Unmodified-Since']
  assert.deepEqual(
    parameters,
    ['id', 'X-Request-Id', ...conditions],
    `the parameters of ${operationId}`,
  )
  await block.locator('tr[data-param-name="id"] input').fill(id)
  if (body !== undefined) await block.locator('textarea.body-param__text').fill(body)
  await block.getByRole('button', { name: 'Execute' }).click()
  const live = block.locator('.live-responses-table .response')
  await live.waitFor({ timeout: 30_000 })
  return {
    requestUrl: (await block.locator('.request-url pre').textContent()) ?? '',
    status: (await live.locator('.response-col_status').textContent()) ?? '',
    body:
      (await live.locator('.response-col_description pre.microlight').first().textContent()) ?? '',
  }
}

describe('the /docs page', () => {
  it('shows the API described at /api/openapi.json and runs GET, PATCH and DELETE of a note from the page', {
    skip: SKIP,
    timeout: 120_000,
  }, async () => {
    assert.ok(existsSync(CHROMIUM), `${MISSING}: CI must install it (.ci/run does).`)
    const { app, store } = buildOpsApp({ docs: true })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const origin = `http://127.0.0.1:${port}`
    const created = await app.inject({
      method: 'POST',
      url: '/api/note',
      payload: { title: 'Buy milk' },
    })
    const note = (created.json() as { data: { id: number; title: string } }).data
    const id = String(note.id)
    const browser = await launchChromium()
    // Tall enough that Swagger UI, which renders the operations near the viewport, renders the
    // note routes checked below (the document's paths in a notebook come after them).
    const page = await browser.newPage({ viewport: { width: 1280, height: 4000 } })
    try {
      const elsewhere: string[] = []
      const requested: string[] = []
      await page.route('**/*', (route) => {
        const url = route.request().url()
        if (url.startsWith('data:')) return route.continue()
        if (url.startsWith(`${origin}/`)) {
          requested.push(`${route.request().method()} ${url.slice(origin.length)}`)
          return route.continue()
        }
        elsewhere.push(url)
        return route.abort()
      })
      const response = await page.goto(`${origin}/docs`)
      assert.equal(response?.status(), 200)
      await page.locator('.opblock-summary').first().waitFor({ timeout: 30_000 })
      const expected = [
        'GET /api/note',
        'POST /api/note',
        'GET /api/note/{id}',
        'PATCH /api/note/{id}',
        'DELETE /api/note/{id}',
      ]
      const listed = () =>
        page.locator('.opblock-summary').evaluateAll((blocks) =>
          blocks.map((block) => {
            const method = block.querySelector('.opblock-summary-method')?.textContent ?? ''
            const path = block.querySelector('.opblock-summary-path')?.textContent ?? ''
            return `${method} ${path.replace(/\u200b/g, '')}`
          }),
        )
      // Swagger UI renders the operations a few at a time: wait (bounded) for the ones checked.
      let operations = await listed()
      for (let tries = 0; tries < 100 && !expected.every((o) => operations.includes(o)); tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        operations = await listed()
      }
      for (const operation of expected) {
        assert.ok(
          operations.includes(operation),
          `${operation} not in ${JSON.stringify(operations)}`,
        )
      }
      assert.equal(
        await page
          .locator('.info .title')
          .first()
          .textContent()
          .then((t) => t?.startsWith('notes-service')),
        true,
      )
      // The top bar names the canonical document, and the page read that one.
      assert.equal(
        await page.locator('.topbar input.download-url-input').inputValue(),
        '/api/openapi.json',
      )
      assert.ok(requested.includes('GET /api/openapi.json'), JSON.stringify(requested))

      const got = await execute(page, 'getNote', id)
      assert.equal(got.requestUrl, `${origin}/api/note/${id}`)
      assert.equal(got.status, '200')
      assert.deepEqual(JSON.parse(got.body), { data: note })

      const patched = await execute(page, 'updateNote', id, '{"done": true}')
      assert.equal(patched.requestUrl, `${origin}/api/note/${id}`)
      assert.equal(patched.status, '200')
      assert.deepEqual(JSON.parse(patched.body), { data: { ...note, done: true } })

      const deleted = await execute(page, 'deleteNote', id)
      assert.equal(deleted.requestUrl, `${origin}/api/note/${id}`)
      assert.equal(deleted.status, '200')
      assert.deepEqual(JSON.parse(deleted.body), { data: id })
      assert.equal((await store.list()).json, '[]')

      assert.deepEqual(elsewhere, [])
      assert.deepEqual(
        requested.filter((request) => request.includes('/api/note/')),
        [`GET /api/note/${id}`, `PATCH /api/note/${id}`, `DELETE /api/note/${id}`],
      )
    } finally {
      if (SCREENSHOT !== undefined) await page.screenshot({ path: SCREENSHOT, fullPage: true })
      await browser.close()
      await app.close()
    }
  })
})

const SWAGGER_UI_DIST = dirname(
  createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'),
)
const NOT_FOUND = {
  type: 'about:blank',
  title: 'Not Found',
  status: 404,
  detail: 'Nothing is served at this path; the notes are at /api/note.',
}

describe('GET /docs and its files', () => {
  it('serves the page and every file it links, those of swagger-ui-dist byte for byte', async () => {
    const { app } = buildOpsApp({ docs: true })
    const page = await app.inject({ method: 'GET', url: '/docs' })
    assert.equal(page.statusCode, 200)
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8')
    assert.equal(page.headers['cache-control'], 'no-cache')
    assert.match(String(page.headers.etag), /^"[\w-]{27}"$/)
    assert.equal((await app.inject({ method: 'GET', url: '/docs/' })).body, page.body)
    const linked = [...page.body.matchAll(/(?:href|src)="\/docs\/static\/([^"]+)"/g)].map(
      (match) => match[1] ?? '',
    )
    assert.deepEqual([...linked].sort(), [...DOCS_PAGE_FILE_NAMES].sort())
    const types: Record<string, string> = {
      css: 'text/css; charset=utf-8',
      js: 'text/javascript; charset=utf-8',
      png: 'image/png',
    }
    for (const name of linked) {
      const file = await app.inject({ method: 'GET', url: `/docs/static/${name}` })
      assert.equal(file.statusCode, 200, name)
      assert.equal(file.headers['content-type'], types[name.split('.').pop() ?? ''], name)
      assert.equal(file.headers['cache-control'], 'no-cache', name)
      if (name === 'swagger-initializer.js') {
        // The page reads the canonical document, and its top bar shows that address.
        assert.match(file.body, /^ {4}url: '\/api\/openapi\.json',$/m)
        assert.doesNotMatch(file.body, /docs\/json/)
      } else {
        assert.deepEqual(file.rawPayload, readFileSync(join(SWAGGER_UI_DIST, name)), name)
      }
    }
  })

  it('answers If-None-Match as the API does: 304 for a strong, weak or listed match and *, else 200', async () => {
    const { app } = buildOpsApp({ docs: true })
    for (const url of ['/docs', '/docs/static/swagger-ui-bundle.js']) {
      const first = await app.inject({ method: 'GET', url })
      const etag = String(first.headers.etag)
      const cases: [string, number][] = [
        [etag, 304],
        [`W/${etag}`, 304],
        [`"other", W/${etag}`, 304],
        [`"a",${etag} , "b"`, 304],
        ['*', 304],
        ['"other"', 200],
        ['W/"other"', 200],
        [etag.slice(1, -1), 200],
        [`${etag.slice(0, -1)}-br"`, 200],
      ]
      for (const [ifNoneMatch, status] of cases) {
        const again = await app.inject({
          method: 'GET',
          url,
          headers: { 'if-none-match': ifNoneMatch },
        })
        const label = `${url} If-None-Match: ${ifNoneMatch}`
        assert.equal(again.statusCode, status, label)
        assert.equal(again.headers.etag, etag, label)
        assert.equal(again.headers['cache-control'], 'no-cache', label)
        if (status === 304) {
          assert.equal(again.headers['content-type'], undefined, label)
          assert.equal(again.body, '', label)
        } else {
          assert.deepEqual(again.rawPayload, first.rawPayload, label)
        }
      }
    }
  })

  it('answers Accept-Encoding as the API does: identity;q=0, *;q=0, q-values, one ETag per coding', async () => {
    const { app } = buildOpsApp({ docs: true })
    const url = '/docs/static/swagger-ui.css'
    const plain = await app.inject({ method: 'GET', url })
    const etag = String(plain.headers.etag)
    const tagged = (coding: string) => `${etag.slice(0, -1)}-${coding}"`
    const cases: [string, string | undefined][] = [
      ['gzip, deflate, br', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0.1, gzip', 'gzip'],
      ['*', 'br'],
      ['*;q=0', undefined],
      ['identity;q=0', undefined],
      ['gzip, identity;q=0', 'gzip'],
      ['gzip;q=0.5, identity', undefined],
      ['deflate', undefined],
    ]
    for (const [accept, coding] of cases) {
      const headers = { 'accept-encoding': accept }
      const file = await app.inject({ method: 'GET', url, headers })
      const body =
        coding === 'br'
          ? brotliDecompressSync(file.rawPayload)
          : coding === 'gzip'
            ? gunzipSync(file.rawPayload)
            : file.rawPayload
      assert.deepEqual(
        [file.statusCode, file.headers['content-encoding'], file.headers.etag, file.headers.vary],
        [200, coding, coding === undefined ? etag : tagged(coding), 'Accept-Encoding'],
        accept,
      )
      assert.deepEqual(body, plain.rawPayload, accept)
      const again = await app.inject({
        method: 'GET',
        url,
        headers: { ...headers, 'if-none-match': String(file.headers.etag) },
      })
      assert.equal(again.statusCode, 304, accept)
    }
    // The page itself is under 1 KiB: compressed only when identity is refused.
    const page = (accept: string) =>
      app.inject({ method: 'GET', url: '/docs', headers: { 'accept-encoding': accept } })
    assert.equal((await page('gzip')).headers['content-encoding'], undefined)
    assert.equal((await page('gzip, identity;q=0')).headers['content-encoding'], 'gzip')
    // Icons are compressed already.
    const icon = await app.inject({
      method: 'GET',
      url: '/docs/static/favicon-32x32.png',
      headers: { 'accept-encoding': 'br, identity;q=0' },
    })
    assert.equal(icon.headers['content-encoding'], undefined)
  })

  it('answers 404 problem JSON for a file the page does not have, and for the old copies of the document', async () => {
    const { app } = buildOpsApp({ docs: true })
    for (const name of [
      'index.html',
      'swagger-ui.js',
      'oauth2-redirect.html',
      'package.json',
      '..%2Fpackage.json',
    ]) {
      const response = await app.inject({ method: 'GET', url: `/docs/static/${name}` })
      assert.equal(response.statusCode, 404, name)
      assert.equal(response.headers['content-type'], 'application/problem+json')
      assert.deepEqual(response.json(), {
        type: 'about:blank',
        title: 'Not Found',
        status: 404,
        detail: 'The /docs page has no such file; open /docs itself.',
      })
    }
    for (const url of ['/docs/json', '/docs/yaml', '/docs/static']) {
      const response = await app.inject({ method: 'GET', url })
      assert.equal(response.statusCode, 404, url)
      assert.deepEqual(response.json(), NOT_FOUND, url)
    }
  })

  it('serves neither the page nor its files when the page is off, and says which setting turns it on', async () => {
    const { app } = buildOpsApp({ docs: false })
    for (const url of [
      '/docs',
      '/docs/',
      '/docs?x=1',
      '/docs/static/swagger-ui.css',
      '/docs/static/swagger-initializer.js',
    ]) {
      const response = await app.inject({ method: 'GET', url })
      assert.equal(response.statusCode, 404, url)
      assert.equal(response.headers['content-type'], 'application/problem+json', url)
      assert.deepEqual(
        response.json(),
        {
          type: 'about:blank',
          title: 'Not Found',
          status: 404,
          detail:
            'The API reference page (/docs) is off: start the service with DOCS=true (or the flag --docs) to serve it.',
        },
        url,
      )
    }
    // A path that is no feature's keeps the 404 that points at the notes.
    assert.deepEqual((await app.inject({ method: 'GET', url: '/docsx' })).json(), NOT_FOUND)
  })
})
