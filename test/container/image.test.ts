import assert from 'node:assert/strict'
import http from 'node:http'
import { after, before, describe, it } from 'node:test'
import {
  assertServesNotes,
  createNote,
  freePort,
  inspect,
  podman,
  RUN,
  run,
  waitUntilOk,
} from './podman.js'

/** The clients that loop keep-alive requests while the container is stopped. */
const CLIENTS = 4
/** The image's SHUTDOWN_TIMEOUT_MS: a stop ends within it (and under podman's 10 s before SIGKILL). */
const SHUTDOWN_MS = 8000

/**
 * The image alone, with the memory store, run as the README says (`podman run -p
 * 127.0.0.1:PORT:3000 IMAGE`): the API through the published port, the user it runs as, its health
 * check, and a `podman stop` while clients loop keep-alive requests.
 */
describe('the image, run alone (memory store)', () => {
  const name = `nstest-${RUN.id}-memory`
  let port: number

  before(async () => {
    port = await freePort()
    const started = Date.now()
    await podman([
      'run',
      '-d',
      '--name',
      name,
      '--label',
      RUN.label,
      '-p',
      `127.0.0.1:${port}:3000`,
      RUN.image,
    ])
    await waitUntilOk(port, '/readyz', 60_000)
    console.log(`# from podman run to /readyz 200: ${Date.now() - started} ms`)
  })

  after(async () => {
    await run('podman', ['rm', '-f', '-t', '0', name])
  })

  it('creates, reads and lists notes through the published port', async () => {
    const created = await createNote(port, { title: 'Groceries', body: 'milk, eggs' })
    assert.deepEqual(created, {
      data: { title: 'Groceries', body: 'milk, eggs', id: created.data.id },
    })
    await assertServesNotes(port, [created])
  })

  it('runs Node as PID 1 (so SIGTERM reaches it), as the unprivileged user node (uid 1000)', async () => {
    const [uid, user, cmdline] = await Promise.all([
      podman(['exec', name, 'id', '-u']),
      podman(['exec', name, 'id', '-un']),
      podman(['exec', name, 'cat', '/proc/1/cmdline']),
    ])
    assert.deepEqual(
      { uid, user, pid1: cmdline.split('\0').filter((part) => part !== '') },
      { uid: '1000', user: 'node', pid1: ['node', 'dist/src/cli.js'] },
    )
  })

  it('has a health check on /healthz that turns healthy', async () => {
    // No systemd here to run it on its 30 s timer: run it once, as the timer would.
    // It exits 0 when the check passes (and 1 with 'unhealthy' when it fails).
    const check = await run('podman', ['healthcheck', 'run', name], { timeoutMs: 30_000 })
    assert.deepEqual({ code: check.code, stderr: check.stderr }, { code: 0, stderr: '' })
    assert.equal(await inspect(name, '{{.State.Health.Status}}'), 'healthy')
  })

  it('stops on podman stop with exit 0 within the shutdown deadline, resetting no keep-alive client', async () => {
    const loops = Array.from({ length: CLIENTS }, () => loopKeepAlive(port, 30_000))
    // Every client has been answered on its kept connection before the stop.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const stopping = Date.now()
    await podman(['stop', name], 30_000)
    const stopMs = Date.now() - stopping
    const ends = await Promise.all(loops)
    const exitCode = await inspect(name, '{{.State.ExitCode}}')
    const logs = await run('podman', ['logs', name])
    console.log(
      `# podman stop took ${stopMs} ms; clients' requests answered: ${ends.map((e) => e.answered).join(', ')}`,
    )
    assert.deepEqual(
      {
        exitCode,
        ends: ends.map((e) => e.end),
        served: ends.every((e) => e.answered > 0),
        stoppedLine: logs.stdout.includes('"msg":"stopped"'),
      },
      { exitCode: '0', ends: Array(CLIENTS).fill('ECONNREFUSED'), served: true, stoppedLine: true },
    )
    assert.ok(stopMs < SHUTDOWN_MS + 1000, `podman stop took ${stopMs} ms`)
  })
})

/**
 * GETs /api/note in a loop on one kept-alive connection (a new one when the service closes it)
 * until a request fails; resolves with how many were answered and the failure's code: after a
 * clean shutdown, ECONNREFUSED (the listener has gone), never ECONNRESET.
 */
async function loopKeepAlive(port: number, ms: number): Promise<{ answered: number; end: string }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  let answered = 0
  const giveUpAt = Date.now() + ms
  try {
    while (Date.now() < giveUpAt) {
      const end = await new Promise<string | undefined>((resolve) => {
        const req = http.get(
          { host: '127.0.0.1', port, path: '/api/note?limit=1', agent },
          (res) => {
            res.resume()
            res.on('end', () => {
              answered++
              resolve(res.statusCode === 200 ? undefined : `status ${res.statusCode}`)
            })
            res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message))
          },
        )
        req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message))
      })
      if (end !== undefined) return { answered, end }
    }
    return { answered, end: 'still looping' }
  } finally {
    agent.destroy()
  }
}
