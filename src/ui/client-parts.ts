/*
 * What the page uses of the client library, each from its own module rather than the package's
 * index: the page's modules are all preloaded, so a part the page never runs (the replica of
 * every notebook) would weigh on every first load.
 */
export { NotesProblem } from './client/errors.js'
export type { FilesClient } from './client/files-client.js'
export { NotesClient } from './client/notes-client.js'
export { parseJson } from './client/parse-json.js'
export { IndexedDbReplicaStorage } from './client/replica/indexeddb-storage.js'
export { MemoryReplicaStorage } from './client/replica/memory-storage.js'
export {
  Replica,
  type ReplicaConflict,
  type ReplicaEntry,
  type ReplicaFile,
} from './client/replica/replica.js'
export type { ReplicaStorage } from './client/replica/storage.js'
export type { Invite, Member, Note, Notebook, Role } from './client/types.js'
