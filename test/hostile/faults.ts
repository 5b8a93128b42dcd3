import http from 'node:http'
import net from 'node:net'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import { startServer } from './server-process.js'
import { statusCounts } from './soak-run.js'
import { CLOSED, header, WireConnection, type WireResponse } from './wire.js'

/** Runs autocannon until stop() is called, and gives its result and its errors by code. */
function startLoad(options: autocannon.Options): {
  errorCodes: Record<string, number>
  stop: () => Promise<autocannon.Result>
} {
  let resolveResult: (result: autocannon.Result) => void = () => undefined
  const result = new Promise<autocannon.Result>((resolve) => {
    resolveResult = resolve
  })
  const instance = autocannon(options, (err: unknown, r: autocannon.Result) => {
    if (err) throw err
    resolveResult(r)
  })
  const errorCodes: Record<string, number> = {}
  instance.on('reqError', (err: NodeJS.ErrnoException) => {
    const code = err.code ?? err.message
    errorCodes[code] = (errorCodes[code] ?? 0) + 1
  })
  return {
    errorCodes,
    stop: () => {
      instance.stop()
      return result
    },
  }
}

/** 'ECONNREFUSED' when nothing listens any more, 'connected' otherwise. */
function connectOutcome(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host)
    socket.once('connect', () => {
      socket.destroy()
      resolve('connected')
    })
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'))
  })
}

function statusOf(response: WireResponse | typeof CLOSED): string {
  return response === CLOSED ? 'closed' : String(response.status)
}

function tally(statuses: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
  return counts
}

export interface SigtermResult {
  /** Requests the server began (logged), how many it never answered, and how many got a 5xx. */
  began: number
  unanswered: number
  answered5xx: number
  /** The load's answers before and during the shutdown, by status. */
  load: Record<string, number>
  /** Load requests that got no answer: refused or reset connections during the shutdown. */
  loadErrors: number
  /** Those by error code: ECONNREFUSED (reconnecting after the close), ECONNRESET... */
  loadErrorCodes: Record<string, number>
  /** Requests half sent when SIGTERM came, finished after it: their answers. */
  inFlight: Record<string, number>
  /** Of those answers, how many told the client to close the connection. */
  inFlightConnectionClose: number
  /** What a new connection 100 ms after SIGTERM met. */
  newConnection: string
  exitCode: number | null
  /** From SIGTERM to when the service took it, by its own clock; undefined if it never did. */
  tookSignalMs: number | undefined
  /** From SIGTERM to the process's exit, in ms, by the service's own clock. */
  shutdownMs: number
  /**
   * From when this harness had read every in-flight answer (and closed those connections) to the
   * service's 'stopped' log line (its server and store closed), in ms; undefined if never logged.
   */
  stoppedAfterAnswersMs: number | undefined
  /** The same to the exit, which also waits for the request log to be written out to this harness. */
  afterAnswersMs: number
  /** From SIGTERM to when this (busy) harness saw the exit, in ms: at least shutdownMs. */
  seenMs: number
  /** The longest this harness's event loop was blocked from SIGTERM to the exit, in ms. */
  harnessLagMs: number
}

/**
 * SIGTERM in the middle of load: keep-alive connections hammering the service, plus requests
 * caught half way (body half sent, or headers half sent on a keep-alive connection) that are
 * completed only after the signal. They must be answered (not 5xx), a new connection must be
 * refused, and the process must exit 0 within the shutdown bound.
 */
export async function sigtermUnderLoad(options: {
  loadMs: number
  connections: number
  inFlight: number
  /** The store's variables (DATABASE_URL), none for memory. */
  env?: Record<string, string>
}): Promise<SigtermResult> {
  // Request logging, so that every request the server began can be matched with its answer.
  const server = await startServer({
    env: { ...options.env, SHUTDOWN_TIMEOUT_MS: '10000', LOG_REQUESTS: 'true' },
  })
  const base = `http://${server.host}:${server.port}`
  const first = (await (
    await fetch(`${base}/api/note`, {
      method: 'POST',
      // Closed after the answer: a closing server keeps an idle keep-alive connection open for
      // the keep-alive timeout, and this one would make the shutdown wait for it.
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: '{}',
    })
  ).json()) as { data: { id: number } }
  const read = `/api/note/${first.data.id}`
  // Stops by itself: the duration is only a ceiling, stop() ends it once the service has exited.
  const load = startLoad({
    url: base,
    connections: options.connections,
    duration: 600,
    requests: [
      {
        method: 'POST',
        path: '/api/note',
        headers: { 'content-type': 'application/json' },
        body: '{"load":true}',
      },
      { method: 'GET', path: read },
    ],
  })
  await sleep(options.loadMs)

  const body = '{"caught":"in flight"}'
  const half = Math.floor(body.length / 2)
  const bodies = await Promise.all(
    Array.from({ length: options.inFlight }, async () => {
      const conn = await WireConnection.open(server.host, server.port)
      conn.write(
        `POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, half)}`,
      )
      return conn
    }),
  )
  const heads = await Promise.all(
    Array.from({ length: options.inFlight }, async () => {
      const conn = await WireConnection.open(server.host, server.port)
      conn.write(`GET ${read} HTTP/1.1\r\nHost: t\r\n\r\n`)
      await conn.readResponse('GET', 5000)
      conn.write(`GET ${read} HTTP/1.1\r\nHost: t\r\n`)
      return conn
    }),
  )
  await sleep(50)

  const lag = monitorEventLoopDelay({ resolution: 10 })
  lag.enable()
  const signalledAt = Date.now()
  server.child.kill('SIGTERM')
  // 100 ms after the service has taken the signal, not after it was sent: a busy machine can delay
  // the service's signal handler past a fixed 100 ms from the kill. Known by the service's stderr
  // (exit-clock.ts), not by its 'shutting down' log line: that line comes behind every request
  // logged before it, and this busy harness read it up to 4.9 s late, leaving the requests in
  // flight unfinished (and the shutdown waiting for them) all that time.
  const tookSignalAt = await server.tookSigterm(5000)
  await sleep(100)
  const newConnection = await connectOutcome(server.host, server.port)
  for (const conn of bodies) conn.write(body.slice(half))
  for (const conn of heads) conn.write('\r\n')
  const answers = await Promise.all(
    [...bodies, ...heads].map(async (conn) => {
      const response = await conn.readResponse('GET', 15_000).catch((): typeof CLOSED => CLOSED)
      conn.destroy()
      return response
    }),
  )
  const answeredAt = Date.now()
  // The service has stopped listening and answered every connection's last request, so the load
  // clients now only reconnect to a closed port (about 40,000 refusals a second). That storm kept
  // this harness too busy to read the service's stdout, and the service, still writing out its
  // request log (6-9 MB behind at SIGTERM), could not exit for up to 7 s (Node 24; 3 s on Node 20).
  const result = await load.stop()
  const exit = await server.exited
  lag.disable()
  const began = new Set<unknown>()
  const answered = new Map<unknown, number>()
  for (const entry of server.logs) {
    if (entry.msg === 'incoming request') began.add(entry.reqId)
    const res = entry.res as { statusCode?: number } | undefined
    if (entry.msg === 'request completed') answered.set(entry.reqId, res?.statusCode ?? 0)
  }
  const stopped = server.logs.find((entry) => entry.msg === 'stopped')
  return {
    began: began.size,
    unanswered: [...began].filter((id) => !answered.has(id)).length,
    answered5xx: [...answered.values()].filter((status) => status >= 500).length,
    load: statusCounts(result),
    loadErrors: result.errors + result.timeouts,
    loadErrorCodes: load.errorCodes,
    inFlight: tally(answers.map(statusOf)),
    inFlightConnectionClose: answers.filter(
      (r) => r !== CLOSED && header(r, 'connection') === 'close',
    ).length,
    newConnection,
    exitCode: exit.code,
    tookSignalMs: tookSignalAt === undefined ? undefined : tookSignalAt - signalledAt,
    shutdownMs: exit.at - signalledAt,
    stoppedAfterAnswersMs:
      typeof stopped?.time === 'number' ? stopped.time - answeredAt : undefined,
    afterAnswersMs: exit.at - answeredAt,
    seenMs: exit.seenAt - signalledAt,
    harnessLagMs: Math.round(lag.max / 1e6),
  }
}

export interface DeadlineResult {
  exitCode: number | null
  shutdownMs: number
  /** What the request that never finished got. */
  stuck: string
}

/** SIGTERM with a request that never finishes: the process still exits 0, at the deadline. */
export async function sigtermWithStuckRequest(shutdownTimeoutMs: number): Promise<DeadlineResult> {
  const server = await startServer({ env: { SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs) } })
  const conn = await WireConnection.open(server.host, server.port)
  conn.write(
    'POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":',
  )
  await sleep(50)
  const signalledAt = Date.now()
  server.child.kill('SIGTERM')
  const [exit, response] = await Promise.all([
    server.exited,
    conn.readResponse('POST', shutdownTimeoutMs + 10_000).catch((): typeof CLOSED => CLOSED),
  ])
  conn.destroy()
  return { exitCode: exit.code, shutdownMs: exit.at - signalledAt, stuck: statusOf(response) }
}

export interface StalledLogReaderResult {
  /** Request log lines the service wrote while its reader had stopped reading. */
  linesBehind: number
  /** From when the reader read again until it had every one of them, in ms. */
  caughtUpMs: number | undefined
  exitCode: number | null
}

/**
 * A log collector that stops reading the service's stdout (a pipe) for a while: the service must
 * go on serving, and once the collector reads again, hand over what it logged meanwhile at once.
 * pino's own writer of file descriptor 1 met the full pipe with 100 ms sleeps between tries, 64 KiB
 * a time: 20,000 requests' log took it 2.2 s to write out, and a SIGTERM waited for that.
 */
export async function stalledLogReader(requests: number): Promise<StalledLogReaderResult> {
  const server = await startServer({ env: { LOG_REQUESTS: 'true' } })
  let counted = 0
  let completed = 0
  const countCompleted = (): number => {
    const logs = server.logs
    for (; counted < logs.length; counted++)
      if (logs[counted]?.msg === 'request completed') completed++
    return completed
  }
  const stdout = server.child.stdout
  if (stdout === null) throw new Error('the service has no stdout pipe')
  stdout.pause()
  await autocannon({
    url: `http://${server.host}:${server.port}/api/note?limit=1`,
    connections: 10,
    amount: requests,
  })
  const resumedAt = Date.now()
  stdout.resume()
  let caughtUpMs: number | undefined
  for (const giveUpAt = resumedAt + 15_000; Date.now() < giveUpAt; await sleep(5)) {
    if (countCompleted() >= requests) {
      caughtUpMs = Date.now() - resumedAt
      break
    }
  }
  const exit = await server.stop()
  return { linesBehind: countCompleted(), caughtUpMs, exitCode: exit.code }
}

export interface CapacityResult {
  /** Creates answered, by status. */
  creates: Record<string, number>
  /** Reads (the list) answered while the store was full or nearly so, by status. */
  reads: Record<string, number>
  errors: number
  /** 507 answers whose body was not the expected problem JSON. */
  bad507: number
  /** Notes confirmed created, and how many the final list holds with the same content. */
  created: number
  found: number
  /** Notes in the list that no 200 confirmed. */
  unexpected: number
  /** After a DELETE, whether a create succeeds again. */
  createAfterDelete: number
}

/**
 * Creates under load until the cap answers 507s: nothing confirmed may be lost or changed, reads
 * keep working, and a delete (with the note purged from the trash) makes room again. `cap` is MAX_NOTES or MAX_STORE_BYTES.
 */
export async function capacityUnderLoad(options: {
  env: Record<string, string>
  connections: number
  durationS: number
}): Promise<CapacityResult> {
  const server = await startServer({ env: options.env })
  const base = `http://${server.host}:${server.port}`
  const ledger = new Map<number, string>()
  const creates: string[] = []
  const reads: string[] = []
  let bad507 = 0
  let n = 0
  const expected507 =
    /^\{"type":"about:blank","title":"Insufficient Storage","status":507,"detail":"The store holds its maximum of \d+ (notes|bytes of notes)\. Delete notes to make room\."\}$/
  // Creates stop before the end (a second, or a quarter of a short run), so that none is in
  // flight when autocannon stops, its answer unseen and its note unconfirmed, however slow the
  // store (PostgreSQL's durable creates); the rest of the run only reads.
  const durationMs = options.durationS * 1000
  const createsUntil = Date.now() + durationMs - Math.min(1000, durationMs / 4)
  const result = await autocannon({
    url: base,
    connections: options.connections,
    duration: options.durationS,
    requests: [
      {
        method: 'POST',
        path: '/api/note',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request, context) => {
          const ctx = context as { creating?: boolean }
          ctx.creating = Date.now() < createsUntil
          if (!ctx.creating) return { ...request, method: 'GET', headers: {}, body: '' }
          return { ...request, body: JSON.stringify({ n: n++, text: 'capacity '.repeat(10) }) }
        },
        onResponse: (status, body, context) => {
          if (!(context as { creating?: boolean }).creating) {
            reads.push(String(status))
            return
          }
          creates.push(String(status))
          if (status === 200) {
            const json = body.slice(8, -1)
            ledger.set((JSON.parse(json) as { id: number }).id, json)
          } else if (status === 507 && !expected507.test(body)) {
            bad507++
          }
        },
      },
      { method: 'GET', path: '/api/note', onResponse: (status) => reads.push(String(status)) },
    ],
  })
  // Each fetch closes its connection, so that stopping the server does not wait for it.
  const close = { connection: 'close' }
  const list = (await (await fetch(`${base}/api/note`, { headers: close })).json()) as {
    data: { id: number }[]
  }
  let found = 0
  for (const note of list.data) if (ledger.get(note.id) === JSON.stringify(note)) found++
  const first = list.data[0]
  let createAfterDelete = 0
  if (first !== undefined) {
    await fetch(`${base}/api/note/${first.id}`, { method: 'DELETE', headers: close })
    // A deleted note counts toward the cap until it leaves the trash.
    await fetch(`${base}/api/trash/${first.id}`, { method: 'DELETE', headers: close })
    const again = await fetch(`${base}/api/note`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...close },
      body: '{"after":"delete"}',
    })
    createAfterDelete = again.status
    await again.arrayBuffer()
  }
  const exit = await server.stop()
  if (exit.code !== 0) throw new Error(`the server exited ${exit.code ?? exit.signal}`)
  return {
    creates: tally(creates),
    reads: tally(reads),
    errors: result.errors + result.timeouts,
    bad507,
    created: ledger.size,
    found,
    unexpected: list.data.filter((note) => !ledger.has(note.id)).length,
    createAfterDelete,
  }
}

export interface StallResult {
  /** Requests sent during one long stall: their answers, and the slowest wait from sending. */
  duringStall: Record<string, number>
  slowestMs: number
  /** Polls during sustained lag and after it, by status. */
  underLag: Record<string, number>
  /** 503 answers without Retry-After or without problem JSON. */
  bad503: number
  /** From the end of the lag until a poll got a 200 again, in ms. */
  recoveredAfterMs: number
}

/**
 * Event-loop stalls in the real service (made by the test probe): clients that send during a long
 * stall must all be answered once it ends (200, or 503 with Retry-After), never left hanging or
 * reset; under sustained lag the service must shed load with 503 + Retry-After and recover after.
 */
export async function stallFaults(options: {
  stallMs: number
  clients: number
  lagMs: number
}): Promise<StallResult> {
  const server = await startServer({ probe: true, env: { MAX_EVENT_LOOP_DELAY_MS: '200' } })
  const conns = await Promise.all(
    Array.from({ length: options.clients }, () => WireConnection.open(server.host, server.port)),
  )
  const stalled = server.stall(options.stallMs)
  await sleep(100)
  const sentAt = Date.now()
  const answers = await Promise.all(
    conns.map(async (conn) => {
      conn.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n')
      const response = await conn
        .readResponse('GET', options.stallMs + 10_000)
        .catch((): typeof CLOSED => CLOSED)
      return { response, ms: Date.now() - sentAt }
    }),
  )
  await stalled
  let bad503 = 0
  const check503 = (response: WireResponse | typeof CLOSED): void => {
    if (response === CLOSED || response.status !== 503) return
    if (
      header(response, 'retry-after') !== '1' ||
      header(response, 'content-type') !== 'application/problem+json'
    )
      bad503++
  }
  for (const { response } of answers) check503(response)

  // Sustained lag: stalls of 300 ms back to back, while one client polls every 100 ms.
  const poller = conns[0] as WireConnection
  const polls: string[] = []
  let lagging = true
  let lagEndedAt = 0
  let recoveredAt = 0
  const lag = (async () => {
    const until = Date.now() + options.lagMs
    while (Date.now() < until) await server.stall(300)
    lagEndedAt = Date.now()
    lagging = false
  })()
  const deadline = Date.now() + options.lagMs + 10_000
  while ((lagging || recoveredAt === 0) && Date.now() < deadline) {
    poller.write('GET /api/note HTTP/1.1\r\nHost: t\r\n\r\n')
    const response = await poller.readResponse('GET', 10_000).catch((): typeof CLOSED => CLOSED)
    polls.push(statusOf(response))
    check503(response)
    if (!lagging && response !== CLOSED && response.status === 200) recoveredAt = Date.now()
    await sleep(100)
  }
  await lag
  for (const conn of conns) conn.destroy()
  const exit = await server.stop()
  if (exit.code !== 0) throw new Error(`the server exited ${exit.code ?? exit.signal}`)
  return {
    duringStall: tally(answers.map(({ response }) => statusOf(response))),
    slowestMs: Math.max(...answers.map(({ ms }) => ms)),
    underLag: tally(polls),
    bad503,
    recoveredAfterMs: recoveredAt === 0 ? -1 : recoveredAt - lagEndedAt,
  }
}

/** How one looping keep-alive client ended after SIGTERM. */
interface KeepAliveClientEnd {
  /** POSTs answered 200 (acknowledged), and answers by status. */
  acknowledged: number
  statuses: Record<string, number>
  /** The error that stopped the loop: ECONNREFUSED on a new connection is the expected end. */
  end: string
  /** Whether that error came on a connection that had already served a request (a reset). */
  onReusedConnection: boolean
}

export interface KeepAliveSigtermResult {
  clients: KeepAliveClientEnd[]
  /** Ends by kind, summed over the clients: {"ECONNREFUSED": 31, "ECONNRESET": 1}. */
  ends: Record<string, number>
  /** Statuses of every answer, summed. */
  statuses: Record<string, number>
  /** /readyz asked on an open keep-alive connection after SIGTERM: status and Connection header. */
  readyz: string
  exitCode: number | null
  shutdownMs: number
}

/**
 * A shutdown resets nobody: `clients` keep-alive clients each loop POSTs on their own connection
 * (node:http, an Agent with keepAlive and one socket, as a service calling another does); SIGTERM
 * comes while they do. Every request must be answered (no reset, no 5xx), each client must end
 * only by being refused a new connection, and the process must exit 0.
 */
export async function sigtermKeepAliveClients(options: {
  clients: number
  loadMs: number
}): Promise<KeepAliveSigtermResult> {
  const server = await startServer({ env: { SHUTDOWN_TIMEOUT_MS: '10000' } })
  const { host, port } = server
  const body = '{"keepalive":true}'
  // A ceiling only: every loop ends once the server has gone.
  const giveUpAt = Date.now() + options.loadMs + 60_000
  const started: KeepAliveClientEnd[] = []
  const loops = Array.from({ length: options.clients }, async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const client: KeepAliveClientEnd = {
      acknowledged: 0,
      statuses: {},
      end: 'none',
      onReusedConnection: false,
    }
    started.push(client)
    try {
      while (Date.now() < giveUpAt) {
        const outcome = await postOnce(agent, host, port, body)
        if (typeof outcome === 'number') {
          client.statuses[outcome] = (client.statuses[outcome] ?? 0) + 1
          if (outcome === 200) client.acknowledged++
        } else {
          client.end = outcome.code
          client.onReusedConnection = outcome.reused
          return client
        }
      }
      client.end = 'still looping'
      return client
    } finally {
      agent.destroy()
    }
  })
  // One more connection, kept open, to ask /readyz after the signal.
  const probe = await WireConnection.open(host, port)
  probe.write('GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n')
  await probe.readResponse('GET', 5000)
  // Every client served once (on a busy machine some take a while to connect), then the load.
  for (const until = Date.now() + 30_000; Date.now() < until; await sleep(10)) {
    if (started.every((client) => client.acknowledged > 0 || client.end !== 'none')) break
  }
  await sleep(options.loadMs)
  const signalledAt = Date.now()
  server.child.kill('SIGTERM')
  // Asked once the server has taken the signal (a busy machine can delay that).
  for (let waited = 0; waited < 5000 && !server.logs.some(isShutdownLine); waited += 10) {
    await sleep(10)
  }
  probe.write('GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n')
  const ready = await probe.readResponse('GET', 5000).catch((): typeof CLOSED => CLOSED)
  probe.destroy()
  const clients = await Promise.all(loops)
  const exit = await server.exited
  const statuses: Record<string, number> = {}
  for (const client of clients)
    for (const [status, count] of Object.entries(client.statuses))
      statuses[status] = (statuses[status] ?? 0) + count
  return {
    clients,
    ends: tally(clients.map((c) => (c.onReusedConnection ? `${c.end} (reused)` : c.end))),
    statuses,
    readyz:
      ready === CLOSED ? 'closed' : `${ready.status} connection: ${header(ready, 'connection')}`,
    exitCode: exit.code,
    shutdownMs: exit.at - signalledAt,
  }
}

function isShutdownLine(entry: Record<string, unknown>): boolean {
  return entry.msg === 'shutting down: finishing requests in flight'
}

/** One POST; its status, or the error that stopped it and whether its connection was reused. */
function postOnce(
  agent: http.Agent,
  host: string,
  port: number,
  body: string,
): Promise<number | { code: string; reused: boolean }> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        agent,
        host,
        port,
        method: 'POST',
        path: '/api/note',
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
        res.on('error', (err: NodeJS.ErrnoException) =>
          resolve({ code: err.code ?? err.message, reused: req.reusedSocket }),
        )
      },
    )
    req.on('error', (err: NodeJS.ErrnoException) =>
      resolve({ code: err.code ?? err.message, reused: req.reusedSocket }),
    )
    req.end(body)
  })
}
