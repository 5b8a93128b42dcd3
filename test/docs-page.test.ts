import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { describe, it } from 'node:test'
import { chromium } from 'playwright-core'
import { buildOpsApp } from './ops-app.js'

/** Debian's Chromium; `.ci/run` installs it. Playwright's own browser download is not used. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

/** Where Chromium cannot be had, say so and skip; CI installs it, so there it must be found. */
function skipReason(): string | false {
  if (existsSync(CHROMIUM)) return false
  const message = `Chromium not found at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`
  if (process.env.CI === 'true') throw new Error(`${message}: CI must install it (.ci/run does).`)
  return message
}

describe('the /docs page', () => {
  it('shows the five note operations in a real browser, with nothing loaded from elsewhere', {
    skip: skipReason(),
    timeout: 60_000,
  }, async () => {
    const { app } = buildOpsApp({ docs: true })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const origin = `http://127.0.0.1:${port}`
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
    try {
      const page = await browser.newPage()
      const elsewhere: string[] = []
      await page.route('**/*', (route) => {
        const url = route.request().url()
        if (url.startsWith(`${origin}/`) || url.startsWith('data:')) return route.continue()
        elsewhere.push(url)
        return route.abort()
      })
      const response = await page.goto(`${origin}/docs`)
      assert.equal(response?.status(), 200)
      await page.locator('.opblock-summary').first().waitFor({ timeout: 30_000 })
      const operations = await page.locator('.opblock-summary').evaluateAll((blocks) =>
        blocks.map((block) => {
          const method = block.querySelector('.opblock-summary-method')?.textContent ?? ''
          const path = block.querySelector('.opblock-summary-path')?.textContent ?? ''
          return `${method} ${path.replace(/\u200b/g, '')}`
        }),
      )
      for (const operation of [
        'GET /api/note',
        'POST /api/note',
        'GET /api/note/{id}',
        'PATCH /api/note/{id}',
        'DELETE /api/note/{id}',
      ]) {
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
      assert.deepEqual(elsewhere, [])
    } finally {
      await browser.close()
      await app.close()
    }
  })
})
