import { ARCHIVE_DEFAULTS } from '../archive.js'
import type { DirectoryLimits } from '../directory.js'
import type { FileLimits } from '../files.js'
import { Capacity } from '../kernel/capacity.js'
import { guardedStore } from '../kernel/guarded-store.js'
import { IdSpace } from '../kernel/id-space.js'
import { randomEpoch } from '../kernel/version-token.js'
import type { Notebooks, NoteStore, StoreStats } from '../types.js'
import { FileRoom } from './file-room.js'
import { MemoryDirectory, type MemoryDirectoryOptions } from './memory-directory.js'
import { MemoryFiles } from './memory-files.js'
import { MemoryNoteStore } from './memory-store.js'
import { MemoryUploads } from './memory-uploads.js'
import type { MemoryStoreOptions, SharedParts } from './options.js'
import { HistoryBudget } from './revisions.js'

export interface MemoryNotebooksOptions
  extends Omit<MemoryStoreOptions, 'maxNotes' | 'maxBytes' | 'epoch' | 'shared'> {
  /** Most notes held at once over every notebook. */
  maxNotes: number
  /** Most UTF-8 bytes of note JSON held at once over every notebook. */
  maxBytes: number
  /** Most notes one notebook holds (MAX_NOTES_PER_USER); default maxNotes. */
  maxNotesPerNotebook?: number
  /** Most UTF-8 bytes of note JSON one notebook holds (MAX_BYTES_PER_USER); default maxBytes. */
  maxBytesPerNotebook?: number
  /**
   * The version epoch of a notebook, for tests that know their tokens ('e.1'); a random one,
   * never given twice, by default (undefined draws one too).
   */
  epochOf?: (notebook: string) => string | undefined
  /** Notebooks one user owns at most (MAX_NOTEBOOKS_PER_USER); default 100. */
  maxNotebooksPerUser?: number
  /** Members one notebook has at most (MAX_MEMBERS); default 100. */
  maxMembers?: number
  /** The caps of files; FILE_LIMIT_DEFAULTS's for those not given. */
  files?: Partial<FileLimits>
}

/** The directory's caps when none are given. */
export const DEFAULT_DIRECTORY_LIMITS: DirectoryLimits = Object.freeze({
  maxNotebooksPerUser: 100,
  maxMembers: 100,
})

/**
 * The notebooks of one service in memory. Each is a MemoryNoteStore of its own,
 * with its own random epoch, so that a version token or ETag of one notebook is never valid in
 * another; they share one IdSpace (ids unique over the service) and the service's Capacity,
 * whose byte cap the files and unfinished uploads count toward too.
 * A notebook, once asked for, stays for the life of the process, empty or not.
 */
export class MemoryNotebooks implements Notebooks {
  readonly #store: MemoryStoreOptions
  readonly #shared: SharedParts
  readonly #notebooks = new Map<string, MemoryNoteStore>()
  /** Every epoch given to a notebook: a random draw that repeats one is drawn again. */
  readonly #epochs = new Set<string>()
  readonly #epochOf: ((notebook: string) => string | undefined) | undefined
  /** Who may see which notebook. */
  readonly directory: MemoryDirectory
  readonly files: MemoryFiles
  /** Resumable uploads' bytes until they are files, counted as the files are. */
  readonly uploads: MemoryUploads

  constructor(options: MemoryNotebooksOptions, onRecord?: MemoryDirectoryOptions['onRecord']) {
    const {
      maxNotesPerNotebook,
      maxBytesPerNotebook,
      epochOf,
      maxNotebooksPerUser = DEFAULT_DIRECTORY_LIMITS.maxNotebooksPerUser,
      maxMembers = DEFAULT_DIRECTORY_LIMITS.maxMembers,
      files,
      ...service
    } = options
    this.#epochOf = epochOf
    this.directory = new MemoryDirectory({
      maxNotebooksPerUser,
      maxMembers,
      dropNotes: (store) => this.drop(store),
      versionOf: (store) => this.notebook(store).version(),
      ...(onRecord === undefined ? {} : { onRecord }),
    })
    this.#shared = {
      ids: new IdSpace(),
      capacity: new Capacity(service.maxNotes, service.maxBytes, 'The service'),
      history: new HistoryBudget(
        service.archive?.maxHistoryBytes ?? ARCHIVE_DEFAULTS.maxHistoryBytes,
      ),
    }
    const room = new FileRoom(this.#shared.capacity)
    this.files = new MemoryFiles({
      ...files,
      roleOf: (store, user) => this.directory.roleIn(store, user),
      ...(service.now === undefined ? {} : { now: service.now }),
      room,
    })
    this.uploads = new MemoryUploads({ room, files: this.files.uploadRoom })
    this.#store = {
      ...service,
      maxNotes: maxNotesPerNotebook ?? service.maxNotes,
      maxBytes: maxBytesPerNotebook ?? service.maxBytes,
      shared: this.#shared,
    }
  }

  notebook(name: string): MemoryNoteStore {
    let notebook = this.#notebooks.get(name)
    if (notebook === undefined) {
      let epoch = this.#epochOf?.(name) ?? randomEpoch()
      while (this.#epochs.has(epoch)) epoch = randomEpoch()
      this.#epochs.add(epoch)
      notebook = new MemoryNoteStore({ ...this.#store, epoch })
      this.#notebooks.set(name, notebook)
    }
    return notebook
  }

  writerFor(name: string, user: string): NoteStore {
    const store = this.notebook(name)
    return guardedStore(store, () => this.directory.roleIn(name, user))
  }

  /**
   * Removes the notebook's notes and gives back their room; asked for again, it is a new, empty
   * notebook with a new epoch (a removed notebook's name is never asked for again: ids are random).
   */
  drop(name: string): void {
    this.files.drop(name)
    const notebook = this.#notebooks.get(name)
    if (notebook === undefined) return
    notebook.release()
    this.#notebooks.delete(name)
  }

  stats(): StoreStats {
    const { notes, bytes, maxNotes, maxBytes } = this.#shared.capacity
    return { notes, bytes, maxNotes, maxBytes }
  }
}
