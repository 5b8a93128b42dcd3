import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

const SERVER = fileURLToPath(new URL('../../src/server.js', import.meta.url))
const PROBE = new URL('./server-probe.js', import.meta.url).href
const EXIT_CLOCK = new URL('./exit-clock.js', import.meta.url).href

export interface ServerExit {
  code: number | null
  signal: NodeJS.Signals | null
  /**
   * Date.now() when the process exited, by its own clock (exit-clock.ts); when it died without
   * running its exit handlers (SIGKILL, a crash), when this process saw the exit.
   */
  at: number
  /** Date.now() when this process saw the exit (later than `at` when this process was busy). */
  seenAt: number
}

/** The real service (`node dist/src/server.js`) in a child process, as it runs in production. */
export interface ServerProcess {
  child: ChildProcess
  host: string
  port: number
  /** Every JSON log line the server has written so far, parsed. */
  logs: Record<string, unknown>[]
  exited: Promise<ServerExit>
  /** Asks the test probe for the heap after two full garbage collections, in bytes. */
  heapAfterGc(): Promise<number>
  /** Makes the test probe block the server's event loop for `ms` milliseconds. */
  stall(ms: number): Promise<void>
  /**
   * Resolves with Date.now() when the process took its first SIGTERM, by its own clock
   * (exit-clock.ts), or with undefined if it has not within `timeoutMs`.
   */
  tookSigterm(timeoutMs: number): Promise<number | undefined>
  /** Sends the signal and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<ServerExit>
}

export interface StartOptions {
  /** Variables for the service (PORT and HOST are set here). */
  env?: Record<string, string>
  /**
   * Load test/hostile/server-probe into the process (with --expose-gc) so the harness can read
   * the heap after a forced GC and stall the event loop, over the IPC channel only the harness has.
   */
  probe?: boolean
  timeoutMs?: number
  /** The port to listen on; a free one by default. */
  port?: number
}

/** The services this process started that have not exited yet. */
const running = new Set<ChildProcess>()

/**
 * Sends SIGTERM to every service this process started that still runs, and waits for them to
 * exit: what an interrupted run does before it removes the store they use.
 */
export async function stopRunningServers(): Promise<void> {
  await Promise.all(
    [...running].map((child) => {
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      return exited
    }),
  )
}

/** Starts the service on 127.0.0.1 and a free port (or `port`), and resolves once it listens. */
export async function startServer(options: StartOptions = {}): Promise<ServerProcess> {
  const probe = options.probe === true
  const nodeArgs = ['--import', EXIT_CLOCK, ...(probe ? ['--expose-gc', '--import', PROBE] : [])]
  const child = spawn(process.execPath, [...nodeArgs, SERVER], {
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      ...options.env,
      PORT: String(options.port ?? 0),
      HOST: '127.0.0.1',
    },
    stdio: probe ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  })
  running.add(child)
  let stderr = ''
  const stderrWaiters = new Set<() => void>()
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
    for (const wake of stderrWaiters) wake()
  })
  // 'exit' can come before the last of stderr has been read; 'close' comes after both.
  const exited = once(child, 'close').then(([code, signal]) => {
    const seenAt = Date.now()
    const clock = /^exit-clock (\d+)$/m.exec(stderr)
    return {
      code: code as number | null,
      signal: signal as NodeJS.Signals | null,
      at: clock === null ? seenAt : Number(clock[1]),
      seenAt,
    }
  })
  void exited.then(() => running.delete(child))
  const log = new LogLines()
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the server did not listen in time; stderr: ${stderr}`)),
      options.timeoutMs ?? 15_000,
    )
    let listening = false
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const added = log.add(chunk)
      if (listening) return
      for (const line of added) {
        const at = /"msg":"Server listening at http:\/\/127\.0\.0\.1:(\d+)"/.exec(line)
        if (at === null) continue
        listening = true
        clearTimeout(timer)
        resolve(Number(at[1]))
        return
      }
    })
    void exited.then((exit) => {
      clearTimeout(timer)
      reject(
        new Error(
          `the server exited (${exit.code ?? exit.signal}) before listening; stderr: ${stderr.replace(/^(exit|signal)-clock \d+\n/gm, '')}`,
        ),
      )
    })
  })

  const ask = <T>(message: Record<string, unknown>, answer: string): Promise<T> => {
    if (!probe) return Promise.reject(new Error('start the server with probe: true'))
    return new Promise((resolve) => {
      const onMessage = (reply: Record<string, unknown>): void => {
        if (reply.type !== answer) return
        child.off('message', onMessage)
        resolve(reply as T)
      }
      child.on('message', onMessage)
      child.send(message)
    })
  }

  return {
    child,
    host: '127.0.0.1',
    port,
    get logs() {
      return log.entries()
    },
    exited,
    heapAfterGc: async () => (await ask<{ heapUsed: number }>({ type: 'heap' }, 'heap')).heapUsed,
    stall: async (ms) => {
      await ask({ type: 'stall', ms }, 'stalled')
    },
    tookSigterm: (timeoutMs) =>
      new Promise((resolve) => {
        const check = (): void => {
          const clock = /^signal-clock (\d+)$/m.exec(stderr)
          if (clock === null) return
          done(Number(clock[1]))
        }
        const done = (at: number | undefined): void => {
          clearTimeout(timer)
          stderrWaiters.delete(check)
          resolve(at)
        }
        const timer = setTimeout(() => done(undefined), timeoutMs)
        stderrWaiters.add(check)
        check()
      }),
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}

/**
 * The service's stdout, split into lines as it arrives and parsed only when asked for. Under the
 * SIGTERM fault the service writes about 100,000 request log lines, and parsing each on arrival
 * made this harness read them slower than they were written: the service then could not exit
 * until its log was written out (up to 2.7 s after it had stopped, on Node 24).
 */
class LogLines {
  readonly #lines: string[] = []
  readonly #entries: Record<string, unknown>[] = []
  #parsed = 0
  #pending = ''

  /** Takes a chunk of output; returns the whole lines it completed. */
  add(chunk: string): string[] {
    const lines = (this.#pending + chunk).split('\n')
    this.#pending = lines.pop() ?? ''
    for (const line of lines) this.#lines.push(line)
    return lines
  }

  /** Every JSON line so far, parsed (lines that are not JSON are left out). */
  entries(): Record<string, unknown>[] {
    for (; this.#parsed < this.#lines.length; this.#parsed++) {
      try {
        this.#entries.push(JSON.parse(this.#lines[this.#parsed] ?? '') as Record<string, unknown>)
      } catch {}
    }
    return this.#entries
  }
}

/** Log lines at error level or above (pino: 50 error, 60 fatal). */
export function errorLogs(logs: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  return logs.filter((entry) => typeof entry.level === 'number' && entry.level >= 50)
}

const LEVEL_NAMES: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
}

/** Log lines counted by level name: { info: 3, warn: 1 }. */
export function logLinesByLevel(logs: readonly Record<string, unknown>[]): Record<string, number> {
  const byLevel: Record<string, number> = {}
  for (const entry of logs) {
    const name = LEVEL_NAMES[entry.level as number] ?? String(entry.level)
    byLevel[name] = (byLevel[name] ?? 0) + 1
  }
  return byLevel
}
