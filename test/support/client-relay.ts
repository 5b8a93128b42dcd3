import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'

/**
 * A TCP relay on 127.0.0.1 between the client under test and the service, for what only a real
 * connection shows: an answer lost after the service applied the request, a service that
 * answers 503 once, a stream cut in the middle. Each new connection takes the next step of
 * `plan` (then forwards): 'lose-answer' forwards the request and cuts the connection when the
 * service's answer arrives, before the client reads a byte of it; a string is written as the
 * whole answer instead of forwarding, and the connection is closed.
 */
export class Relay {
  readonly #server: Server
  readonly #pairs = new Set<Socket>()
  /** Where connections go: the service's port (changeable, for a restarted service). */
  target: number
  readonly plan: ('lose-answer' | string)[] = []
  /** Connections accepted so far. */
  connections = 0

  private constructor(server: Server, target: number) {
    this.#server = server
    this.target = target
  }

  static async start(target: number): Promise<Relay> {
    const server = createServer()
    const relay = new Relay(server, target)
    server.on('connection', (socket) => relay.#relay(socket))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return relay
  }

  get port(): number {
    const address = this.#server.address()
    if (address === null || typeof address === 'string') throw new Error('not listening')
    return address.port
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`
  }

  /** Connections open now (client side). */
  get open(): number {
    return this.#pairs.size
  }

  /** Cuts every connection open now, as a network drop would. */
  cutAll(): void {
    for (const socket of this.#pairs) socket.destroy()
  }

  async close(): Promise<void> {
    this.cutAll()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  #relay(client: Socket): void {
    this.connections++
    this.#pairs.add(client)
    client.on('close', () => this.#pairs.delete(client))
    client.on('error', () => {})
    const step = this.plan.shift()
    if (step !== undefined && step !== 'lose-answer') {
      client.once('data', () => client.end(step))
      return
    }
    const upstream = connect(this.target, '127.0.0.1')
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    client.pipe(upstream)
    if (step === 'lose-answer') {
      upstream.once('data', () => {
        upstream.destroy()
        client.destroy()
      })
    } else {
      upstream.pipe(client)
    }
  }
}

/** A port where nothing listens: connections to it are refused (a relay target for "offline"). */
export const NOWHERE = 9

/** Listens on 127.0.0.1, closed (without the keep-alive grace) when the test ends; its port. */
export async function serve(t: TestContext, app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.after(async () => {
    const closing = app.close()
    app.server.closeAllConnections()
    await closing
  })
  return (app.server.address() as AddressInfo).port
}
