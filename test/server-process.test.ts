import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, readFileSync } from 'node:fs'
import { it } from 'node:test'
import { waitFor } from './support/socket.js'

const SERVER_PROCESS = new URL('./hostile/server-process.js', import.meta.url).href

/** Whether `pid` is a process that has not exited (a zombie waiting for its reaper has). */
function alive(pid: number): boolean {
  try {
    // The third field of /proc/PID/stat is the state; Z is a process that has exited.
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') === false
  } catch {
    return false
  }
}

const PROC = existsSync('/proc/self/stat') ? false : 'reads process states from /proc (Linux)'

it('a service the harness started stops by itself when the harness is killed', {
  skip: PROC,
}, async (t) => {
  // A harness that starts the service, tells its PID, and waits to be killed.
  const harness = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { startServer } from ${JSON.stringify(SERVER_PROCESS)}
       const server = await startServer()
       process.stdout.write(server.child.pid + '\\n')
       setInterval(() => {}, 1000)`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  let out = ''
  harness.stdout.setEncoding('utf8')
  const pid = await new Promise<number>((resolve, reject) => {
    harness.stdout.on('data', (chunk: string) => {
      out += chunk
      if (out.endsWith('\n')) resolve(Number(out.trim()))
    })
    harness.once('exit', (code) => reject(new Error(`the harness exited (${code}): ${out}`)))
  })
  t.after(() => {
    // Should the service not stop, the test ends it, by its PID, as it started it.
    if (alive(pid)) process.kill(pid, 'SIGKILL')
  })
  assert.ok(Number.isInteger(pid) && alive(pid), `the service runs as PID ${pid}`)

  const exited = once(harness, 'exit')
  harness.kill('SIGKILL')
  await exited
  const killed = Date.now()
  await waitFor(
    () => !alive(pid),
    15_000,
    `the service (PID ${pid}) to stop after its harness died`,
  )
  console.log(`# the service stopped ${Date.now() - killed} ms after its harness was killed`)
})
