import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { buildApp } from '../../src/app.js'
import { UserTokens } from '../../src/auth/user-tokens.js'
import { type Config, DEFAULT_CONFIG } from '../../src/config/config.js'
import { MemoryNotebooks } from '../../src/store/memory/memory-notebooks.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'

/**
 * Every example of docs/client.md, run against a fresh service and compared with the output shown
 * after it. The conventions this file reads:
 * - A ```js block is an ES module that imports from 'notes-service-client' (the client package,
 *   through its `exports` and the workspace's link in node_modules/, as a user's import of it
 *   installed would be) and talks to 'http://localhost:3000',
 *   which is replaced by the URL of a service started for the block.
 * - The ```text block after it is what it prints, exactly, once masked: 13-digit note ids (each
 *   distinct id becomes ID1, ID2... in order of appearance) and the epoch of version tokens.
 * - `<!-- example config: {...} -->` right before a block merges that JSON into the service's
 *   configuration; with `authJwtSecret`, the service has notebooks and takes user tokens signed
 *   with it.
 */

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const DOC = 'docs/client.md'
const PLACEHOLDER = 'http://localhost:3000'
const run = promisify(execFile)

interface Example {
  heading: string
  line: number
  code: string
  output: string
  config: Partial<Config>
}

function examples(text: string): Example[] {
  const lines = text.split('\n')
  const found: Example[] = []
  let heading = ''
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string
    if (line.startsWith('## ')) heading = line.slice(3)
    if (line !== '```js') continue
    const end = lines.indexOf('```', i + 1)
    const outputStart = lines.indexOf('```text', end)
    const outputEnd = lines.indexOf('```', outputStart + 1)
    assert.ok(
      end > i && outputStart > end,
      `${DOC}:${i + 1}: a js block needs a text block after it`,
    )
    assert.ok(
      lines.slice(end + 1, outputStart).every((between) => between.trim() === ''),
      `${DOC}:${i + 1}: only blank lines between an example and its output`,
    )
    const directive = /^<!-- example config: (.*) -->$/.exec(lines[i - 1] ?? '')
    found.push({
      heading,
      line: i + 1,
      code: lines.slice(i + 1, end).join('\n'),
      output: lines.slice(outputStart + 1, outputEnd).join('\n'),
      config: directive === null ? {} : (JSON.parse(directive[1] as string) as Partial<Config>),
    })
    i = outputEnd
  }
  return found
}

/** '{"id":1795545943701} "2hvgzwnqof.3"' -> '{"id":ID1} "<epoch>.3"' */
function masked(text: string): string {
  const ids = new Map<string, string>()
  return text
    .replace(/\b\d{13}\b/g, (id) => {
      if (!ids.has(id)) ids.set(id, `ID${ids.size + 1}`)
      return ids.get(id) as string
    })
    .replace(/\b[0-9a-z]{1,16}\.(\d+)\b/g, '<epoch>.$1')
}

/** Runs one example against a fresh service; answers what it printed. */
async function runExample(example: Example, index: number): Promise<string> {
  const config = { ...DEFAULT_CONFIG, ...example.config }
  // Room for the files the examples upload: in memory, they count toward the store's bytes.
  const caps = { maxNotes: 1_000, maxBytes: 1 << 24 }
  const app = buildApp(
    config.authJwtSecret === ''
      ? { store: new MemoryNoteStore(caps), config }
      : {
          notebooks: new MemoryNotebooks(caps),
          userTokens: new UserTokens({ secret: config.authJwtSecret }),
          config,
        },
  )
  await app.listen({ port: 0, host: '127.0.0.1' })
  try {
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    const dir = join(ROOT, 'dist/test/client-docs')
    mkdirSync(dir, { recursive: true })
    const file = join(dir, `example-${index}.mjs`)
    writeFileSync(file, example.code.replaceAll(PLACEHOLDER, base))
    const { stdout } = await run(process.execPath, [file], { timeout: 15_000 })
    return stdout.replace(/\n$/, '')
  } finally {
    await app.close()
  }
}

const EXAMPLES = examples(readFileSync(join(ROOT, DOC), 'utf8'))

/** Whether this build has POST /api/batch (the batch example waits for it). */
async function hasBatch(): Promise<boolean> {
  const app = buildApp({
    store: new MemoryNoteStore({ maxNotes: 10, maxBytes: 1 << 16 }),
    config: DEFAULT_CONFIG,
  })
  const answer = await app.inject({ method: 'POST', url: '/api/batch', payload: {} })
  await app.close()
  return answer.statusCode !== 404
}

describe(DOC, () => {
  it('has an example for every feature', () => {
    assert.deepEqual(
      EXAMPLES.map((example) => example.heading),
      [
        'Start',
        'Reading',
        'Pages and search',
        'Updates and conflicts',
        'Merging',
        'Merge patch',
        'Deletes',
        'Idempotent creates',
        'Batches',
        'The change feed',
        'Keys and user tokens',
        'Notebooks',
        'Files',
        'Large files and progress',
        'History and trash',
        'Errors',
        'Retries and aborts',
        'Replica (offline)',
        'Replica (offline)',
        'Replica (offline)',
        'Every notebook offline',
        'Files offline',
      ],
    )
  })

  EXAMPLES.forEach((example, index) => {
    it(`runs the example of "${example.heading}" (line ${example.line}) as shown`, async (t) => {
      if (example.heading === 'Batches' && !(await hasBatch())) {
        t.skip('POST /api/batch is not in this build yet')
        return
      }
      assert.equal(masked(await runExample(example, index)), masked(example.output))
    })
  })
})
