import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, readlinkSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { DIST } from './dist-server.js'

/**
 * Holders of a lock file in other processes, for the lock tests of durable/, the journal and the
 * client's file storage: a live one, a zombie, openers racing; and the lock texts to write.
 */

const LOCK_CHILD = join(DIST, 'test/support/pid-lock-child.js')

/** What /proc/<pid>/stat says: state and start time in clock ticks (field 22, after the last ')'). */
export function procStat(pid: number | 'self'): { state: string; start: number } {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { state: fields[0] as string, start: Number(fields[19]) }
}

/** This process's identity as a lock holds it. */
export function thisProcess(): {
  pid: number
  start: number
  boot: string
  pidns: string
  host: string
} {
  return {
    pid: process.pid,
    start: procStat('self').start,
    boot: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
    pidns: readlinkSync('/proc/self/ns/pid'),
    host: hostname(),
  }
}

/** A lock's text: this process's identity with `fields` changed. */
export function lockText(fields: Record<string, unknown>): string {
  return `${JSON.stringify({ ...thisProcess(), ...fields })}\n`
}

/** Resolves with the first line of the child's stdout that matches. */
function lineOf(child: ChildProcess, pattern: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = ''
    const onData = (chunk: Buffer): void => {
      out += chunk
      const found = pattern.exec(out)
      if (found === null) return
      child.stdout?.off('data', onData)
      resolve(found)
    }
    child.stdout?.on('data', onData)
    child.once('exit', () => reject(new Error(`the child exited; it said: ${out}`)))
  })
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGKILL')
  await exited
}

/** A live process holding `lock`; `stop` kills it (SIGKILL, so it leaves its lock behind). */
export async function liveHolder(lock: string): Promise<{ pid: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [LOCK_CHILD, 'hold', lock], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const [, pid] = await lineOf(child, /^held (\d+)$/m)
  return { pid: Number(pid), stop: () => stopChild(child) }
}

const quoted = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`

/**
 * A zombie holding `lock`: `/bin/sh -c 'node HOLDER & exec sleep 60'` makes sleep the holder's
 * parent, which never reaps it; the holder takes the lock, is killed with SIGKILL, and stays a
 * zombie (checked in /proc) until `stop` kills the sleep, by its PID.
 */
export async function zombieHolder(lock: string): Promise<{ pid: number; stop(): Promise<void> }> {
  const command = `${quoted(process.execPath)} ${quoted(LOCK_CHILD)} hold ${quoted(lock)} & exec sleep 60`
  const sleeper = spawn('/bin/sh', ['-c', command], { stdio: ['ignore', 'pipe', 'inherit'] })
  const stop = (): Promise<void> => stopChild(sleeper)
  try {
    const pid = Number((await lineOf(sleeper, /^held (\d+)$/m))[1])
    process.kill(pid, 'SIGKILL')
    await zombie(pid)
    return { pid, stop }
  } catch (err) {
    await stop()
    throw err
  }
}

/**
 * The service (`dist/src/cli.js`) started through `/bin/sh -c 'node cli.js & exec sleep 60'` and
 * killed with SIGKILL once it listens: a zombie holding the journal's lock until `stop`.
 */
export async function zombieService(
  dataFile: string,
): Promise<{ pid: number; stop(): Promise<void> }> {
  const cli = join(DIST, 'src/cli.js')
  const command = `${quoted(process.execPath)} ${quoted(cli)} & exec sleep 60`
  const sleeper = spawn('/bin/sh', ['-c', command], {
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_FILE: dataFile,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const stop = (): Promise<void> => stopChild(sleeper)
  try {
    const pid = Number((await lineOf(sleeper, /"pid":(\d+).*"msg":"Server listening at /))[1])
    process.kill(pid, 'SIGKILL')
    await zombie(pid)
    return { pid, stop }
  } catch (err) {
    await stop()
    throw err
  }
}

async function zombie(pid: number): Promise<void> {
  for (let waited = 0; procStat(pid).state !== 'Z'; waited += 10) {
    if (waited > 5000) throw new Error(`process ${pid} is ${procStat(pid).state}, not a zombie`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * `count` child processes that open `lock` at the same instant, `rounds` times (`before` runs
 * before each round, e.g. to leave a stale lock): per round, which of them won ('won' or 'lost PID').
 */
export async function race(
  lock: string,
  count: number,
  rounds: number,
  before: (round: number) => void | Promise<void>,
): Promise<{ pids: number[]; rounds: string[][] }> {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, [LOCK_CHILD, 'race'], { stdio: ['pipe', 'pipe', 'inherit'] }),
  )
  try {
    const lines = children.map((child) => {
      const queue: string[] = []
      let partial = ''
      let wake: (() => void) | undefined
      child.stdout.on('data', (chunk: Buffer) => {
        const parts = (partial + chunk).split('\n')
        partial = parts.pop() ?? ''
        queue.push(...parts)
        wake?.()
      })
      const exited = once(child, 'exit').then(() => {
        throw new Error(`a racing opener exited; it said: ${queue.join(', ')}`)
      })
      exited.catch(() => {})
      return async (): Promise<string> => {
        while (queue.length === 0) {
          await Promise.race([new Promise<void>((resolve) => (wake = resolve)), exited])
        }
        return queue.shift() as string
      }
    })
    await Promise.all(lines.map((next) => next()))
    const results: string[][] = []
    for (let round = 0; round < rounds; round++) {
      await before(round)
      const at = Date.now() + 50
      for (const child of children) child.stdin.write(`take ${lock} ${at}\n`)
      const said = await Promise.all(lines.map((next) => next()))
      results.push(said)
      for (const child of children) child.stdin.write(`release ${lock}\n`)
      await Promise.all(lines.map((next) => next()))
    }
    return { pids: children.map((child) => child.pid as number), rounds: results }
  } finally {
    await Promise.all(children.map(stopChild))
  }
}
