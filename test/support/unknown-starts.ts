import type { Access, Directory } from '../../src/store/directory.js'
import type { Notebooks } from '../../src/store/types.js'

/**
 * `notebooks`, with a directory that knows no membership's start (Access.since), as for the
 * memberships an older release made: what a resumed stream must treat as "cannot tell".
 */
export function withoutStarts(notebooks: Notebooks): Notebooks {
  const inner = notebooks.directory
  const strip = (access: Access | undefined): Access | undefined => {
    if (access === undefined) return undefined
    const { id, store, role } = access
    return { id, store, role }
  }
  const directory = new Proxy(inner, {
    get(object, key) {
      if (key === 'access') {
        return (user: string, id: string) => {
          const access = object.access(user, id)
          return access instanceof Promise ? access.then(strip) : strip(access)
        }
      }
      const value: unknown = Reflect.get(object, key, object)
      return typeof value === 'function' ? value.bind(object) : value
    },
  }) satisfies Directory
  return new Proxy(notebooks, {
    get(object, key) {
      if (key === 'directory') return directory
      const value: unknown = Reflect.get(object, key, object)
      return typeof value === 'function' ? value.bind(object) : value
    },
  })
}
