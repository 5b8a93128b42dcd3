import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

/**
 * The floors of src/ (docs/architecture.md): store/ at the bottom, then api/, then http/ and
 * ops/, then app.ts, then server.ts and cli.ts. A module imports only from its own floor or
 * below, and no modules import each other in a loop.
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
/** The replica's file storage, its own subpath export (notes-service/client/file-storage). */
const NODE_ONLY = 'client/replica/file-storage.ts'
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

  it('lets store/ import only from store/', () => {
    const upward = FILES.filter((file) => file.startsWith('store/')).flatMap((file) =>
      (GRAPH.get(file) ?? [])
        .filter((target) => !target.startsWith('store/'))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(upward, [])
  })

  it('keeps client/ apart: it imports only client/ (and no node: module but in the Node-only file storage), and nothing imports it', () => {
    const crossing = FILES.flatMap((file) =>
      (GRAPH.get(file) ?? [])
        .filter((target) => file.startsWith('client/') !== target.startsWith('client/'))
        .map((target) => `${file} -> ${target}`),
    )
    assert.deepEqual(crossing, [])
    const builtIns = FILES.filter(
      (file) =>
        file.startsWith('client/') &&
        file !== NODE_ONLY &&
        /^(?:import|export)\b[^'"]*?from\s+'node:/m.test(readFileSync(join(SRC, file), 'utf8')),
    )
    assert.ok(FILES.includes('client/index.ts'))
    assert.deepEqual(builtIns, [])
  })

  it('lets no client module import the file storage, so a browser never loads node:fs', () => {
    assert.ok(FILES.includes(NODE_ONLY))
    const importers = FILES.filter((file) => (GRAPH.get(file) ?? []).includes(NODE_ONLY))
    assert.deepEqual(importers, [])
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
