import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Page } from 'playwright-core'

/** axe-core's browser build, evaluated in a page that bypasses its policy (no eval otherwise). */
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')

export interface Violation {
  id: string
  impact: string
  targets: string[]
}

/** The serious and critical axe-core violations (WCAG 2.1 A and AA, best practice) of the page now. */
export async function seriousViolations(page: Page): Promise<Violation[]> {
  if ((await page.evaluate('typeof axe')) !== 'object') {
    await page.evaluate(readFileSync(AXE, 'utf8'))
  }
  const found = (await page.evaluate(
    `axe.run({ runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] }).then((result) =>
      result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) })))`,
  )) as Violation[]
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical')
}

/** axe-core finds nothing serious or critical in the page as it is now (`state` names it). */
export async function axeClean(page: Page, state: string): Promise<void> {
  const found = await seriousViolations(page)
  assert.deepEqual(found, [], `${state}: ${JSON.stringify(found)}`)
}
