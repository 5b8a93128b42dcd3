import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

/**
 * The floors of src/ (docs/architecture.md), from the ground up: durable/ (the record frame, file
 * steps and lock, shared by the store's journal and the client's Node-only file storage) and
 * config/; store/; api/; auth/, http/ and pages/; ops/; openapi/; open-stores.ts and commands/;
 * app.ts; server.ts and cli.ts. A module imports only from its own room or the rooms that
 * `MAY_IMPORT` names for it, every one of them lower, and no modules import each other in a loop.
 * client/ is a package of its own (notes-service-client), beside the floors: its build compiles in
 * the few outside modules it imports, and the service imports one module of it (parseJson).
 */

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src')

/** Every .ts file under src/, as a path relative to it: 'api/answer.ts'. */
function sources(folder = SRC): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name)
    // client/dist/: the client package's build (git-ignored), not sources.
    if (entry.isDirectory()) return entry.name === 'dist' ? [] : sources(path)
    return entry.name.endsWith('.ts') ? [relative(SRC, path)] : []
  })
}

/**
 * The src/ modules a file imports: `import`/`export ... from` (type imports included), a bare
 * `import './x.js'` for its side effects, and `import('./x.js')` (how cli.ts loads the server).
 * './answer.js' -> 'api/answer.ts'.
 */
function importsOf(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8')
  const found: string[] = []
  const patterns = [
    /^(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+)'/gm,
    /^import\s+'(\.{1,2}\/[^']+)'/gm,
    /\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g,
  ]
  for (const pattern of patterns) {
    for (const match of text.matchAll(pattern)) {
      const target = normalize(join(dirname(file), match[1] as string)).replace(/\.js$/, '.ts')
      if (!found.includes(target)) found.push(target)
    }
  }
  return found
}

const FILES = sources()
/**
 * The replica's file storage, its own subpath export (notes-service/client/file-storage), and the
 * module of its bytes and file steps, which only it imports.
 */
const NODE_ONLY = 'client/replica/file-storage.ts'
const NODE_ONLY_PARTS = ['client/replica/file-journal.ts']
const GRAPH = new Map(FILES.map((file) => [file, importsOf(file)]))
/**
 * The modules outside client/ that client modules import, all from the Node-only file storage
 * (the client package's build compiles them, and what they import, into its dist/).
 */
const CLIENT_IMPORTS_OUTSIDE = [
  'durable/file-steps.ts',
  'durable/group-commit.ts',
  'durable/pid-lock.ts',
  'durable/record-frame.ts',
]
/** The client modules that the service imports: one parseJson for both. */
const SERVICE_IMPORTS_OF_CLIENT = ['client/parse-json.ts']
/** How imports cross client/'s edge: 'from -> to' for each, in order. */
function crossings(fromClient: boolean): { from: string; to: string }[] {
  return FILES.filter((file) => file.startsWith('client/') === fromClient).flatMap((file) =>
    (GRAPH.get(file) ?? [])
      .filter((target) => target.startsWith('client/') !== fromClient)
      .map((target) => ({ from: file, to: target })),
  )
}

/** A module's room: its top folder under src/, or the file itself at the top ('app.ts'). */
function roomOf(file: string): string {
  const slash = file.indexOf('/')
  return slash === -1 ? file : file.slice(0, slash)
}

/** The rooms each room's modules may import, beside its own (client/ and ui/ are kept apart below). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  // The package's two entry points under the service's name: they import the package alone.
  exports: [],
  durable: [],
  config: [],
  store: ['durable'],
  api: ['store', 'config'],
  auth: ['api', 'store', 'config'],
  http: ['api', 'store', 'config'],
  pages: ['api', 'config'],
  ops: ['auth', 'api', 'store', 'config'],
  openapi: ['pages', 'ops', 'auth', 'api', 'store', 'config'],
  'open-stores.ts': ['store', 'config'],
  commands: ['open-stores.ts', 'auth', 'api', 'store', 'config'],
  'app.ts': ['openapi', 'ops', 'pages', 'http', 'auth', 'api', 'store', 'config'],
  'server.ts': ['app.ts', 'open-stores.ts', 'ops', 'http', 'auth', 'config'],
  'cli.ts': ['commands', 'server.ts', 'config'],
}

describe('the floors of src/', () => {
  it('finds the modules and their imports', () => {
    assert.ok(FILES.includes('api/answer.ts'))
    assert.deepEqual(GRAPH.get('api/answer-head.ts'), ['api/answer.ts'])
    // A side-effect import and the dynamic imports of the CLI count too.
    assert.ok(GRAPH.get('server.ts')?.includes('http/tick-shapes.ts'))
    assert.ok(GRAPH.get('cli.ts')?.includes('server.ts'))
    assert.ok(GRAPH.get('cli.ts')?.includes('commands/token-command.ts'))
  })

  it('lets each room import only from the rooms beneath it', () => {
    const upward = FILES.filter(
      (file) => !file.startsWith('client/') && !file.startsWith('ui/'),
    ).flatMap((file) => {
      const allowed = MAY_IMPORT[roomOf(file)]
      assert.ok(allowed !== undefined, `${file} is in no room of MAY_IMPORT`)
      return (GRAPH.get(file) ?? [])
        .filter((target) => roomOf(target) !== roomOf(file) && !allowed.includes(roomOf(target)))
        .filter((target) => !SERVICE_IMPORTS_OF_CLIENT.includes(target))
        .map((target) => `${file} -> ${target}`)
    })
    assert.deepEqual(upward, [])
    assert.ok((GRAPH.get('store/journal/journal-file.ts') ?? []).includes('durable/file-steps.ts'))
  })

  it('lets durable/ import only from durable/ and node: modules', () => {
    const durable = FILES.filter((file) => file.startsWith('durable/'))
    assert.ok(durable.includes('durable/record-frame.ts'))
    const outward = durable.flatMap((file) =>
      (GRAPH.get(file) ?? [])
        .filter((target) => !target.startsWith('durable/'))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(outward, [])
    const packages = durable.flatMap((file) =>
      [
        ...readFileSync(join(SRC, file), 'utf8').matchAll(
          /^(?:import|export)\b[^'"]*?from\s+'([^'.][^']*)'/gm,
        ),
      ]
        .map((match) => match[1] as string)
        .filter((specifier) => !specifier.startsWith('node:'))
        .map((specifier) => `${file} -> ${specifier}`),
    )
    assert.deepEqual(packages, [])
  })

  it('lets client/ import from outside it only the durable/ modules of its Node-only file storage', () => {
    const outward = crossings(true)
    assert.deepEqual([...new Set(outward.map(({ to }) => to))].sort(), CLIENT_IMPORTS_OUTSIDE)
    const importers = outward.filter(
      ({ from }) => from !== NODE_ONLY && !NODE_ONLY_PARTS.includes(from),
    )
    assert.deepEqual(importers, [])
  })

  it('lets the service import of client/ only parseJson', () => {
    const inward = crossings(false)
    assert.deepEqual([...new Set(inward.map(({ to }) => to))], SERVICE_IMPORTS_OF_CLIENT)
    assert.ok(inward.some(({ from }) => from === 'api/json-body.ts'))
  })

  it('lets no client module but the file storage import a node: module', () => {
    const builtIns = FILES.filter(
      (file) =>
        file.startsWith('client/') &&
        file !== NODE_ONLY &&
        !NODE_ONLY_PARTS.includes(file) &&
        /^(?:import|export)\b[^'"]*?from\s+'node:/m.test(readFileSync(join(SRC, file), 'utf8')),
    )
    assert.ok(FILES.includes('client/index.ts'))
    assert.deepEqual(builtIns, [])
  })

  it('lets exports/ (notes-service/client) only re-export the client package by its name', () => {
    const modules = FILES.filter((file) => file.startsWith('exports/')).sort()
    assert.deepEqual(
      modules.map((file) => [
        file,
        [...readFileSync(join(SRC, file), 'utf8').matchAll(/^(?:import|export)\b.*$/gm)].map(
          (match) => match[0],
        ),
      ]),
      [
        ['exports/client-file-storage.ts', ["export * from 'notes-service-client/file-storage'"]],
        ['exports/client.ts', ["export * from 'notes-service-client'"]],
      ],
    )
  })

  it('lets no client module import the file storage, so a browser never loads node:fs', () => {
    assert.ok(FILES.includes(NODE_ONLY))
    const importers = FILES.filter((file) => (GRAPH.get(file) ?? []).includes(NODE_ONLY))
    assert.deepEqual(importers, [])
    for (const part of NODE_ONLY_PARTS) {
      const partImporters = FILES.filter((file) => (GRAPH.get(file) ?? []).includes(part))
      assert.deepEqual(partImporters, [NODE_ONLY], part)
    }
  })

  it('keeps every module of src/ at 500 lines or fewer: a longer one holds more than one job', () => {
    const long = FILES.map((file) => ({
      file,
      lines: readFileSync(join(SRC, file), 'utf8').split('\n').length - 1,
    }))
      .filter(({ lines }) => lines > 500)
      .map(({ file, lines }) => `${file}: ${lines} lines`)
    assert.deepEqual(long, [])
  })

  it('has no import loop', () => {
    const loops: string[] = []
    const state = new Map<string, 'open' | 'done'>()
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return
      if (state.get(file) === 'open') {
        const loop = path.slice(path.indexOf(file))
        loops.push([...loop, file].join(' -> '))
        return
      }
      state.set(file, 'open')
      for (const target of GRAPH.get(file) ?? []) visit(target, [...path, file])
      state.set(file, 'done')
    }
    for (const file of FILES) visit(file, [])
    assert.deepEqual(loops, [])
  })
})
