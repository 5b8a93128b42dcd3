/**
 * Files: upload and download speed against Node's floors, and the memory a transfer costs.
 *   node dist/bench/files.js [MiB=100] [rounds=3] [--postgres] [--big]
 * Each round, in turn: the service on DATA_FILE, the service on PostgreSQL (with --postgres: a
 * throwaway durable cluster), the node:http floor (read, hash, write, one fsync; createReadStream)
 * and, for downloads, Fastify with @fastify/static (bench/file-floor-server.ts). Every target runs
 * in a process of its own; the client here streams a file of MiB random bytes up (8 bytes of its
 * own first, so no upload is a duplicate) and reads it down, counting bytes. Reports MB/s per
 * target (median of the rounds), the ratios the targets are held to, and the service's largest
 * RSS growth during a transfer, sampled every 20 ms from /proc. --big adds one 1 GiB transfer up
 * and down on each service target, for the memory bound.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  createReadStream,
  createWriteStream,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
} from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { PostgresCluster } from '../test/support/postgres-cluster.js'
import { spawnService } from './spawn-service.js'

const args = process.argv.slice(2)
const flags = new Set(args.filter((arg) => arg.startsWith('--')))
const [mib = 100, rounds = 3] = args.filter((arg) => !arg.startsWith('--')).map(Number)
const MiB = 1024 * 1024
const FLOOR = fileURLToPath(new URL('./file-floor-server.js', import.meta.url))

const root = mkdtempSync(join(tmpdir(), 'notes-files-bench-'))

/** A file of `size` random bytes, written in 1 MiB pieces. */
async function randomFile(path: string, size: number): Promise<void> {
  const out = createWriteStream(path)
  for (let left = size; left > 0; left -= MiB) {
    if (!out.write(randomBytes(Math.min(MiB, left)))) {
      await new Promise<void>((resolve) => out.once('drain', () => resolve()))
    }
  }
  await new Promise<void>((resolve, reject) =>
    out.end((error?: Error | null) => (error ? reject(error) : resolve())),
  )
}

/** RSS of a process now, in bytes. */
function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
}

/** Runs `work` while sampling `pid`'s RSS; answers its time and the largest growth seen. */
async function measured<T>(pid: number, work: () => Promise<T>) {
  const before = rssOf(pid)
  let peak = before
  const timer = setInterval(() => {
    peak = Math.max(peak, rssOf(pid))
  }, 20)
  const started = performance.now()
  try {
    const result = await work()
    return { ms: performance.now() - started, growth: peak - before, result }
  } finally {
    clearInterval(timer)
  }
}

/** POSTs 8 fresh bytes then the file at `path`; answers the id the target gave. */
function upload(port: number, path: string, size: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const body = new PassThrough()
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: target,
        headers: { 'content-type': 'application/octet-stream', 'content-length': size + 8 },
      },
      (response) => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => {
          text += chunk
        })
        response.on('end', () => {
          if (response.statusCode !== 201)
            reject(new Error(`upload ${response.statusCode}: ${text}`))
          else resolve((JSON.parse(text) as { data: { id: string } }).data.id)
        })
      },
    )
    req.on('error', reject)
    body.write(randomBytes(8))
    pipeline(createReadStream(path, { highWaterMark: 256 * 1024 }), body, req).catch(reject)
  })
}

/** GETs `path` and counts its bytes. */
function download(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`download ${response.statusCode}`))
      let bytes = 0
      response.on('data', (chunk: Buffer) => {
        bytes += chunk.length
      })
      response.on('end', () => resolve(bytes))
      response.on('error', reject)
    })
      .on('error', reject)
      .end()
  })
}

interface Target {
  readonly name: string
  readonly port: number
  readonly pid: number
  /** Where uploads go, and where a file of id `id` is read; undefined: this target only serves. */
  readonly uploadPath: string | undefined
  filePath(id: string): string
  stop(): Promise<void>
}

async function floor(kind: 'plain' | 'static', folder: string): Promise<Target> {
  const child: ChildProcess = spawn(process.execPath, [FLOOR, folder, kind], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.once('data', (chunk: Buffer) => resolve(Number(/(\d+)/.exec(String(chunk))?.[1])))
    child.once('exit', () => reject(new Error(`the ${kind} floor exited`)))
  })
  return {
    name: kind === 'plain' ? 'node:http floor' : 'fastify + @fastify/static',
    port,
    pid: child.pid ?? 0,
    uploadPath: kind === 'plain' ? '/upload' : undefined,
    filePath: (id) => `/files/${id}`,
    stop: async () => {
      child.kill('SIGTERM')
      await new Promise((resolve) => child.once('exit', resolve))
    },
  }
}

async function service(name: string, env: Record<string, string>): Promise<Target> {
  const spawned = await spawnService({
    MAX_FILE_BYTES: String(2048 * MiB),
    MAX_FILES_BYTES_PER_USER: String(64 * 1024 * MiB),
    MAX_FILES_BYTES: String(64 * 1024 * MiB),
    LOG_REQUESTS: 'false',
    REQUEST_TIMEOUT_MS: '600000',
    ...env,
  })
  return {
    name,
    port: spawned.port,
    pid: spawned.pid,
    uploadPath: '/api/files',
    filePath: (id) => `/api/files/${id}`,
    stop: () => spawned.stop(),
  }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

const size = mib * MiB
const source = join(root, 'source.bin')
await randomFile(source, size)
const floorFolder = join(root, 'floor')
mkdirSync(floorFolder)
const cluster = flags.has('--postgres') ? await PostgresCluster.start() : undefined
const targets: Target[] = [
  await service('service on DATA_FILE', { DATA_FILE: join(root, 'notes.journal') }),
  ...(cluster === undefined
    ? []
    : [await service('service on PostgreSQL', { DATABASE_URL: await cluster.createDatabase() })]),
  await floor('plain', floorFolder),
  await floor('static', floorFolder),
]
const plain = targets.find((target) => target.name === 'node:http floor') as Target
const up = new Map<string, number[]>()
const down = new Map<string, number[]>()
const growth = new Map<string, number>()
const mbps = (ms: number, bytes: number) => bytes / 1e6 / (ms / 1000)
try {
  for (let round = 0; round < rounds; round++) {
    // The static floor serves what the plain floor stored in this round.
    let floorId = ''
    for (const target of targets) {
      let id = floorId
      if (target.uploadPath !== undefined) {
        const sent = await measured(target.pid, () =>
          upload(target.port, source, size, target.uploadPath as string),
        )
        id = sent.result
        if (target === plain) floorId = id
        up.set(target.name, [...(up.get(target.name) ?? []), mbps(sent.ms, size)])
        growth.set(`${target.name} up`, Math.max(growth.get(`${target.name} up`) ?? 0, sent.growth))
      }
      const got = await measured(target.pid, () => download(target.port, target.filePath(id)))
      if (got.result !== size + 8) throw new Error(`${target.name} sent ${got.result} bytes`)
      down.set(target.name, [...(down.get(target.name) ?? []), mbps(got.ms, size)])
      growth.set(
        `${target.name} down`,
        Math.max(growth.get(`${target.name} down`) ?? 0, got.growth),
      )
    }
  }
  if (flags.has('--big')) {
    const big = join(root, 'big.bin')
    await randomFile(big, 1024 * MiB)
    for (const target of targets.filter((t) => t.name.startsWith('service'))) {
      const sent = await measured(target.pid, () =>
        upload(target.port, big, 1024 * MiB, '/api/files'),
      )
      const got = await measured(target.pid, () =>
        download(target.port, target.filePath(sent.result)),
      )
      growth.set(`${target.name} 1 GiB up`, sent.growth)
      growth.set(`${target.name} 1 GiB down`, got.growth)
    }
    rmSync(big, { force: true })
  }
} finally {
  for (const target of targets) await target.stop()
  await cluster?.destroy()
  rmSync(root, { recursive: true, force: true })
}

const report: Record<string, unknown> = { fileMiB: mib, rounds }
for (const [name, values] of up) report[`${name}: upload MB/s`] = +median(values).toFixed(1)
for (const [name, values] of down) report[`${name}: download MB/s`] = +median(values).toFixed(1)
const ratio = (a: string, b: string, map: Map<string, number[]>) =>
  +(median(map.get(a) ?? []) / median(map.get(b) ?? [])).toFixed(3)
report['download DATA_FILE / node:http floor (target >= 0.8)'] = ratio(
  'service on DATA_FILE',
  'node:http floor',
  down,
)
report['download DATA_FILE / @fastify/static (target >= 1.0)'] = ratio(
  'service on DATA_FILE',
  'fastify + @fastify/static',
  down,
)
report['upload DATA_FILE / node:http floor (target >= 0.7)'] = ratio(
  'service on DATA_FILE',
  'node:http floor',
  up,
)
for (const [name, bytes] of growth) report[`RSS growth MiB, ${name}`] = +(bytes / MiB).toFixed(1)
console.log(JSON.stringify(report, null, 2))
