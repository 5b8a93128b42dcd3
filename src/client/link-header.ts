/**
 * The `next` URL of a Link header:
 * '</api/note?limit=2&after=d2.x>; rel="next"' -> '/api/note?limit=2&after=d2.x'; none -> undefined.
 */
export function nextLink(link: string | null): string | undefined {
  if (link === null) return undefined
  for (const part of link.split(/,(?=\s*<)/)) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part)
    if (match === null) continue
    const rel = /;\s*rel\s*=\s*"?([^";]*)"?/i.exec(match[2] ?? '')?.[1] ?? ''
    if (rel.toLowerCase().split(/\s+/).includes('next')) return match[1]
  }
  return undefined
}
