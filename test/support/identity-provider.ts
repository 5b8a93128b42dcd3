import { createHash, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, type JWK } from 'jose'
import { Provider } from 'oidc-provider'

/** The audience of the access tokens for this service, and the resource indicator naming it. */
export const AUDIENCE = 'notes-service'
const RESOURCE = 'https://notes.example/api'
/** A back-end that gets tokens for itself (client credentials). */
export const WORKER_CLIENT = 'notes-worker'
/** The notes app in a browser: a public client, authorization code with PKCE. */
export const WEB_CLIENT = 'notes-web'
/**
 * The notes page (AUTH_PAGE_CLIENT_ID): a public client, code with PKCE, refresh tokens, and
 * the page's own URL to come back to after signing in and out (`allowPage`).
 */
export const PAGE_CLIENT = 'notes-page'
/** How long the page's access tokens last. */
export const PAGE_TOKEN_SECONDS = 8
const WORKER_SECRET = 'worker-secret-0123456789abcdef0123456789'
const REDIRECT_URI = 'http://127.0.0.1/callback'

/** A private signing key of the provider, as oidc-provider takes it (with its kid). */
export async function providerKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true })
  return { ...(await exportJWK(privateKey)), kid, alg: 'ES256', use: 'sig' }
}

/** What a person's sign-in through the authorization code flow gives the app. */
export interface SignIn {
  idToken: string
  accessToken: string
}

/**
 * A real OpenID provider (oidc-provider 9, certified) on 127.0.0.1, in this process: a client for
 * client credentials, a public client for the code flow with PKCE (its development login form
 * takes any login, then asks for consent), and JWT access tokens for AUDIENCE (resource
 * indicators; oidc-provider types them at+jwt). Keys rotate by `rotate`: a new provider on the
 * same address and issuer, publishing the new keys and signing with the first of them.
 */
export class IdentityProvider {
  readonly issuer: string
  readonly jwksUrl: URL
  /** Requests for the key set received. */
  jwksRequests = 0
  #provider: Provider
  #keys: JWK[]
  #page: string | undefined
  readonly #server: ReturnType<typeof createServer>

  private constructor(server: ReturnType<typeof createServer>, issuer: string, keys: JWK[]) {
    this.#server = server
    this.issuer = issuer
    this.jwksUrl = new URL(`${issuer}/jwks`)
    this.#keys = keys
    this.#provider = providerOf(issuer, keys, undefined)
  }

  static async start(keys: JWK[]): Promise<IdentityProvider> {
    let self: IdentityProvider | undefined
    const server = createServer((request, response) => self?.answer(request, response))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    self = new IdentityProvider(server, `http://127.0.0.1:${port}`, keys)
    return self
  }

  answer(request: IncomingMessage, response: ServerResponse): void {
    if (request.url === '/jwks') this.jwksRequests++
    this.#provider.callback()(request, response)
  }

  /** From now on publishes `keys` and signs with the first. */
  rotate(keys: JWK[]): void {
    this.#keys = keys
    this.#provider = providerOf(this.issuer, keys, this.#page)
  }

  /**
   * From now on knows the notes page at `redirectUri` (its origin and '/', which is known only
   * once the service listens) as PAGE_CLIENT.
   */
  allowPage(redirectUri: string): void {
    this.#page = redirectUri
    this.#provider = providerOf(this.issuer, this.#keys, redirectUri)
  }

  /** An access token for the worker client itself (its sub is the client id). */
  async clientCredentialsToken(): Promise<string> {
    const response = await fetch(`${this.issuer}/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${WORKER_CLIENT}:${WORKER_SECRET}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        scope: 'notes',
        resource: RESOURCE,
      }),
    })
    const body = (await response.json()) as { access_token?: string }
    if (response.status !== 200 || body.access_token === undefined) {
      throw new Error(`client credentials: ${response.status} ${JSON.stringify(body)}`)
    }
    return body.access_token
  }

  /**
   * `login` signs in to the web client as a browser would: the authorization request (PKCE,
   * a nonce unless told not to), the login form, the consent form, each redirect followed by hand with the cookies
   * carried, then the code exchanged for the tokens.
   */
  async signIn(login: string, { nonce = true } = {}): Promise<SignIn> {
    const verifier = randomBytes(32).toString('base64url')
    const challenge = createHash('sha256').update(verifier).digest('base64url')
    const cookies = new Map<string, string>()
    const authorize = new URL(`${this.issuer}/auth`)
    authorize.search = new URLSearchParams({
      client_id: WEB_CLIENT,
      response_type: 'code',
      redirect_uri: REDIRECT_URI,
      scope: 'openid notes',
      resource: RESOURCE,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: randomBytes(8).toString('base64url'),
      ...(nonce ? { nonce: randomBytes(8).toString('base64url') } : {}),
    }).toString()
    let url = authorize.href
    let form: URLSearchParams | undefined
    for (let step = 0; step < 20; step++) {
      const response = await fetch(url, {
        method: form === undefined ? 'GET' : 'POST',
        redirect: 'manual',
        headers: {
          cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join('; '),
          ...(form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
        },
        ...(form === undefined ? {} : { body: form }),
      })
      for (const line of response.headers.getSetCookie()) {
        const [pair = ''] = line.split(';')
        const eq = pair.indexOf('=')
        cookies.set(pair.slice(0, eq), pair.slice(eq + 1))
      }
      form = undefined
      const location = response.headers.get('location')
      if (location !== null) {
        await response.arrayBuffer()
        const next = new URL(location, url)
        if (next.href.startsWith(REDIRECT_URI)) {
          const code = next.searchParams.get('code')
          if (code === null) throw new Error(`sign-in refused: ${next.search}`)
          return this.#exchange(code, verifier)
        }
        url = next.href
        continue
      }
      // A page of the development interactions: the login form, or the consent form.
      const page = await response.text()
      const action = /<form[^>]* action="([^"]+)"/.exec(page)?.[1]
      if (response.status !== 200 || action === undefined) {
        throw new Error(`sign-in: ${response.status} at ${url}: ${page.slice(0, 300)}`)
      }
      url = new URL(action.replaceAll('&amp;', '&'), url).href
      form = page.includes('name="login"')
        ? new URLSearchParams({ prompt: 'login', login, password: 'any' })
        : new URLSearchParams({ prompt: 'consent' })
    }
    throw new Error('sign-in: too many steps')
  }

  async #exchange(code: string, verifier: string): Promise<SignIn> {
    const response = await fetch(`${this.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        client_id: WEB_CLIENT,
        code,
        redirect_uri: REDIRECT_URI,
        code_verifier: verifier,
        resource: RESOURCE,
      }),
    })
    const body = (await response.json()) as { id_token?: string; access_token?: string }
    if (response.status !== 200 || body.id_token === undefined || body.access_token === undefined) {
      throw new Error(`code exchange: ${response.status} ${JSON.stringify(body)}`)
    }
    return { idToken: body.id_token, accessToken: body.access_token }
  }

  async close(): Promise<void> {
    const closed = once(this.#server, 'close')
    this.#server.close()
    this.#server.closeAllConnections()
    await closed
  }
}

/**
 * A provider for these tests. oidc-provider warns, on each one made, of the development defaults
 * (its in-memory store, its login form) that these tests choose: those warnings are left out.
 */
function providerOf(issuer: string, keys: JWK[], page: string | undefined): Provider {
  const warn = console.warn
  console.warn = (...args: unknown[]) => {
    if (!String(args[0]).startsWith('oidc-provider WARNING')) warn(...args)
  }
  try {
    return newProvider(issuer, keys, page)
  } finally {
    console.warn = warn
  }
}

function newProvider(issuer: string, keys: JWK[], page: string | undefined): Provider {
  const pageClients =
    page === undefined
      ? []
      : [
          {
            client_id: PAGE_CLIENT,
            token_endpoint_auth_method: 'none',
            application_type: 'web',
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            redirect_uris: [page],
            post_logout_redirect_uris: [page],
          },
        ]
  return new Provider(issuer, {
    clients: [
      ...pageClients,
      {
        client_id: WORKER_CLIENT,
        client_secret: WORKER_SECRET,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
      },
      {
        client_id: WEB_CLIENT,
        token_endpoint_auth_method: 'none',
        application_type: 'native',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [REDIRECT_URI],
      },
    ],
    clientDefaults: { id_token_signed_response_alg: 'ES256' },
    jwks: { keys },
    cookies: { keys: ['a-cookie-key-for-these-tests-only'] },
    scopes: ['openid', 'notes'],
    pkce: { required: () => true },
    // A public client's own origins, as oidc-provider does by default (set, so it says nothing).
    clientBasedCORS: (_context: unknown, origin: string, client: { redirectUris: string[] }) =>
      client.redirectUris.some((uri) => new URL(uri).origin === origin),
    // The page gets a refresh token without asking for offline_access (a client allowed the grant).
    issueRefreshToken: (_context: unknown, client: { grantTypeAllowed(type: string): boolean }) =>
      client.grantTypeAllowed('refresh_token'),
    findAccount: (_context: unknown, sub: string) => ({
      accountId: sub,
      claims: () => ({ sub }),
    }),
    // Set, so that oidc-provider does not print a notice for each default it uses.
    ttl: {
      // The page's last a few seconds, so that a test sees them renewed.
      AccessToken: (_context: unknown, _token: unknown, client?: { clientId: string }) =>
        client?.clientId === PAGE_CLIENT ? PAGE_TOKEN_SECONDS : 600,
      RefreshToken: 600,
      ClientCredentials: 600,
      Grant: 600,
      IdToken: 600,
      Interaction: 600,
      Session: 600,
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'notes',
          audience: AUDIENCE,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
  })
}
