import { request } from 'node:http'
import { connect } from 'node:net'

/** What a client that streamed a large body saw. */
export interface UploadOutcome {
  /** The response, if one arrived; its body as far as it was read. */
  status: number | undefined
  connection: string | undefined
  body: string
  /** True when the whole response was read. */
  responseRead: boolean
  /** The first error the client met ('EPIPE', 'ECONNRESET', ...), and whether it came before the whole response. */
  error: string | undefined
  errorBeforeResponse: boolean
  /** Body bytes handed to the socket before the request ended or failed. */
  bytesSent: number
}

const CHUNK = Buffer.alloc(64 * 1024, 'x')

/** An upload's outcome before anything has happened. */
function noOutcomeYet(): UploadOutcome {
  return {
    status: undefined,
    connection: undefined,
    body: '',
    responseRead: false,
    error: undefined,
    errorBeforeResponse: false,
    bytesSent: 0,
  }
}

/**
 * POSTs `bytes` of body to /api/note on a new connection, as fast as the socket takes it, with
 * Content-Length or chunked, and reads whatever response comes back meanwhile, as an HTTP client
 * uploading a file does: it goes on sending after an early answer until the body is out.
 */
export function uploadLarge(
  host: string,
  port: number,
  options: { bytes: number; chunked: boolean; timeoutMs: number },
): Promise<UploadOutcome> {
  return new Promise((resolve) => {
    const outcome = noOutcomeYet()
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (options.chunked) headers['transfer-encoding'] = 'chunked'
    else headers['content-length'] = String(options.bytes)
    const req = request({ host, port, method: 'POST', path: '/api/note', headers, agent: false })
    let settled = false
    const settle = (): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      req.destroy()
      resolve(outcome)
    }
    const fail = (err: NodeJS.ErrnoException): void => {
      if (outcome.error === undefined) {
        outcome.error = err.code ?? err.message
        outcome.errorBeforeResponse = !outcome.responseRead
      }
    }
    const timer = setTimeout(() => {
      fail(new Error(`no end after ${options.timeoutMs} ms`))
      settle()
    }, options.timeoutMs)
    req.on('error', fail)
    req.on('response', (res) => {
      outcome.status = res.statusCode
      outcome.connection = res.headers.connection
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        outcome.body += chunk
      })
      res.on('end', () => {
        outcome.responseRead = true
      })
      res.on('error', fail)
    })
    req.on('close', () => setImmediate(settle))
    const send = (): void => {
      while (outcome.bytesSent < options.bytes && !req.destroyed) {
        const size = Math.min(CHUNK.length, options.bytes - outcome.bytesSent)
        outcome.bytesSent += size
        if (!req.write(size === CHUNK.length ? CHUNK : CHUNK.subarray(0, size))) {
          req.once('drain', send)
          return
        }
      }
      if (!req.destroyed) req.end()
    }
    send()
  })
}

/**
 * The same upload from a client that sends its whole body before it looks at the answer, and
 * keeps sending after the server has closed its side (as many HTTP libraries do): a raw
 * connection that writes the request, then reads whatever came back.
 */
export function uploadWholeBody(
  host: string,
  port: number,
  options: { bytes: number; chunked: boolean; timeoutMs: number },
): Promise<UploadOutcome> {
  return new Promise((resolve) => {
    const outcome = noOutcomeYet()
    const socket = connect({ host, port, allowHalfOpen: true })
    const received: Buffer[] = []
    let settled = false
    const settle = (): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      readResponse(Buffer.concat(received), outcome)
      outcome.errorBeforeResponse = outcome.error !== undefined && !outcome.responseRead
      resolve(outcome)
    }
    const timer = setTimeout(() => {
      outcome.error ??= `no end after ${options.timeoutMs} ms`
      settle()
    }, options.timeoutMs)
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    socket.on('error', (err: NodeJS.ErrnoException) => {
      outcome.error ??= err.code ?? err.message
    })
    socket.on('close', () => settle())
    const framing = options.chunked
      ? 'Transfer-Encoding: chunked'
      : `Content-Length: ${options.bytes}`
    socket.write(
      `POST /api/note HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`,
    )
    const chunkHead = Buffer.from(`${CHUNK.length.toString(16)}\r\n`)
    const send = (): void => {
      while (outcome.bytesSent < options.bytes && !socket.destroyed) {
        const size = Math.min(CHUNK.length, options.bytes - outcome.bytesSent)
        outcome.bytesSent += size
        const data = size === CHUNK.length ? CHUNK : CHUNK.subarray(0, size)
        const framed = options.chunked
          ? Buffer.concat([
              size === CHUNK.length ? chunkHead : Buffer.from(`${size.toString(16)}\r\n`),
              data,
              CRLF,
            ])
          : data
        if (!socket.write(framed)) {
          socket.once('drain', send)
          return
        }
      }
      if (!socket.destroyed) socket.end(options.chunked ? '0\r\n\r\n' : '')
    }
    send()
  })
}

const CRLF = Buffer.from('\r\n')

/** Fills status, Connection and body from one response with a Content-Length. */
function readResponse(raw: Buffer, outcome: UploadOutcome): void {
  const text = raw.toString('latin1')
  const headEnd = text.indexOf('\r\n\r\n')
  if (headEnd === -1) return
  const head = text.slice(0, headEnd).split('\r\n')
  outcome.status = Number(head[0]?.split(' ')[1])
  let length = -1
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':')
    const name = line.slice(0, colon).toLowerCase()
    const value = line.slice(colon + 1).trim()
    if (name === 'connection') outcome.connection = value
    if (name === 'content-length') length = Number(value)
  }
  const body = raw.subarray(headEnd + 4)
  outcome.body = body.toString('utf8')
  outcome.responseRead = length >= 0 && body.length >= length
}
