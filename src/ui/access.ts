/**
 * Who the page acts as: an access key or user token pasted into the key dialog (kept for this
 * tab only), or, when the service names an OpenID provider, the person signed in there
 * (sign-in.ts). A 401 asks for a key, renews the sign-in, or offers to sign in.
 */
import { accessKey, type Failure, setAccessKey, tokenSubject } from './api.js'
import { byId } from './dom.js'
import type { OidcSignIn } from './sign-in.js'

const keyDialog = byId('key-dialog', HTMLDialogElement)
const keyForm = byId('key-form', HTMLFormElement)
const keyInput = byId('key-input', HTMLInputElement)
const keyReason = byId('key-reason', HTMLElement)
const keyCancel = byId('key-cancel', HTMLButtonElement)
const keyButton = byId('key-button', HTMLButtonElement)
const forgetButton = byId('forget-key', HTMLButtonElement)
const signInButton = byId('sign-in', HTMLButtonElement)
const whoami = byId('whoami', HTMLElement)
const readOnlyNote = byId('read-only', HTMLElement)

export class Access {
  readonly #signIn: OidcSignIn | undefined
  readonly #changed: () => void

  /** `changed`: the key or the sign-in changed (or was renewed): open the notes again. */
  constructor(signIn: OidcSignIn | undefined, changed: () => void) {
    this.#signIn = signIn
    this.#changed = changed
    keyForm.addEventListener('submit', (event) => {
      event.preventDefault()
      const key = keyInput.value.trim()
      if (key === '') return
      setAccessKey(key)
      keyInput.value = ''
      keyDialog.close()
      this.#use()
    })
    keyCancel.addEventListener('click', () => keyDialog.close())
    keyButton.addEventListener('click', () => this.#askForKey())
    signInButton.addEventListener('click', () => void signIn?.signIn())
    forgetButton.addEventListener('click', () => {
      if (signIn === undefined) {
        setAccessKey(null)
        this.#use()
      } else {
        this.show()
        void signIn.signOut().then(() => this.#use())
      }
    })
    this.show()
  }

  /** Whether the page signs people in at a provider, and nobody is signed in in this tab. */
  get signedOut(): boolean {
    return this.#signIn !== undefined && !this.#signIn.signedIn
  }

  /** A 401: a key is asked for, the sign-in renewed (or made again), or Sign in offered. */
  refused(failure: Failure): void {
    const signIn = this.#signIn
    if (signIn === undefined) {
      this.#askForKey(failure)
      return
    }
    if (!signIn.signedIn) {
      this.show()
      signInButton.focus()
      return
    }
    void signIn.refused().then((renewed) => {
      if (renewed) this.#changed()
    })
  }

  show(): void {
    const key = accessKey()
    const user = tokenSubject(key)
    const oidc = this.#signIn !== undefined
    signInButton.hidden = !oidc || key !== null
    if (oidc) keyButton.hidden = true
    forgetButton.hidden = key === null
    whoami.hidden = user === undefined
    whoami.textContent =
      user === undefined ? '' : oidc ? `Signed in as ${user}` : `Notebook of ${user}`
    forgetButton.textContent = user === undefined ? 'Forget the key' : 'Sign out'
  }

  #use(): void {
    readOnlyNote.hidden = true
    this.show()
    if (this.#signIn === undefined && accessKey() !== null) keyButton.hidden = false
    this.#changed()
  }

  #askForKey(failure?: Failure): void {
    keyReason.textContent =
      failure?.detail ?? 'This service needs an access key. Ask whoever runs it for one.'
    keyButton.hidden = false
    if (!keyDialog.open) {
      keyInput.value = ''
      keyDialog.showModal()
    }
  }
}
