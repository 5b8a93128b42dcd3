import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { EXPORT_HELP } from '../src/commands/export-command.js'
import { IMPORT_HELP } from '../src/commands/import-command.js'
import { OPTIONS } from '../src/config/config.js'
import { formatHelp } from '../src/config/help.js'
import { readPackageInfo } from '../src/config/package-info.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CLI = join(ROOT, 'dist/src/cli.js')
const { version } = readPackageInfo()

describe('notes-service --help', () => {
  const help = formatHelp(OPTIONS, readPackageInfo())

  it('lists every option with its flag, environment variable, default and accepted values', () => {
    const expected: [string, string][] = [
      ['--port <value>', 'env PORT, default 3000; an integer from 0 to 65535'],
      [
        '--host <value>',
        'env HOST, default 127.0.0.1; an IP address (127.0.0.1, ::1, 0.0.0.0 for every interface) or a host name (localhost)',
      ],
      [
        '--log-requests [true|false]',
        'env LOG_REQUESTS, default false; true/false, 1/0, yes/no or on/off, in any case',
      ],
      [
        '--cors-origin <value>',
        'env CORS_ORIGIN, default none; a comma-separated list of origins such as https://app.example.com, or *',
      ],
      [
        '--metrics [true|false]',
        'env METRICS, default false; true/false, 1/0, yes/no or on/off, in any case',
      ],
      [
        '--docs [true|false]',
        'env DOCS, default false; true/false, 1/0, yes/no or on/off, in any case',
      ],
    ]
    const lines = help.split('\n')
    for (const [flag, details] of expected) {
      const at = lines.indexOf(`  ${flag}`)
      assert.notEqual(at, -1, flag)
      assert.equal(lines[at + 2], `      ${details}`, flag)
    }
    for (const option of OPTIONS) {
      assert.match(help, new RegExp(`^  ${option.flag} `, 'm'), option.flag)
      assert.match(help, new RegExp(`^      env ${option.env}, default `, 'm'), option.env)
    }
    assert.match(help, /^ {2}--help\n/m)
    assert.match(help, /^ {2}--version\n/m)
  })

  it('is what the command prints, and --version prints the version', async () => {
    assert.equal((await run(process.execPath, [CLI, '--help'])).stdout, help)
    assert.equal((await run(process.execPath, [CLI, '--version'])).stdout, `${version}\n`)
  })

  it('stops start-up with a one-line message naming a bad variable', async () => {
    await assert.rejects(run(process.execPath, [CLI], { env: { ...process.env, PORT: 'x' } }), {
      code: 2,
      stderr: 'notes-service: Invalid PORT "x": expected an integer from 0 to 65535.\n',
    })
  })
})

describe('notes-service export --help and import --help', () => {
  it("print each command's help on stdout and exit 0, with -h too, whatever else is there and with no store set", async () => {
    const env = { PATH: process.env.PATH ?? '' }
    const cases: [string[], string, string][] = [
      [['export', '--help'], EXPORT_HELP, 'Usage: notes-service export [--out FILE]'],
      [['export', '-h'], EXPORT_HELP, 'Usage: notes-service export [--out FILE]'],
      [
        ['export', '--out', 'x.ndjson', '--help'],
        EXPORT_HELP,
        'Usage: notes-service export [--out FILE]',
      ],
      [['import', '--help'], IMPORT_HELP, 'Usage: notes-service import FILE [--replace]'],
      [['import', '-h'], IMPORT_HELP, 'Usage: notes-service import FILE [--replace]'],
      [
        ['import', 'dump.ndjson', '--replace', '-h'],
        IMPORT_HELP,
        'Usage: notes-service import FILE [--replace]',
      ],
    ]
    for (const [args, help, usage] of cases) {
      const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env })
      assert.deepEqual({ stdout, stderr }, { stdout: help, stderr: '' }, args.join(' '))
      assert.equal(help.split('\n')[0], usage)
      assert.match(help, /^ {2}--help, -h\n/m)
    }
  })

  it('are named by the top-level --help', () => {
    const help = formatHelp(OPTIONS, readPackageInfo())
    assert.match(help, /^ {7}notes-service token\|export\|import --help$/m)
  })
})

describe('the packed package', () => {
  const work = mkdtempSync(join(tmpdir(), 'notes-service-pack-'))
  after(() => rmSync(work, { recursive: true, force: true }))

  it('installs from its tarball and runs as `npx notes-service`', {
    timeout: 240_000,
  }, async () => {
    // `npm pack` runs the package's `prepare`, a full build. In the checkout that would rewrite
    // dist/ while the test files running beside this one load it (one once read a module half
    // written, and lacked an export): it builds in a copy of what the package is made from.
    const source = join(work, 'source')
    mkdirSync(source)
    for (const name of readdirSync(ROOT)) {
      if (/^(src|scripts|package\.json|tsconfig.*\.json|README.*|LICEN[CS]E.*)$/i.test(name)) {
        cpSync(join(ROOT, name), join(source, name), { recursive: true })
      }
    }
    // Its node_modules: the checkout's packages, and its own client package (a workspace, which
    // the tarball bundles), as `npm ci` would link it.
    mkdirSync(join(source, 'node_modules'))
    for (const name of readdirSync(join(ROOT, 'node_modules'))) {
      if (name === 'notes-service-client' || name === '.package-lock.json') continue
      symlinkSync(join(ROOT, 'node_modules', name), join(source, 'node_modules', name))
    }
    symlinkSync('../src/client', join(source, 'node_modules/notes-service-client'), 'dir')
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], {
      cwd: source,
    })
    const [{ filename }] = JSON.parse(stdout.slice(stdout.indexOf('['))) as [{ filename: string }]
    writeFileSync(join(work, 'package.json'), '{"name":"pack-test","private":true}\n')
    await run(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', join(work, filename)],
      {
        cwd: work,
      },
    )

    // The client comes inside it, as notes-service/client (the bundled client package under the
    // service's name), and its Node-only subpath with the durable/ modules it imports: a file
    // storage writes, reopens and reads back from the installed package, and its declarations
    // resolve.
    writeFileSync(
      join(work, 'storage.mjs'),
      `import { NotesClient, parseJson } from 'notes-service/client'
import { FileReplicaStorage } from 'notes-service/client/file-storage'
console.log(typeof NotesClient, JSON.stringify(parseJson('{"\\\\n":1}')))
const path = process.argv[2]
const first = await FileReplicaStorage.open(path)
await first.write([{ table: 'meta', key: 'k', value: { packed: true } }])
await first.close()
const again = await FileReplicaStorage.open(path)
console.log(JSON.stringify([...(await again.load()).meta]))
await again.close()
`,
    )
    const stored = await run('node', ['storage.mjs', join(work, 'replica')], { cwd: work })
    assert.equal(stored.stdout, 'function {"\\n":1}\n[["k",{"packed":true}]]\n')
    assert.deepEqual(readdirSync(join(work, 'node_modules/notes-service/node_modules')), [
      'notes-service-client',
    ])
    writeFileSync(
      join(work, 'storage-types.mts'),
      `import { NotesClient } from 'notes-service/client'
import { FileReplicaStorage } from 'notes-service/client/file-storage'
const storage: FileReplicaStorage = await FileReplicaStorage.open('replica')
const compactions: number = storage.compactions
const client: NotesClient = new NotesClient({ baseUrl: 'http://127.0.0.1:1' })
export { client, compactions }
`,
    )
    await run(
      'node',
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
        'storage-types.mts',
      ],
      { cwd: work },
    )

    assert.equal(
      (await run('npx', ['--no', '--', 'notes-service', '--version'], { cwd: work })).stdout,
      `${version}\n`,
    )
    const help = (await run('npx', ['--no', '--', 'notes-service', '--help'], { cwd: work })).stdout
    assert.equal(help.split('\n')[2], 'Usage: notes-service [options]')

    const server = spawn('npx', ['--no', '--', 'notes-service', '--port', '0'], {
      cwd: work,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    try {
      const base = await listeningAddress(server)
      const health = await fetch(`${base}/healthz`)
      assert.equal(health.status, 200)
      assert.equal(await health.text(), '{"status":"ok"}')
      // The notes page ships too: its HTML and style from src/ui/, its scripts (and the client's) from dist/src/page/.
      for (const [path, type] of [
        ['/', 'text/html; charset=utf-8'],
        ['/ui/style.css', 'text/css; charset=utf-8'],
        ['/ui/main.js', 'text/javascript; charset=utf-8'],
      ]) {
        const file = await fetch(`${base}${path}`)
        assert.equal(file.status, 200, path)
        assert.equal(file.headers.get('content-type'), type, path)
      }
      const created = await fetch(`${base}/api/note`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"title":"packed"}',
      })
      assert.equal(created.status, 200)
      const log = collect(server)
      // npx does not pass SIGTERM on to the server, so signal the whole process group.
      process.kill(-(server.pid as number), 'SIGTERM')
      await closed(server)
      assert.match(log(), /"msg":"stopped"/)
    } finally {
      if (server.exitCode === null && server.signalCode === null) {
        try {
          process.kill(-(server.pid as number), 'SIGKILL')
        } catch {
          // already gone
        }
      }
    }
  })
})

/** Resolves with 'http://127.0.0.1:PORT' once the server logs that it listens. */
function listeningAddress(server: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => reject(new Error(`no listening line in 30 s: ${out}`)), 30_000)
    server.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8')
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (match?.[1] !== undefined) {
        clearTimeout(timer)
        resolve(match[1])
      }
    })
    server.once('exit', (code) => reject(new Error(`exited with ${code}: ${out}`)))
  })
}

/** Everything the process writes to stdout from now on. */
function collect(server: ChildProcess): () => string {
  let out = ''
  server.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8')
  })
  return () => out
}

/** Resolves when the process and every process holding its output have ended (20 s at most). */
function closed(server: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('still running 20 s after SIGTERM')), 20_000)
    server.once('close', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}
