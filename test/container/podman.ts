import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import http from 'node:http'
import { createServer } from 'node:net'

/**
 * The run that run.sh started: its id (in the names of what the tests create), its label (on every
 * container they start, so that run.sh removes them whatever happens) and the image under test.
 */
export const RUN = {
  id: requiredEnv('CONTAINER_TEST_RUN'),
  label: requiredEnv('CONTAINER_TEST_LABEL'),
  image: requiredEnv('NOTES_IMAGE'),
}

function requiredEnv(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') {
    throw new Error(`${name} is not set: run these checks with npm run test:container`)
  }
  return value
}

/** What a command printed and how it ended. */
export interface Ran {
  code: number
  stdout: string
  stderr: string
}

/**
 * Runs `command args...` (bounded by `timeoutMs`) and resolves with its outputs and exit code,
 * whatever the code: the caller asserts on it.
 */
export function run(
  command: string,
  args: readonly string[],
  options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      {
        timeout: options.timeoutMs ?? 120_000,
        maxBuffer: 16 * 1024 * 1024,
        env: options.env ?? process.env,
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1
        resolve({ code, stdout, stderr })
      },
    )
  })
}

/** Runs podman (the wrapper run.sh put on PATH, with this machine's flags); throws unless it exits 0. */
export async function podman(args: readonly string[], timeoutMs = 120_000): Promise<string> {
  const ran = await run('podman', args, { timeoutMs })
  if (ran.code !== 0) {
    throw new Error(`podman ${args.join(' ')} exited ${ran.code}: ${ran.stderr.trim()}`)
  }
  return ran.stdout.trim()
}

/** A TCP port on 127.0.0.1 that nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

/** One HTTP exchange with 127.0.0.1:port, on a new connection. */
export interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  body: string
}

export function request(
  port: number,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 10_000,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        timeout: timeoutMs,
        headers: payload === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
        })
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
        )
        res.on('error', reject)
      },
    )
    req.on('timeout', () =>
      req.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`)),
    )
    req.on('error', reject)
    req.end(payload)
  })
}

/** A stored note as the API answers it: `{"data": {...}}`. */
export interface NoteAnswer {
  data: { id: number } & Record<string, unknown>
}

/** Creates a note through 127.0.0.1:port and returns it as stored. */
export async function createNote(port: number, note: Record<string, unknown>): Promise<NoteAnswer> {
  const answer = await request(port, 'POST', '/api/note', note)
  if (answer.status !== 200) throw new Error(`POST /api/note: ${answer.status} ${answer.body}`)
  return JSON.parse(answer.body) as NoteAnswer
}

/** Checks that 127.0.0.1:port serves each of `notes` at its id, and exactly them as the list. */
export async function assertServesNotes(port: number, notes: readonly NoteAnswer[]): Promise<void> {
  for (const note of notes) {
    const read = await request(port, 'GET', `/api/note/${note.data.id}`)
    assert.deepEqual(
      { status: read.status, body: JSON.parse(read.body) as unknown },
      { status: 200, body: note },
    )
  }
  const list = await request(port, 'GET', '/api/note')
  assert.deepEqual(
    { status: list.status, body: JSON.parse(list.body) as unknown },
    { status: 200, body: { data: notes.map((note) => note.data) } },
  )
}

/**
 * Polls GET path on 127.0.0.1:port every 100 ms until it answers 200; returns the milliseconds
 * that took. Refusals and resets while the service starts are expected; rejects after `ms`.
 */
export async function waitUntilOk(port: number, path: string, ms: number): Promise<number> {
  const started = Date.now()
  let last = 'no answer yet'
  while (Date.now() - started < ms) {
    try {
      const answer = await request(port, 'GET', path, undefined, 2000)
      if (answer.status === 200) return Date.now() - started
      last = `${answer.status} ${answer.body}`
    } catch (err) {
      last = err instanceof Error ? err.message : String(err)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`GET ${path} on port ${port} not 200 within ${ms} ms: ${last}`)
}

/** A container's state as `podman inspect` gives it. */
export async function inspect(container: string, format: string): Promise<string> {
  return podman(['inspect', '--format', format, container])
}
