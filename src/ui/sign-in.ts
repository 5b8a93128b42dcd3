/**
 * Signing in on the page with OpenID Connect, when the service names a provider and the page's
 * client id there (/ui/sign-in.json): the authorization code flow with PKCE (S256) and state, for
 * a public client, through oauth4webapi. The access token (never the ID token) is what the page
 * sends to the API; it is kept in this tab's session storage, renewed before it expires with the
 * refresh token when the provider gave one, and else asked for again once the API refuses it.
 */
import { setAccessKey } from './api.js'
import type * as OAuth from './vendor/oauth4webapi.js'

/** What /ui/sign-in.json says: {} when the page asks for a token instead. */
export interface SignInSettings {
  issuer: string
  client_id: string
  scope: string
}

/** The tokens of this tab's sign-in. `expires`: ms since the epoch, or undefined if not said. */
interface Session {
  access: string
  refresh: string | undefined
  idToken: string | undefined
  expires: number | undefined
}

const SETTINGS_STORAGE = 'notes-service.sign-in-settings'
const SESSION_STORAGE = 'notes-service.sign-in'
const PENDING_STORAGE = 'notes-service.sign-in.pending'
let library: Promise<typeof OAuth> | undefined

/**
 * oauth4webapi, loaded when the page first talks to the provider: a page that only opens (with
 * a token kept, or offline) never needs it, and a service without sign-in never loads it.
 */
function load(): Promise<typeof OAuth> {
  library ??= import('./vendor/oauth4webapi.js').catch((err: unknown) => {
    library = undefined
    throw err
  })
  return library
}

/** Renewed this long before the access token expires (or at 4/5 of a shorter life). */
const RENEW_AHEAD_MS = 60_000

/**
 * How the page signs in, as the service says, else as it last said (the page opens offline
 * too); undefined when it asks for a token.
 */
export async function signInSettings(): Promise<SignInSettings | undefined> {
  let settings: unknown
  try {
    const response = await fetch('/ui/sign-in.json', { cache: 'no-cache', credentials: 'omit' })
    if (!response.ok) throw new Error(`status ${response.status}`)
    settings = await response.json()
    localStorage.setItem(SETTINGS_STORAGE, JSON.stringify(settings))
  } catch {
    settings = read(localStorage, SETTINGS_STORAGE)
  }
  const { issuer, client_id, scope } = (settings ?? {}) as Partial<SignInSettings>
  if (typeof issuer !== 'string' || typeof client_id !== 'string') return undefined
  return { issuer, client_id, scope: typeof scope === 'string' ? scope : 'openid' }
}

function read(storage: Storage, key: string): unknown {
  try {
    const text = storage.getItem(key)
    return text === null ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

function write(storage: Storage, key: string, value: unknown): void {
  try {
    if (value === undefined) storage.removeItem(key)
    else storage.setItem(key, JSON.stringify(value))
  } catch {
    // Storage refused (a private mode): the sign-in then lasts until the page is left.
  }
}

/** The page's sign-in at one provider. */
export class OidcSignIn {
  readonly #issuer: URL
  readonly #client: OAuth.Client
  readonly #scope: string
  /** Where the provider sends the person back: the page itself, as registered there. */
  readonly #redirectUri = `${location.origin}/`
  /** http: is allowed for a provider on this machine alone (the service refuses it elsewhere). */
  readonly #insecure: boolean
  #server: Promise<OAuth.AuthorizationServer> | undefined
  #session: Session | undefined
  #timer: ReturnType<typeof setTimeout> | undefined
  #renewing: Promise<boolean> | undefined

  constructor(settings: SignInSettings) {
    this.#issuer = new URL(settings.issuer)
    this.#client = { client_id: settings.client_id }
    this.#scope = settings.scope
    this.#insecure = this.#issuer.protocol === 'http:'
    this.#session = read(sessionStorage, SESSION_STORAGE) as Session | undefined
  }

  /** Whether this tab is signed in (its access token may have expired since). */
  get signedIn(): boolean {
    return this.#session !== undefined
  }

  /**
   * Finishes a sign-in when the provider has just sent the person back (?code=...&state=...),
   * then uses this tab's tokens. Throws with the provider's or the check's words when the answer
   * is refused.
   */
  async start(): Promise<void> {
    const here = new URL(location.href)
    if (here.searchParams.has('state') || here.searchParams.has('error')) {
      const pending = read(sessionStorage, PENDING_STORAGE) as
        | { verifier: string; state: string; hash: string }
        | undefined
      write(sessionStorage, PENDING_STORAGE, undefined)
      history.replaceState(null, '', `/${pending?.hash ?? ''}`)
      if (pending === undefined)
        throw new Error('This sign-in was not started here; sign in again.')
      const oauth = await load()
      const server = await this.#discover()
      const params = oauth.validateAuthResponse(server, this.#client, here, pending.state)
      const response = await oauth.authorizationCodeGrantRequest(
        server,
        this.#client,
        oauth.None(),
        params,
        this.#redirectUri,
        pending.verifier,
        this.#options(oauth),
      )
      this.#keep(await oauth.processAuthorizationCodeResponse(server, this.#client, response))
    }
    this.#use()
  }

  /** Sends the person to the provider to sign in; they come back to this page (`start`). */
  async signIn(): Promise<void> {
    const oauth = await load()
    const server = await this.#discover()
    const verifier = oauth.generateRandomCodeVerifier()
    const state = oauth.generateRandomState()
    write(sessionStorage, PENDING_STORAGE, { verifier, state, hash: location.hash })
    const url = new URL(server.authorization_endpoint as string)
    url.search = new URLSearchParams({
      client_id: this.#client.client_id,
      redirect_uri: this.#redirectUri,
      response_type: 'code',
      scope: this.#scope,
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString()
    location.assign(url.href)
  }

  /**
   * Forgets this tab's tokens, then ends the session at the provider too when it offers that
   * (RP-initiated logout), which sends the person back to this page.
   */
  async signOut(): Promise<void> {
    const idToken = this.#session?.idToken
    this.#forget()
    let server: OAuth.AuthorizationServer | undefined
    try {
      server = await this.#discover()
    } catch {
      return
    }
    if (server.end_session_endpoint === undefined) return
    const url = new URL(server.end_session_endpoint)
    url.searchParams.set('client_id', this.#client.client_id)
    url.searchParams.set('post_logout_redirect_uri', this.#redirectUri)
    if (idToken !== undefined) url.searchParams.set('id_token_hint', idToken)
    location.assign(url.href)
  }

  /**
   * After the API refused the access token (401): a new one from the refresh token when there
   * is one (true), else the person is sent to sign in again (false).
   */
  async refused(): Promise<boolean> {
    if (this.#session === undefined) return false
    if (await this.#renew()) return true
    await this.signIn()
    return false
  }

  #renew(): Promise<boolean> {
    this.#renewing ??= this.#refresh().finally(() => {
      this.#renewing = undefined
    })
    return this.#renewing
  }

  async #refresh(): Promise<boolean> {
    const refresh = this.#session?.refresh
    if (refresh === undefined) return false
    let oauth: typeof OAuth | undefined
    try {
      oauth = await load()
      const server = await this.#discover()
      const response = await oauth.refreshTokenGrantRequest(
        server,
        this.#client,
        oauth.None(),
        refresh,
        this.#options(oauth),
      )
      this.#keep(await oauth.processRefreshTokenResponse(server, this.#client, response))
      this.#use()
      return true
    } catch (err) {
      // The provider said no (the refresh token is spent or revoked): sign in again. No answer
      // (offline): the next refusal tries again.
      if (oauth !== undefined && err instanceof oauth.ResponseBodyError) this.#forget()
      return false
    }
  }

  #keep(tokens: OAuth.TokenEndpointResponse): void {
    const old = this.#session
    this.#session = {
      access: tokens.access_token,
      // A provider that does not rotate it sends none with a renewal: the old one still holds.
      refresh: tokens.refresh_token ?? old?.refresh,
      idToken: tokens.id_token ?? old?.idToken,
      expires: tokens.expires_in === undefined ? undefined : Date.now() + tokens.expires_in * 1000,
    }
    write(sessionStorage, SESSION_STORAGE, this.#session)
  }

  /** Gives the client this tab's access token, and plans its renewal. */
  #use(): void {
    clearTimeout(this.#timer)
    const session = this.#session
    if (session === undefined) return
    setAccessKey(session.access)
    if (session.refresh === undefined || session.expires === undefined) return
    const left = session.expires - Date.now()
    const delay = Math.max(1_000, left - Math.min(RENEW_AHEAD_MS, left / 5))
    this.#timer = setTimeout(() => void this.#renew(), delay)
  }

  #forget(): void {
    clearTimeout(this.#timer)
    this.#session = undefined
    write(sessionStorage, SESSION_STORAGE, undefined)
    setAccessKey(null)
  }

  #options(oauth: typeof OAuth): { [OAuth.allowInsecureRequests]?: boolean } {
    return this.#insecure ? { [oauth.allowInsecureRequests]: true } : {}
  }

  #discover(): Promise<OAuth.AuthorizationServer> {
    this.#server ??= (async () => {
      const oauth = await load()
      const response = await oauth.discoveryRequest(this.#issuer, {
        algorithm: 'oidc',
        ...this.#options(oauth),
      })
      return oauth.processDiscoveryResponse(this.#issuer, response)
    })().catch((err: unknown) => {
      this.#server = undefined
      throw err
    })
    return this.#server
  }
}
