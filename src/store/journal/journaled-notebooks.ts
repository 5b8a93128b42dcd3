import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import { ARCHIVE_DEFAULTS } from '../archive.js'
import type { FileLimits } from '../files.js'
import { Capacity } from '../kernel/capacity.js'
import { guardedStore } from '../kernel/guarded-store.js'
import { IdSpace } from '../kernel/id-space.js'
import { randomEpoch } from '../kernel/version-token.js'
import { DEFAULT_DIRECTORY_LIMITS } from '../memory/memory-notebooks.js'
import type { MemoryStoreOptions, SharedParts } from '../memory/options.js'
import { HistoryBudget } from '../memory/revisions.js'
import type { Notebooks, NoteStore, StoreStats } from '../types.js'
import { SHARED_NOTEBOOK } from '../types.js'
import { JournalFile } from './journal-file.js'
import { JournalFiles } from './journal-files.js'
import { JournalOpenError } from './journal-open-error.js'
import { directoryRecords, imageRecords, JournalDamage, replayJournal } from './journal-records.js'
import { JournaledDirectory } from './journaled-directory.js'
import { JournaledStore, type JournalHost } from './journaled-store.js'
import { type DecodedRecord, decodeJournal } from './record-format.js'

export interface JournaledStoreOptions
  extends Omit<MemoryStoreOptions, 'epoch' | 'shared' | 'onWrite'> {
  /** The journal (DATA_FILE); its lock is `path.lock`, a compaction writes `path.tmp`. */
  path: string
  /** No compaction below this size, in bytes; default 1 MiB. */
  compactMinBytes?: number
}

export interface JournaledNotebooksOptions extends JournaledStoreOptions {
  /** Most notes one notebook holds (MAX_NOTES_PER_USER); default maxNotes. */
  maxNotesPerNotebook?: number
  /** Most UTF-8 bytes of note JSON one notebook holds (MAX_BYTES_PER_USER); default maxBytes. */
  maxBytesPerNotebook?: number
  /** Notebooks one user owns at most (MAX_NOTEBOOKS_PER_USER); default 100. */
  maxNotebooksPerUser?: number
  /** Members one notebook has at most (MAX_MEMBERS); default 100. */
  maxMembers?: number
  /** The caps of files; FILE_LIMIT_DEFAULTS's for those not given. */
  files?: Partial<FileLimits>
}

/**
 * Every notebook of one journal: one file, one lock, one group
 * commit, and per notebook a JournaledStore over a memory store of its own, as MemoryNotebooks
 * keeps them (one IdSpace, so ids are unique over the service; the service's caps beside each
 * notebook's). The shared notebook's epoch is the journal's; another's is derived from the
 * journal's epoch and its name, so it survives restarts without a record of its own, differs
 * between notebooks, and changes with the journal's (an import). The directory's acts are records
 * of the same journal, in the same group commit as the notes' writes (journaled-directory.ts), and
 * so are the files' (journal-files.ts: their bytes in the folder `path.files` beside it).
 */
export class JournaledNotebooks implements Notebooks, JournalHost {
  readonly dropped: { offset: number; bytes: number } | undefined
  readonly #options: JournaledNotebooksOptions
  readonly #file: JournalFile
  readonly #epoch: string
  readonly #notebooks = new Map<string, JournaledStore>()
  #shared: SharedParts
  #closed = false
  /** Who may see which notebook. */
  readonly directory: JournaledDirectory
  /** Every notebook's files: their bytes beside the journal, their records in it. */
  readonly files: JournalFiles

  /**
   * Opens (or creates) the journal at `options.path`, under its lock, and replays it.
   * @throws JournalOpenError with a one-line message.
   */
  constructor(options: JournaledNotebooksOptions) {
    this.#options = options
    this.#shared = this.#newShared()
    this.directory = new JournaledDirectory(this, {
      maxNotebooksPerUser:
        options.maxNotebooksPerUser ?? DEFAULT_DIRECTORY_LIMITS.maxNotebooksPerUser,
      maxMembers: options.maxMembers ?? DEFAULT_DIRECTORY_LIMITS.maxMembers,
      dropNotes: (store) => this.drop(store),
      versionOf: (store) => this.notebook(store).version(),
    })
    this.files = new JournalFiles(this, {
      path: options.path,
      roleOf: (store, user) => this.directory.roleIn(store, user),
      ...(options.files === undefined ? {} : { limits: options.files }),
      ...(options.now === undefined ? {} : { now: options.now }),
    })
    const opened = JournalFile.open({
      path: options.path,
      newEpoch: randomEpoch,
      liveBytes: () => this.#shared.capacity.bytes,
      image: () => this.#image(),
      onLost: () => this.#rebuild(this.#fileRecords()),
      ...(options.compactMinBytes === undefined
        ? {}
        : { compactMinBytes: options.compactMinBytes }),
    })
    this.#file = opened.file
    this.#epoch = opened.epoch
    this.dropped = opened.dropped
    try {
      this.#rebuild(opened.records)
      this.files.recover(opened.created)
    } catch (err) {
      // A journal made just now holds nothing; left, it would open next time as the files' own.
      if (opened.created) removeQuietly(options.path)
      void this.#file.close()
      if (!(err instanceof JournalDamage)) throw err
      throw new JournalOpenError(
        `DATA_FILE ${options.path} is damaged at byte ${err.offset}: ${err.message}; restore it from a backup or move it away.`,
      )
    }
  }

  notebook(name: string): JournaledStore {
    let notebook = this.#notebooks.get(name)
    if (notebook === undefined) {
      const { path: _path, compactMinBytes: _min, ...memory } = this.#options
      const {
        maxNotesPerNotebook,
        maxBytesPerNotebook,
        maxNotebooksPerUser: _notebooks,
        maxMembers: _members,
        files: _files,
        ...service
      } = memory
      const single = maxNotesPerNotebook === undefined && maxBytesPerNotebook === undefined
      notebook = new JournaledStore(this, name, {
        ...service,
        // With one notebook (no per-notebook caps), a refusal names the store, as memory's does.
        ...(single ? { holder: 'The store' } : {}),
        maxNotes: maxNotesPerNotebook ?? service.maxNotes,
        maxBytes: maxBytesPerNotebook ?? service.maxBytes,
        epoch: notebookEpoch(this.#epoch, name),
        shared: this.#shared,
      })
      this.#notebooks.set(name, notebook)
    }
    return notebook
  }

  writerFor(name: string, user: string): NoteStore {
    return guardedStore(this.notebook(name), () => this.directory.roleIn(name, user))
  }

  /**
   * Removes the notebook's notes and files from memory and gives back their room, as
   * MemoryNotebooks.drop; the directory's 'remove' record, before which all its notes and files
   * were written, is what keeps it removed in the journal, and a compaction no longer writes
   * them. The files' bytes go once that record is durable.
   */
  drop(name: string): void {
    this.files.drop(name)
    const notebook = this.#notebooks.get(name)
    if (notebook === undefined) return
    notebook.memory.release()
    this.#notebooks.delete(name)
  }

  /** Deleted notes in every notebook's trash (those past their time too, until swept). */
  trashedNotes(): number {
    return this.#shared.capacity.trashNotes
  }

  /**
   * The notebooks that hold notes or a trash (within its time), in code point order of their
   * names (UTF-8 byte order, as PostgreSQL's export sorts them), what an export writes.
   */
  notebooksHeld(): JournaledStore[] {
    return [...this.#notebooks.values()]
      .filter(
        (notebook) => notebook.stats().notes > 0 || notebook.memory.trash(1, undefined).total > 0,
      )
      .sort((a, b) => Buffer.compare(Buffer.from(a.notebook), Buffer.from(b.notebook)))
  }

  stats(): StoreStats {
    const { notes, bytes, maxNotes, maxBytes } = this.#shared.capacity
    return { notes, bytes, maxNotes, maxBytes }
  }

  append(bytes: Buffer): Promise<void> {
    return this.#file.append(bytes)
  }

  settled(): Promise<void> {
    return this.#file.settled()
  }

  get closed(): boolean {
    return this.#closed
  }

  /** Waits for the writes in flight, closes the journal and removes its lock. */
  close(): Promise<void> {
    this.#closed = true
    return this.#file.close()
  }

  /** The journal's size in bytes (for tests and metrics). */
  get fileBytes(): number {
    return this.#file.size
  }

  /** The parts every notebook shares: the ids creates give, and the service's caps. */
  #newShared(): SharedParts {
    const { maxNotes, maxBytes } = this.#options
    return {
      ids: new IdSpace(),
      capacity: new Capacity(maxNotes, maxBytes, 'The service'),
      history: new HistoryBudget(
        this.#options.archive?.maxHistoryBytes ?? ARCHIVE_DEFAULTS.maxHistoryBytes,
      ),
    }
  }

  /** Every notebook's memory store rebuilt from `records` (opening, or appends lost). */
  #rebuild(records: readonly DecodedRecord[]): void {
    this.#shared = this.#newShared()
    for (const notebook of this.#notebooks.values()) notebook.reset(this.#shared)
    this.directory.reset()
    this.files.reset()
    try {
      replayJournal(
        records,
        (name) => this.notebook(name).memory,
        (record) => this.directory.replay(record),
        (payload) => this.files.replay(payload),
      )
    } finally {
      this.files.ready()
    }
    for (const notebook of this.#notebooks.values()) notebook.ready()
  }

  #fileRecords(): readonly DecodedRecord[] {
    // The file was cut back to its durable length, which decodes as it did when it was written.
    const decoded = decodeJournal(this.#file.durableBytes())
    if (decoded === 'foreign' || !decoded.ok) throw new Error('the journal changed under the store')
    return decoded.records
  }

  /**
   * The snapshot a compaction writes: the directory, the shared notebook, then every other, then
   * the files' index.
   */
  #image(): Buffer[] {
    const frames: Buffer[] = directoryRecords(this.directory.records())
    const shared = this.#notebooks.get(SHARED_NOTEBOOK)
    frames.push(...imageRecords((shared ?? this.notebook(SHARED_NOTEBOOK)).memory.image()))
    for (const [name, notebook] of this.#notebooks) {
      if (name === SHARED_NOTEBOOK) continue
      // A notebook never written needs no image: it starts empty again.
      const image = notebook.memory.image()
      if (image.sequence > 0) frames.push(...imageRecords(image, name))
    }
    frames.push(...this.files.image())
    return frames
  }
}

/**
 * The epoch of a notebook of the journal whose epoch is `journal`: the journal's own for the
 * shared notebook (so a journal written without user tokens keeps its tokens), else 48 bits of
 * SHA-256 over both, in base 36, as random epochs are.
 */
export function notebookEpoch(journal: string, notebook: string): string {
  if (notebook === SHARED_NOTEBOOK) return journal
  return createHash('sha256')
    .update(`${journal}\0${notebook}`)
    .digest()
    .readUIntBE(0, 6)
    .toString(36)
}

/** The store of the shared notebook of the journal at `options.path`: the whole store without user tokens. */
export function openJournaledStore(options: JournaledStoreOptions): JournaledStore {
  return new JournaledNotebooks(options).notebook(SHARED_NOTEBOOK)
}

/** Removes the file at `path` if it can; an error here would hide the one being reported. */
function removeQuietly(path: string): void {
  try {
    rmSync(path, { force: true })
  } catch {
    // The file stays: the next start reads it as an empty journal.
  }
}
