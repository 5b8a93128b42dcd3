import net from 'node:net'

/** One HTTP/1.1 response as it came off the wire. */
export interface WireResponse {
  status: number
  /** Lowercased header name -> every value sent under it, in order. */
  headers: Map<string, string[]>
  body: Buffer
}

/** The connection closed (or was reset) before a whole response arrived. */
export const CLOSED = 'closed'

class WireTimeoutError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'WireTimeoutError'
  }
}

/**
 * A raw TCP connection speaking just enough HTTP/1.1 to read responses: the requests are
 * whatever bytes the caller writes, so they can be as broken as a test needs.
 */
export class WireConnection {
  readonly socket: net.Socket
  #buffer: Buffer = Buffer.alloc(0)
  #closed = false
  #wake: (() => void) | undefined

  private constructor(socket: net.Socket) {
    this.socket = socket
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk])
      this.#notify()
    })
    const onClose = (): void => {
      this.#closed = true
      this.#notify()
    }
    socket.on('end', onClose)
    socket.on('close', onClose)
    // A reset is how some rejections end; it reads as a close.
    socket.on('error', onClose)
  }

  static open(host: string, port: number, timeoutMs = 5000): Promise<WireConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port })
      socket.setNoDelay(true)
      const timer = setTimeout(() => {
        socket.destroy()
        reject(new WireTimeoutError(`connecting to ${host}:${port} took over ${timeoutMs} ms`))
      }, timeoutMs)
      socket.once('connect', () => {
        clearTimeout(timer)
        socket.removeAllListeners('error')
        resolve(new WireConnection(socket))
      })
      socket.once('error', (err) => {
        clearTimeout(timer)
        reject(err)
      })
    })
  }

  /** True once the server closed or reset the connection (bytes already received can still be read). */
  get closed(): boolean {
    return this.#closed
  }

  /** Bytes received and not yet read as a response. */
  get pending(): number {
    return this.#buffer.length
  }

  write(data: Buffer | string): void {
    if (!this.socket.destroyed) this.socket.write(data)
  }

  /** Half-closes: the server sees the end of the request stream. */
  end(): void {
    if (!this.socket.destroyed) this.socket.end()
  }

  destroy(): void {
    this.socket.destroy()
  }

  /**
   * Reads the next final response (1xx interim responses are skipped), or CLOSED when the
   * connection ends first. `method` is the request's, because a HEAD response has no body.
   * @throws WireTimeoutError when neither happens within timeoutMs.
   */
  async readResponse(method: string, timeoutMs: number): Promise<WireResponse | typeof CLOSED> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const response = await this.#readOne(method, deadline)
      if (response === CLOSED || response.status >= 200) return response
    }
  }

  /** Waits until the server closes the connection. @throws WireTimeoutError after timeoutMs. */
  async waitForClose(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!this.#closed) await this.#more(deadline)
  }

  async #readOne(method: string, deadline: number): Promise<WireResponse | typeof CLOSED> {
    let headEnd = this.#buffer.indexOf('\r\n\r\n')
    while (headEnd === -1) {
      if (this.#closed) return CLOSED
      await this.#more(deadline)
      headEnd = this.#buffer.indexOf('\r\n\r\n')
    }
    const head = this.#buffer.subarray(0, headEnd).toString('latin1')
    const lines = head.split('\r\n')
    const statusLine = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? '')
    if (statusLine === null)
      throw new Error(`not an HTTP/1.1 status line: ${JSON.stringify(lines[0])}`)
    const status = Number(statusLine[1])
    const headers = new Map<string, string[]>()
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':')
      if (colon <= 0) throw new Error(`malformed response header line: ${JSON.stringify(line)}`)
      const name = line.slice(0, colon).toLowerCase()
      const values = headers.get(name) ?? []
      values.push(line.slice(colon + 1).trim())
      headers.set(name, values)
    }
    let at = headEnd + 4
    const noBody = method === 'HEAD' || status < 200 || status === 204 || status === 304
    const length = headers.get('content-length')
    const chunked = headers.get('transfer-encoding')?.some((v) => /chunked/i.test(v)) === true
    let body: Buffer
    if (noBody) {
      body = Buffer.alloc(0)
    } else if (chunked) {
      const parts: Buffer[] = []
      for (;;) {
        let lineEnd = this.#buffer.indexOf('\r\n', at)
        while (lineEnd === -1) {
          if (this.#closed) return CLOSED
          await this.#more(deadline)
          lineEnd = this.#buffer.indexOf('\r\n', at)
        }
        const size = Number.parseInt(this.#buffer.subarray(at, lineEnd).toString('latin1'), 16)
        if (!Number.isFinite(size)) throw new Error('malformed chunk size in a response')
        const chunkEnd = lineEnd + 2 + size + 2
        while (this.#buffer.length < chunkEnd) {
          if (this.#closed) return CLOSED
          await this.#more(deadline)
        }
        parts.push(this.#buffer.subarray(lineEnd + 2, lineEnd + 2 + size))
        at = chunkEnd
        if (size === 0) break
      }
      body = Buffer.concat(parts)
    } else if (length !== undefined) {
      const n = Number(length[0])
      while (this.#buffer.length < at + n) {
        if (this.#closed) return CLOSED
        await this.#more(deadline)
      }
      body = Buffer.from(this.#buffer.subarray(at, at + n))
      at += n
    } else {
      while (!this.#closed) await this.#more(deadline)
      body = Buffer.from(this.#buffer.subarray(at))
      at = this.#buffer.length
    }
    this.#buffer = this.#buffer.subarray(at)
    return { status, headers, body }
  }

  #more(deadline: number): Promise<void> {
    const wait = deadline - Date.now()
    if (wait <= 0) return Promise.reject(new WireTimeoutError('no complete response in time'))
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#wake = undefined
        reject(new WireTimeoutError('no complete response in time'))
      }, wait)
      this.#wake = () => {
        clearTimeout(timer)
        this.#wake = undefined
        resolve()
      }
    })
  }

  #notify(): void {
    this.#wake?.()
  }
}

/** The first value of a response header, or undefined. */
export function header(response: WireResponse, name: string): string | undefined {
  return response.headers.get(name)?.[0]
}
