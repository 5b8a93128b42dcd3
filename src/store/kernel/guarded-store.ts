import type { Role } from '../directory.js'
import { AccessLostError, type NoteStore } from '../types.js'

/**
 * A synchronous store's notebook as one member writes it (Notebooks.writerFor): `roleOf` is asked
 * right before each write and batch, in the same synchronous step as the write itself, so that a
 * member removed or demoted a moment earlier writes nothing. Reads go to the store as they are.
 */
export function guardedStore(store: NoteStore, roleOf: () => Role | undefined): NoteStore {
  const check = (): void => {
    const role = roleOf()
    if (role !== 'owner' && role !== 'editor') throw new AccessLostError(role)
  }
  return {
    create(fields) {
      check()
      return store.create(fields)
    },
    createOnce(key, fingerprint, fields) {
      check()
      return store.createOnce(key, fingerprint, fields)
    },
    list: () => store.list(),
    page: (query) => store.page(query),
    get: (id) => store.get(id),
    update(id, fields, kind, conditions) {
      check()
      return store.update(id, fields, kind, conditions)
    },
    delete(id, conditions) {
      check()
      return store.delete(id, conditions)
    },
    version: () => store.version(),
    changesSince: (since, limit) => store.changesSince(since, limit),
    subscribe: (listener) => store.subscribe(listener),
    stats: () => store.stats(),
    exportNotes: () => store.exportNotes(),
    batch(work, once) {
      check()
      return store.batch(work, once)
    },
    revisions: (id, limit, after) => store.revisions(id, limit, after),
    revision: (id, version) => store.revision(id, version),
    trash: (limit, after) => store.trash(limit, after),
    untrash(id) {
      check()
      return store.untrash(id)
    },
    purge(id) {
      check()
      return store.purge(id)
    },
    emptyTrash() {
      check()
      return store.emptyTrash()
    },
  }
}
