import { type Agent, request } from 'node:http'

export interface Answer {
  status: number
  body: string
  /** The body as it came, not decoded (a compressed body stays compressed). */
  bytes: Buffer
  headers: Record<string, string | string[] | undefined>
}

/** One request to 127.0.0.1:port; the body, when given, is sent as application/json. */
export function send(
  port: number,
  method: string,
  path: string,
  options: {
    body?: string
    agent?: Agent
    timeoutMs?: number
    headers?: Record<string, string>
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.body !== undefined) headers['content-type'] = 'application/json'
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers,
        agent: options.agent ?? false,
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          const bytes = Buffer.concat(chunks)
          resolve({
            status: res.statusCode ?? 0,
            body: bytes.toString('utf8'),
            bytes,
            headers: res.headers,
          })
        })
        res.on('error', reject)
      },
    )
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)))
    req.on('error', reject)
    req.end(options.body)
  })
}
