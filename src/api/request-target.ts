import type { IncomingMessage } from 'node:http'

/**
 * What a request names, read the one way both lanes and every check read it: its path as the
 * router decodes it, its query, and the bearer credentials it carries.
 */

/**
 * The path as the router matched it: query and fragment cut, percent-encoding decoded except
 * for '%2F', which stays inside its segment.
 * '/api/note?x=1' -> '/api/note'; '/api/%6eote#f' -> '/api/note'; '/api%2Fnote' -> '/api%2Fnote'
 */
export function pathOf(url: string): string {
  const end = url.search(/[?#]/)
  const path = end === -1 ? url : url.slice(0, end)
  if (!path.includes('%')) return path
  return path
    .split(/%2f/i)
    .map((part) => {
      try {
        return decodeURIComponent(part)
      } catch {
        return part
      }
    })
    .join('%2F')
}

/**
 * The path of a request target, decoded as the router decodes it:
 * '/api/note?x' -> '/api/note'; '/%61pi/note' -> '/api/note';
 * 'http://host:3000/api/note' (absolute form, RFC 9112 §3.2.2) -> '/api/note'.
 */
export function requestPath(url: string): string {
  const origin = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(url)
  return pathOf(origin === null ? url : url.slice(origin[0].length) || '/')
}

/** '/api/note?limit=2' -> 'limit=2'; '/api/note' -> '' */
export function queryOf(url: string): string {
  const mark = url.indexOf('?')
  return mark === -1 ? '' : url.slice(mark + 1)
}

/**
 * Every Authorization header of the request, as sent. Node keeps only the first of several in
 * `headers`, so they are counted in `rawHeaders`, whose names keep the case they were sent in.
 */
export function authorizationsOf(request: IncomingMessage): string[] {
  if (request.headers.authorization === undefined) return []
  const raw = request.rawHeaders
  const values: string[] = []
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      values.push(raw[i + 1] as string)
    }
  }
  return values
}

/**
 * The key in an Authorization value: 'Bearer k1' -> 'k1'; 'bearer k1' -> 'k1' (the scheme is
 * case-insensitive, RFC 9110 §11.1); 'Bearer k1 ' -> 'k1' (whitespace around a field value is
 * not part of it, RFC 9110 §5.5: Node's parser drops it before we see it, so it is dropped here
 * too, and a request means the same whichever way it arrives); 'Basic k1', 'Bearer', 'Bearer a b'
 * -> undefined.
 */
export function bearerToken(value: string): string | undefined {
  const match = /^[ \t]*bearer +([^ \t]+)[ \t]*$/i.exec(value)
  return match?.[1]
}

/**
 * Whether the request target's query carries an access_token parameter (RFC 6750 §2.3), by any
 * spelling: '/api/note?access_token=x' and '/api/note?a=1&access%5Ftoken=' -> true.
 */
export function tokenInQuery(url: string): boolean {
  const query = url.indexOf('?')
  if (query === -1) return false
  const fragment = url.indexOf('#', query)
  return new URLSearchParams(url.slice(query + 1, fragment === -1 ? undefined : fragment)).has(
    'access_token',
  )
}
