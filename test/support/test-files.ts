import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * Which test files a run takes. The whole suite (`npm test`) is every `*.test.ts` under test/ but
 * test/container/ (the image's tests, which test/container/run.sh runs against containers). The
 * unit tier (`npm run test:unit`) is the `*.unit.test.ts` files among them: no PostgreSQL, no
 * browser, no child process, so it runs in seconds on any checkout; test/test-layout.unit.test.ts
 * checks, through what each of them imports, that none of them can start one.
 */

/** The repository's root, from this module's place in dist/test/support/. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..')

export type Tier = 'all' | 'unit'

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

/** The test sources of a tier: 'test/auth/user-tokens.unit.test.ts', ... */
export function testSources(tier: Tier): string[] {
  return filesUnder('test').filter(
    (path) =>
      path.endsWith(tier === 'unit' ? '.unit.test.ts' : '.test.ts') &&
      !NOT_RUN.some((folder) => path.startsWith(`${folder}/`)),
  )
}

/** Where a source's compiled module is: 'test/a/b.test.ts' -> 'dist/test/a/b.test.js'. */
export function compiled(source: string): string {
  return `dist/${source.replace(/\.ts$/, '.js')}`
}

/**
 * What a module imports, statically or with `import('...')`: the repository's modules (resolved,
 * root-relative: 'src/app.ts') and the packages and node: modules by name ('node:child_process').
 */
function importsOf(source: string): { modules: string[]; packages: string[] } {
  const text = readFileSync(join(ROOT, source), 'utf8')
  const modules: string[] = []
  const packages: string[] = []
  const specifiers = /(?:\bfrom\s+|\bimport\s*\(\s*|^import\s+)'([^']+)'/gm
  for (const [, specifier = ''] of text.matchAll(specifiers)) {
    if (specifier.startsWith('.')) {
      const module = normalize(join(dirname(source), specifier)).replace(/\.js$/, '.ts')
      // Only TypeScript is followed: '../package.json' is data.
      if (module.endsWith('.ts') && existsSync(join(ROOT, module))) modules.push(module)
    } else {
      packages.push(specifier)
    }
  }
  return { modules, packages }
}

/**
 * The first package of `wanted` that `source` reaches through its imports, and the chain of
 * modules to it: 'test/support/each-store.ts' -> ['test/support/postgres-cluster.ts',
 * 'node:child_process']. Undefined when it reaches none of them.
 */
export function reaches(source: string, wanted: readonly string[]): string[] | undefined {
  const seen = new Set([source])
  const queue: string[][] = [[source]]
  for (let chain = queue.shift(); chain !== undefined; chain = queue.shift()) {
    const { modules, packages } = importsOf(chain.at(-1) as string)
    const found = packages.find((name) => wanted.includes(name))
    if (found !== undefined) return [...chain.slice(1), found]
    for (const module of modules) {
      if (seen.has(module)) continue
      seen.add(module)
      queue.push([...chain, module])
    }
  }
  return undefined
}
