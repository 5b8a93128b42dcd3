import { once } from 'node:events'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  type CryptoKey,
  exportJWK,
  type GenerateKeyPairResult,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
} from 'jose'

/**
 * What the key set endpoint does: serve the keys; fail with a 500; hang (accept the request and
 * never answer); stall (send the head and the start of a body, never the rest); or answer 200
 * with something that is not a key set.
 */
export type JwksMode = 'serve' | 'fail' | 'hang' | 'stall' | 'garbage'

/**
 * An identity provider's key set served over real HTTP on 127.0.0.1, as `createRemoteJWKSet`
 * fetches it: its keys and behaviour can be changed while it runs, and it counts the requests.
 */
export class JwksServer {
  keys: JWK[]
  mode: JwksMode = 'serve'
  /** Requests received, whatever they were answered. */
  requests = 0
  readonly url: URL
  readonly #server: ReturnType<typeof createServer>
  readonly #hanging: ServerResponse[] = []

  private constructor(server: ReturnType<typeof createServer>, keys: JWK[]) {
    this.#server = server
    this.keys = keys
    const { port } = server.address() as AddressInfo
    this.url = new URL(`http://127.0.0.1:${port}/.well-known/jwks.json`)
  }

  static async start(keys: JWK[]): Promise<JwksServer> {
    let self: JwksServer | undefined
    const server = createServer((_request, response) => self?.answer(response))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    self = new JwksServer(server, keys)
    return self
  }

  answer(response: ServerResponse): void {
    this.requests++
    if (this.mode === 'hang' || this.mode === 'stall') {
      if (this.mode === 'stall') {
        response.writeHead(200, { 'content-type': 'application/json' }).write('{"keys": [')
      }
      this.#hanging.push(response)
      return
    }
    if (this.mode === 'fail') {
      response.writeHead(500).end()
      return
    }
    response.setHeader('content-type', 'application/json')
    response.end(this.mode === 'garbage' ? '{"keys": "none"}' : JSON.stringify({ keys: this.keys }))
  }

  /** Stops listening and cuts every connection, hanging ones included. */
  async close(): Promise<void> {
    const closed = once(this.#server, 'close')
    this.#server.close()
    this.#server.closeAllConnections()
    await closed
  }
}

/** A signing key and its public half as a JWK of the set. */
export interface SigningKey {
  kid: string
  alg: string
  privateKey: CryptoKey
  publicKey: CryptoKey
  jwk: JWK
}

export async function signingKey(alg: string, kid: string): Promise<SigningKey> {
  const pair: GenerateKeyPairResult = await generateKeyPair(alg, { extractable: true })
  const jwk = { ...(await exportJWK(pair.publicKey)), kid, alg, use: 'sig' }
  return { kid, alg, privateKey: pair.privateKey, publicKey: pair.publicKey, jwk }
}

/** A JWT with exactly these header parameters and claims, signed with `key`. */
export function signed(
  key: CryptoKey | Uint8Array,
  header: { alg: string; kid?: string; typ?: string },
  claims: JWTPayload,
): Promise<string> {
  return new SignJWT(claims).setProtectedHeader(header).sign(key)
}

/** header.payload. with the given JSON, unsigned: 'alg: none' and malformed tokens. */
export function unsigned(header: unknown, claims: unknown, signature = ''): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  return `${part(header)}.${part(claims)}.${signature}`
}
