import type { DirectoryRecord } from '../directory.js'

/**
 * What an import hands a store: the notebooks of a whole export file, checked, and
 * their notes read again a chunk at a time, so that a store learns everything it must refuse for
 * (a non-empty target, caps, names) before it changes anything, and never holds the file whole.
 */

/** A notebook of the file, in the file's order. */
export interface ImportedNotebook {
  /** 'shared', or 'user:<sub>'. */
  readonly name: string
  readonly notes: number
  /** UTF-8 bytes of its notes' JSON. */
  readonly bytes: number
}

/** One note: its notebook and its JSON as the list will hold it. */
export interface ImportedNote {
  readonly notebook: string
  readonly json: string
  /** Its `id` field (a finite number is what a path id finds), undefined when it has none. */
  readonly id: unknown
}

export interface ImportSource {
  /**
   * Who may see which notebook: the records that rebuild the directory, checked (each notebook
   * before its members and invitations, every notebook with an owner); empty for a file without.
   */
  readonly directory: readonly DirectoryRecord[]
  readonly notebooks: readonly ImportedNotebook[]
  /** Notes over every notebook. */
  readonly notes: number
  readonly bytes: number
  /**
   * The highest id that is a safe integer, or -Infinity: later creates give ids above it
   * (ids are max(now, last + 1)). Other numeric ids are held as a PATCH would hold them.
   */
  readonly lastId: number
  /** Every note in file order (each notebook's notes together, in list order), by chunks. */
  read(): AsyncIterable<readonly ImportedNote[]>
}

/** An import the store refuses; nothing was changed. The message is one line. */
export class ImportRefusedError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ImportRefusedError'
  }
}

/** The caps an import must fit, as the running service would hold them. */
export interface ImportCaps {
  maxNotes: number
  maxBytes: number
  /** Per notebook (MAX_NOTES_PER_USER, MAX_BYTES_PER_USER), when user tokens are on. */
  maxNotesPerNotebook?: number | undefined
  maxBytesPerNotebook?: number | undefined
}

/**
 * Throws ImportRefusedError when the file's notes do not fit the caps:
 * 'The file holds 12 notes; MAX_NOTES allows 10.'
 */
export function checkImportCaps(source: ImportSource, caps: ImportCaps): void {
  if (source.notes > caps.maxNotes) {
    throw new ImportRefusedError(
      `The file holds ${source.notes} notes; MAX_NOTES allows ${caps.maxNotes}.`,
    )
  }
  if (source.bytes > caps.maxBytes) {
    throw new ImportRefusedError(
      `The file holds ${source.bytes} bytes of notes; MAX_STORE_BYTES allows ${caps.maxBytes}.`,
    )
  }
  for (const notebook of source.notebooks) {
    const { maxNotesPerNotebook, maxBytesPerNotebook } = caps
    if (maxNotesPerNotebook !== undefined && notebook.notes > maxNotesPerNotebook) {
      throw new ImportRefusedError(
        `Notebook ${JSON.stringify(notebook.name)} holds ${notebook.notes} notes; MAX_NOTES_PER_USER allows ${maxNotesPerNotebook}.`,
      )
    }
    if (maxBytesPerNotebook !== undefined && notebook.bytes > maxBytesPerNotebook) {
      throw new ImportRefusedError(
        `Notebook ${JSON.stringify(notebook.name)} holds ${notebook.bytes} bytes of notes; MAX_BYTES_PER_USER allows ${maxBytesPerNotebook}.`,
      )
    }
  }
}
