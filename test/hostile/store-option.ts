import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PostgresCluster } from '../support/postgres-cluster.js'
import { stopRunningServers } from './server-process.js'

/**
 * Which store a hostile run (fuzz, soak) starts the service on: `--store memory|postgres|file`,
 * `journal` being another name for `file` (DATA_FILE, the journal).
 */
export type StoreKind = 'memory' | 'postgres' | 'file'

export function storeKind(raw: string | undefined): StoreKind {
  if (raw === undefined || raw === 'memory') return 'memory'
  if (raw === 'postgres' || raw === 'file') return raw
  if (raw === 'journal') return 'file'
  throw new Error(`--store must be memory, postgres, file or journal, not ${JSON.stringify(raw)}`)
}

/** The store a run's services use: the variables that select it, and how to remove it. */
export interface RunStore {
  kind: StoreKind
  /** For the service's environment: DATABASE_URL on PostgreSQL, DATA_FILE on a file, nothing on memory. */
  env: Record<string, string>
  /** 'memory' or 'postgres (PostgreSQL cluster on 127.0.0.1:5433, durable commits)'. */
  description: string
  /** Fresh, empty store for the next service (a new database on PostgreSQL). */
  fresh(): Promise<Record<string, string>>
  /** Removes what `openStore` made (the throwaway cluster); safe to call twice. */
  destroy(): Promise<void>
}

/**
 * Memory: nothing to start. PostgreSQL: a throwaway cluster (test/support/postgres-cluster.ts,
 * durable settings) with one fresh database; destroyed by `destroy`, also when the run fails or is
 * interrupted (SIGINT, SIGTERM, SIGHUP: the services this process started are stopped first).
 */
export async function openStore(kind: StoreKind): Promise<RunStore> {
  if (kind === 'file') {
    // A journal (DATA_FILE) per service, in a directory removed at the end.
    const dir = mkdtempSync(join(tmpdir(), 'notes-hostile-'))
    let files = 0
    const fresh = async (): Promise<Record<string, string>> => ({
      DATA_FILE: join(dir, `notes-${++files}.journal`),
    })
    return {
      kind,
      env: await fresh(),
      description: `file (a journal in ${dir}, fsynced)`,
      fresh,
      destroy: async () => rmSync(dir, { recursive: true, force: true }),
    }
  }
  if (kind === 'memory') {
    return {
      kind,
      env: {},
      description: 'memory',
      fresh: async () => ({}),
      destroy: async () => {},
    }
  }
  const cluster = await PostgresCluster.start()
  let destroyed: Promise<void> | undefined
  const destroy = (): Promise<void> => {
    destroyed ??= cluster.destroy()
    return destroyed
  }
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
  const onInterrupt = (signal: NodeJS.Signals): void => {
    console.error(`\n${signal}: stopping the service and removing the PostgreSQL cluster`)
    void stopRunningServers()
      .then(destroy)
      .finally(() => process.exit(130))
  }
  for (const signal of signals) process.once(signal, onInterrupt)
  try {
    const fresh = async (): Promise<Record<string, string>> => ({
      DATABASE_URL: await cluster.createDatabase(),
    })
    return {
      kind,
      env: await fresh(),
      description: `postgres (a throwaway PostgreSQL cluster on 127.0.0.1:${cluster.port}, durable commits)`,
      fresh,
      destroy: async () => {
        for (const signal of signals) process.off(signal, onInterrupt)
        await destroy()
      },
    }
  } catch (err) {
    await destroy()
    throw err
  }
}
