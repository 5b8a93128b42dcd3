import { execFile, execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'

const run = promisify(execFile)

/**
 * Where PostgreSQL's server programs are: /usr/local/bin (our image), then Debian's
 * /usr/lib/postgresql/<version>/bin, newest first; undefined when there are none.
 */
export function findPostgresBin(): string | undefined {
  const candidates = ['/usr/local/bin']
  const debian = '/usr/lib/postgresql'
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))
    for (const version of versions) candidates.push(join(debian, version, 'bin'))
  }
  return candidates.find(
    (dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')),
  )
}

/**
 * Whether the PostgreSQL suites run. Without the binaries they are skipped, said loudly once per
 * file; under CI=true a missing PostgreSQL is a failure instead.
 */
export function postgresAvailable(suite: string): boolean {
  if (findPostgresBin() !== undefined) return true
  if (process.env.CI === 'true') {
    throw new Error(`${suite}: PostgreSQL (initdb, pg_ctl) not found, and CI=true requires it`)
  }
  process.stderr.write(
    `\n*** SKIPPED ${suite}: PostgreSQL's initdb and pg_ctl are not installed (apt-get install -y postgresql) ***\n\n`,
  )
  return false
}

/**
 * The environment variable through which one test run shares one cluster among its test files:
 * the URL of the cluster's `postgres` database. test/support/with-postgres.ts starts the cluster,
 * sets it for the command it runs (`npm test`), and removes the cluster when that command ends.
 */
export const SHARED_CLUSTER_ENV = 'NOTES_TEST_POSTGRES_URL'

/**
 * The cluster of this process's tests, once asked for: the shared one that SHARED_CLUSTER_ENV
 * names, or else (a file run alone) a cluster this process starts and removes when it exits. Not
 * durable: the suites on it prove behaviour, not what survives a crash (postgres-faults, on a
 * durable cluster of its own, does). A cache of a resource, not test state: no test reads it.
 */
let processCluster: Promise<string> | undefined

function clusterUrl(): Promise<string> {
  processCluster ??= startProcessCluster()
  return processCluster
}

async function startProcessCluster(): Promise<string> {
  const shared = process.env[SHARED_CLUSTER_ENV]
  if (shared !== undefined && shared !== '') return shared
  const cluster = await PostgresCluster.start({ durable: false })
  process.once('exit', () => cluster.destroySync())
  return cluster.url()
}

/** A fresh, empty database on this process's test cluster (see clusterUrl); its URL. */
export async function createTestDatabase(): Promise<string> {
  return createDatabaseAt(await clusterUrl())
}

let processDatabase: Promise<string> | undefined

/**
 * One fresh database for this process's tests, made on first use; its URL. Suites in it keep
 * apart by schema.
 */
export function testDatabase(): Promise<string> {
  processDatabase ??= createTestDatabase()
  return processDatabase
}

/**
 * Creates a database on the cluster whose `postgres` database is at `adminUrl`. Named at random:
 * test files that share a cluster create theirs without knowing of each other.
 */
async function createDatabaseAt(adminUrl: string): Promise<string> {
  const name = `notes_${randomBytes(6).toString('hex')}`
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    await client.query(`CREATE DATABASE ${name}`)
  } finally {
    await client.end()
  }
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.href
}

/** A 127.0.0.1 port that nothing listens on (as a database URL with the wrong port has). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/**
 * A throwaway PostgreSQL cluster in a temp dir on a free 127.0.0.1 port, trust auth, durable
 * settings (fsync and synchronous_commit on) unless `durable: false` (for suites that prove no
 * durability, where waiting for every commit's flush only costs time). As root, initdb and pg_ctl
 * run as the `postgres` user, which they require.
 */
export class PostgresCluster {
  readonly dir: string
  readonly port: number
  readonly #bin: string
  readonly #durable: boolean

  private constructor(bin: string, dir: string, port: number, durable: boolean) {
    this.#bin = bin
    this.dir = dir
    this.port = port
    this.#durable = durable
  }

  static async start({ durable = true }: { durable?: boolean } = {}): Promise<PostgresCluster> {
    const bin = findPostgresBin()
    if (bin === undefined) throw new Error('PostgreSQL binaries not found')
    const dir = mkdtempSync(join(tmpdir(), 'notes-pg-'))
    chmodSync(dir, 0o755)
    if (process.getuid?.() === 0) {
      const { stdout } = await run('id', ['-u', 'postgres'])
      const { stdout: gid } = await run('id', ['-g', 'postgres'])
      chownSync(dir, Number(stdout.trim()), Number(gid.trim()))
    }
    const cluster = new PostgresCluster(bin, dir, await freePort(), durable)
    await cluster.#as(join(bin, 'initdb'), [
      '-D',
      cluster.#data,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-locale',
      '--no-sync',
    ])
    await cluster.startServer()
    return cluster
  }

  get #data(): string {
    return join(this.dir, 'data')
  }

  /** The URL of database `name` (default `postgres`). */
  url(name = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${name}`
  }

  /** A fresh, empty database; its URL. */
  createDatabase(): Promise<string> {
    return createDatabaseAt(this.url())
  }

  /**
   * A login role that must give its password over TCP (scram-sha-256), unlike every other role of
   * the cluster (trust), and a database of the same name that it owns: for tests of a wrong
   * password.
   */
  async addPasswordRole(name: string, password: string): Promise<void> {
    const client = new pg.Client({ connectionString: this.url() })
    await client.connect()
    try {
      await client.query(`CREATE ROLE ${name} LOGIN PASSWORD '${password}'`)
      await client.query(`CREATE DATABASE ${name} OWNER ${name}`)
    } finally {
      await client.end()
    }
    // pg_hba.conf is read top down, first match wins: this line goes before initdb's trust lines.
    const hba = join(this.#data, 'pg_hba.conf')
    writeFileSync(hba, `host all ${name} 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`)
    await this.#as(join(this.#bin, 'pg_ctl'), ['reload', '-D', this.#data])
  }

  async startServer(): Promise<void> {
    await this.#as(join(this.#bin, 'pg_ctl'), [
      'start',
      '-w',
      '-D',
      this.#data,
      '-l',
      join(this.dir, 'log'),
      '-o',
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=200 ${this.#durable ? '-c fsync=on -c synchronous_commit=on' : '-c fsync=off -c synchronous_commit=off'}`,
    ])
  }

  /**
   * Freezes the server (SIGSTOP to the postmaster and every backend it started): connections stay
   * open and nothing answers, as when a database host stops responding. Returns the thaw.
   */
  async freeze(): Promise<() => void> {
    const postmaster = Number(
      readFileSync(join(this.#data, 'postmaster.pid'), 'latin1').split('\n')[0],
    )
    const { stdout } = await run('pgrep', ['-P', String(postmaster)])
    const pids = [postmaster, ...stdout.split('\n').filter(Boolean).map(Number)]
    for (const pid of pids) process.kill(pid, 'SIGSTOP')
    return () => {
      for (const pid of pids) process.kill(pid, 'SIGCONT')
    }
  }

  /** Stops the server: 'immediate' is a crash (recovery at the next start), 'fast' a clean stop. */
  async stopServer(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.#as(join(this.#bin, 'pg_ctl'), ['stop', '-w', '-m', mode, '-D', this.#data])
  }

  /** Stops the server and removes every file of the cluster. */
  async destroy(): Promise<void> {
    try {
      await this.stopServer('immediate')
    } catch {
      // Already stopped.
    }
    rmSync(this.dir, { recursive: true, force: true })
  }

  /**
   * destroy(), synchronously: for a process 'exit' handler, when a cluster is still running because
   * the hooks that would have destroyed it did not run (a filtered or failed test file).
   */
  destroySync(): void {
    const stop = [join(this.#bin, 'pg_ctl'), 'stop', '-w', '-m', 'immediate', '-D', this.#data]
    try {
      if (process.getuid?.() === 0) execFileSync('runuser', ['-u', 'postgres', '--', ...stop])
      else execFileSync(stop[0] as string, stop.slice(1))
    } catch {
      // Already stopped.
    }
    rmSync(this.dir, { recursive: true, force: true })
  }

  async #as(command: string, args: string[]): Promise<void> {
    if (process.getuid?.() === 0) await run('runuser', ['-u', 'postgres', '--', command, ...args])
    else await run(command, args)
  }
}
