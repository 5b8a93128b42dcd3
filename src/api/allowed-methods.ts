import type { FastifyInstance } from 'fastify'

interface Resource {
  /** '/api/note/:id' -> /^\/api\/note\/[^/]+\/?$/ */
  pattern: RegExp
  methods: Set<string>
}

/**
 * Keeps, for every path the app serves, the methods it answers, as routes are added.
 * `allowFor('/api/note/7')` -> 'DELETE, GET, HEAD, OPTIONS, PATCH, PUT'; an unknown path -> undefined.
 * Call before registering routes.
 */
export function trackAllowedMethods(app: FastifyInstance): (path: string) => string | undefined {
  const resources = new Map<string, Resource>()
  app.addHook('onRoute', (route) => {
    const url = route.url
    if (url.includes('*')) return
    const key = url.replace(/\/$/, '')
    let resource = resources.get(key)
    if (resource === undefined) {
      resource = { pattern: pathPattern(key), methods: new Set(['OPTIONS']) }
      resources.set(key, resource)
    }
    for (const method of [route.method].flat()) resource.methods.add(method)
  })
  return (path) => {
    for (const resource of resources.values()) {
      if (resource.pattern.test(path)) return [...resource.methods].sort().join(', ')
    }
    return undefined
  }
}

/** '/api/note/:id' -> /^\/api\/note\/[^/]+\/?$/ (a trailing slash is the same resource) */
function pathPattern(url: string): RegExp {
  const source = url
    .split('/')
    .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(`^${source}/?$`)
}
