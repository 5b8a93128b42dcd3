import type { Config } from './config.js'

const CHOOSE_HOST =
  'choose another with HOST=... or --host ... (127.0.0.1 for this machine only, 0.0.0.0 for every interface)'

/** getaddrinfo's answers for a name it cannot resolve to an address, now or at all. */
const UNRESOLVED = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'EAI_NODATA',
  'EAI_ADDRFAMILY',
  'ENODATA',
])

/**
 * The one line to print when listening fails because of the PORT or HOST setting,
 * naming the setting and what to do; undefined for any other failure, which is a bug.
 * EADDRINUSE on 3000 -> 'PORT 3000 is already in use on 127.0.0.1; choose another with PORT=... or --port ...'
 */
export function listenErrorMessage(
  error: unknown,
  { port, host }: Pick<Config, 'port' | 'host'>,
): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  switch (code) {
    case 'EADDRINUSE':
      return `PORT ${port} is already in use on ${host}; choose another with PORT=... or --port ...`
    case 'EACCES':
      return `PORT ${port} on ${host} needs privileges this process does not have; choose one above 1023 with PORT=... or --port ...`
    case 'EADDRNOTAVAIL':
      return `HOST ${host} is not an address of this machine; ${CHOOSE_HOST}`
    case 'EAFNOSUPPORT':
      return `HOST ${host} is of an address family (IPv4 or IPv6) that this machine does not support; ${CHOOSE_HOST}`
    default:
      if (typeof code === 'string' && UNRESOLVED.has(code)) {
        return `HOST ${host} does not resolve to an address (${code}); ${CHOOSE_HOST}`
      }
      return undefined
  }
}
