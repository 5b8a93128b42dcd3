import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { NoteRecord, NoteStore } from '../../src/store/types.js'

/*
 * What the export and import tests of history and trash share (test/commands/export-history*):
 * the real CLI, temporary files, and one story of writes whose history and trash they move.
 */

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url))

export const DAY = 86_400_000

/** Runs the real CLI with `env` (and PATH alone besides); its exit code, stdout and stderr. */
export function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, maxBuffer: 1 << 28 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
        resolve({ code, stdout, stderr })
      },
    )
  })
}

/** Paths in a temporary folder of the tests', each new; `remove` takes the folder away. */
export function tempFiles(prefix: string): { fresh(name: string): string; remove(): void } {
  const root = mkdtempSync(join(tmpdir(), prefix))
  let count = 0
  return {
    fresh: (name) => join(root, `${++count}-${name}`),
    remove: () => rmSync(root, { recursive: true, force: true }),
  }
}

/** When the story's writes are made, in ms, for a story told at `now`. */
export function storyTimes(now: number) {
  const start = now - 10 * DAY
  return {
    start,
    a2: start + DAY,
    a3: start + 2 * DAY,
    c1: now - 4 * DAY,
    c2: now - 3.5 * DAY,
    cGone: now - 3 * DAY,
    bGone: now - 2 * DAY,
    bBack: now - DAY,
    d1: now - 2 * 3_600_000,
    dGone: now - 3_600_000,
  }
}

const idOf = (note: NoteRecord | undefined): number =>
  (JSON.parse((note as NoteRecord).json) as { id: number }).id

/**
 * The story, on an empty `store` whose clock reads `clock.at`: A created, then updated twice; B
 * created, deleted and put back from the trash; C created, updated and deleted; D created and
 * deleted. Eleven writes; the trash holds C and D. Answers the notes' ids.
 */
export async function HISTORY_STORY(
  store: NoteStore,
  clock: { at: number },
  t: ReturnType<typeof storyTimes>,
): Promise<Record<'a' | 'b' | 'c' | 'd', number>> {
  clock.at = t.start
  const a = idOf(await store.create({ title: 'A', n: 1 }))
  const b = idOf(await store.create({ title: 'B' }))
  clock.at = t.a2
  await store.update(a, { n: 2 })
  clock.at = t.a3
  await store.update(a, { n: 3 })
  clock.at = t.c1
  const c = idOf(await store.create({ title: 'C', n: 1 }))
  clock.at = t.c2
  await store.update(c, { n: 2 })
  clock.at = t.cGone
  await store.delete(c)
  clock.at = t.bGone
  await store.delete(b)
  clock.at = t.bBack
  await store.untrash(b)
  clock.at = t.d1
  const d = idOf(await store.create({ title: 'D' }))
  clock.at = t.dGone
  await store.delete(d)
  return { a, b, c, d }
}
