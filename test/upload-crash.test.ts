import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { type ServerProcess, startServer } from './hostile/server-process.js'
import { bytesOf } from './support/files.contract.js'
import { createTestDatabase, postgresAvailable } from './support/postgres-cluster.js'

/*
 * Uploads that resume, through the real service (`node dist/src/server.js`) killed with SIGKILL
 * in the middle of a PATCH: started again on the same store, it answers an offset that counts
 * every byte acknowledged before the kill, holds exactly the bytes sent up to it, and takes the
 * rest to a file byte for byte. On PostgreSQL, an upload goes on on another instance too.
 */

const TUS = { 'tus-resumable': '1.0.0' }
const PART = { ...TUS, 'content-type': 'application/offset+octet-stream' }
const LENGTH = 3 * 1024 * 1024 + 12_345
const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** What a store holds of an upload behind the service's back. */
interface Probe {
  /** The bytes of the upload with this id it holds now, whatever the service has answered. */
  held(id: string): Promise<number>
  /** Those bytes. */
  bytes(id: string): Promise<Buffer>
}

const base = (server: ServerProcess) => `http://127.0.0.1:${server.port}`

async function create(server: ServerProcess, length: number): Promise<string> {
  const created = await fetch(`${base(server)}/api/uploads`, {
    method: 'POST',
    headers: { ...TUS, 'upload-length': String(length) },
  })
  assert.equal(created.status, 201)
  return created.headers.get('location') as string
}

async function patch(server: ServerProcess, location: string, at: number, body: Buffer) {
  const answer = await fetch(`${base(server)}${location}`, {
    method: 'PATCH',
    headers: { ...PART, 'upload-offset': String(at) },
    body,
  })
  await answer.arrayBuffer()
  return answer
}

async function offsetOf(server: ServerProcess, location: string): Promise<number> {
  const head = await fetch(`${base(server)}${location}`, { method: 'HEAD', headers: TUS })
  assert.equal(head.status, 200)
  return Number(head.headers.get('upload-offset'))
}

/** The upload's file, asked of `server`, checked byte for byte against `bytes`. */
async function checkFile(server: ServerProcess, location: string, bytes: Buffer): Promise<void> {
  const done = await fetch(`${base(server)}${location}`)
  assert.equal(done.status, 200)
  const file = ((await done.json()) as { data: { id: string; size: number } }).data
  assert.deepEqual({ id: file.id, size: file.size }, { id: sha256(bytes), size: bytes.length })
  const got = Buffer.from(await (await fetch(`${base(server)}/api/files/${file.id}`)).arrayBuffer())
  assert.ok(got.equals(bytes), 'the file is the bytes sent')
}

/**
 * Two PATCHes answered, a third sent in part over a socket of its own until the store holds some
 * of its bytes, then SIGKILL; started again with the same `env`, the upload resumes.
 */
async function killDuringPatch(env: Record<string, string>, probe: Probe): Promise<void> {
  const bytes = bytesOf(LENGTH, 11)
  const server = await startServer({ env })
  let acknowledged = 0
  let location = ''
  const sent = 2_000_000
  try {
    location = await create(server, LENGTH)
    for (const to of [700_001, 1_000_003]) {
      const answer = await patch(server, location, acknowledged, bytes.subarray(acknowledged, to))
      assert.equal(answer.status, 204)
      assert.equal(answer.headers.get('upload-offset'), String(to))
      acknowledged = to
    }
    const socket = connect(server.port, '127.0.0.1')
    socket.on('error', () => {})
    await once(socket, 'connect')
    socket.write(
      [
        `PATCH ${location} HTTP/1.1`,
        'Host: 127.0.0.1',
        'Tus-Resumable: 1.0.0',
        'Content-Type: application/offset+octet-stream',
        `Upload-Offset: ${acknowledged}`,
        `Content-Length: ${LENGTH - acknowledged}`,
        '',
        '',
      ].join('\r\n'),
    )
    // Past two of PostgreSQL's chunks (256 KiB), short of the whole: the answer never comes.
    for (let at = acknowledged; at < sent; at += 65_536) {
      if (!socket.write(bytes.subarray(at, Math.min(at + 65_536, sent)))) {
        await once(socket, 'drain')
      }
    }
    const id = location.split('/').at(-1) as string
    const deadline = Date.now() + 20_000
    while ((await probe.held(id)) <= acknowledged && Date.now() < deadline) await sleep(5)
    assert.ok((await probe.held(id)) > acknowledged, 'the store got some of the cut PATCH')
    server.child.kill('SIGKILL')
    await server.exited
    socket.destroy()
  } finally {
    await server.stop()
  }

  const again = await startServer({ env })
  try {
    const offset = await offsetOf(again, location)
    assert.ok(offset >= acknowledged, `offset ${offset} counts every acknowledged byte`)
    assert.ok(offset <= sent, `offset ${offset} counts no byte that was never sent`)
    const id = location.split('/').at(-1) as string
    assert.ok(
      (await probe.bytes(id)).equals(bytes.subarray(0, offset)),
      'the bytes held are those sent',
    )
    const rest = await patch(again, location, offset, bytes.subarray(offset))
    assert.equal(rest.status, 204)
    assert.equal(rest.headers.get('upload-offset'), String(LENGTH))
    await checkFile(again, location, bytes)
  } finally {
    await again.stop()
  }
}

describe('an upload through a service killed mid-PATCH (SIGKILL)', () => {
  it('on DATA_FILE resumes from every acknowledged byte, to the file byte for byte', async () => {
    const root = mkdtempSync(join(tmpdir(), 'notes-upload-crash-'))
    const dataFile = join(root, 'notes.journal')
    const part = (id: string) => join(`${dataFile}.uploads`, `${id}.part`)
    try {
      await killDuringPatch(
        { DATA_FILE: dataFile },
        {
          held: async (id) => {
            try {
              return statSync(part(id)).size
            } catch {
              return 0
            }
          },
          bytes: async (id) => readFileSync(part(id)),
        },
      )
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

if (postgresAvailable('uploads through killed and several PostgreSQL instances')) {
  describe('uploads on PostgreSQL, through the real service', () => {
    let url = ''
    let admin: pg.Pool
    before(async () => {
      url = await createTestDatabase()
      admin = new pg.Pool({ connectionString: url, max: 2 })
    })
    after(async () => {
      await admin.end()
    })
    const probe: Probe = {
      held: async (id) => {
        const { rows } = await admin.query<{ received: string }>(
          'SELECT received FROM notes_resumable_uploads WHERE id = $1',
          [id],
        )
        return Number(rows[0]?.received ?? 0)
      },
      bytes: async (id) => {
        const { rows } = await admin.query<{ data: Buffer }>(
          `SELECT c.data FROM notes_resumable_uploads u JOIN notes_file_chunks c ON c.blob = u.blob
          WHERE u.id = $1 ORDER BY c.part`,
          [id],
        )
        return Buffer.concat(rows.map((row) => row.data))
      },
    }

    it('resumes after a SIGKILL mid-PATCH from every acknowledged byte, to the file byte for byte', async () => {
      await killDuringPatch({ DATABASE_URL: url }, probe)
    })

    it('goes on on instance B with an upload created and begun on instance A', async () => {
      const [a, b] = await Promise.all(
        [0, 1].map(() => startServer({ env: { DATABASE_URL: url } })),
      )
      try {
        const bytes = bytesOf(1_500_000, 12)
        const location = await create(a as ServerProcess, bytes.length)
        const first = await patch(a as ServerProcess, location, 0, bytes.subarray(0, 600_000))
        assert.equal(first.status, 204)
        assert.equal(await offsetOf(b as ServerProcess, location), 600_000)
        const rest = await patch(b as ServerProcess, location, 600_000, bytes.subarray(600_000))
        assert.equal(rest.status, 204)
        assert.equal(rest.headers.get('upload-offset'), String(bytes.length))
        await checkFile(a as ServerProcess, location, bytes)
        await checkFile(b as ServerProcess, location, bytes)
      } finally {
        await Promise.all([a, b].map((server) => server?.stop()))
      }
    })
  })
}
