import { setTimeout as sleep } from 'node:timers/promises'
import type { ID_TAKEN, Revision, RevisionPage, TrashPage } from '../../src/store/archive.js'
import { MemoryNoteStore } from '../../src/store/memory/memory-store.js'
import type { MemoryStoreOptions } from '../../src/store/memory/options.js'
import type {
  BatchKey,
  BatchResult,
  Change,
  IdempotentCreate,
  ListRecord,
  NoteExport,
  NoteFields,
  NoteRecord,
  NoteStore,
  NoteWriter,
  PageQuery,
  PageRecord,
  PatchKind,
  PreconditionFailed,
  Preconditions,
  StoreStats,
} from '../../src/store/types.js'

/**
 * A store that answers every call with a promise, as a networked backend would, so the shared
 * suites prove the routes and the contract hold for asynchronous stores too.
 */
export class PromisedNoteStore implements NoteStore {
  readonly #inner: MemoryNoteStore
  readonly #createDelayMs: number

  /** @param createDelayMs how long each create takes to settle (0: a microtask). */
  constructor(options: MemoryStoreOptions & { createDelayMs?: number }) {
    this.#inner = new MemoryNoteStore(options)
    this.#createDelayMs = options.createDelayMs ?? 0
  }

  async create(fields: NoteFields): Promise<NoteRecord> {
    if (this.#createDelayMs > 0) await sleep(this.#createDelayMs)
    else await Promise.resolve()
    return copy(this.#inner.create(fields))
  }

  /**
   * The inner store's batch, answered after a microtask: the writes inside it are the inner
   * store's own, synchronous, as a memory store's batch needs.
   */
  async batch(
    work: (writer: NoteWriter) => string | undefined | Promise<string | undefined>,
    once?: BatchKey,
  ): Promise<BatchResult | undefined> {
    await Promise.resolve()
    return this.#inner.batch(work, once)
  }

  async createOnce(
    key: string,
    fingerprint: string,
    fields: NoteFields,
  ): Promise<IdempotentCreate> {
    await Promise.resolve()
    return this.#inner.createOnce(key, fingerprint, fields)
  }

  async list(): Promise<ListRecord> {
    return this.#inner.list()
  }

  async page(query: PageQuery): Promise<PageRecord> {
    return this.#inner.page(query)
  }

  async exportNotes(): Promise<NoteExport> {
    return this.#inner.exportNotes()
  }

  async revisions(
    id: number,
    limit: number,
    after: string | undefined,
  ): Promise<RevisionPage | undefined> {
    return this.#inner.revisions(id, limit, after)
  }

  async revision(id: number, version: string): Promise<Revision | undefined> {
    return this.#inner.revision(id, version)
  }

  async trash(limit: number, after: number | undefined): Promise<TrashPage> {
    return this.#inner.trash(limit, after)
  }

  async untrash(id: number): Promise<NoteRecord | undefined | typeof ID_TAKEN> {
    await Promise.resolve()
    const note = this.#inner.untrash(id)
    return note === undefined || typeof note === 'string' ? note : copy(note)
  }

  async purge(id: number): Promise<boolean> {
    return this.#inner.purge(id)
  }

  async emptyTrash(): Promise<number> {
    return this.#inner.emptyTrash()
  }

  async get(id: number): Promise<NoteRecord | undefined> {
    const note = this.#inner.get(id)
    return note === undefined ? undefined : copy(note)
  }

  async update(
    id: number,
    fields: NoteFields,
    kind?: PatchKind,
    conditions?: Preconditions,
  ): Promise<NoteRecord | undefined | PreconditionFailed> {
    await Promise.resolve()
    const note = this.#inner.update(id, fields, kind, conditions)
    return note === undefined || !('json' in note) ? note : copy(note)
  }

  async delete(id: number, conditions?: Preconditions): Promise<boolean | PreconditionFailed> {
    return this.#inner.delete(id, conditions)
  }

  async version(): Promise<string> {
    return this.#inner.version()
  }

  async changesSince(since: string, limit: number): Promise<readonly Change[] | undefined> {
    return this.#inner.changesSince(since, limit)
  }

  subscribe(listener: (change: Change) => void): () => void {
    return this.#inner.subscribe(listener)
  }

  async stats(): Promise<StoreStats> {
    return this.#inner.stats()
  }
}

/** As a networked store answers: a record of its own, not the stored one. */
function copy({ json, etag, modified }: NoteRecord): NoteRecord {
  return { json, etag, modified }
}
