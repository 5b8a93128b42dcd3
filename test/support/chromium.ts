import { existsSync } from 'node:fs'
import { type Browser, chromium, type Page } from 'playwright-core'

/** Debian's Chromium; `.ci/run` installs it. Playwright's own browser download is not used. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/** Playwright adds --user-data-dir itself: a new empty profile in the temp folder per launch. */
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

export const MISSING = `Chromium not found at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`

/**
 * The `skip` option of the browser tests: where Chromium cannot be had, say so and skip; CI
 * installs it, so under CI=true the tests run and fail (a failed test in the counts, not a skip).
 */
export const SKIP: string | false =
  existsSync(CHROMIUM) || process.env.CI === 'true' ? false : MISSING

/** A headless Chromium from CHROMIUM. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
}

/**
 * Waits until `expression` is true in the page, polling every 50 ms for at most `timeoutMs`.
 * Playwright's waitForFunction would evaluate a string with eval, which the page's policy refuses.
 */
export async function until(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs
  while ((await page.evaluate(expression)) !== true) {
    if (Date.now() > end) throw new Error(`still false after ${timeoutMs} ms: ${expression}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
