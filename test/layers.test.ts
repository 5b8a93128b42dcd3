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
 */

const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src')

/** Every .ts file under src/, as a path relative to it: 'api/answer.ts'. */
function sources(folder = SRC): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) return sources(path)
    return entry.name.endsWith('.ts') ? [relative(SRC, path)] : []
  })
}

/** The src/ modules a file imports (type imports included): './answer.js' -> 'api/answer.ts'. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8')
  const found: string[] = []
  for (const match of text.matchAll(/^(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+)'/gm)) {
    const target = normalize(join(dirname(file), match[1] as string)).replace(/\.js$/, '.ts')
    found.push(target)
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

/** A module's room: its top folder under src/, or the file itself at the top ('app.ts'). */
function roomOf(file: string): string {
  const slash = file.indexOf('/')
  return slash === -1 ? file : file.slice(0, slash)
}

/** The rooms each room's modules may import, beside its own (client/ and ui/ are kept apart below). */
const MAY_IMPORT: Record<string, readonly string[]> = {
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
  })

  it('lets each room import only from the rooms beneath it', () => {
    const upward = FILES.filter(
      (file) => !file.startsWith('client/') && !file.startsWith('ui/'),
    ).flatMap((file) => {
      const allowed = MAY_IMPORT[roomOf(file)]
      assert.ok(allowed !== undefined, `${file} is in no room of MAY_IMPORT`)
      return (GRAPH.get(file) ?? [])
        .filter((target) => roomOf(target) !== roomOf(file) && !allowed.includes(roomOf(target)))
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

  it('keeps client/ apart: it imports only client/ (the Node-only file storage durable/ too, and no node: module elsewhere), and nothing imports it', () => {
    const nodeOnly = (file: string) => file === NODE_ONLY || NODE_ONLY_PARTS.includes(file)
    const crossing = FILES.flatMap((file) =>
      (GRAPH.get(file) ?? [])
        .filter((target) => file.startsWith('client/') !== target.startsWith('client/'))
        .filter((target) => !(nodeOnly(file) && target.startsWith('durable/')))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(crossing, [])
    assert.ok((GRAPH.get(NODE_ONLY) ?? []).some((target) => target.startsWith('durable/')))
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

  it('lets no client module import the file storage, so a browser never loads node:fs', () => {
    assert.ok(FILES.includes(NODE_ONLY))
    const importers = FILES.filter((file) => (GRAPH.get(file) ?? []).includes(NODE_ONLY))
    assert.deepEqual(importers, [])
    for (const part of NODE_ONLY_PARTS) {
      const partImporters = FILES.filter((file) => (GRAPH.get(file) ?? []).includes(part))
      assert.deepEqual(partImporters, [NODE_ONLY], part)
    }
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
