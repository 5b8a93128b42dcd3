import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import {
  assertServesNotes,
  createNote,
  freePort,
  inspect,
  type NoteAnswer,
  podman,
  RUN,
  request,
  run,
  waitUntilOk,
} from './podman.js'

const PROJECT = `nstest-${RUN.id}`
/** podman-compose names a service's container PROJECT_SERVICE_1. */
const container = (service: string): string => `${PROJECT}_${service}_1`

/**
 * compose.yaml as users run it (`podman-compose up -d`), with each instance's port also published
 * on 127.0.0.1 (compose.ports.yaml) so that the test reaches each one: two instances of the image
 * on one PostgreSQL with its volume, behind nginx.
 */
describe('compose.yaml: two instances on PostgreSQL behind nginx', () => {
  const ports = { balancer: 0, 'notes-1': 0, 'notes-2': 0 }
  let env: NodeJS.ProcessEnv

  async function compose(args: readonly string[], timeoutMs = 180_000): Promise<void> {
    const ran = await run(
      'podman-compose',
      ['-p', PROJECT, '-f', 'compose.yaml', '-f', 'test/container/compose.ports.yaml', ...args],
      { env, timeoutMs },
    )
    if (ran.code !== 0) {
      throw new Error(
        `podman-compose ${args.join(' ')} exited ${ran.code}: ${ran.stderr.slice(-2000)}`,
      )
    }
  }

  /** Each of the three answers GET /readyz with 200 within `ms`. */
  async function allReady(ms: number): Promise<void> {
    await Promise.all(Object.values(ports).map((port) => waitUntilOk(port, '/readyz', ms)))
  }

  before(async () => {
    ports.balancer = await freePort()
    ports['notes-1'] = await freePort()
    ports['notes-2'] = await freePort()
    env = {
      ...process.env,
      NOTES_PORT: String(ports.balancer),
      NOTES_1_PORT: String(ports['notes-1']),
      NOTES_2_PORT: String(ports['notes-2']),
    }
    const started = Date.now()
    await compose(['up', '-d'])
    await allReady(90_000)
    console.log(`# from podman-compose up -d to all three /readyz 200: ${Date.now() - started} ms`)
  })

  after(async () => {
    await run(
      'podman-compose',
      [
        '-p',
        PROJECT,
        '-f',
        'compose.yaml',
        '-f',
        'test/container/compose.ports.yaml',
        'down',
        '-v',
        '-t',
        '0',
      ],
      { env, timeoutMs: 120_000 },
    )
  })

  const notes: NoteAnswer[] = []

  it('creates, reads and lists on each instance, and each sees the notes written through the other', async () => {
    notes.push(await createNote(ports['notes-1'], { title: 'written through notes-1' }))
    notes.push(await createNote(ports['notes-2'], { title: 'written through notes-2' }))
    for (const port of [ports['notes-1'], ports['notes-2']]) await assertServesNotes(port, notes)
  })

  it('serves through the balancer, which spreads requests over both instances', async () => {
    notes.push(await createNote(ports.balancer, { title: 'written through the balancer' }))
    const list = await request(ports.balancer, 'GET', '/api/note')
    assert.deepEqual(
      { status: list.status, body: JSON.parse(list.body) as unknown },
      {
        status: 200,
        body: { data: notes.map((n) => n.data) },
      },
    )
    // Generated request ids start with a random prefix per process: two prefixes, two instances.
    // Not in a fixed number of requests: each nginx worker keeps its own round robin and its own
    // record of failed attempts, and a worker that saw one (a 503 from /readyz while an instance
    // waited for the database at start-up) sends it nothing for fail_timeout (5 s). Ask until both
    // have answered, within 20 s.
    const prefixes = new Set<string>()
    const started = Date.now()
    let asked = 0
    while (prefixes.size < 2 && Date.now() - started < 20_000) {
      const answer = await request(ports.balancer, 'GET', '/healthz')
      assert.equal(answer.status, 200)
      prefixes.add(String(answer.headers['x-request-id']).split('-')[0] as string)
      asked++
      if (prefixes.size < 2 && asked >= 8) await new Promise((resolve) => setTimeout(resolve, 250))
    }
    assert.equal(prefixes.size, 2, `one instance answered all ${asked} requests in 20 s`)
    console.log(`# both instances answered through the balancer within ${asked} requests`)
  })

  it('keeps the notes across a restart of an instance', async () => {
    await podman(['restart', container('notes-1')], 60_000)
    await waitUntilOk(ports['notes-1'], '/readyz', 60_000)
    const list = await request(ports['notes-1'], 'GET', '/api/note')
    assert.deepEqual(JSON.parse(list.body), { data: notes.map((n) => n.data) })
  })

  it('keeps the notes across a restart of the database, and both instances serve again', async () => {
    await podman(['restart', container('database')], 60_000)
    for (const port of [ports['notes-1'], ports['notes-2']]) {
      await waitUntilOk(port, '/api/note', 60_000)
      const list = await request(port, 'GET', '/api/note')
      assert.deepEqual(JSON.parse(list.body), { data: notes.map((n) => n.data) })
    }
    notes.push(await createNote(ports['notes-2'], { title: 'written after the restart' }))
  })

  it('made the database set-up: the service owns its database and tables as a plain role', async () => {
    const owners = await podman([
      'exec',
      container('database'),
      'psql',
      '--username',
      'postgres',
      '--dbname',
      'notes',
      '--tuples-only',
      '--no-align',
      '--command',
      `SELECT r.rolname, r.rolsuper, r.rolcreatedb, r.rolcreaterole, t.tableowner
         FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba, pg_tables t
        WHERE d.datname = 'notes' AND t.tablename = 'notes'`,
    ])
    assert.equal(owners, 'notes|f|f|f|notes')
  })

  it('keeps the notes across down and up again (the volume stays), and the instances are healthy', async () => {
    await compose(['down', '-t', '10'])
    await compose(['up', '-d'])
    await allReady(90_000)
    const list = await request(ports.balancer, 'GET', '/api/note')
    assert.deepEqual(JSON.parse(list.body), { data: notes.map((n) => n.data) })
    for (const service of ['notes-1', 'notes-2']) {
      const check = await run('podman', ['healthcheck', 'run', container(service)], {
        timeoutMs: 30_000,
      })
      assert.equal(check.code, 0, `${service}: ${check.stdout}${check.stderr}`)
      assert.equal(await inspect(container(service), '{{.State.Health.Status}}'), 'healthy')
    }
  })
})
