import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, normalize } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { buildApp } from '../../src/app.js'
import { DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const PACKAGE = join(ROOT, 'src/client')
const ENTRIES = ['dist/client/index.js', 'dist/client/replica/file-storage.js']

/**
 * The package's modules that its entry points reach, through the imports of their JS and of
 * their declarations, as 'dist/client/errors' (without .js or .d.ts); and every specifier that
 * is neither relative nor node:, which would be a dependency.
 */
function reachedFrom(folder: string): { modules: string[]; packages: string[] } {
  const modules = new Set<string>()
  const packages = new Set<string>()
  const queue = ENTRIES.map((entry) => entry.replace(/\.js$/, ''))
  for (let module = queue.pop(); module !== undefined; module = queue.pop()) {
    if (modules.has(module)) continue
    modules.add(module)
    for (const suffix of ['.js', '.d.ts']) {
      const text = readFileSync(join(folder, module + suffix), 'utf8')
      for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g)) {
        const specifier = match[1] as string
        if (specifier.startsWith('.')) {
          queue.push(normalize(join(dirname(module), specifier)).replace(/\.js$/, ''))
        } else if (!specifier.startsWith('node:')) packages.add(`${module}${suffix}: ${specifier}`)
      }
    }
  }
  return { modules: [...modules].sort(), packages: [...packages] }
}

describe('the client package (notes-service-client), packed and installed alone', () => {
  const work = mkdtempSync(join(tmpdir(), 'notes-client-pack-'))
  after(() => rmSync(work, { recursive: true, force: true }))

  it('installs with no other package, and its client and file storage work from Node', {
    timeout: 120_000,
  }, async (t) => {
    // --ignore-scripts: its `prepare` is the package's build, which `npm run compile` ran; built
    // again here, it would rewrite src/client/dist/ while other test files load it. The service's
    // packed-package test (cli.test.ts) runs that build, in a copy.
    const packed = await run(
      'npm',
      ['pack', '--json', '--ignore-scripts', '--pack-destination', work],
      { cwd: PACKAGE },
    )
    const [{ filename, files }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [
      { filename: string; files: { path: string }[] },
    ]
    const app = join(work, 'app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), '{"name":"client-pack-test","private":true}\n')
    // --offline: a package with no dependencies needs nothing from a registry.
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(work, filename)], {
      cwd: app,
    })

    assert.deepEqual(readdirSync(join(app, 'node_modules')).sort(), [
      '.package-lock.json',
      'notes-service-client',
    ])
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dependencies?: unknown }>
    }
    assert.deepEqual(Object.keys(lock.packages), ['', 'node_modules/notes-service-client'])
    assert.equal(lock.packages['node_modules/notes-service-client']?.dependencies, undefined)

    // The tarball holds the modules its two entry points import (the durable/ ones of the file
    // storage too), each with its declarations, and nothing else; none imports a package.
    const installed = join(app, 'node_modules/notes-service-client')
    const { modules, packages } = reachedFrom(installed)
    assert.deepEqual(packages, [])
    assert.ok(modules.includes('dist/durable/record-frame'), modules.join(' '))
    assert.deepEqual(
      files.map((file) => file.path).sort(),
      ['README.md', 'package.json', ...modules.flatMap((m) => [`${m}.d.ts`, `${m}.js`])].sort(),
    )

    const store = new MemoryNoteStore({ maxNotes: 100, maxBytes: 1 << 20 })
    const service = buildApp({ store, config: DEFAULT_CONFIG })
    await service.listen({ port: 0, host: '127.0.0.1' })
    t.after(() => service.close())
    const base = `http://127.0.0.1:${(service.server.address() as AddressInfo).port}`
    writeFileSync(
      join(app, 'use.mjs'),
      `import { NotesClient } from 'notes-service-client'
import { FileReplicaStorage } from 'notes-service-client/file-storage'
const [base, path] = process.argv.slice(2)
const notes = new NotesClient({ baseUrl: base })
const { note } = await notes.create({ title: 'packed' })
const read = await notes.get(note.id)
const first = await FileReplicaStorage.open(path)
await first.write([{ table: 'meta', key: 'k', value: { packed: true } }])
await first.close()
const again = await FileReplicaStorage.open(path)
const meta = [...(await again.load()).meta]
await again.close()
console.log(JSON.stringify({ created: note, read: read.note, meta }))
`,
    )
    const used = await run(process.execPath, ['use.mjs', base, join(work, 'replica')], {
      cwd: app,
    })
    const listed = await service.inject({ method: 'GET', url: '/api/note' })
    const [stored] = (JSON.parse(listed.body) as { data: { id: number }[] }).data
    assert.equal(listed.body, `{"data":[{"title":"packed","id":${stored?.id}}]}`)
    const note = `{"title":"packed","id":${stored?.id}}`
    assert.equal(used.stdout, `{"created":${note},"read":${note},"meta":[["k",{"packed":true}]]}\n`)

    // Its declarations hold for a strict TypeScript program on Node's types alone (no DOM).
    writeFileSync(
      join(app, 'types.mts'),
      `import { NotesClient, type Note } from 'notes-service-client'
import { FileReplicaStorage } from 'notes-service-client/file-storage'
const notes: NotesClient = new NotesClient({ baseUrl: 'http://127.0.0.1:1' })
const created: Note = (await notes.create({ title: 'typed' })).note
const storage: FileReplicaStorage = await FileReplicaStorage.open('replica')
export const parts: [Note, FileReplicaStorage] = [created, storage]
`,
    )
    await run(
      process.execPath,
      [
        join(ROOT, 'node_modules/typescript/bin/tsc'),
        '--noEmit',
        '--strict',
        '--module',
        'nodenext',
        '--target',
        'es2023',
        '--types',
        'node',
        '--typeRoots',
        join(ROOT, 'node_modules/@types'),
        'types.mts',
      ],
      { cwd: app },
    )
  })
})
