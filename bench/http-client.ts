import { type Agent, request } from 'node:http'

export interface Answer {
  status: number
  body: string
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
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: res.headers,
          }),
        )
        res.on('error', reject)
      },
    )
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)))
    req.on('error', reject)
    req.end(options.body)
  })
}
