import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * Which test files a run takes: every `*.test.ts` under test/ but test/container/ (the image's
 * tests, which test/container/run.sh runs against containers).
 */

/** The repository's root, from this module's place in dist/test/support/. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..')

/** The folders of test/ whose files no run takes. */
const NOT_RUN = ['test/container']

/** Every file under `folder` (relative to the root), as a root-relative path, sorted. */
export function filesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { withFileTypes: true })
    .flatMap((entry) => {
      const path = `${folder}/${entry.name}`
      return entry.isDirectory() ? filesUnder(path) : [path]
    })
    .sort()
}

/** The test sources: 'test/auth/user-tokens.test.ts', ... */
export function testSources(): string[] {
  return filesUnder('test').filter(
    (path) => path.endsWith('.test.ts') && !NOT_RUN.some((folder) => path.startsWith(`${folder}/`)),
  )
}

/** Where a source's compiled module is: 'test/a/b.test.ts' -> 'dist/test/a/b.test.js'. */
export function compiled(source: string): string {
  return `dist/${source.replace(/\.ts$/, '.js')}`
}
