import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const SERVER = fileURLToPath(new URL('../src/server.js', import.meta.url))
const PARENT_WATCH = new URL('../test/hostile/parent-watch.js', import.meta.url).href

export interface SpawnedService {
  port: number
  /** The service's process id (to read its memory from /proc). */
  pid: number
  /** Sends SIGTERM and resolves once the service has exited. */
  stop(): Promise<void>
}

/**
 * The service (`node dist/src/server.js`) on 127.0.0.1 and a free port, with `env` beside PATH,
 * once it listens. Its log is read only until it says where it listens, then drained unread, so
 * the bench keeps no copy of the request log it writes. Should the bench be killed, the service
 * stops itself (test/hostile/parent-watch.ts).
 */
export async function spawnService(env: Record<string, string>): Promise<SpawnedService> {
  const child = spawn(process.execPath, ['--import', PARENT_WATCH, SERVER], {
    env: { PATH: process.env.PATH ?? '', ...env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
  }
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let text = ''
      const onData = (chunk: Buffer): void => {
        text += chunk.toString()
        const found = /listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(text)
        if (found === null) return
        child.stdout?.off('data', onData)
        child.stdout?.resume()
        resolve(Number(found[1]))
      }
      child.stdout?.on('data', onData)
      void exited.then(() => reject(new Error('the service exited before it listened')))
    })
    return { port, pid: child.pid ?? 0, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
