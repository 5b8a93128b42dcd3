import { connect, type Socket } from 'node:net'
import { send } from './http-client.js'
import { type PreloadedIds, smallNote } from './workloads.js'

const CONNECTIONS = 4
/** Requests written at once on a connection (HTTP/1.1 pipelining) before reading their answers. */
const BATCH = 128

interface Answer {
  status: number
  body: string
}

/**
 * One keep-alive connection that sends requests in pipelined batches and reads the answers in
 * order. Answers are read by their Content-Length, which every server in the bench sends.
 */
class PipelinedConnection {
  readonly #socket: Socket
  #buffer: Buffer = Buffer.alloc(0)
  #waiting: { resolve: (a: Answer) => void; reject: (e: Error) => void }[] = []
  #error: Error | undefined

  private constructor(socket: Socket) {
    this.#socket = socket
    socket.on('data', (chunk: Buffer) => this.#read(chunk))
    const fail = (err: Error): void => {
      this.#error = err
      for (const w of this.#waiting.splice(0)) w.reject(err)
    }
    socket.on('error', fail)
    socket.on('close', () => fail(new Error('connection closed')))
  }

  static open(port: number): Promise<PipelinedConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => resolve(new PipelinedConnection(socket)))
      socket.once('error', reject)
    })
  }

  /** Sends every request at once and resolves with their answers, in order. */
  postAll(path: string, bodies: string[]): Promise<Answer[]> {
    if (this.#error !== undefined) return Promise.reject(this.#error)
    const answers = bodies.map(
      () => new Promise<Answer>((resolve, reject) => this.#waiting.push({ resolve, reject })),
    )
    let text = ''
    for (const body of bodies) {
      text +=
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    }
    this.#socket.write(text)
    return Promise.all(answers)
  }

  close(): void {
    this.#socket.removeAllListeners('close')
    this.#socket.destroy()
  }

  #read(chunk: Buffer): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk])
    for (;;) {
      const end = this.#buffer.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = this.#buffer.subarray(0, end).toString('latin1')
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0)
      if (this.#buffer.length < end + 4 + length) return
      const body = this.#buffer.subarray(end + 4, end + 4 + length).toString('utf8')
      this.#buffer = this.#buffer.subarray(end + 4 + length)
      const status = Number(head.slice(9, 12))
      this.#waiting.shift()?.resolve({ status, body })
    }
  }
}

/**
 * Creates `count` small notes over HTTP: pipelined batches on 4 keep-alive connections (or
 * `connectionCount`), so that even 100,000 notes take seconds. The note of request count/2 is the middle one (within a few
 * hundred places of the list's middle); the last note is created alone once every other has been
 * answered, so it is truly the last.
 */
export async function preload(
  port: number,
  count: number,
  connectionCount = CONNECTIONS,
): Promise<PreloadedIds> {
  if (count === 0) return { middle: undefined, last: undefined }
  const ids: number[] = new Array(count)
  const idOf = (answer: Answer): number => {
    if (answer.status !== 200) throw new Error(`preload POST answered ${answer.status}`)
    return (JSON.parse(answer.body) as { data: { id: number } }).data.id
  }
  const connections = await Promise.all(
    Array.from({ length: connectionCount }, () => PipelinedConnection.open(port)),
  )
  try {
    let next = 0
    const worker = async (connection: PipelinedConnection): Promise<void> => {
      while (next < count - 1) {
        const first = next
        const size = Math.min(BATCH, count - 1 - first)
        next += size
        const bodies = Array.from({ length: size }, (_, i) => smallNote(first + i))
        const answers = await connection.postAll('/api/note', bodies)
        answers.forEach((answer, i) => {
          ids[first + i] = idOf(answer)
        })
      }
    }
    await Promise.all(connections.map(worker))
    const [lastAnswer] = await (connections[0] as PipelinedConnection).postAll('/api/note', [
      smallNote(count - 1),
    ])
    ids[count - 1] = idOf(lastAnswer as Answer)
  } finally {
    for (const connection of connections) connection.close()
  }
  return { middle: ids[Math.floor(count / 2)], last: ids[count - 1] }
}

/** How many notes the server holds, read from its list. */
export async function countNotes(port: number): Promise<number> {
  const answer = await send(port, 'GET', '/api/note', { timeoutMs: 60_000 })
  if (answer.status !== 200) throw new Error(`GET /api/note answered ${answer.status}`)
  return (JSON.parse(answer.body) as { data: unknown[] }).data.length
}
