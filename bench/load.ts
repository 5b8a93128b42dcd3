import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { pinned } from './server-process.js'
import type { LoadRequest } from './workloads.js'

/** What one load-generator run measured. */
export interface LoadResult {
  /** Responses received in the run. */
  requests: number
  durationS: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** Connection errors and timeouts. */
  errors: number
  /** Responses whose status was not 2xx (wrk: status 400 and up). */
  non2xx: number
}

export interface LoadOptions {
  port: number
  request: LoadRequest
  connections: number
  durationS: number
  cpu: number | undefined
}

export interface Generator {
  name: 'wrk' | 'autocannon'
  version: string
  run: (options: LoadOptions) => Promise<LoadResult>
}

/** wrk when it is installed (it costs the generator's core far less), autocannon otherwise. */
export function chooseGenerator(prefer: 'wrk' | 'autocannon' | undefined): Generator {
  if (prefer !== 'autocannon') {
    const version = wrkVersion()
    if (version !== undefined) return { name: 'wrk', version, run: runWrk }
    if (prefer === 'wrk') throw new Error('wrk is not installed')
  }
  return { name: 'autocannon', version: autocannonVersion(), run: runAutocannon }
}

function wrkVersion(): string | undefined {
  try {
    execFileSync('wrk', ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (err) {
    // wrk prints its version and usage, then exits 1.
    const out = String((err as { stdout?: unknown }).stdout ?? '')
    const match = /^wrk (\S+)/m.exec(out)
    return match?.[1] ?? (out.startsWith('wrk') ? 'unknown' : undefined)
  }
  return 'unknown'
}

function autocannonVersion(): string {
  const pkg = fileURLToPath(import.meta.resolve('autocannon/package.json'))
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version
}

/** Runs a command with a hard deadline and returns its stdout. */
function runBounded(command: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text
    })
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      if (stderr.length < 10_000) stderr += text
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(stdout)
      else reject(new Error(`${command} ${args.join(' ')} failed (${code ?? signal}): ${stderr}`))
    })
  })
}

/** Lua long-bracket string, safe for any JSON text. */
function luaString(text: string): string {
  let level = '='
  while (text.includes(`]${level}]`)) level += '='
  return `[${level}[${text}]${level}]`
}

const WRK_DONE = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK-RESULT {"requests":%d,"durationUs":%d,"errors":%d,"non2xx":%d,"p50Us":%d,"p99Us":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
`

async function runWrk(options: LoadOptions): Promise<LoadResult> {
  const { request } = options
  const dir = mkdtempSync(join(tmpdir(), 'notes-bench-'))
  const script = join(dir, 'load.lua')
  let lua = `wrk.method = "${request.method}"\n`
  if (request.body !== undefined) {
    lua += `wrk.body = ${luaString(request.body)}\nwrk.headers["Content-Type"] = "application/json"\n`
  }
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    lua += `wrk.headers[${luaString(name)}] = ${luaString(value)}\n`
  }
  writeFileSync(script, lua + WRK_DONE)
  const url = `http://127.0.0.1:${options.port}${request.path}`
  const args = ['-t1', `-c${options.connections}`, `-d${options.durationS}s`, '--timeout', '5s']
  const [command, argv] = pinned(options.cpu, 'wrk', [...args, '-s', script, url])
  try {
    const out = await runBounded(command, argv, (options.durationS + 30) * 1000)
    const line = /^WRK-RESULT (.*)$/m.exec(out)?.[1]
    if (line === undefined) throw new Error(`wrk printed no result:\n${out}`)
    const r = JSON.parse(line) as Record<
      'requests' | 'durationUs' | 'errors' | 'non2xx' | 'p50Us' | 'p99Us',
      number
    >
    const durationS = r.durationUs / 1e6
    return {
      requests: r.requests,
      durationS,
      rps: r.requests / durationS,
      p50Ms: r.p50Us / 1000,
      p99Ms: r.p99Us / 1000,
      errors: r.errors,
      non2xx: r.non2xx,
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function runAutocannon(options: LoadOptions): Promise<LoadResult> {
  const worker = fileURLToPath(new URL('./autocannon-worker.js', import.meta.url))
  const input = JSON.stringify({
    url: `http://127.0.0.1:${options.port}${options.request.path}`,
    method: options.request.method,
    body: options.request.body,
    headers: options.request.headers,
    connections: options.connections,
    durationS: options.durationS,
  })
  const [command, argv] = pinned(options.cpu, process.execPath, [worker, input])
  const out = await runBounded(command, argv, (options.durationS + 30) * 1000)
  return JSON.parse(out) as LoadResult
}
