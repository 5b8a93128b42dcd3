import { once } from 'node:events'
import { connect, type Socket } from 'node:net'

/** A raw TCP connection to 127.0.0.1:port that collects everything the server sends. */
export async function openRaw(
  port: number,
): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  const socket = connect({ port, host: '127.0.0.1' })
  let data = ''
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => {
    data += chunk
  })
  socket.on('error', () => {})
  const closed = once(socket, 'close').then(() => undefined)
  await once(socket, 'connect')
  return { socket, received: () => data, closed }
}

/** Resolves when `predicate` holds, polling every 10 ms; rejects after `ms`. */
export async function waitFor(predicate: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
