import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

/**
 * The floors of src/ (docs/architecture.md): durable/ at the bottom (the record frame, file steps
 * and PID lock, shared by the store's journal and the client's Node-only file storage), store/
 * above it, then api/, then http/ and ops/, then app.ts, then server.ts and cli.ts. A module
 * imports only from its own floor or below, and no modules import each other in a loop.
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

describe('the floors of src/', () => {
  it('finds the modules and their imports', () => {
    assert.ok(FILES.includes('api/answer.ts'))
    assert.deepEqual(GRAPH.get('api/answer-head.ts'), ['api/answer.ts'])
  })

  it('lets api/ import only from api/, store/ and config/', () => {
    const upward = FILES.filter((file) => file.startsWith('api/')).flatMap((file) =>
      (GRAPH.get(file) ?? [])
        .filter((target) => !/^(api|store|config)\//.test(target))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(upward, [])
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

  it('lets store/ import only from store/ and durable/', () => {
    const upward = FILES.filter((file) => file.startsWith('store/')).flatMap((file) =>
      (GRAPH.get(file) ?? [])
        .filter((target) => !/^(store|durable)\//.test(target))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(upward, [])
    assert.ok((GRAPH.get('store/journal/journal-file.ts') ?? []).includes('durable/file-steps.ts'))
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
