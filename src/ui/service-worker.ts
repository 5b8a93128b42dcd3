/** The address of the page's service worker (sw.ts), as the service serves it. */
const SERVICE_WORKER = '/ui/sw.js'

/** What the page uses of the Trusted Types API (not in TypeScript's DOM lib). */
interface TrustedTypesWindow {
  trustedTypes?: {
    createPolicy(
      name: string,
      rules: { createScriptURL(url: string): string },
    ): { createScriptURL(url: string): unknown }
  }
}

/**
 * Registers the service worker that keeps the page's shell for offline use (sw.ts), through
 * the one Trusted Types policy the page's CSP allows, which makes a script URL of its address
 * and of nothing else.
 */
export function registerServiceWorker(): void {
  if (!('serviceWorker' in navigator)) return
  const policy = (window as TrustedTypesWindow).trustedTypes?.createPolicy('notes-service-worker', {
    createScriptURL: (url: string) => {
      if (url !== SERVICE_WORKER) throw new TypeError(`not the service worker: ${url}`)
      return url
    },
  })
  const url = policy?.createScriptURL(SERVICE_WORKER) ?? SERVICE_WORKER
  navigator.serviceWorker
    .register(url as string, { scope: '/', type: 'module', updateViaCache: 'none' })
    .catch(() => {
      // No offline shell (a private window may refuse workers): the page works online as before.
    })
}
