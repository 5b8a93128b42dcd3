/**
 * npm run bench:events [-- --streams N] [--rate N] [--duration S]
 *
 * W9, the change feed under load: the service as shipped (a fresh process, pinned to CPU 1 when
 * it can be), N open event streams (default 1,000) while writes arrive at `rate` a second
 * (default 1,000) for `duration` seconds (default 10). Every stream must receive every event, in
 * order; the figures are the delay from a write's answer (as the writer reads it) to its event
 * (as each stream reads it), the server's CPU per delivered event and its memory per open stream.
 *
 * Streams and writer live in this process (pinned to CPU 0), as light as they can be: the
 * streams are node:http responses whose body is only counted (messages that start with `event:`)
 * and timed; a sample of them also checks every event's id against the versions the writes
 * answered (their ETags). The writer sends POSTs pipelined, 10 every 10 ms, on one connection,
 * so answers, and so changes, come in the order they were sent: the k-th event of every stream is
 * the k-th write's.
 */
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { setPriority } from 'node:os'
import { parseArgs } from 'node:util'
import { choosePinning, type RunningServer, startServer, TARGETS } from './server-process.js'
import { smallNote } from './workloads.js'

interface Settings {
  streams: number
  rate: number
  durationS: number
}

function parseSettings(argv: string[]): Settings {
  const { values } = parseArgs({
    args: argv,
    options: {
      streams: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '1000' },
      duration: { type: 'string', default: '10' },
    },
  })
  const positive = (raw: string): number => {
    const value = Number(raw)
    if (!(value > 0)) throw new Error(`not a positive number: ${raw}`)
    return value
  }
  return {
    streams: Math.round(positive(values.streams)),
    rate: positive(values.rate),
    durationS: positive(values.duration),
  }
}

/** Delays in 0.1 ms buckets up to 10 s (and one bucket for everything beyond). */
class DelayHistogram {
  readonly #buckets = new Uint32Array(100_001)
  count = 0
  max = 0

  add(ms: number): void {
    const bucket = Math.min(100_000, Math.max(0, Math.round(ms * 10)))
    this.#buckets[bucket] = (this.#buckets[bucket] as number) + 1
    this.count++
    if (ms > this.max) this.max = ms
  }

  /** The delay below which `share` of the events arrived, in ms. */
  percentile(share: number): number {
    const rank = Math.ceil(this.count * share)
    let seen = 0
    for (let i = 0; i < this.#buckets.length; i++) {
      seen += this.#buckets[i] as number
      if (seen >= rank) return i / 10
    }
    return Number.NaN
  }
}

/** Answer times of the writes, in order, and their versions (from the ETag). */
interface Writes {
  times: number[]
  versions: string[]
}

/**
 * One stream: counts the messages that start with `event:` and times each against the write it
 * belongs to. `check` also compares every event's id with the write's version.
 */
class Stream {
  events = 0
  opened: string | undefined
  errors: string[] = []
  ended = false
  #tail = ''

  constructor(
    readonly check: boolean,
    readonly writes: Writes,
    readonly delays: DelayHistogram,
  ) {}

  static open(
    port: number,
    check: boolean,
    writes: Writes,
    delays: DelayHistogram,
  ): Promise<Stream> {
    const stream = new Stream(check, writes, delays)
    return new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path: '/api/events', agent: false },
        (response) => {
          if (response.statusCode !== 200) {
            reject(new Error(`GET /api/events answered ${response.statusCode}`))
            return
          }
          response.setEncoding('latin1')
          response.on('data', (chunk: string) => stream.#read(chunk))
          response.on('close', () => {
            stream.ended = true
          })
          resolve(stream)
        },
      )
      req.on('error', reject)
      req.end()
    })
  }

  #read(chunk: string): void {
    const now = performance.now()
    const text = this.#tail === '' ? chunk : this.#tail + chunk
    let at = 0
    for (;;) {
      const end = text.indexOf('\n\n', at)
      if (end === -1) break
      if (text.startsWith('event:', at)) {
        const k = this.events++
        const answered = this.writes.times[k]
        // The event may be read before the writer has read the answer: no delay then.
        this.delays.add(answered === undefined ? 0 : Math.max(0, now - answered))
        if (this.check) {
          const idAt = text.indexOf('\nid: ', at) + 5
          const id = text.slice(idAt, text.indexOf('\n', idAt))
          // The writer may not have read this answer yet: compare what can be compared.
          const expected = this.writes.versions[k]
          if (expected !== undefined && id !== expected && this.errors.length < 5) {
            this.errors.push(`event ${k}: id ${id}, expected ${expected}`)
          }
        }
      } else if (text.startsWith('retry:', at)) {
        const idAt = text.indexOf('\nid: ', at)
        if (idAt !== -1 && idAt < end) this.opened = text.slice(idAt + 5, end)
      }
      at = end + 2
    }
    this.#tail = text.slice(at)
  }
}

const EVENT = Buffer.from('event: ')
const READ_BUFFER = Buffer.alloc(256 * 1024)
const OPENING = Buffer.from('retry: ')

/**
 * The light stream most of the W9 streams are: a raw socket whose bytes are only searched for
 * 'event: ' (natively, as Buffers; one that straddles two reads is found in the 12 bytes around
 * the seam). Chunk framing and headers never hold that text, and neither do the bench's notes.
 */
class RawStream {
  events = 0
  opened = false
  ended = false
  #tail: Buffer = Buffer.alloc(0)

  constructor(
    readonly writes: Writes,
    readonly delays: DelayHistogram,
  ) {}

  static open(port: number, writes: Writes, delays: DelayHistogram): Promise<RawStream> {
    const stream = new RawStream(writes, delays)
    return new Promise((resolve, reject) => {
      // Read into one shared buffer, without a Buffer and a 'data' event per read: the clients
      // must cost far less than the server, on a CPU of their own.
      const socket = connect({
        port,
        host: '127.0.0.1',
        onread: {
          buffer: READ_BUFFER,
          callback: (bytes) => {
            stream.#read(READ_BUFFER.subarray(0, bytes))
            return true
          },
        },
      })
      socket.once('connect', () => {
        socket.write('GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
        resolve(stream)
      })
      socket.once('error', reject)
      socket.on('close', () => {
        stream.ended = true
      })
    })
  }

  #read(chunk: Buffer): void {
    const now = performance.now()
    if (!this.opened) this.opened = chunk.includes(OPENING)
    let found = 0
    if (this.#tail.length > 0) {
      const seam = Buffer.concat([this.#tail, chunk.subarray(0, EVENT.length - 1)])
      for (let at = seam.indexOf(EVENT); at !== -1; at = seam.indexOf(EVENT, at + 1)) found++
    }
    for (let at = chunk.indexOf(EVENT); at !== -1; at = chunk.indexOf(EVENT, at + EVENT.length)) {
      found++
    }
    this.#tail = Buffer.from(chunk.subarray(Math.max(0, chunk.length - (EVENT.length - 1))))
    for (let i = 0; i < found; i++) {
      const answered = this.writes.times[this.events++]
      this.delays.add(answered === undefined ? 0 : Math.max(0, now - answered))
    }
  }
}

/** POSTs pipelined on one connection; records each answer's time and version, in order. */
class Writer {
  readonly writes: Writes = { times: [], versions: [] }
  failures = 0
  #socket: Socket
  #buffer = ''
  #sent = 0

  private constructor(socket: Socket) {
    this.#socket = socket
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => this.#read(chunk))
  }

  static open(port: number): Promise<Writer> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => resolve(new Writer(socket)))
      socket.once('error', reject)
    })
  }

  get sent(): number {
    return this.#sent
  }

  get answered(): number {
    return this.writes.times.length + this.failures
  }

  post(count: number): void {
    let text = ''
    for (let i = 0; i < count; i++) {
      const body = smallNote(this.#sent++)
      text +=
        `POST /api/note HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    }
    this.#socket.write(text)
  }

  close(): void {
    this.#socket.destroy()
  }

  #read(chunk: string): void {
    const now = performance.now()
    this.#buffer += chunk
    for (;;) {
      const end = this.#buffer.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = this.#buffer.slice(0, end)
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0)
      if (this.#buffer.length < end + 4 + length) return
      this.#buffer = this.#buffer.slice(end + 4 + length)
      const etag = /\r\netag: "([^"]+)"/i.exec(head)?.[1]
      if (head.startsWith('HTTP/1.1 200') && etag !== undefined) {
        this.writes.times.push(now)
        this.writes.versions.push(etag)
      } else {
        this.failures++
      }
    }
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function until(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs
  while (!done()) {
    if (performance.now() > deadline) return false
    await sleep(20)
  }
  return true
}

async function main(): Promise<void> {
  const settings = parseSettings(process.argv.slice(2))
  const pinning = choosePinning(2)
  try {
    setPriority(-10)
  } catch {
    // normal priority
  }
  const say = (text: string): void => {
    process.stdout.write(`${text}\n`)
  }
  say(
    `W9 change feed: ${settings.streams} streams, ${settings.rate} writes/s for ${settings.durationS} s, node ${process.version}` +
      (pinning === undefined
        ? ', not pinned'
        : `, server on CPU ${pinning.serverCpu}, streams and writer on CPU ${pinning.generatorCpu}`),
  )
  const server: RunningServer = await startServer(TARGETS.service, pinning?.serverCpu, '/dev/null')
  try {
    await sleep(300)
    const rssBefore = server.rss()
    const delays = new DelayHistogram()
    const writer = await Writer.open(server.port)
    const checked: Stream[] = []
    const streams: (Stream | RawStream)[] = []
    for (let i = 0; i < settings.streams; i++) {
      // One at a time, so the server's backlog of connections never overflows.
      if (i < 10) {
        const stream = await Stream.open(server.port, true, writer.writes, delays)
        checked.push(stream)
        streams.push(stream)
      } else {
        streams.push(await RawStream.open(server.port, writer.writes, delays))
      }
    }
    const opened = (s: Stream | RawStream): boolean =>
      s instanceof Stream ? s.opened !== undefined : s.opened
    if (!(await until(() => streams.every(opened), 30_000))) {
      throw new Error('not every stream received its opening')
    }
    await sleep(500)
    const rssOpen = server.rss()
    const perStream = (rssOpen - rssBefore) / settings.streams

    const total = Math.round(settings.rate * settings.durationS)
    const cpuBefore = server.cpuSeconds()
    const driverBefore = process.cpuUsage()
    const loopBefore = performance.eventLoopUtilization()
    const started = performance.now()
    // 10 writes every 10 ms (pipelined), on schedule: a late tick sends what is due.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.min(
          total,
          Math.floor(((performance.now() - started) / 1000) * settings.rate),
        )
        if (due > writer.sent) writer.post(due - writer.sent)
        if (writer.sent >= total) {
          clearInterval(timer)
          resolve()
        }
      }, 10)
    })
    const writesDone = await until(() => writer.answered >= total, 30_000)
    const writeSeconds = (performance.now() - started) / 1000
    const delivered = await until(
      () => streams.every((s) => s.events >= writer.writes.times.length),
      30_000,
    )
    const cpuSeconds = server.cpuSeconds() - cpuBefore
    const driverCpu = process.cpuUsage(driverBefore)
    const driverLoop = performance.eventLoopUtilization(loopBefore)
    const rssAfter = server.rss()
    writer.close()

    const expected = writer.writes.times.length
    const events = streams.reduce((sum, s) => sum + s.events, 0)
    const short = streams.filter((s) => s.events !== expected).length
    const closed = streams.filter((s) => s.ended).length
    const errors = checked.flatMap((s) => s.errors)
    const openedAt = new Set(checked.map((s) => s.opened))
    const p99 = delays.percentile(0.99)
    say(
      table([
        [
          'streams open',
          `${settings.streams} (the 10 checked ones from version ${[...openedAt].join(', ')})`,
        ],
        [
          'writes answered 200',
          `${expected} of ${total} in ${writeSeconds.toFixed(1)} s (${(expected / writeSeconds).toFixed(0)}/s)${writesDone ? '' : ', NOT ALL ANSWERED'}`,
        ],
        [
          'events delivered',
          `${events} of ${expected * settings.streams}; streams short of events ${short}; streams closed early ${closed}${delivered ? '' : ' (gave up waiting after 30 s)'}`,
        ],
        [
          'ids checked on',
          `${checked.length} streams: ${errors.length === 0 ? 'all in order' : errors.join('; ')}`,
        ],
        [
          'delay, write answered -> event read',
          `p50 ${delays.percentile(0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${delays.max.toFixed(1)} ms (target p99 < 50 ms: ${p99 < 50 ? 'ok' : 'MISSED'})`,
        ],
        [
          'server CPU per delivered event',
          `${((cpuSeconds / events) * 1e6).toFixed(2)} us (${cpuSeconds.toFixed(2)} s of CPU for the writes and their events)`,
        ],
        [
          'streams and writer (this process)',
          `${((driverCpu.user + driverCpu.system) / 1e6).toFixed(2)} s of CPU, event loop busy ${(driverLoop.utilization * 100).toFixed(0)}% (near 100%: the clients, not the server, set the delays)`,
        ],
        [
          'server memory per open stream',
          `${(perStream / 1024).toFixed(1)} KiB (RSS ${(rssBefore / 2 ** 20).toFixed(1)} MiB before the streams, ${(rssOpen / 2 ** 20).toFixed(1)} MiB with them, ${(rssAfter / 2 ** 20).toFixed(1)} MiB after the writes)`,
        ],
      ]),
    )
    const ok =
      writesDone && delivered && short === 0 && closed === 0 && errors.length === 0 && p99 < 50
    say(ok ? 'W9 ok' : 'W9 MISSED')
    for (const stream of streams) stream.ended = true
    process.exitCode = ok ? 0 : 1
  } finally {
    await server.stop()
  }
}

function table(rows: string[][]): string {
  const width = Math.max(...rows.map((r) => (r[0] ?? '').length))
  return rows.map(([name = '', value = '']) => `${name.padEnd(width)}  ${value}`).join('\n')
}

await main()
process.exit()
