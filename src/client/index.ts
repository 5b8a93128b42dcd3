/**
 * notes-service/client: a typed client of the notes API for browsers and Node >= 20, on fetch,
 * with no dependencies. See docs/client.md.
 */
export { ChangeFeed, type EventsOptions } from './change-feed.js'
export {
  ConflictError,
  NoteNotFoundError,
  NotesNetworkError,
  NotesProblem,
  type ProblemDocument,
} from './errors.js'
export { EventStreamParser, type StreamEvent } from './event-stream.js'
export {
  type DownloadOptions,
  type FilePage,
  FilesClient,
  type StoredFile,
  type UploadOptions,
  type UploadSource,
} from './files-client.js'
export { mergeNotes, type NoteMerge } from './merge-notes.js'
export type { NotebooksEvent } from './notebooks-feed.js'
export { NotesClient, type NotesClientOptions } from './notes-client.js'
export { parseJson } from './parse-json.js'
export {
  IndexedDbReplicaStorage,
  type IndexedDbReplicaStorageOptions,
  IndexedDbReplicaStorages,
} from './replica/indexeddb-storage.js'
export { MemoryReplicaStorage, MemoryReplicaStorages } from './replica/memory-storage.js'
export {
  NotebooksReplica,
  type NotebooksReplicaEvent,
  type NotebooksReplicaOptions,
  type UnsentWrite,
  type UnsentWrites,
} from './replica/notebooks-replica.js'
export {
  type AttachOptions,
  Replica,
  type ReplicaConflict,
  type ReplicaEntry,
  type ReplicaEvent,
  type ReplicaFile,
  type ReplicaOptions,
  type UnsentFile,
} from './replica/replica.js'
export {
  REPLICA_TABLES,
  type ReplicaContents,
  type ReplicaStorage,
  ReplicaStorageError,
  type ReplicaStorageErrorCode,
  type ReplicaStorages,
  type ReplicaTable,
  type ReplicaWrite,
} from './replica/storage.js'
export type { RetryOptions } from './retry-policy.js'
export type { TokenSource } from './transport.js'
export type {
  BatchAnswer,
  BatchOptions,
  BatchRequest,
  BatchResult,
  CallOptions,
  ChangeEvent,
  CreateOptions,
  DeleteOptions,
  IfMatch,
  Invite,
  InviteOptions,
  ListOptions,
  Member,
  NewInvite,
  Note,
  Notebook,
  NoteFields,
  NoteList,
  NotePage,
  NoteResult,
  PagesOptions,
  ReplaceOptions,
  RestoreOptions,
  Revision,
  RevisionPage,
  RevisionsOptions,
  Role,
  TrashedNote,
  TrashOptions,
  TrashPage,
  UpdateOptions,
} from './types.js'
