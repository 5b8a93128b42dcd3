/**
 * The PostgreSQL side of `npm run bench -- --store postgres`: one throwaway cluster for the whole
 * run (test/support/postgres-cluster.ts: durable, fsync and synchronous_commit on), a fresh
 * database per server start, the CPU time of the cluster's processes, and the connections a
 * database has.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { PostgresCluster } from '../test/support/postgres-cluster.js'
import { clockTicks } from './server-process.js'

export interface BenchDatabase {
  url: string
  name: string
}

export class BenchCluster {
  readonly #cluster: PostgresCluster
  readonly #client: pg.Client
  readonly #postmaster: number
  readonly #cpu: number | undefined
  #databases = 0

  private constructor(
    cluster: PostgresCluster,
    client: pg.Client,
    postmaster: number,
    cpu: number | undefined,
  ) {
    this.#cluster = cluster
    this.#client = client
    this.#postmaster = postmaster
    this.#cpu = cpu
  }

  /**
   * Starts the cluster; with `cpu`, pins the postmaster and its processes to that CPU (backends
   * forked later inherit it). The cluster is destroyed if anything after its start fails.
   */
  static async start(cpu: number | undefined): Promise<BenchCluster> {
    const cluster = await PostgresCluster.start()
    try {
      const pid = Number(
        readFileSync(join(cluster.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0],
      )
      const client = new pg.Client({ connectionString: cluster.url() })
      await client.connect()
      const bench = new BenchCluster(cluster, client, pid, cpu)
      bench.#pin()
      return bench
    } catch (err) {
      await cluster.destroy()
      throw err
    }
  }

  get description(): string {
    return (
      `PostgreSQL cluster on 127.0.0.1:${this.#cluster.port} (fsync=on, synchronous_commit=on), ` +
      `a fresh database per server start` +
      (this.#cpu === undefined ? '' : `, its processes pinned to CPU ${this.#cpu}`)
    )
  }

  /**
   * A fresh database, empty or a copy of `template` (a database nobody is connected to any more:
   * the backends of a server that has just exited may take a moment to go, so this waits up to
   * 10 s for them).
   */
  async createDatabase(template?: string): Promise<BenchDatabase> {
    const name = `bench_${++this.#databases}`
    const deadline = Date.now() + 10_000
    for (;;) {
      try {
        await this.#client.query(
          `CREATE DATABASE ${name}${template === undefined ? '' : ` TEMPLATE ${template}`}`,
        )
        break
      } catch (err) {
        // 55006: the source database is being accessed by other users.
        if ((err as { code?: string }).code !== '55006' || Date.now() > deadline) throw err
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    this.#pin()
    return { url: this.#cluster.url(name), name }
  }

  /** Connections open to `database` now (pg_stat_activity). */
  async connections(database: string): Promise<number> {
    const { rows } = await this.#client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
      [database],
    )
    return rows[0]?.n ?? 0
  }

  /**
   * CPU time (user + system, seconds) of the postmaster, its live children, and its children that
   * have exited (the postmaster's cutime and cstime), so that a backend ending between two
   * readings moves its time from one term to the other and is counted once.
   */
  cpuSeconds(): number {
    let ticks = 0
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      const fields = statFields(Number(entry))
      if (fields === undefined) continue
      const pid = Number(entry)
      if (pid === this.#postmaster) {
        ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])
      } else if (Number(fields[1]) === this.#postmaster) {
        ticks += Number(fields[11]) + Number(fields[12])
      }
    }
    return ticks / clockTicks()
  }

  async destroy(): Promise<void> {
    await this.#client.end().catch(() => undefined)
    await this.#cluster.destroy()
  }

  /** The postmaster and every process it has now, on the cluster's CPU. */
  #pin(): void {
    if (this.#cpu === undefined) return
    const pids = [this.#postmaster]
    for (const entry of readdirSync('/proc')) {
      if (/^\d+$/.test(entry) && Number(statFields(Number(entry))?.[1]) === this.#postmaster) {
        pids.push(Number(entry))
      }
    }
    for (const pid of pids) {
      try {
        execFileSync('taskset', ['-p', '-c', String(this.#cpu), String(pid)], { stdio: 'ignore' })
      } catch {
        // The process ended meanwhile.
      }
    }
  }
}

/** Fields of /proc/PID/stat after the command name: [0] state, [1] ppid, ... [11] utime. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}
