import { setTimeout as sleep } from 'node:timers/promises'
import { MemoryNoteStore, type MemoryStoreOptions } from '../src/store/memory.js'
import type { NoteFields, NoteStore, PatchKind, StoreStats } from '../src/store/types.js'

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

  async create(fields: NoteFields): Promise<string> {
    if (this.#createDelayMs > 0) await sleep(this.#createDelayMs)
    else await Promise.resolve()
    return this.#inner.create(fields)
  }

  async list(): Promise<string> {
    return this.#inner.list()
  }

  async get(id: number): Promise<string | undefined> {
    return this.#inner.get(id)
  }

  async update(id: number, fields: NoteFields, kind?: PatchKind): Promise<string | undefined> {
    await Promise.resolve()
    return this.#inner.update(id, fields, kind)
  }

  async delete(id: number): Promise<boolean> {
    return this.#inner.delete(id)
  }

  async stats(): Promise<StoreStats> {
    return this.#inner.stats()
  }
}
